"""What the blocking and the asyncio clients share, without I/O: how a reply is judged, the
fields optional arguments become, the reconnect's backoff, a stream's read-only views, and the
command methods (each builds one command and hands it to the client's own way of sending it,
so an asyncio client's method returns the coroutine to await)."""

import time
import uuid

from . import commands as cmd
from .errors import ConnectionLost, DaemonUnreachable, ProtocolError, Refused, Timeout
from .events import parse_event
from .outcome import Outcome
from .records import Record
from .stream import new_id
from .wire import EVENT_FORMAT

# How long a reconnect keeps trying before it gives up (the daemon restarting, say).
RECONNECT_TIMEOUT = 30.0

# What a failed connection attempt may raise and still be worth another try.
RECONNECTABLE = (DaemonUnreachable, ConnectionLost, OSError)
# A submit whose reply did not arrive is sent again (with its request_id, so it makes one run).
SUBMIT_RETRYABLE = RECONNECTABLE + (Timeout,)


def new_request_id():
    """A submit's request_id: fresh per submit() call, reused by its retries."""
    return str(uuid.uuid4())


def request_reply(name, rid, reply):
    """The reply to request `name` (id `rid`) as a Record; raises for what is not one."""
    if reply is None:
        raise ConnectionLost(f"{name}: the daemon closed the connection before replying")
    if reply.get("format") == EVENT_FORMAT or reply.get("id") != rid:
        raise ProtocolError(f"{name}: a line that is not its reply", reply)
    if reply.get("reply") == "refused":
        raise Refused(reply.get("code"), reply.get("reason"), Record.wrap(reply), name)
    return Record.wrap(reply)


def attach_horizon(reply):
    """The `get` reply an attachment reads before it attaches; raises for a refusal or none."""
    if reply is None:
        raise ConnectionLost("the daemon closed the connection before replying to get")
    if reply.get("reply") == "refused":
        raise Refused(reply.get("code"), reply.get("reason"), Record.wrap(reply), "attach")
    return reply


def fetched_event(obj, seq, run_id):
    """One line read while fetching event `seq`: the event, or None to read on."""
    if obj is None:
        raise ConnectionLost(f"reading seq {seq} of run {run_id}: the connection closed")
    if obj.get("format") == EVENT_FORMAT:
        return parse_event(obj)
    if obj.get("reply") == "refused":
        raise Refused(obj.get("code"), obj.get("reason"), Record.wrap(obj), "tail")
    return None


def given(**fields):
    """The fields that were given (None is an argument left out, not a value sent)."""
    return {k: v for k, v in fields.items() if v is not None}


def reply_outcome(reply):
    """The Outcome a `result` reply carries."""
    return Outcome.from_wire(reply.get("command_id"), reply.get("outcome"), reply.get("recorded", False))


def ended_and_closed(run_id):
    return ConnectionLost(f"run {run_id}'s stream has ended and its connection is closed")


class Backoff:
    """The waits between reconnect attempts: doubling from 50 ms to 1 s, within `timeout` s."""

    def __init__(self, run_id, timeout):
        self._run_id = run_id
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._delay = 0.05

    def attempt(self, connect):
        """One attempt: None when `connect()` succeeded, else how long to wait before the next."""
        try:
            connect()
            return None
        except RECONNECTABLE as e:
            return self.after_failure(e)

    async def attempt_async(self, connect):
        """attempt(), for a coroutine function `connect`."""
        try:
            await connect()
            return None
        except RECONNECTABLE as e:
            return self.after_failure(e)

    def after_failure(self, error):
        """How long to wait before the next attempt; raises ConnectionLost when past the bound."""
        delay = self._delay
        if time.monotonic() + delay > self._deadline:
            raise ConnectionLost(
                f"run {self._run_id}: the connection dropped and could not be resumed within "
                f"{self._timeout} s: {error}") from None
        self._delay = min(delay * 2, 1.0)
        return delay


def _core_view(name, doc):
    """A read-only attribute that is the StreamCore's own."""
    return property(lambda self: getattr(self._core, name), doc=doc)


class StreamViews:
    """A stream's state as its reader sees it (the StreamCore in `self._core`)."""

    def _init_stream(self, client, core, timeout):
        self._client = client
        self._core = core
        self.timeout = timeout
        self.reconnect_timeout = RECONNECT_TIMEOUT
        self._conn = None
        self._closed = False  # by the caller: never reconnected

    run_id = _core_view("run_id", "The run this stream follows.")
    last_seq = _core_view("last_seq", "The seq of the last event read (None before the first).")
    next_seq = _core_view("next_seq", "Where this stream continues: the seq a reader that stops here would resume from.")
    connections = _core_view("connections", "How many connections this stream has used (1 + the reconnects).")

    def _reconnect_backoff(self):
        """Drops the connection, and paces the attempts to resume it (a stream the caller closed
        is not resumed)."""
        self._drop()
        if self._closed:
            raise ConnectionLost(f"the stream of run {self.run_id} was closed")
        return Backoff(self.run_id, self.reconnect_timeout)

    def close(self):
        """Ends this stream's connection; it is not resumed."""
        self._closed = True
        self._drop()

    def _drop(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class RunCommands:
    """A client's commands to a run it is not attached to: each through `self.command`."""

    def decide(self, run_id, call_id, decision, reason=None, input=None):  # noqa: A002
        """Decides one pending call: a Decision (Allow(), Deny(reason), Replace(input),
        Abstain()) or its name with reason= / input=. Returns the Outcome (TOO_LATE when the
        call was already decided, UNKNOWN_CALL when there is no such call)."""
        return self.command(run_id, cmd.tool_decide(new_id("c"), call_id, decision, reason, input))

    def inject(self, run_id, text):
        return self.command(run_id, cmd.message_inject(new_id("c"), text))

    def set_frame(self, run_id, frame, step_outcome=None):
        return self.command(run_id, cmd.frame_set(new_id("c"), frame, step_outcome))

    def interrupt(self, run_id, reason=None):
        return self.command(run_id, cmd.interrupt(new_id("c"), reason))

    def steer(self, run_id, text):
        return self.command(run_id, cmd.steer(new_id("c"), text))

    def set_permission(self, run_id, posture):
        return self.command(run_id, cmd.permission_set(new_id("c"), posture))


class AttachedCommands:
    """An attachment's commands: each through `self.send`, which waits for its one result."""

    @property
    def pending(self):
        """The calls waiting for a decision, as far as this controller knows: call id -> Pending."""
        return self._core.pending

    def decide(self, call_id, decision, reason=None, input=None, timeout=None):  # noqa: A002
        return self.send(cmd.tool_decide(new_id("c"), call_id, decision, reason, input), timeout)

    def set_frame(self, frame, step_outcome=None, timeout=None):
        return self.send(cmd.frame_set(new_id("c"), frame, step_outcome), timeout)

    def inject(self, text, timeout=None):
        return self.send(cmd.message_inject(new_id("c"), text), timeout)

    def steer(self, text, timeout=None):
        return self.send(cmd.steer(new_id("c"), text), timeout)

    def set_permission(self, posture, timeout=None):
        return self.send(cmd.permission_set(new_id("c"), posture), timeout)

    def interrupt(self, reason=None, timeout=None):
        return self.send(cmd.interrupt(new_id("c"), reason), timeout)

    def halt(self, reason=None, timeout=None):
        return self.send(cmd.halt(new_id("c"), reason), timeout)
