"""One run's stream as a client follows it (tail or attach), without I/O: lines go in, events,
pending decisions and command results come out. The blocking and the asyncio clients both drive
it, so a reconnect behaves the same in each.

The cursor: the seq after the last event handed out. A connection that drops before `end` is
replaced by one that asks for exactly that seq, so the reader sees no gap and no duplicate.

Decisions (attach): the daemon hands a new controller every call still waiting (`pending`
lines). Together with the live `tool.requested` lines that want a decision, they come out as
`Pending` items, once per connection: a call this client has not decided is offered again after
a reconnect (`reoffered`), with the time it has left. A call whose tool.requested came before
this connection's `horizon` (the run's last seq, read just before attaching) and that the daemon
does not list is already decided: replaying it offers nothing."""

import itertools
import os
from collections import deque

from .errors import CommandLost, MalformedLine, ProtocolError, Refused, UnknownReply
from .events import parse_event
from .outcome import Outcome
from .records import Record
from .wire import EVENT_FORMAT

_ids = itertools.count(1)

# Every reply name of metaharness.socket/1.
REPLIES = ("submitted", "runs", "run", "attached", "tailing", "pending", "end", "result", "status",
           "shutting_down", "refused")


def new_id(prefix):
    return f"py{os.getpid()}-{prefix}{next(_ids)}"


class Pending:
    """A tool call waiting for this controller's decision.

    `call_id`; `requested_seq` (its tool.requested line); `remaining_ms` (its deadline when
    offered; None when the call has none); `request` (the ToolRequested event: name, input,
    operations...); `reoffered` (True when the daemon handed it again after a reconnect)."""

    reply = "pending"

    def __init__(self, call_id, requested_seq, remaining_ms, request=None, reoffered=False):
        self.call_id = call_id
        self.requested_seq = requested_seq
        self.remaining_ms = remaining_ms
        self.request = request
        self.reoffered = reoffered

    def __repr__(self):
        again = ", reoffered" if self.reoffered else ""
        return f"Pending({self.call_id!r}, seq {self.requested_seq}, {self.remaining_ms} ms left{again})"


class StreamCore:
    def __init__(self, run_id, from_seq, attach, follow=True):
        if not isinstance(from_seq, int) or from_seq < 0:
            raise ValueError("from_seq is a non-negative integer (0 = from the end)")
        self.run_id = run_id
        self.attach = attach
        self.follow = attach or follow
        self.next_seq = from_seq  # what a (re)connect asks for
        self.last_seq = None  # the last event handed out
        self.ended = False
        self.end_next_seq = None
        self.items = deque()  # events and Pending, in order, not yet taken by the reader
        self.results = {}  # command id -> Outcome or CommandLost, not yet taken by the caller
        self.connections = 0
        self.request_id = None
        self._served_from = None  # this connection's first seq
        self._horizon = 0
        self._pending = {}  # call id -> Pending: waiting, as far as this client knows
        self._requests = {}  # call id -> ToolRequested, for the calls still waiting
        self._deferred = {}  # call id -> Pending whose tool.requested the replay will bring
        self._offered = set()  # call ids offered on this connection
        self._outstanding = {}  # command id -> command sent, no result yet
        self._unsent = []  # commands whose send failed: sent once the next connection is attached

    # --- connecting ------------------------------------------------------------------------

    def stream_request(self):
        """The tail/attach request for a new connection (the first, or after a drop)."""
        self.request_id = new_id("a" if self.attach else "t")
        self.connections += 1
        self._served_from = None
        self._offered = set()
        fields = {"format": "metaharness.socket/1", "request": "attach" if self.attach else "tail",
                  "id": self.request_id, "run_id": self.run_id, "from_seq": self.next_seq}
        if not self.attach:
            fields["follow"] = self.follow
        return fields

    def set_horizon(self, run_reply):
        """The `run` reply of the `get` sent just before attaching."""
        last = run_reply.get("last_seq")
        self._horizon = last if isinstance(last, int) else 0

    @property
    def reconnected(self):
        return self.connections > 1

    # --- commands ----------------------------------------------------------------------------

    def register(self, obj):
        self._outstanding[obj["id"]] = obj

    def send_failed(self, obj):
        """The line never left this client whole, so the daemon did not act on it (a line counts
        only with its newline): it is sent again once the next connection is attached."""
        self._unsent.append(obj)

    def take_unsent(self):
        unsent, self._unsent = self._unsent, []
        return unsent

    def take_result(self, command_id):
        return self.results.pop(command_id, None)

    def _resolve(self, command_id, outcome):
        if self._outstanding.pop(command_id, None) is not None:
            self.results[command_id] = outcome

    def connection_closed(self):
        """The connection ended. Before `end` the caller reconnects; after it, a command still
        without its result never reached a run that could record it."""
        if not self.ended:
            return
        for command_id in list(self._outstanding):
            self._resolve(command_id, CommandLost(
                command_id, f"run {self.run_id}'s stream had ended and the connection closed first"))

    def _decide_in_flight(self, call_id):
        for obj in list(self._outstanding.values()) + self._unsent:
            if obj.get("command") == "tool.decide" and obj.get("call_id") == call_id:
                return True
        return False

    # --- lines -------------------------------------------------------------------------------

    def on_line(self, obj):
        """One decoded line. Returns (call id, seq) for each tool.requested line to fetch (a
        pending call whose request lies before this stream's start), usually none."""
        if obj.get("format") == EVENT_FORMAT:
            self._on_event(parse_event(obj))
            return []
        reply = obj.get("reply")
        if reply not in REPLIES:
            raise UnknownReply(reply, obj)
        rid = obj.get("id")
        if reply == "refused":
            if rid is not None and rid in self._outstanding:
                self._resolve(rid, Outcome.socket_refusal(rid, obj))
                return []
            raise Refused(obj.get("code"), obj.get("reason"), Record.wrap(obj),
                          "attach" if self.attach else "tail")
        if reply == "result":
            command_id = obj.get("command_id")
            if command_id in self._outstanding:
                self._resolve(command_id, Outcome.from_wire(command_id, obj.get("outcome"), obj.get("recorded", False)))
            return []
        if rid != self.request_id:
            raise ProtocolError(f"a {reply!r} reply for request {rid!r} on run {self.run_id}'s stream", obj)
        if reply in ("attached", "tailing"):
            served = obj.get("from_seq")
            if not isinstance(served, int):
                raise MalformedLine(f"{reply}: \"from_seq\" must be an integer", obj)
            if self.last_seq is not None and served != self.last_seq + 1:
                raise ProtocolError(f"resumed at seq {served}, expected {self.last_seq + 1}", obj)
            self._served_from = served
            self.next_seq = served
            return []
        if reply == "pending":
            return self._on_pending(obj)
        if reply == "end":
            self.ended = True
            self.end_next_seq = obj.get("next_seq")
            self._pending.clear()
            self._requests.clear()
            self._deferred.clear()
            return []
        raise ProtocolError(f"unexpected {reply!r} reply on run {self.run_id}'s stream", obj)

    def _offer(self, pending):
        self._offered.add(pending.call_id)
        for item in self.items:  # one offer per call in the queue: refresh its time left
            if isinstance(item, Pending) and item.call_id == pending.call_id:
                item.remaining_ms = pending.remaining_ms
                return
        self.items.append(pending)

    def _on_pending(self, obj):
        call_id = obj.get("call_id")
        seq = obj.get("requested_seq")
        if not isinstance(call_id, str) or not isinstance(seq, int):
            raise MalformedLine("pending: needs \"call_id\" and \"requested_seq\"", obj)
        offer = Pending(call_id, seq, obj.get("remaining_ms"), reoffered=self.reconnected)
        self._pending[call_id] = offer
        if self._decide_in_flight(call_id):
            return []  # this client's decision is on its way: taken, not offered again
        if call_id in self._requests:
            offer.request = self._requests[call_id]
            self._offer(offer)
            return []
        if self._served_from is not None and seq >= self._served_from:
            self._deferred[call_id] = offer  # offered when the replay reaches its tool.requested
            return []
        return [(call_id, seq)]

    def on_fetched(self, call_id, event):
        """The tool.requested of a pending call that lies before this stream's start."""
        offer = self._pending.get(call_id)
        if offer is None or call_id in self._offered:
            return
        if event.event != "tool.requested" or event.call_id != call_id:
            raise ProtocolError(f"seq {event.seq} is not the tool.requested of call {call_id}")
        offer.request = event
        self._requests[call_id] = event
        self._offer(offer)

    def _on_event(self, event):
        expected = self.last_seq + 1 if self.last_seq is not None else self._served_from
        if expected is not None and event.seq != expected:
            raise ProtocolError(f"run {self.run_id}: seq {event.seq} where {expected} was due (a gap or a duplicate)")
        if event.run != self.run_id:
            raise ProtocolError(f"an event of run {event.run!r} on run {self.run_id}'s stream")
        self.last_seq = event.seq
        self.next_seq = event.seq + 1
        self.items.append(event)
        name = event.event
        if name == "command.result":
            self._resolve(event.id, event.outcome)
        elif not self.attach:
            return
        elif name == "tool.requested" and event.decision_required:
            self._on_requested(event)
        elif name == "tool.decided":
            self._forget(event.call_id)
        elif name == "stream.closed":
            for call_id in list(self._pending):
                self._forget(call_id)

    def _on_requested(self, event):
        call_id = event.call_id
        deferred = self._deferred.pop(call_id, None)
        if deferred is not None:
            self._requests[call_id] = event
            deferred.request = event
            if not self._decide_in_flight(call_id):
                self._offer(deferred)
            return
        if event.seq <= self._horizon or call_id in self._offered:
            return  # history: requested before this connection and not listed pending, so decided
        offer = Pending(call_id, event.seq, event.deadline_ms, request=event)
        self._pending[call_id] = offer
        self._requests[call_id] = event
        self._offer(offer)

    def _forget(self, call_id):
        self._pending.pop(call_id, None)
        self._requests.pop(call_id, None)
        self._deferred.pop(call_id, None)
        stale = [i for i in self.items if isinstance(i, Pending) and i.call_id == call_id]
        for item in stale:  # decided (by the deadline, another controller...) before it was taken
            self.items.remove(item)

    @property
    def pending(self):
        """The calls waiting for a decision, as far as this client knows: call id -> Pending."""
        return dict(self._pending)
