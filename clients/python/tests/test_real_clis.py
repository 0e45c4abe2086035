"""The client against runs of the REAL vendor CLIs (every vendor/pins line: Claude Code 2.1.197, Codex
0.171.0, opencode 1.18.33, Gemini CLI 0.61.0, Qwen Code 0.24.4), each playing a scenario from
metaharness's scripted endpoint on loopback: the documented evaluation loop on all five at once
(each vendor's assertion it cannot meet replaced by what it really does, as its capability notes
name it), and a controller that loses its connection mid-decision on Claude."""

import asyncio
import json
import pathlib
import re
import subprocess

import pytest

import metaharness
from conftest import METAHARNESS, SCENARIOS, SOURCE_DIR, Daemon, read_deciding_after_a_drop
from test_example import example_code

# Both wires: a network fetch from the shell (the policy denies it), then a local edit (allowed).
SCENARIO = {
    "format": "metaharness.scenario/1",
    "description": "A shell call that touches the network, one that does not, then an answer.",
    "steps": [
        {"name": "fetch", "content": [{"type": "tool_call", "id": "call_fetch", "name": "Bash",
                                       "input": {"command": "curl -s https://example.com/data.json",
                                                 "description": "Fetch the data"},
                                       "responses": {"name": "exec_command",
                                                     "input": {"cmd": "curl -s https://example.com/data.json"}}}]},
        {"name": "work", "content": [{"type": "tool_call", "id": "call_work", "name": "Bash",
                                      "input": {"command": "touch marker.txt", "description": "Leave a marker"},
                                      "responses": {"name": "exec_command", "input": {"cmd": "touch marker.txt"}}}]},
        {"name": "answer", "content": [{"type": "text", "text": "Done."}]},
    ],
}



def in_opencodes_words(scenario):
    """The same script as opencode plays it: its own tool name (`bash`, same input) on the Anthropic
    wire it speaks, and an answer for its session-title request (a request with no tools)."""
    def call(block):
        if block["type"] != "tool_call":
            return block
        return {"type": "tool_call", "id": block["id"], "name": "bash", "input": block["input"]}
    return {"format": scenario["format"], "description": scenario["description"], "wires": ["anthropic"],
            "aux": {"content": [{"type": "text", "text": "Scripted title"}]},
            "steps": [{"name": s["name"], "content": [call(b) for b in s["content"]]} for s in scenario["steps"]]}


def in_acp_vendors_words(scenario, wire):
    """The same script as Gemini CLI and Qwen Code play it: their shell tool's own name
    (`run_shell_command`, same input) on the wire each speaks (Qwen's side requests answered aux)."""
    def call(block):
        if block["type"] != "tool_call":
            return block
        return {"type": "tool_call", "id": block["id"], "name": "run_shell_command", "input": block["input"]}
    out = {"format": scenario["format"], "description": scenario["description"], "wires": [wire],
           "steps": [{"name": s["name"], "content": [call(b) for b in s["content"]]} for s in scenario["steps"]]}
    if wire == "anthropic":
        out["aux"] = {"content": [{"type": "text", "text": "Scripted aux"}]}
    return out


def pinned_vendors():
    """vendor/pins, the build's vendors and their pinned versions: `<adapter> <package> <version> [...]`."""
    pins = {}
    for line in (SOURCE_DIR / "vendor" / "pins").read_text().splitlines():
        if line[:1].isalpha() and line[:1].islower():
            fields = line.split()
            pins[fields[0]] = fields[2]
    return pins


def capability_notes(adapter):
    """`metaharness capabilities <adapter>`'s notes: where an adapter names what it cannot do."""
    out = subprocess.run([str(METAHARNESS), "capabilities", adapter], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["notes"]


PINNED = pinned_vendors()
ADAPTERS = tuple(PINNED)
# Every vendor plays SCENARIO, each in its own words.
SCENARIOS_BY_ADAPTER = {adapter: SCENARIO for adapter in ADAPTERS} | {
    "opencode": in_opencodes_words(SCENARIO),
    "gemini": in_acp_vendors_words(SCENARIO, "gemini"),
    "qwen": in_acp_vendors_words(SCENARIO, "anthropic"),
}
OFFLINE = "this evaluation runs offline: no network from the shell"
UNSEEN = "the command is not reported: a shell call nobody can read is denied"


@pytest.fixture(scope="module")
def real():
    d = Daemon(name="real").start()
    yield d
    d.stop()


def test_the_documented_eval_loop_governs_a_real_run_of_every_vendor(real, tmp_path):
    namespace = {"__name__": "docs_example"}
    exec(compile(example_code(), "docs/python-client.md", "exec"), namespace)  # noqa: S102
    # The documented policy reads the shell call's command. Gemini CLI reports no call input over
    # ACP (input null: `capabilities gemini` names it), so a command nobody can read is denied here,
    # fail-closed; for every other vendor this is the documented policy unchanged.
    documented = namespace["policy"]

    def policy(call):
        if call.input is None and "shell" in call.operations:
            return metaharness.Deny(UNSEEN)
        return documented(call)
    namespace["policy"] = policy
    specs = [{"adapter": adapter, "prompt": "fetch the data, then leave a marker",
              "model_scenario": SCENARIOS_BY_ADAPTER[adapter], "decisions": "ask", "decision_deadline_ms": 120000,
              "labels": {"vendor": adapter}}
             for adapter in ADAPTERS]
    results = asyncio.run(asyncio.wait_for(namespace["evaluate"](specs, real.socket), 600))
    client = metaharness.Client(real.socket)
    for adapter, r in zip(ADAPTERS, results):
        events = list(client.tail(r["run_id"], timeout=60))
        started = next(e for e in events if e.event == "session.started")
        assert started.adapter == adapter
        assert started.harness_version == PINNED[adapter]
        assert r["close_reason"] == "completed", (adapter, r)
        requested = [e for e in events if e.event == "tool.requested" and e.decision_required]
        assert requested and all("shell" in e.operations for e in requested), (adapter, requested)
        marker = pathlib.Path(client.get(r["run_id"]).run_dir) / "scratch" / "work" / "marker.txt"
        by_embedder = [d["reason"] for d in r["denials"] if d["by"] == "embedder"]
        not_delivered = [e for e in events if e.event == "warning" and e.code == "DENY_REASON_NOT_DELIVERED"]
        if adapter == "gemini":
            # No input to read: both shell calls are presented with input null and denied unseen;
            # Gemini CLI goes on after a cancelled call, the model reads Gemini's own text (the run
            # warns DENY_REASON_NOT_DELIVERED for each), and nothing ran.
            assert any("reports no tool input" in n for n in capability_notes(adapter))
            assert [e.input for e in requested] == [None, None], requested
            assert by_embedder == [UNSEEN, UNSEEN], r["denials"]
            assert r["census"] is not None and r["census"]["denied"] == 2 and r["census"]["allowed"] == 0, r
            assert len(not_delivered) == 2, not_delivered
            assert not marker.exists()
            continue
        fetch = [e for e in requested if "curl" in json.dumps(e.input)]
        assert fetch, (adapter, requested)
        assert by_embedder == [OFFLINE] * len(fetch), (adapter, r["denials"])
        if adapter == "qwen":
            # The fetch is denied by the documented policy, and the cancelled call ends Qwen Code's
            # turn (`capabilities qwen` names it): the marker call is never asked, the run completes,
            # and the model read Qwen's own text (DENY_REASON_NOT_DELIVERED).
            assert any("a cancelled call ends the turn" in n for n in capability_notes(adapter))
            assert len(requested) == 1, requested
            assert r["census"] is not None and r["census"]["denied"] == 1 and r["census"]["allowed"] == 0, r
            assert len(not_delivered) == 1, not_delivered
            assert not marker.exists()
            continue
        assert r["census"] is not None and r["census"]["denied"] >= 1 and r["census"]["allowed"] >= 1, r
        assert marker.exists(), adapter


def test_a_real_claude_run_survives_its_controller_losing_the_connection_mid_decision(real):
    client = metaharness.Client(real.socket)
    scenario = pathlib.Path(SCENARIOS / "claude" / "bash_marker.json")
    run_id = client.submit(adapter="claude", prompt="leave a marker", model_scenario=scenario, decisions="ask",
                           decision_deadline_ms=120000)
    with client.attach(run_id, timeout=120) as run:
        offers, seqs = read_deciding_after_a_drop(run, metaharness.Deny("no markers today"))
        assert run.connections == 2
    assert [o.call_id for o in offers] == ["toolu_marker", "toolu_marker"] and offers[1].reoffered
    assert offers[1].remaining_ms <= offers[0].remaining_ms
    assert seqs == list(range(1, len(real.events_file(run_id)) + 1))
    decided = [e for e in client.tail(run_id) if e.event == "tool.decided"]
    assert [(d.decision, d.decided_by) for d in decided] == [(metaharness.Deny("no markers today"), "embedder")]
    got = client.get(run_id)
    assert got.close_reason == "completed" and got.hermetic.gating == "ok"
    assert not (pathlib.Path(got.run_dir) / "scratch" / "work" / "marker.txt").exists()


def test_the_readme_snippet_governs_a_real_codex_run(real, monkeypatch):
    from conftest import SOURCE_DIR

    text = (SOURCE_DIR / "README.md").read_text()
    code = re.search(r"<!-- example: readme[^>]*-->\n```python\n(.*?)\n```", text, re.S).group(1)
    monkeypatch.setenv("METAHARNESS_SOCKET", real.socket)
    monkeypatch.chdir(SOURCE_DIR)  # the snippet names the scenario relative to the checkout
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own document
    run_id = namespace["run_id"]
    got = metaharness.Client(real.socket).get(run_id)
    assert got.adapter == "codex" and got.close_reason == "completed"
    decided = [e for e in metaharness.Client(real.socket).tail(run_id) if e.event == "tool.decided"]
    assert [(d.decision, d.decided_by) for d in decided] == [(metaharness.Deny("read-only today"), "embedder")]
    assert not (pathlib.Path(got.run_dir) / "scratch" / "work" / "marker.txt").exists()
