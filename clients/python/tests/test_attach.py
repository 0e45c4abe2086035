"""The controller's side: decisions round trip, every command's one result, and an attachment
that survives a dropped connection with no gap, no duplicate and the pending call re-offered."""

import pytest

import metaharness
from conftest import bash, drop, read_deciding_after_a_drop, sealed_frame, standin_spec, write_script

ASK = {"decisions": "ask", "decision_deadline_ms": 120000}


def work(daemon, run_id, name):
    return daemon.run_dir(run_id) / "scratch" / "work" / name


def test_the_four_decisions_round_trip_and_each_is_what_the_vendor_was_given(client, daemon, scripts):
    script = write_script(scripts, "four.json", [[
        bash("toolu_allow", "touch allowed.txt"), bash("toolu_deny", "touch denied.txt"),
        bash("toolu_replace", "touch original.txt"), bash("toolu_abstain", "touch abstained.txt"),
        {"type": "text", "text": "Done."}]])
    run_id = client.submit(**standin_spec(script, **ASK))
    policy = {"toolu_allow": metaharness.Allow(), "toolu_deny": metaharness.Deny("not this one"),
              "toolu_replace": metaharness.Replace({"command": "touch replaced.txt", "description": "r"}),
              "toolu_abstain": metaharness.Abstain()}
    offered, outcomes, decided = [], {}, {}
    with client.attach(run_id, timeout=60) as run:
        for item in run:
            if isinstance(item, metaharness.Pending):
                offered.append(item.call_id)
                assert item.request.call_id == item.call_id and item.request.name == "Bash"
                assert not item.reoffered and 0 < item.remaining_ms <= 120000
                outcomes[item.call_id] = run.decide(item.call_id, policy[item.call_id])
            elif item.event == "tool.decided":
                decided[item.call_id] = item
    assert offered == list(policy), "each call offered once, in order"
    assert all(o.ok for o in outcomes.values())
    for call_id, decision in policy.items():
        assert decided[call_id].decision == decision and decided[call_id].decided_by == "embedder"
    assert work(daemon, run_id, "allowed.txt").exists()
    assert not work(daemon, run_id, "denied.txt").exists()
    assert work(daemon, run_id, "replaced.txt").exists() and not work(daemon, run_id, "original.txt").exists()
    assert not work(daemon, run_id, "abstained.txt").exists(), "abstain: the vendor's own pipeline denied it"


def test_decisions_by_name_with_reason_and_input(client, daemon):
    run_id = client.submit(**standin_spec("bash_marker.json", **ASK))
    with client.attach(run_id, timeout=60) as run:
        pending = next(i for i in run if isinstance(i, metaharness.Pending))
        with pytest.raises(ValueError, match="non-empty reason"):
            run.decide(pending.call_id, "deny")
        assert run.decide(pending.call_id, "replace", input={"command": "touch other.txt"}).ok
        events = list(run)
    assert events[-1].event == "stream.closed"
    assert work(daemon, run_id, "other.txt").exists() and not work(daemon, run_id, "marker.txt").exists()


def test_every_command_on_an_attachment_gets_exactly_one_result(client, scripts, tmp_path):
    script = write_script(scripts, "held.json", [[{"type": "text", "text": "first"}], [{"type": "idle"}]])
    run_id = client.submit(**standin_spec(script, decisions="frame", keep_open=True))
    frame = sealed_frame(tmp_path, ["file.read"])
    outcomes = []
    with client.attach(run_id, timeout=60) as run:
        next(e for e in run if e.event == "turn.ended")
        framed = run.set_frame(frame)
        assert framed.ok and framed.applies_at, "frame.set says when it takes effect"
        outcomes.append(framed)
        outcomes.append(run.inject("second turn, please"))
        assert outcomes[-1].ok
        next(e for e in run if e.event == "turn.started" and e.turn == 2)
        outcomes.append(run.steer("faster"))
        assert outcomes[-1].code == "UNSUPPORTED_CONTROL"
        outcomes.append(run.set_permission("bypassPermissions"))
        assert outcomes[-1].code == "UNSUPPORTED_CONTROL" and "dangerously-skip-permissions" in outcomes[-1].reason
        outcomes.append(run.interrupt("enough of this turn"))
        assert outcomes[-1].ok
        outcomes.append(run.halt("done"))
        assert outcomes[-1].ok
        rest = list(run)
    assert rest[-1].event == "stream.closed" and rest[-1].reason == "steer-halt"
    stream = client.tail(run_id)
    results = [e for e in stream if e.event == "command.result"]
    assert sorted(r.id for r in results) == sorted(o.command_id for o in outcomes), "one result per command"
    for r in results:
        match = next(o for o in outcomes if o.command_id == r.id)
        assert r.outcome.ok == match.ok and r.outcome.code == match.code


def test_a_command_to_a_run_that_has_closed_is_answered_not_left_unanswered(client):
    run_id = client.submit(**standin_spec("bash_marker.json", decisions="observe"))
    list(client.tail(run_id, follow=True, timeout=60))
    with client.attach(run_id, timeout=60) as run:
        events = list(run)
        assert events[-1].event == "stream.closed"
        late = run.inject("hello?")
    assert late.refused and late.code == "NOT_ATTACHED" and late.recorded is False


def test_a_dropped_connection_resumes_at_the_next_seq_with_no_gap_and_no_duplicate(client, daemon, scripts):
    script = write_script(scripts, "chatter.json", [[{"type": "chatter", "count": 3000, "bytes": 100}]])
    run_id = client.submit(**standin_spec(script, decisions="observe"))
    seqs = []
    with client.attach(run_id, timeout=60) as run:
        for event in run:
            seqs.append(event.seq)
            if len(seqs) in (100, 1500):
                drop(run)
        assert run.connections == 3
    on_disk = daemon.events_file(run_id)
    assert seqs == list(range(1, len(on_disk) + 1)), "every line once, in order, across two drops"


def test_after_a_drop_the_still_pending_call_is_offered_again_with_its_time_left(client, daemon):
    run_id = client.submit(**standin_spec("bash_marker.json", **ASK))
    with client.attach(run_id, timeout=60) as run:
        offers, seqs = read_deciding_after_a_drop(run, metaharness.Allow())
        assert run.connections == 2
    first, again = offers
    assert again.call_id == first.call_id and again.reoffered and not first.reoffered
    assert again.requested_seq == first.requested_seq
    assert again.remaining_ms <= first.remaining_ms
    assert again.request is first.request, "the tool.requested it already read"
    assert seqs == list(range(1, len(daemon.events_file(run_id)) + 1))
    assert work(daemon, run_id, "marker.txt").exists()


def test_a_decision_sent_while_the_connection_is_down_is_taken_after_the_reconnect(client, daemon):
    run_id = client.submit(**standin_spec("bash_marker.json", **ASK))
    offers, decided = [], []
    with client.attach(run_id, timeout=60) as run:
        for item in run:
            if isinstance(item, metaharness.Pending):
                offers.append(item)
                drop(run)
                outcome = run.decide(item.call_id, metaharness.Deny("not while I was away"))
                assert outcome.ok, outcome
            elif item.event == "tool.decided":
                decided.append(item)
        assert run.connections == 2
    assert len(offers) == 1, "the call the reconnect found pending was this client's: not offered again"
    assert decided[0].decision == metaharness.Deny("not while I was away") and decided[0].decided_by == "embedder"
    assert not work(daemon, run_id, "marker.txt").exists()


def test_attaching_past_a_pending_call_still_offers_it_with_its_request(client):
    run_id = client.submit(**standin_spec("bash_marker.json", **ASK))
    with client.tail(run_id, follow=True, timeout=60) as stream:
        requested = next(e for e in stream if e.event == "tool.requested")
    with client.attach(run_id, from_seq=0, timeout=60) as run:
        offer = next(run)
        assert isinstance(offer, metaharness.Pending) and offer.call_id == requested.call_id
        assert offer.request.seq == requested.seq and offer.request.input == requested.input
        assert run.pending.keys() == {requested.call_id}
        assert run.halt().ok


def test_replaying_a_run_offers_only_the_calls_still_waiting(client, scripts):
    script = write_script(scripts, "two.json", [[bash("toolu_one", "touch one.txt"), bash("toolu_two", "touch two.txt"),
                                                 {"type": "text", "text": "Done."}]])
    run_id = client.submit(**standin_spec(script, **ASK))
    with client.tail(run_id, follow=True, timeout=60) as stream:
        next(e for e in stream if e.event == "tool.requested" and e.call_id == "toolu_one")
    assert client.decide(run_id, "toolu_one", "allow").ok
    offered = []
    with client.attach(run_id, from_seq=1, timeout=60) as run:
        for item in run:
            if isinstance(item, metaharness.Pending):
                offered.append(item.call_id)
                assert run.decide(item.call_id, "allow").ok
    assert offered == ["toolu_two"], "toolu_one was decided before this controller attached"


def test_an_attachment_closed_by_its_caller_is_not_resumed(client):
    run_id = client.submit(**standin_spec("bash_marker.json", **ASK))
    run = client.attach(run_id, timeout=60)
    offer = next(i for i in run if isinstance(i, metaharness.Pending))
    run.close()
    with pytest.raises(metaharness.ConnectionLost, match="closed"):
        next(run)
    with pytest.raises(metaharness.ConnectionLost, match="closed"):
        run.decide(offer.call_id, "allow")
    assert client.halt(run_id).ok
