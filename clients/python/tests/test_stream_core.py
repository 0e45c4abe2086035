"""The stream state machine alone, lines in and items out: the cases a live daemon does not
produce on demand (a lost command, a line out of sequence)."""

import pytest

import metaharness
from metaharness.stream import StreamCore

EV = "metaharness.event/1"
SOCK = "metaharness.socket/1"


def attached(core, from_seq=1):
    request = core.stream_request()
    core.on_line({"format": SOCK, "reply": "attached", "id": request["id"], "run_id": "r", "from_seq": from_seq})
    return request


def text(seq):
    return {"format": EV, "seq": seq, "run": "r", "event": "text", "text": f"t{seq}", "request_id": None}


def test_a_command_whose_stream_ended_before_its_result_is_lost_not_left_waiting():
    core = StreamCore("r", 1, attach=True)
    request = attached(core)
    core.register({"format": "metaharness.command/1", "id": "c1", "command": "message.inject", "text": "hi"})
    core.on_line(text(1))
    core.on_line({"format": SOCK, "reply": "end", "id": request["id"], "run_id": "r", "next_seq": 2})
    assert core.take_result("c1") is None, "a result may still come on this connection"
    core.connection_closed()
    lost = core.take_result("c1")
    assert isinstance(lost, metaharness.CommandLost) and lost.command_id == "c1"


def test_a_connection_that_drops_before_the_end_leaves_commands_waiting_for_their_result():
    core = StreamCore("r", 1, attach=True)
    attached(core)
    core.register({"format": "metaharness.command/1", "id": "c1", "command": "halt"})
    core.connection_closed()
    assert core.take_result("c1") is None
    attached(core, from_seq=1)
    core.on_line({"format": EV, "seq": 1, "run": "r", "event": "command.result", "id": "c1",
                  "outcome": {"result": "ok", "applies_at": None}})
    assert core.take_result("c1").ok


def test_a_line_out_of_sequence_is_refused_not_passed_on():
    core = StreamCore("r", 1, attach=False)
    attached(core)
    core.on_line(text(1))
    with pytest.raises(metaharness.ProtocolError, match="seq 3 where 2 was due"):
        core.on_line(text(3))
    with pytest.raises(metaharness.ProtocolError, match="seq 1 where 2 was due"):
        core.on_line(text(1))


def test_a_resumed_stream_must_start_at_the_next_seq():
    core = StreamCore("r", 1, attach=False)
    attached(core)
    core.on_line(text(1))
    request = core.stream_request()
    with pytest.raises(metaharness.ProtocolError, match="resumed at seq 5, expected 2"):
        core.on_line({"format": SOCK, "reply": "tailing", "id": request["id"], "run_id": "r", "from_seq": 5})


def test_a_refusal_of_a_command_is_its_result_and_a_reply_outside_the_vocabulary_is_refused():
    core = StreamCore("r", 1, attach=True)
    attached(core)
    core.register({"format": "metaharness.command/1", "id": "c9", "command": "halt"})
    core.on_line({"format": SOCK, "reply": "refused", "id": "c9", "code": "NOT_ATTACHED", "reason": "no run"})
    outcome = core.take_result("c9")
    assert outcome.code == "NOT_ATTACHED" and outcome.recorded is False
    with pytest.raises(metaharness.UnknownReply, match="teleported"):
        core.on_line({"format": SOCK, "reply": "teleported", "id": None})
    with pytest.raises(metaharness.Refused) as refused:
        core.on_line({"format": SOCK, "reply": "refused", "id": None, "code": "LINE_TOO_LONG", "reason": "long"})
    assert refused.value.code == "LINE_TOO_LONG"
