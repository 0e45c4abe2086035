"""A Python client for the metaharness daemon (docs/python-client.md).

    import metaharness
    client = metaharness.Client()            # $METAHARNESS_SOCKET, else the daemon's default
    run_id = client.submit(adapter="claude", prompt="fix the failing test", decisions="ask")
    with client.attach(run_id) as run:
        for item in run:
            if isinstance(item, metaharness.Pending):
                run.decide(item.call_id, metaharness.Allow())

Standard library only."""

from . import events
from .aio import AsyncAttachment, AsyncClient, AsyncTail
from .client import Attachment, Client, Tail
from .decisions import Abstain, Allow, Decision, Deny, Replace
from .errors import (
    CommandLost,
    CommandRefused,
    ConnectionLost,
    DaemonUnreachable,
    MalformedLine,
    MetaharnessError,
    NotJson,
    ProtocolError,
    Refused,
    RunFailed,
    Timeout,
    UnknownEvent,
    UnknownFormat,
    UnknownReply,
)
from .events import EVENT_NAMES, Event, parse_event
from .failure import FAILURE_CATEGORIES, RunFailure
from .outcome import Outcome
from .paths import default_socket_path
from .records import Record
from .spec import RUN_SPEC_FIELDS
from .stall import ON_STALL, StallReport
from .stream import Pending
from .wire import COMMAND_FORMAT, EVENT_FORMAT, SOCKET_FORMAT, decode


def parse_line(line):
    """One event line (bytes or str) -> its typed Event; refuses a line that is not JSON, an
    unknown format tag and an unknown event name, each by name."""
    return parse_event(decode(line))


__version__ = "0.1.0"

__all__ = [
    "Abstain", "Allow", "AsyncAttachment", "AsyncClient", "AsyncTail", "Attachment", "Client",
    "COMMAND_FORMAT", "CommandLost", "CommandRefused", "ConnectionLost", "DaemonUnreachable",
    "Decision", "Deny", "EVENT_FORMAT", "EVENT_NAMES", "Event", "MalformedLine", "MetaharnessError",
    "NotJson", "Outcome", "Pending", "ProtocolError", "RUN_SPEC_FIELDS", "Record", "Refused",
    "Replace", "RunFailed", "RunFailure", "FAILURE_CATEGORIES", "ON_STALL", "SOCKET_FORMAT", "StallReport", "Tail", "Timeout", "UnknownEvent", "UnknownFormat", "UnknownReply",
    "default_socket_path", "events", "parse_event", "parse_line",
]
