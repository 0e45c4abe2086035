"""A command's one result (`command.result` in the stream, or a `result` reply)."""

from .errors import CommandRefused, MalformedLine


class Outcome:
    """What became of one command.

    ok: the command was taken (`applies_at` says when a deferred one takes effect: frame.set).
    refused: `code` (UNSUPPORTED_CONTROL, UNKNOWN_CALL, TOO_LATE, MALFORMED, SHADOWED, or a socket
    code such as NOT_ATTACHED) and `reason`. `recorded` is False when the run's stream had already
    closed, so the result could not be written there."""

    def __init__(self, command_id, ok, code=None, reason=None, applies_at=None, recorded=True, raw=None):
        self.command_id = command_id
        self.ok = ok
        self.code = code
        self.reason = reason
        self.applies_at = applies_at
        self.recorded = recorded
        self.raw = raw

    @property
    def refused(self):
        return not self.ok

    def check(self):
        """Returns self when ok; raises CommandRefused (carrying code and reason) otherwise."""
        if not self.ok:
            raise CommandRefused(self)
        return self

    def __repr__(self):
        if self.ok:
            return f"Outcome({self.command_id!r}, ok, applies_at={self.applies_at!r})"
        return f"Outcome({self.command_id!r}, refused {self.code}: {self.reason!r})"

    @classmethod
    def from_wire(cls, command_id, outcome, recorded=True):
        """From a CommandOutcome object: {"result":"ok","applies_at":…} or
        {"result":"refused","refused":{"code":…,"reason":…}}."""
        if not isinstance(outcome, dict):
            raise MalformedLine(f"a command outcome is an object, not {outcome!r}")
        result = outcome.get("result")
        if result == "ok":
            return cls(command_id, True, applies_at=outcome.get("applies_at"), recorded=recorded, raw=outcome)
        if result == "refused":
            refusal = outcome.get("refused")
            if not isinstance(refusal, dict) or not isinstance(refusal.get("code"), str):
                raise MalformedLine(f"a refused outcome names its code: {outcome!r}")
            return cls(command_id, False, refusal["code"], refusal.get("reason"), recorded=recorded, raw=outcome)
        raise MalformedLine(f"unknown command outcome {result!r}; expected ok or refused")

    @classmethod
    def socket_refusal(cls, command_id, reply):
        """A command the connection refused before it reached a run (e.g. NOT_ATTACHED)."""
        return cls(command_id, False, reply.get("code"), reply.get("reason"), recorded=False, raw=reply)
