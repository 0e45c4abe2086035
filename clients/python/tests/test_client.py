"""Every request of the blocking Client against a real daemon hosting the stand-in harness."""

import os
import uuid

import pytest

import metaharness
from conftest import ReplyDroppingProxy, bash, sealed_frame, standin_spec, write_script


def finished(client, run_id, timeout=60):
    """Follows a run to stream.closed and returns its events."""
    with client.tail(run_id, follow=True, timeout=timeout) as stream:
        return list(stream)


def wait_for_event(client, run_id, name, timeout=60):
    with client.tail(run_id, follow=True, timeout=timeout) as stream:
        for e in stream:
            if e.event == name:
                return e
    raise AssertionError(f"run {run_id} closed without {name}")


def test_status_describes_this_daemon(client, daemon):
    s = client.status()
    assert s.pid == daemon.proc.pid
    assert s.socket == daemon.socket and s.state_dir == str(daemon.state_dir)
    assert isinstance(s.version, str) and s.uptime_ms >= 0 and s.accepting is True
    assert set(s.runs) >= {"active", "idle", "closed", "pending_decisions"}
    assert s.connections >= 1


def test_the_socket_path_comes_from_metaharness_socket_when_no_argument_names_it(daemon, monkeypatch):
    monkeypatch.setenv("METAHARNESS_SOCKET", daemon.socket)
    assert metaharness.Client().status().pid == daemon.proc.pid
    assert metaharness.Client().socket_path == daemon.socket


def test_a_socket_nobody_listens_on_is_unreachable_by_name(tmp_path):
    with pytest.raises(metaharness.DaemonUnreachable, match="cannot reach the metaharness daemon at"):
        metaharness.Client(str(tmp_path / "none.sock")).status()


def test_submit_returns_the_run_id_and_list_and_get_describe_the_run(client, daemon):
    run_id = client.submit(**standin_spec("bash_marker.json", decisions="observe", labels={"suite": "py"}))
    assert isinstance(run_id, str) and daemon.run_dir(run_id).is_dir()
    events = finished(client, run_id)
    assert events[-1].event == "stream.closed" and events[-1].reason == "completed"
    listed = [r for r in client.list() if r.run_id == run_id]
    assert len(listed) == 1
    assert listed[0].state == "closed" and listed[0].labels == {"suite": "py"} and listed[0].adapter == "claude"
    got = client.get(run_id)
    assert got.run_id == run_id and got.close_reason == "completed" and got.run_dir == str(daemon.run_dir(run_id))
    assert got.spec["decisions"] == "observe" and got.last_seq == events[-1].seq
    assert got.hermetic.mode == "on" and len(got.hermetic.rows) == 12
    assert got.spend.tool_calls == 1
    late = client.halt(run_id)
    assert late.refused and late.code == "TOO_LATE" and late.recorded is False, "the stream had closed"


def test_a_submit_whose_reply_is_lost_is_sent_again_and_makes_one_run(daemon, tmp_path):
    proxy = ReplyDroppingProxy(tmp_path / "proxy.sock", daemon.socket, drop=2)
    try:
        label = str(uuid.uuid4())
        run_id = metaharness.Client(proxy.path, timeout=60).submit(
            **standin_spec("bash_marker.json", decisions="observe", labels={"lost-reply": label}))
    finally:
        proxy.close()
    submits = [r for r in proxy.requests if r["request"] == "submit"]
    assert len(submits) == 3, "sent three times: two replies were lost"
    assert len({r["request_id"] for r in submits}) == 1, "every attempt carries the call's one request_id"
    client = metaharness.Client(daemon.socket)
    runs = [r for r in client.list() if (r.labels or {}).get("lost-reply") == label]
    assert [r.run_id for r in runs] == [run_id], "one run, and the id the caller got is its"
    finished(client, run_id)
    # Each call is a submit of its own (a fresh request_id); a caller's own id makes its retries one run.
    spec = standin_spec("bash_marker.json", decisions="observe")
    assert client.submit(**spec) != client.submit(**spec)
    mine = f"job-{label}"
    assert client.submit(request_id=mine, **spec) == client.submit(request_id=mine, **spec)
    with pytest.raises(metaharness.Refused) as conflict:
        client.submit(request_id=mine, **standin_spec("chatter.json", decisions="observe"))
    assert conflict.value.code == "CONFLICT"


def test_a_refused_submit_raises_with_the_daemons_code_and_reason(client):
    with pytest.raises(metaharness.Refused) as refused:
        client.submit(adapter="claude", prompt="go", model_scenario={"format": "metaharness.scenario/1"},
                      model_endpoint={"base_url": "http://127.0.0.1:9"})
    assert refused.value.code == "MALFORMED"
    assert "model_scenario" in refused.value.reason and "model_endpoint" in refused.value.reason
    with pytest.raises(metaharness.Refused) as refused:
        client.submit(adapter="nosuchvendor", prompt="go")
    assert refused.value.code == "MALFORMED" and "nosuchvendor" in refused.value.reason


def test_get_tail_attach_and_commands_on_an_unknown_run_are_refused_unknown_run(client):
    for call in (lambda: client.get("no-such-run"), lambda: client.tail("no-such-run"),
                 lambda: client.attach("no-such-run"), lambda: client.halt("no-such-run"),
                 lambda: client.decide("no-such-run", "c", "allow")):
        with pytest.raises(metaharness.Refused) as refused:
            call()
        assert refused.value.code == "UNKNOWN_RUN" and "no-such-run" in refused.value.reason


def test_tail_reads_typed_events_from_any_seq_and_says_where_to_resume(client, daemon):
    run_id = client.submit(**standin_spec("bash_marker.json", decisions="observe"))
    events = finished(client, run_id)
    on_disk = daemon.events_file(run_id)
    assert [e.raw for e in events] == on_disk, "the lines exactly as events.jsonl holds them"
    assert [e.seq for e in events] == list(range(1, len(on_disk) + 1))
    by_name = {e.event: e for e in events}
    assert isinstance(by_name["session.started"], metaharness.events.SessionStarted)
    assert by_name["session.started"].adapter == "claude"
    requested = by_name["tool.requested"]
    assert requested.name == "Bash" and requested.input["command"] == "touch marker.txt"
    assert requested.operations == ["shell"] and requested.decision_required is False
    assert by_name["tool.decided"].decision == metaharness.Allow() and by_name["tool.decided"].decided_by == "observe"
    assert all(e.recorded_at for e in events)
    middle = len(events) // 2
    with client.tail(run_id, from_seq=middle) as stream:
        rest = list(stream)
        assert stream.next_seq == len(events) + 1
    assert [e.seq for e in rest] == list(range(middle, len(events) + 1))
    with client.tail(run_id, from_seq=0) as stream:
        assert list(stream) == [] and stream.next_seq == len(events) + 1


def test_decide_and_halt_without_attaching_each_return_the_commands_one_result(client, daemon, scripts):
    script = write_script(scripts, "two.json", [[bash("toolu_one", "touch one.txt"), bash("toolu_two", "touch two.txt"),
                                                 {"type": "text", "text": "Done."}]])
    run_id = client.submit(**standin_spec(script, decisions="ask", decision_deadline_ms=120000))
    first = wait_for_event(client, run_id, "tool.requested")
    assert first.call_id == "toolu_one" and first.decision_required and first.deadline_ms == 120000
    denied = client.decide(run_id, "toolu_one", metaharness.Deny("this step writes nothing"))
    assert denied.ok and denied.recorded
    assert client.decide(run_id, "toolu_one", "allow").code == "TOO_LATE"
    unknown = client.decide(run_id, "toolu_nothing", "allow")
    assert unknown.refused and unknown.code == "UNKNOWN_CALL"
    with pytest.raises(metaharness.CommandRefused, match="UNKNOWN_CALL"):
        unknown.check()
    halted = client.halt(run_id, reason="enough")
    assert halted.ok
    events = finished(client, run_id)
    decided = [e for e in events if e.event == "tool.decided"]
    assert decided[0].call_id == "toolu_one" and decided[0].decision == metaharness.Deny("this step writes nothing")
    assert decided[0].decided_by == "embedder" and decided[0].peer["pid"] == os.getpid()
    results = {e.id: e.outcome for e in events if e.event == "command.result"}
    assert results[denied.command_id].ok and results[halted.command_id].ok
    assert events[-1].reason == "steer-halt"
    assert not (daemon.run_dir(run_id) / "scratch" / "work" / "one.txt").exists()


def test_the_other_commands_without_attaching(client, scripts, tmp_path):
    # Turn 2 holds the turn open (the stand-in's `idle` step) until it is interrupted.
    script = write_script(scripts, "talk.json", [[{"type": "text", "text": "first"}], [{"type": "idle"}]])
    run_id = client.submit(**standin_spec(script, decisions="frame", keep_open=True))
    wait_for_event(client, run_id, "turn.ended")  # then idle, held open for a message
    framed = client.set_frame(run_id, sealed_frame(tmp_path, ["file.read"]))
    assert framed.ok and framed.applies_at
    nothing_running = client.interrupt(run_id, "stop the turn")
    assert nothing_running.code == "TOO_LATE" and "no turn is running" in nothing_running.reason
    assert client.inject(run_id, "and now?").ok
    with client.tail(run_id, follow=True, timeout=60) as stream:
        next(e for e in stream if e.event == "turn.started" and e.turn == 2)
    steer = client.steer(run_id, "faster")
    assert steer.code == "UNSUPPORTED_CONTROL", "Claude headless has no mid-turn tier"
    assert client.set_permission(run_id, "plan").code == "SHADOWED", "an allow would override plan"
    assert client.interrupt(run_id, "stop the turn").ok
    assert client.halt(run_id).ok
    events = finished(client, run_id)
    assert events[-1].reason == "steer-halt"
    assert any(e.event == "injection" and e.text == "and now?" for e in events)
    results = [e for e in events if e.event == "command.result"]
    assert len(results) == 7, "one command.result per command"
    assert any(e.event == "turn.started" and e.turn == 2 and e.frame_digest == framed_digest(tmp_path)
               for e in events), "the frame came into force at the next turn"


def framed_digest(directory):
    import json

    return json.loads((directory / "sealed.json").read_text())["digest"]


def test_shutdown_stops_the_daemon_as_sigterm_does():
    from conftest import Daemon

    d = Daemon(name="shutdown").start()
    try:
        metaharness.Client(d.socket).shutdown()
        assert d.proc.wait(timeout=60) == 0
        with pytest.raises(metaharness.DaemonUnreachable):
            metaharness.Client(d.socket).status()
    finally:
        d.stop()


def test_viewer_gives_a_token_and_the_address_of_the_page_on_the_http_listener():
    from conftest import Daemon

    d = Daemon("[http]\nlisten = \"127.0.0.1:0\"\n", name="viewer").start()
    try:
        c = metaharness.Client(d.socket)
        page = c.viewer(role="observe", ttl_s=60)
        assert page.role == "observe"
        address = (d.state_dir / "http.addr").read_text().strip()
        assert page.url == f"http://{address}/viewer#token={page.token}"
        with pytest.raises(metaharness.Refused) as refused:
            c.viewer(role="root")
        assert refused.value.code == "MALFORMED"
    finally:
        d.stop()


def test_viewer_without_an_http_listener_is_refused_not_configured(client):
    with pytest.raises(metaharness.Refused) as refused:
        client.viewer()
    assert refused.value.code == "NOT_CONFIGURED"
