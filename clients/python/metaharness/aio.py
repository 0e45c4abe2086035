"""The asyncio client: `AsyncClient`, with `AsyncTail` and `AsyncAttachment`. Same requests,
same stream semantics (metaharness.stream.StreamCore) as the blocking client.

Several tasks may share one attachment (one iterating, others deciding): whichever holds the
read lock reads the next line, and every waiter looks again at what it waits for."""

import asyncio
import time

from . import exchange as ex
from . import wire
from .errors import ConnectionLost, DaemonUnreachable, ProtocolError, Timeout
from .paths import resolve_socket_path
from .spec import build_run_spec
from .stream import StreamCore, new_id
from .wire import request

RECONNECT_TIMEOUT = ex.RECONNECT_TIMEOUT


class _LineConnection:
    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self.closed = False

    @classmethod
    async def open(cls, path, connect_timeout=10.0):
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(path, limit=wire.MAX_LINE_BYTES), connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise DaemonUnreachable(path, e) from None
        return cls(reader, writer)

    async def send(self, obj):
        if self.closed or self._writer.transport.is_closing():
            raise BrokenPipeError("the connection is closed")
        self._writer.write(wire.encode(obj))
        await self._writer.drain()

    async def read(self, timeout=None):
        """The next line as a dict, or None once the daemon closed the connection."""
        if self.closed:
            return None
        try:
            line = await asyncio.wait_for(self._reader.readline(), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"no line from the daemon within {timeout} s") from None
        except (OSError, asyncio.IncompleteReadError):
            line = b""
        except (ValueError, asyncio.LimitOverrunError):
            self.close()
            raise ProtocolError(f"a line longer than {wire.MAX_LINE_BYTES} bytes") from None
        if not line.endswith(b"\n"):  # EOF (a last line with no newline is not a line)
            self.close()
            return None
        return wire.decode(line[:-1])

    def close(self):
        if not self.closed:
            self.closed = True
            self._writer.close()


class AsyncClient(ex.RunCommands):
    """The daemon over its socket, for asyncio. Same methods as `Client`, as coroutines;
    `tail()` and `attach()` return streams to use with `async for` / `async with`."""

    def __init__(self, socket_path=None, timeout=60.0):
        self.socket_path = resolve_socket_path(socket_path)
        self.timeout = timeout

    async def _request(self, name, timeout=None, **fields):
        rid = new_id("r")
        conn = await _LineConnection.open(self.socket_path)
        try:
            try:
                await conn.send(request(name, rid, **fields))
            except OSError as e:
                raise ConnectionLost(f"{name}: the daemon closed the connection: {e}") from None
            return ex.request_reply(name, rid, await conn.read(self.timeout if timeout is None else timeout))
        finally:
            conn.close()

    async def status(self):
        return await self._request("status")

    async def submit(self, request_id=None, **run_spec):
        return await self.submit_spec(build_run_spec(run_spec), request_id=request_id)

    async def submit_spec(self, spec, request_id=None):
        """Idempotent as Client.submit_spec: one run per request_id, resent while its reply is lost."""
        request_id = request_id or ex.new_request_id()
        backoff = ex.Backoff(f"(submit {request_id})", ex.RECONNECT_TIMEOUT)
        while True:
            try:
                return (await self._request("submit", run=spec, request_id=request_id)).run_id
            except ex.SUBMIT_RETRYABLE as e:
                await asyncio.sleep(backoff.after_failure(e))  # a retry interval, waiting for the daemon

    async def list(self):
        return (await self._request("list")).runs

    async def get(self, run_id):
        return await self._request("get", run_id=run_id)

    async def viewer(self, role=None, ttl_s=None):
        return await self._request("viewer", **ex.given(role=role, ttl_s=ttl_s))

    async def shutdown(self):
        try:
            await self._request("shutdown")
        except ConnectionLost:
            # As Client.shutdown: confirmed by its effect when the reply did not leave in time.
            try:
                await self.status()
            except DaemonUnreachable:
                return
            raise

    async def command(self, run_id, command):
        return ex.reply_outcome(await self._request("command", run_id=run_id, command=command))

    async def halt(self, run_id, reason=None):
        return ex.reply_outcome(await self._request("halt", run_id=run_id, **ex.given(reason=reason)))

    # decide, inject, set_frame, interrupt, steer, set_permission: ex.RunCommands, each returning
    # the coroutine command() makes.

    def tail(self, run_id, from_seq=1, follow=False, timeout=None):
        return AsyncTail(self, StreamCore(run_id, from_seq, attach=False, follow=follow), timeout)

    def attach(self, run_id, from_seq=1, timeout=None):
        return AsyncAttachment(self, StreamCore(run_id, from_seq, attach=True), timeout)


class _AsyncStream(ex.StreamViews):
    def __init__(self, client, core, timeout):
        self._init_stream(client, core, timeout)
        self._opened = False
        self._lock = asyncio.Lock()

    async def open(self):
        if not self._opened:
            async with self._lock:
                if not self._opened:
                    await self._connect()
                    self._opened = True
        return self

    def __await__(self):
        return self.open().__await__()

    async def __aenter__(self):
        return await self.open()

    async def __aexit__(self, *exc):
        self.close()

    async def _connect(self):
        conn = await _LineConnection.open(self._client.socket_path)
        try:
            if self._core.attach:
                rid = new_id("g")
                await conn.send(request("get", rid, run_id=self._core.run_id))
                self._core.set_horizon(ex.attach_horizon(await conn.read(self._client.timeout)))
            await conn.send(self._core.stream_request())
            self._conn = conn
            while self._core._served_from is None:
                await self._handle(await conn.read(self._client.timeout), during_connect=True)
        except BaseException:
            conn.close()
            self._conn = None
            raise
        for obj in self._core.take_unsent():
            await self._send(obj)

    async def _reconnect(self):
        backoff = self._reconnect_backoff()
        while (delay := await backoff.attempt_async(self._connect)) is not None:
            await asyncio.sleep(delay)  # a retry interval, waiting for the daemon to come back

    async def _handle(self, obj, during_connect=False):
        if obj is None:
            if during_connect:
                raise ConnectionLost("the daemon closed the connection while attaching")
            self._core.connection_closed()
            if not self._core.ended:
                await self._reconnect()
            return
        for call_id, seq in self._core.on_line(obj):
            self._core.on_fetched(call_id, await self._fetch(seq))

    async def _fetch(self, seq):
        conn = await _LineConnection.open(self._client.socket_path)
        try:
            await conn.send(request("tail", new_id("f"), run_id=self.run_id, from_seq=seq, follow=False))
            while True:
                event = ex.fetched_event(await conn.read(self._client.timeout), seq, self.run_id)
                if event is not None:
                    return event
        finally:
            conn.close()

    async def _pump_until(self, ready, timeout, what):
        """Reads lines (one waiter at a time) until `ready()` holds, within `timeout` seconds."""
        await self.open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise Timeout(f"{what}: nothing within {timeout} s")
            try:
                await asyncio.wait_for(self._lock.acquire(), remaining)
            except asyncio.TimeoutError:
                raise Timeout(f"{what}: nothing within {timeout} s") from None
            try:
                if ready():
                    return
                if self._conn is None or self._conn.closed:
                    if self._core.ended:
                        raise ex.ended_and_closed(self.run_id)
                    await self._reconnect()
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
                await self._handle(await self._conn.read(remaining))
            finally:
                self._lock.release()

    def __aiter__(self):
        return self

    async def __anext__(self):
        core = self._core
        await self._pump_until(lambda: core.items or core.ended, self.timeout, f"run {self.run_id}'s stream")
        if core.items:
            return core.items.popleft()
        if not core.attach:
            self._drop()  # a tail is done at its end; an attachment still answers commands
        raise StopAsyncIteration

    async def _send(self, obj):
        """Writes one command line. One that cannot be written whole was not acted on: it is sent
        on the next connection (whoever reads next reconnects, seeing this one closed)."""
        while True:
            conn = self._conn
            if conn is not None and not conn.closed:
                try:
                    await conn.send(obj)
                    return
                except OSError:
                    conn.close()
            if self._core.ended:
                raise ex.ended_and_closed(self.run_id)
            if self._conn is conn or self._conn is None or self._conn.closed:
                self._core.send_failed(obj)
                return
            # A new connection came up while this line was being written: it goes there.


class AsyncTail(_AsyncStream):
    """A run's events, read-only: `async for event in client.tail(...)`."""


class AsyncAttachment(ex.AttachedCommands, _AsyncStream):
    """The run's controller, for asyncio: `async for` yields events and Pending decisions;
    commands are coroutines returning their Outcome."""

    command_timeout = 120.0

    async def send(self, command, timeout=None):
        await self.open()
        command_id = command["id"]
        self._core.register(command)
        await self._send(command)  # never waits for the read lock: the reader may wait for this
        bound = self.command_timeout if timeout is None else timeout
        holder = {}

        def ready():
            result = self._core.take_result(command_id)
            if result is not None:
                holder["result"] = result
            return "result" in holder

        await self._pump_until(ready, bound, f"command {command_id} ({command['command']})")
        result = holder["result"]
        if isinstance(result, Exception):
            raise result
        return result

    # decide, set_frame, inject, steer, set_permission, interrupt, halt: ex.AttachedCommands,
    # each returning the coroutine send() makes.
