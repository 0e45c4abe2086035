"""What a RUN_STALLED warning says in figures (docs/socket-api.md, "Stalls"): `warning`'s `stall`."""

from dataclasses import dataclass

from .errors import MalformedLine

# What a stalled run gets: a warning, or the warning and then a halt.
ON_STALL = ("warn", "halt")


@dataclass(frozen=True)
class StallReport:
    """`silent_ms` (since the vendor's last output, or its spawn when it made none), `last_event`
    (the type of the last event its output made; None: none yet), `last_tool` (that event's tool,
    for a tool.* event; else None), `stall_after_ms` (the run's) and `on_stall` ("warn", or "halt":
    the run is halted right after the warning and closes with failure category "stalled")."""

    silent_ms: int
    last_event: object
    last_tool: object
    stall_after_ms: int
    on_stall: str

    @classmethod
    def from_wire(cls, value):
        if value is None:
            return None
        if (not isinstance(value, dict) or not isinstance(value.get("silent_ms"), int)
                or not isinstance(value.get("stall_after_ms"), int) or not isinstance(value.get("on_stall"), str)):
            raise MalformedLine(f"warning stall is not {{silent_ms, last_event, last_tool, stall_after_ms, "
                                f"on_stall}}: {value!r}")
        return cls(value["silent_ms"], value.get("last_event"), value.get("last_tool"), value["stall_after_ms"],
                   value["on_stall"])
