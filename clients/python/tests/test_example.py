"""The evaluation loop of docs/python-client.md, run word for word against a real daemon."""

import asyncio
import re

from conftest import SOURCE_DIR, bash, standin_spec, write_script

DOC = SOURCE_DIR / "docs" / "python-client.md"


def example_code():
    text = DOC.read_text()
    found = re.search(r"<!-- example: eval-loop -->\n```python\n(.*?)\n```", text, re.S)
    assert found, f"{DOC} has no eval-loop example"
    return found.group(1)


def test_the_documented_eval_loop_runs_and_collects_each_runs_result(daemon, scripts):
    namespace = {"__name__": "docs_example"}
    exec(compile(example_code(), str(DOC), "exec"), namespace)  # noqa: S102 - our own document
    # Each run asks for a shell call that touches the network and one that does not.
    script = write_script(scripts, "task.json", [[
        bash("toolu_fetch", "curl -s https://example.com/data.json"),
        bash("toolu_work", "touch solution.txt"),
        {"type": "text", "text": "Solved."}]])
    specs = [standin_spec(script, decisions="ask", decision_deadline_ms=120000, labels={"task": str(i)})
             for i in range(4)]
    results = asyncio.run(asyncio.wait_for(namespace["evaluate"](specs, daemon.socket), 120))
    assert len(results) == 4 and len({r["run_id"] for r in results}) == 4
    for r in results:
        assert r["close_reason"] == "completed"
        assert r["census"]["allowed"] == 1 and r["census"]["denied"] == 1
        assert r["denials"] == [{"call": "toolu_fetch", "by": "embedder",
                                 "reason": "this evaluation runs offline: no network from the shell"}]
        assert (daemon.run_dir(r["run_id"]) / "scratch" / "work" / "solution.txt").exists()


def test_the_policy_denies_network_shell_calls_and_allows_the_rest():
    namespace = {"__name__": "docs_example"}
    exec(compile(example_code(), str(DOC), "exec"), namespace)  # noqa: S102
    import metaharness

    def call(name, operations, **input):
        return metaharness.parse_event({"format": "metaharness.event/1", "seq": 1, "run": "r", "event":
                                        "tool.requested", "call_id": "c", "name": name, "input": input,
                                        "operations": operations, "decision_required": True, "seam": "hook"})

    policy = namespace["policy"]
    assert policy(call("Bash", ["shell"], command="wget http://x")).kind == "deny"
    assert policy(call("Bash", ["shell"], cmd="ssh host true")).kind == "deny"
    assert policy(call("Bash", ["shell"], command="pytest -q")).kind == "allow"
    assert policy(call("Read", ["file.read"], file_path="https://not-a-shell-call")).kind == "allow"
