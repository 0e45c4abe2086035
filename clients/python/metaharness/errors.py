"""Every way a call can fail, as a typed exception. Nothing is swallowed: a refusal, a wire
violation or a lost connection each has its own class, carrying what the daemon or the line said."""


class MetaharnessError(Exception):
    """Base of every error this package raises."""


class DaemonUnreachable(MetaharnessError):
    """No daemon answers on the socket (it is not running, or the path is wrong)."""

    def __init__(self, socket_path, cause):
        self.socket_path = str(socket_path)
        self.cause = cause
        super().__init__(f"cannot reach the metaharness daemon at {self.socket_path}: {cause}")


class ConnectionLost(MetaharnessError):
    """The connection closed before the answer arrived, and could not be resumed."""


class Timeout(MetaharnessError, TimeoutError):
    """A bounded wait ran out (the bound is the caller's `timeout`)."""


class Refused(MetaharnessError):
    """The daemon answered a request with a `refused` line (docs/socket-api.md, "Refusals").

    `code` is the daemon's code (`UNKNOWN_RUN`, `MALFORMED`, `BUSY`, `FORBIDDEN`, ...) and
    `reason` its sentence; `reply` is the whole reply line as a dict."""

    def __init__(self, code, reason, reply=None, request=None):
        self.code = code
        self.reason = reason
        self.reply = reply or {}
        self.request = request
        where = f" ({request})" if request else ""
        super().__init__(f"refused {code}{where}: {reason}")


class CommandRefused(MetaharnessError):
    """A command's `command.result` was a refusal (raised by `Outcome.check()`)."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.code = outcome.code
        self.reason = outcome.reason
        self.command_id = outcome.command_id
        super().__init__(f"command {outcome.command_id} refused {outcome.code}: {outcome.reason}")


class RunFailed(MetaharnessError):
    """A run closed without completing (`StreamClosed.raise_for_failure()`): `failure` is its
    RunFailure (`category`, `retryable`, `detail`), to filter on without reading prose."""

    def __init__(self, run_id, reason, failure):
        self.run_id = run_id
        self.reason = reason
        self.failure = failure
        retry = "retryable" if failure.retryable else "not retryable"
        super().__init__(f"run {run_id} closed {reason}: {failure.category} ({retry}): {failure.detail}")


class CommandLost(MetaharnessError):
    """A command was sent and its run's stream ended without its result: the daemon never
    recorded it (it reached a run whose stream had already closed, over a connection that was
    gone by then)."""

    def __init__(self, command_id, why):
        self.command_id = command_id
        super().__init__(f"command {command_id} got no result: {why}")


class ProtocolError(MetaharnessError):
    """A line that does not follow the wire. Refused by name, never guessed at."""

    def __init__(self, message, line=None):
        self.line = line
        super().__init__(message)


class NotJson(ProtocolError):
    """A line that is not a JSON object."""


class UnknownFormat(ProtocolError):
    """A line whose `format` tag this client does not speak (or that has none)."""

    def __init__(self, tag, expected, line=None):
        self.tag = tag
        self.expected = tuple(expected)
        said = "no format tag" if tag is None else f"unknown format tag {tag!r}"
        super().__init__(f"{said}; this client reads {', '.join(self.expected)}", line)


class UnknownEvent(ProtocolError):
    """An event line whose `event` name is not one of the 20 of metaharness.event/1."""

    def __init__(self, name, line=None):
        self.name = name
        super().__init__(
            f"unknown event {name!r}: metaharness.event/1 has exactly 20 events "
            "(an event this client does not know is refused, not guessed at)",
            line,
        )


class UnknownReply(ProtocolError):
    """A socket reply name outside metaharness.socket/1."""

    def __init__(self, name, line=None):
        self.name = name
        super().__init__(f"unknown reply {name!r} in metaharness.socket/1", line)


class MalformedLine(ProtocolError):
    """A known event or reply whose fields do not fit (a required field missing or mistyped)."""
