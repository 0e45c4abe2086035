"""The wire as the client reads it, line by line: typed events, decisions, outcomes, refusals by
name. (The same rules through a real daemon are in test_disk_runs.py.)"""

import json

import pytest

import metaharness
from metaharness import events

# One well-formed line per event, with every required field.
SAMPLES = {
    "session.started": {"adapter": "claude", "adapter_class": "harness", "harness_version": "2.1.197",
                        "transcript": {"path": None, "digest": None, "bytes": None},
                        "hermetic": {"mode": "on", "decisions": "ask", "imposed": [], "unavailable": [],
                                     "ambient_inputs": [], "installed_plugins": []},
                        "mcp_servers": None, "withheld": None},
    "session.ended": {"is_error": False, "subtype": "success", "permission_denials": [],
                      "census": {"allowed": 1, "denied": 0, "replaced": 0, "abstained": 0,
                                 "by_seam": {"hook": 1}, "by_decider": {"embedder": 1}}},
    "step.entered": {"step": {"workflow": "w", "state": "s", "index": 1, "attempt": 1}, "frame_digest": None},
    "step.left": {"step": {"workflow": "w", "state": "s", "index": 1, "attempt": 1},
                  "outcome": {"outcome": "completed"}},
    "turn.started": {"turn": 1, "frame_digest": None},
    "turn.ended": {"turn": 1, "stop_reason": "end_turn"},
    "text": {"text": "Done.", "request_id": "req_1"},
    "thinking": {"text": "hmm", "request_id": None},
    "thinking.estimate": {"estimate": 12, "delta": 3},
    "injection": {"text": "the frame", "origin": "frame"},
    "tool.requested": {"call_id": "toolu_1", "name": "Bash", "input": {"command": "ls"}, "operations": ["shell"],
                       "decision_required": True, "deadline_ms": 55000, "seam": "hook", "agent": None},
    "tool.decided": {"call_id": "toolu_1", "decision": {"decision": "deny", "reason": "no shell"},
                     "decided_by": "embedder", "seam": "hook", "latency_ms": 4, "peer": {"uid": 0, "pid": 1},
                     "requested": None},
    "tool.result": {"exit_code": None, "outcome_source": None, "call_id": "toolu_1", "is_error": False,
                    "content": "ok", "bytes": 2, "tool_use_result": None},
    "usage": {"request_id": "req_1", "model": "m", "usage": {"input_tokens": 20, "output_tokens": 15}},
    "rate_limit": {"info": {"status": "allowed", "window": None, "resets_at": None, "utilization": None,
                            "using_overage": None}},
    "command.result": {"id": "c1", "outcome": {"result": "ok", "applies_at": None}},
    "warning": {"code": "NO_FRAME_IN_FORCE", "message": "no frame"},
    "opaque": {"vendor_type": "x", "vendor_subtype": None, "digest": "ab" * 32, "source_line": 3},
    "auth.expired": {"credential_source": "none", "detail": "401", "source_line": 9},
    "stream.closed": {"events": 19, "reason": "completed", "run_id": "r-1", "process": {"kind": "exited", "code": 0}},
}


def line(event, seq=1, payload=None):
    obj = {"format": "metaharness.event/1", "seq": seq, "run": "r-1", "event": event}
    obj.update(SAMPLES[event] if payload is None else payload)
    return json.dumps(obj)


def test_the_vocabulary_is_the_twenty_events_in_wire_order():
    assert len(metaharness.EVENT_NAMES) == 20
    assert metaharness.EVENT_NAMES[0] == "session.started"
    assert metaharness.EVENT_NAMES[-1] == "stream.closed"
    assert set(metaharness.EVENT_NAMES) == set(SAMPLES)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_event_reads_as_its_own_type_with_the_envelope_and_payload_as_attributes(name):
    e = metaharness.parse_line(line(name, seq=7))
    cls = events.CLASSES[name]
    assert type(e) is cls and isinstance(e, metaharness.Event)
    assert (e.event, e.seq, e.run, e.format) == (name, 7, "r-1", "metaharness.event/1")
    assert e.at is None and e.recorded_at is None and e.cut == []
    for field, value in SAMPLES[name].items():
        got = getattr(e, field)
        if name == "tool.decided" and field == "decision":
            assert got == metaharness.Deny("no shell")
        elif name == "command.result" and field == "outcome":
            assert isinstance(got, metaharness.Outcome) and got.ok and got.command_id == "c1"
        else:
            assert got == value, field
    assert e.extra == {}


def test_stream_closed_carries_the_runs_resources_as_declared_and_none_without_a_cgroup():
    counted = dict(SAMPLES["stream.closed"], resources={"cpu_usec": 41234, "memory_peak_bytes": None,
                                                        "tasks_peak": None, "oom_kills": None,
                                                        "processes_killed": 3})
    e = metaharness.parse_line(line("stream.closed", payload=counted))
    assert e.resources == counted["resources"] and e.extra == {}
    assert e.payload["resources"]["memory_peak_bytes"] is None
    assert metaharness.parse_line(line("stream.closed")).resources is None


def test_stream_closed_carries_a_typed_failure_and_raises_it_on_request():
    failed = dict(SAMPLES["stream.closed"], reason="error",
                  failure={"category": "rate_limit", "retryable": True, "detail": "the model service answered 429"})
    e = metaharness.parse_line(line("stream.closed", payload=failed))
    assert e.failure == metaharness.RunFailure("rate_limit", True, "the model service answered 429")
    assert e.failure.known and e.extra == {}
    with pytest.raises(metaharness.RunFailed) as raised:
        e.raise_for_failure()
    assert raised.value.failure.category == "rate_limit" and raised.value.failure.retryable
    completed = metaharness.parse_line(line("stream.closed"))
    assert completed.failure is None and completed.raise_for_failure() is completed
    newer = dict(failed, failure={"category": "quota", "retryable": False, "detail": ""})
    assert not metaharness.parse_line(line("stream.closed", payload=newer)).failure.known
    assert set(metaharness.FAILURE_CATEGORIES) == {
        "auth", "rate_limit", "budget", "stalled", "vendor_exit", "launch", "halted", "daemon", "upstream"}
    for bad in ({"category": "auth"}, "auth", {"category": 7, "retryable": True}):
        with pytest.raises(metaharness.MalformedLine):
            metaharness.parse_line(line("stream.closed", payload=dict(failed, failure=bad)))


def test_a_declared_field_the_line_does_not_carry_reads_none_and_omitted_lists_read_empty():
    e = metaharness.parse_line(line("tool.requested", payload={
        "call_id": "c", "name": "Read", "input": None, "decision_required": False, "seam": "hook"}))
    assert e.input is None and e.deadline_ms is None and e.agent is None
    assert e.operations == [] and e.subjects == []


def test_the_daemons_additive_envelope_keys_read_as_attributes():
    obj = json.loads(line("text"))
    obj["at"] = "2026-12-01T09:30:00Z"
    obj["recorded_at"] = "2026-12-01T09:30:00.123Z"
    obj["cut"] = [{"field": "text", "pointer": "/text", "form": "text", "bytes": 9, "kept": 4, "digest": "d"}]
    e = metaharness.parse_event(obj)
    assert e.at == "2026-12-01T09:30:00Z" and e.recorded_at == "2026-12-01T09:30:00.123Z"
    assert e.cut[0]["kept"] == 4 and e.extra == {}


def test_an_unknown_field_on_a_known_event_is_kept_never_an_error():
    obj = json.loads(line("tool.requested"))
    obj["blast_radius"] = {"files": 3}
    e = metaharness.parse_event(obj)
    assert e.extra == {"blast_radius": {"files": 3}}
    assert e.blast_radius == {"files": 3}
    assert e.raw["blast_radius"] == {"files": 3}
    with pytest.raises(AttributeError, match="no field 'not_there'"):
        e.not_there


def test_an_unknown_event_name_is_refused_by_name():
    obj = json.loads(line("text"))
    obj["event"] = "tool.teleported"
    with pytest.raises(metaharness.UnknownEvent, match="tool.teleported") as refused:
        metaharness.parse_event(obj)
    assert refused.value.name == "tool.teleported"


def test_an_unknown_format_tag_is_refused_by_name_and_a_missing_one_too():
    obj = json.loads(line("text"))
    obj["format"] = "metaharness.event/2"
    with pytest.raises(metaharness.UnknownFormat, match="metaharness.event/2") as refused:
        metaharness.parse_line(json.dumps(obj))
    assert refused.value.tag == "metaharness.event/2"
    del obj["format"]
    with pytest.raises(metaharness.UnknownFormat, match="no format tag"):
        metaharness.parse_line(json.dumps(obj))


def test_a_line_that_is_not_a_json_object_is_refused():
    for bad in ("not json", "[1,2]", '"text"'):
        with pytest.raises(metaharness.NotJson):
            metaharness.parse_line(bad)


def test_a_known_event_missing_a_required_field_is_malformed_naming_it():
    obj = json.loads(line("tool.requested"))
    del obj["call_id"]
    with pytest.raises(metaharness.MalformedLine, match="'call_id'"):
        metaharness.parse_event(obj)
    obj = json.loads(line("warning"))
    obj["seq"] = 0
    with pytest.raises(metaharness.MalformedLine, match="seq"):
        metaharness.parse_event(obj)


def test_decisions_read_and_write_as_the_wire_spells_them():
    D = metaharness.Decision
    assert D.from_wire({"decision": "allow"}) == metaharness.Allow()
    assert D.from_wire("allow") == metaharness.Allow() and D.from_wire("abstain") == metaharness.Abstain()
    assert D.from_wire({"decision": "deny", "reason": "r"}) == metaharness.Deny("r")
    assert D.from_wire({"decision": "replace", "input": {"command": "true"}}).input == {"command": "true"}
    assert metaharness.Deny("why").to_wire() == {"decision": "deny", "reason": "why"}
    assert metaharness.Replace({"a": 1}).to_wire() == {"decision": "replace", "input": {"a": 1}}
    assert metaharness.Abstain().to_wire() == {"decision": "abstain"}
    for bad in ("deny", {"decision": "deny", "reason": "  "}, {"decision": "maybe"}, {"decision": "replace"}):
        with pytest.raises(metaharness.MalformedLine):
            D.from_wire(bad)
    with pytest.raises(ValueError, match="non-empty reason"):
        metaharness.Deny("")


def test_outcomes_read_ok_and_refused_and_check_raises_a_refusal():
    ok = metaharness.Outcome.from_wire("c1", {"result": "ok", "applies_at": "the next turn or step boundary"})
    assert ok.ok and ok.applies_at == "the next turn or step boundary" and ok.check() is ok
    refused = metaharness.Outcome.from_wire(
        "c2", {"result": "refused", "refused": {"code": "TOO_LATE", "reason": "decided"}}, recorded=False)
    assert refused.refused and (refused.code, refused.reason, refused.recorded) == ("TOO_LATE", "decided", False)
    with pytest.raises(metaharness.CommandRefused) as e:
        refused.check()
    assert (e.value.code, e.value.reason, e.value.command_id) == ("TOO_LATE", "decided", "c2")


def test_the_socket_path_follows_the_daemons_rules():
    path = metaharness.default_socket_path
    assert path({"METAHARNESS_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": "/run/user/1"}) == "/x/s.sock"
    assert path({"RUNTIME_DIRECTORY": "/run/metaharness:/run/other", "STATE_DIRECTORY": "/var/lib/metaharness"}) \
        == "/run/metaharness/metaharness.sock"
    assert path({"RUNTIME_DIRECTORY": "/run/metaharness", "XDG_RUNTIME_DIR": "/run/user/7"}) \
        == "/run/user/7/metaharness/metaharness.sock"
    assert path({}).endswith("/metaharness-state/metaharness.sock")


def test_a_run_spec_key_the_daemon_would_ignore_is_refused_by_name():
    client = metaharness.Client("/nonexistent/mh.sock")
    with pytest.raises(TypeError, match="decision_mode"):
        client.submit(adapter="claude", prompt="go", decision_mode="ask")
    with pytest.raises(TypeError, match="'prompt'"):
        client.submit(adapter="claude")
