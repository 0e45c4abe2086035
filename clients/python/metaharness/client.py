"""The blocking client: `Client`, and the run streams it opens (`Tail`, `Attachment`)."""

import time

from . import exchange as ex
from .connection import LineConnection
from .errors import ConnectionLost, DaemonUnreachable, Timeout
from .paths import resolve_socket_path
from .spec import build_run_spec
from .stream import StreamCore, new_id
from .wire import request

# How long a reconnect keeps trying before it gives up (the daemon restarting, say).
RECONNECT_TIMEOUT = ex.RECONNECT_TIMEOUT


class Client(ex.RunCommands):
    """A metaharness daemon over its socket (docs/socket-api.md).

    `socket_path`: the argument, else $METAHARNESS_SOCKET, else the daemon's default. `timeout`
    bounds every wait for a reply (seconds). Each request uses its own connection; a refusal
    raises `Refused` (with `code` and `reason`)."""

    def __init__(self, socket_path=None, timeout=60.0):
        self.socket_path = resolve_socket_path(socket_path)
        self.timeout = timeout

    # --- requests --------------------------------------------------------------------------

    def _request(self, name, timeout=None, **fields):
        rid = new_id("r")
        conn = LineConnection(self.socket_path)
        try:
            try:
                conn.send(request(name, rid, **fields))
            except OSError as e:
                raise ConnectionLost(f"{name}: the daemon closed the connection: {e}") from None
            return ex.request_reply(name, rid, conn.read(self.timeout if timeout is None else timeout))
        finally:
            conn.close()

    def status(self):
        """The daemon: version, pid, uptime_ms, socket, state_dir, runs {active, idle, closed,
        pending_decisions}, accepting, connections."""
        return self._request("status")

    def submit(self, request_id=None, **run_spec):
        """Submits a run and returns its id. The keywords are the run spec's fields (adapter,
        prompt, decisions, decision_deadline_ms, frame, model_scenario, ...); a scenario or
        frame given as a pathlib.Path is read and sent inline. An unknown keyword is a
        TypeError; a refusal (MALFORMED, BUSY, CONFLICT, ...) raises Refused.

        Idempotent: the submit carries `request_id` (default: a fresh UUID for this call), and
        when its reply is lost (the connection drops, the daemon restarts, the reply times out)
        it is sent again with the same id for up to RECONNECT_TIMEOUT seconds: the daemon makes
        one run for it, whichever attempt got through. Pass your own id to make a retry of your
        own (a job resumed after a crash) get the same run."""
        return self.submit_spec(build_run_spec(run_spec), request_id=request_id)

    def submit_spec(self, spec, request_id=None):
        """Submits a run spec dict as it is (no check of its keys); returns the run id. Idempotent
        as submit()."""
        request_id = request_id or ex.new_request_id()
        backoff = ex.Backoff(f"(submit {request_id})", RECONNECT_TIMEOUT)
        while True:
            try:
                return self._request("submit", run=spec, request_id=request_id).run_id
            except ex.SUBMIT_RETRYABLE as e:
                time.sleep(backoff.after_failure(e))  # a retry interval, waiting for the daemon

    def list(self):
        """Every run the daemon knows, as run summaries (run_id, adapter, state, close_reason,
        pending_decisions, spend, ...)."""
        return self._request("list").runs

    def get(self, run_id):
        """One run: its summary plus run_dir, spec and hermetic."""
        return self._request("get", run_id=run_id)

    def viewer(self, role=None, ttl_s=None):
        """A token for the viewer page (docs/viewer.md): a record with token, role, expires_at
        and url (the page's address, carrying the token). The role is at most the caller's;
        Refused NOT_CONFIGURED when the daemon has no [http] listener."""
        return self._request("viewer", **ex.given(role=role, ttl_s=ttl_s))

    def shutdown(self):
        """Stops the daemon as SIGTERM does (admin only). Returns once the daemon said
        `shutting_down`, or once it verifiably stopped accepting connections."""
        try:
            self._request("shutdown")
        except ConnectionLost:
            # A daemon with no run to halt can stop before its reply has left: the request was
            # read, and its effect, a socket that no longer accepts, is what confirms it.
            try:
                self.status()
            except DaemonUnreachable:
                return
            raise

    # --- commands without attaching ------------------------------------------------------------

    def command(self, run_id, command):
        """Sends one metaharness.command/1 object to a run; returns its Outcome."""
        return ex.reply_outcome(self._request("command", run_id=run_id, command=command))

    def halt(self, run_id, reason=None):
        """Halts a run (its stream then closes `steer-halt`); returns the Outcome."""
        return ex.reply_outcome(self._request("halt", run_id=run_id, **ex.given(reason=reason)))

    # decide, inject, set_frame, interrupt, steer, set_permission: ex.RunCommands, through command().

    # --- streams ---------------------------------------------------------------------------

    def tail(self, run_id, from_seq=1, follow=False, timeout=None):
        """The run's events from `from_seq` (0 = from the end): what exists, or with
        `follow` up to stream.closed. Iterate it; `timeout` bounds each wait for a line."""
        return Tail(self, run_id, from_seq, follow, timeout)

    def attach(self, run_id, from_seq=1, timeout=None):
        """Becomes the run's controller: iterate it for events and Pending decisions, and send
        commands on it. A dropped connection is resumed where it stopped."""
        return Attachment(self, run_id, from_seq, timeout)


class _Stream(ex.StreamViews):
    """What Tail and Attachment share: one connection following one run, resumed on a drop."""

    def __init__(self, client, core, timeout):
        self._init_stream(client, core, timeout)
        self._connect()

    def _connect(self):
        conn = LineConnection(self._client.socket_path)
        try:
            if self._core.attach:
                rid = new_id("g")
                conn.send(request("get", rid, run_id=self._core.run_id))
                self._core.set_horizon(ex.attach_horizon(conn.read(self._client.timeout)))
            conn.send(self._core.stream_request())
            self._conn = conn
            while self._core._served_from is None:
                self._handle(conn.read(self._client.timeout), during_connect=True)
        except BaseException:
            conn.close()
            self._conn = None
            raise
        for obj in self._core.take_unsent():
            self._send(obj)

    def _reconnect(self):
        backoff = self._reconnect_backoff()
        while (delay := backoff.attempt(self._connect)) is not None:
            time.sleep(delay)  # a retry interval, waiting for the daemon to come back

    def _handle(self, obj, during_connect=False):
        if obj is None:
            if during_connect:
                raise ConnectionLost("the daemon closed the connection while attaching")
            self._core.connection_closed()
            if not self._core.ended:
                self._reconnect()
            return
        for call_id, seq in self._core.on_line(obj):
            self._core.on_fetched(call_id, self._fetch(seq))

    def _fetch(self, seq):
        """One event line by its seq, on a connection of its own."""
        conn = LineConnection(self._client.socket_path)
        try:
            conn.send(request("tail", new_id("f"), run_id=self.run_id, from_seq=seq, follow=False))
            while True:
                event = ex.fetched_event(conn.read(self._client.timeout), seq, self.run_id)
                if event is not None:
                    return event
        finally:
            conn.close()

    def _pump(self, timeout):
        if self._conn is None or self._conn.closed:
            if self._core.ended:
                raise ex.ended_and_closed(self.run_id)
            self._reconnect()
        self._handle(self._conn.read(timeout))

    def __iter__(self):
        return self

    def __next__(self):
        while not self._core.items:
            if self._core.ended:
                if not self._core.attach:
                    self._drop()  # a tail is done at its end; an attachment still answers commands
                raise StopIteration
            self._pump(self.timeout)
        return self._core.items.popleft()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, obj):
        try:
            if self._conn is None:
                raise BrokenPipeError("no connection")
            self._conn.send(obj)
        except OSError:
            # Not handed over whole, so not acted on: sent again on the next connection.
            self._core.send_failed(obj)
            if self._core.ended:
                raise ex.ended_and_closed(self.run_id) from None
            self._reconnect()


class Tail(_Stream):
    """A run's events, read-only. Iterate it; `next_seq` afterwards is where to resume."""

    def __init__(self, client, run_id, from_seq, follow, timeout):
        super().__init__(client, StreamCore(run_id, from_seq, attach=False, follow=follow), timeout)


class Attachment(ex.AttachedCommands, _Stream):
    """The run's controller. Iterating yields its events and, for each call that waits for this
    controller's decision, a `Pending` (after the call's tool.requested; again, `reoffered`, when
    a reconnect finds it still waiting). Commands wait for their one result and return it as an
    Outcome (`outcome.check()` raises CommandRefused on a refusal). Not for use from several
    threads at once."""

    command_timeout = 120.0

    def __init__(self, client, run_id, from_seq, timeout):
        super().__init__(client, StreamCore(run_id, from_seq, attach=True), timeout)

    def send(self, command, timeout=None):
        """Sends one metaharness.command/1 object and returns its Outcome. Events that arrive
        meanwhile are kept for the iteration."""
        if self._closed:
            raise ConnectionLost(f"the attachment to run {self.run_id} is closed")
        command_id = command["id"]
        self._core.register(command)
        self._send(command)
        bound = self.command_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        while True:
            result = self._core.take_result(command_id)
            if isinstance(result, Exception):
                raise result
            if result is not None:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(f"command {command_id} ({command['command']}): no result within {bound} s")
            self._pump(remaining)

    # decide, set_frame, inject, steer, set_permission, interrupt, halt: ex.AttachedCommands,
    # each through send().
