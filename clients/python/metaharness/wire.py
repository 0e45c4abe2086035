"""JSON lines as the wire frames them: one compact object per line, each carrying its own
`format` tag (docs/socket-api.md). No I/O here."""

import json

from .errors import NotJson, UnknownFormat

SOCKET_FORMAT = "metaharness.socket/1"
EVENT_FORMAT = "metaharness.event/1"
COMMAND_FORMAT = "metaharness.command/1"

# What the daemon may send a client: replies, and a run's event lines.
INBOUND_FORMATS = (SOCKET_FORMAT, EVENT_FORMAT)

# The daemon's largest event line is 16 MiB (runs.max_event_line_bytes); a reply line listing
# thousands of runs can be longer still. The bound only keeps a broken peer from growing a
# buffer without end.
MAX_LINE_BYTES = 64 * 1024 * 1024


def encode(obj):
    """One line, compact, UTF-8, with its newline."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def decode(line):
    """A received line (bytes or str, without its newline) -> dict, its tag checked.

    Raises NotJson for anything that is not a JSON object and UnknownFormat for a tag that
    is neither metaharness.socket/1 nor metaharness.event/1."""
    text = line.decode("utf-8", errors="strict") if isinstance(line, (bytes, bytearray)) else line
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise NotJson(f"not a JSON object: {e}", text) from None
    if not isinstance(obj, dict):
        raise NotJson(f"not a JSON object: read a {type(obj).__name__}", text)
    tag = obj.get("format")
    if tag not in INBOUND_FORMATS:
        raise UnknownFormat(tag, INBOUND_FORMATS, text)
    return obj


def request(name, line_id, /, **fields):
    """A metaharness.socket/1 request object: `line_id` is its `id` (the reply carries it back);
    `fields` may hold any field, a submit's `request_id` among them."""
    obj = {"format": SOCKET_FORMAT, "request": name, "id": line_id}
    obj.update(fields)
    return obj
