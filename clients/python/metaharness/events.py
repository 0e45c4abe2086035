"""The 20 events of metaharness.event/1 as typed objects.

Every event has the envelope (`format`, `seq`, `run`, `at`, `event`, and this daemon's additive
`recorded_at` and `cut`) and its payload fields as attributes, in the wire's spelling. A field
this client does not declare is kept, never an error: in `extra`, and as an attribute too. An
event name outside the 20 is refused by name (UnknownEvent), as the wire says: it is an authored
schema, so a name nobody declared is a mistake to be told about."""

from .decisions import Decision
from .errors import MalformedLine, RunFailed, UnknownEvent, UnknownFormat
from .failure import RunFailure
from .outcome import Outcome
from .stall import StallReport
from .wire import EVENT_FORMAT

# Envelope keys; `at` is omitted when the vendor gave no time, `recorded_at` where nobody wrote
# the line live (translate), `cut` when nothing was cut.
ENVELOPE = ("format", "seq", "run", "at", "event", "recorded_at", "cut")

# name -> (class name, payload fields in wire order, the ones that are never null or absent).
# Additive fields of this implementation (docs/socket-api.md) are declared too: `agent`,
# `escalation` (tool.requested), `peer`, `requested` (tool.decided), `resources` (stream.closed:
# what the run's cgroup counted, each counter None where unknown; None for a run without one;
# `failure`: why it failed, a RunFailure, None when it completed), `stall` (warning: a
# RUN_STALLED's figures, a StallReport; None on every other warning).
SCHEMA = {
    "session.started": ("SessionStarted", (
        "adapter", "adapter_class", "harness_version", "session_id", "model", "permission_mode",
        "credential_source", "output_style", "cwd", "offered_tools", "available_operations",
        "withheld", "slash_commands", "skills", "agents", "plugins", "mcp_servers", "inputs_digest",
        "transcript", "hermetic"), ("adapter", "adapter_class", "transcript", "hermetic")),
    "session.ended": ("SessionEnded", (
        "final_answer", "observed_models", "is_error", "subtype", "stop_reason", "terminal_reason",
        "api_error_status", "num_turns", "duration_ms", "duration_api_ms", "ttft_ms",
        "time_to_request_ms", "total_cost_usd", "permission_denials", "subagents_spawned", "usage",
        "model_usage", "census"), ("census",)),
    "step.entered": ("StepEntered", ("step", "frame_digest"), ("step",)),
    "step.left": ("StepLeft", ("step", "outcome"), ("step", "outcome")),
    "turn.started": ("TurnStarted", ("turn", "frame_digest"), ("turn",)),
    "turn.ended": ("TurnEnded", ("turn", "stop_reason"), ("turn",)),
    "text": ("Text", ("text", "request_id"), ("text",)),
    "thinking": ("Thinking", ("text", "request_id"), ("text",)),
    "thinking.estimate": ("ThinkingEstimate", ("estimate", "delta"), ("estimate",)),
    "injection": ("Injection", ("text", "origin"), ("text",)),
    "tool.requested": ("ToolRequested", (
        "call_id", "name", "input", "operations", "subjects", "decision_required", "deadline_ms",
        "seam", "agent", "escalation"), ("call_id", "name", "input", "decision_required", "seam")),
    "tool.decided": ("ToolDecided", (
        "call_id", "decision", "decided_by", "seam", "latency_ms", "peer", "requested"),
        ("call_id", "decision", "decided_by", "seam")),
    "tool.result": ("ToolResult", (
        "exit_code", "outcome_source", "call_id", "is_error", "content", "bytes", "tool_use_result"),
        ("call_id",)),
    "usage": ("Usage", ("request_id", "model", "usage"), ("usage",)),
    "rate_limit": ("RateLimit", ("info",), ("info",)),
    "command.result": ("CommandResult", ("id", "outcome"), ("id", "outcome")),
    "warning": ("Warning", ("code", "message", "stall"), ("code", "message")),
    "opaque": ("Opaque", ("vendor_type", "vendor_subtype", "digest", "source_line"), ("digest",)),
    "auth.expired": ("AuthExpired", ("credential_source", "detail", "source_line"), ()),
    "stream.closed": ("StreamClosed", ("events", "reason", "run_id", "process", "resources", "failure"),
                      ("events", "reason", "run_id")),
}

EVENT_NAMES = tuple(SCHEMA)  # the vocabulary, in the wire's order
assert len(EVENT_NAMES) == 20

# Required keys whose value may still be null: a tool call's input when the vendor gave none.
_NULLABLE_REQUIRED = {"input"}

# Keys the wire omits rather than write empty: an absent one reads as its empty value.
_OMITTED_WHEN_EMPTY = {"operations": list, "subjects": list}


def _envelope(key, empty=None):
    """A read-only attribute for one envelope key of the line; with `empty`, a missing or empty
    value reads as `empty()`."""
    if empty is None:
        return property(lambda self: self.raw.get(key))
    return property(lambda self: self.raw.get(key) or empty())


class Event:
    """One event line. `event`, `seq`, `run`, `at` (None when the vendor gave no time),
    `recorded_at` (None where nobody wrote the line live), `cut` ([] when nothing was cut), the
    payload fields as attributes, `extra` (every key this client does not declare) and `raw`
    (the whole line as a dict)."""

    event_name = None  # the wire name (a class attribute; `.event` reads it off the line)
    FIELDS = ()
    REQUIRED = ()

    __slots__ = ("raw", "extra", "_payload")

    def __init__(self, raw):
        self.raw = raw
        self._payload = {}
        for field in self.FIELDS:
            if field in raw:
                self._payload[field] = raw[field]
            elif field in _OMITTED_WHEN_EMPTY:
                self._payload[field] = _OMITTED_WHEN_EMPTY[field]()
            else:
                self._payload[field] = None
        known = set(ENVELOPE) | set(self.FIELDS)
        self.extra = {k: v for k, v in raw.items() if k not in known}
        self._convert()

    def _convert(self):
        """Per-event typing of nested values (decisions, command outcomes)."""

    # The envelope (ENVELOPE), read off the line; `cut` reads [] when nothing was cut.
    format = _envelope("format")
    event = _envelope("event")
    seq = _envelope("seq")
    run = _envelope("run")
    at = _envelope("at")
    recorded_at = _envelope("recorded_at")
    cut = _envelope("cut", empty=list)

    @property
    def payload(self):
        """The declared payload fields, as a dict."""
        return dict(self._payload)

    def __getattr__(self, name):
        # Only reached for names that are not slots or properties: payload, then unknown fields.
        if name.startswith("__"):
            raise AttributeError(name)
        payload = object.__getattribute__(self, "_payload")
        if name in payload:
            return payload[name]
        extra = object.__getattribute__(self, "extra")
        if name in extra:
            return extra[name]
        raise AttributeError(f"{self.event_name} event has no field {name!r}")

    def __repr__(self):
        return f"<{type(self).__name__} seq={self.seq} run={self.run!r}>"


class ToolDecidedBase(Event):
    __slots__ = ()

    def _convert(self):
        self._payload["decision"] = Decision.from_wire(self._payload["decision"])
        if self._payload.get("requested") is not None:
            self._payload["requested"] = Decision.from_wire(self._payload["requested"])


class CommandResultBase(Event):
    __slots__ = ()

    def _convert(self):
        self._payload["outcome"] = Outcome.from_wire(self._payload["id"], self._payload["outcome"])


class StreamClosedBase(Event):
    __slots__ = ()

    def _convert(self):
        self._payload["failure"] = RunFailure.from_wire(self._payload.get("failure"))

    def raise_for_failure(self):
        """Raises RunFailed (carrying the RunFailure) when the run did not complete; returns self
        when it did."""
        if self._payload["failure"] is not None:
            raise RunFailed(self.run_id, self.reason, self._payload["failure"])
        return self


class WarningBase(Event):
    __slots__ = ()

    def _convert(self):
        self._payload["stall"] = StallReport.from_wire(self._payload.get("stall"))


def _make_classes():
    bases = {"tool.decided": ToolDecidedBase, "command.result": CommandResultBase,
             "stream.closed": StreamClosedBase, "warning": WarningBase}
    classes = {}
    for name, (class_name, fields, required) in SCHEMA.items():
        base = bases.get(name, Event)
        classes[name] = type(class_name, (base,), {
            "__slots__": (), "event_name": name, "FIELDS": fields, "REQUIRED": required,
            "__doc__": f"The `{name}` event: {', '.join(fields)}.",
        })
    return classes


CLASSES = _make_classes()
globals().update({cls.__name__: cls for cls in CLASSES.values()})

__all__ = ["Event", "EVENT_NAMES", "parse_event"] + [cls.__name__ for cls in CLASSES.values()]


def parse_event(obj):
    """An event line (already a dict) -> its typed Event.

    Refuses by name: a tag other than metaharness.event/1 (UnknownFormat), an event name outside
    the 20 (UnknownEvent), a known event missing an envelope key or a required payload field, or
    one whose decision or outcome does not read (MalformedLine). Unknown fields are kept."""
    tag = obj.get("format")
    if tag != EVENT_FORMAT:
        raise UnknownFormat(tag, (EVENT_FORMAT,), obj)
    name = obj.get("event")
    if not isinstance(name, str):
        raise MalformedLine(f"an event line has an \"event\" name; read {name!r}", obj)
    cls = CLASSES.get(name)
    if cls is None:
        raise UnknownEvent(name, obj)
    seq = obj.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise MalformedLine(f"{name}: \"seq\" must be a positive integer, not {seq!r}", obj)
    if not isinstance(obj.get("run"), str):
        raise MalformedLine(f"{name}: \"run\" must be a string, not {obj.get('run')!r}", obj)
    for field in cls.REQUIRED:
        if field not in obj or (obj[field] is None and field not in _NULLABLE_REQUIRED):
            raise MalformedLine(f"{name} (seq {seq}): required field {field!r} is missing or null", obj)
    try:
        return cls(obj)
    except MalformedLine as e:
        raise MalformedLine(f"{name} (seq {seq}): {e}", obj) from None
