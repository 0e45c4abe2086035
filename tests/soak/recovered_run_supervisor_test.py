#!/usr/bin/env python3
"""The soak's second finding (docs/soak.md, "Findings" 2; seed 2929 at 724 s), made
deterministic: a daemon killed (-9) after it spawned a run's supervisor but before the
supervisor wrote its supervisor.json. The next daemon recovers the run (it is not adoptable
without supervisor.json) and closes it; the supervisor must not outlive that close. Today it
waits runs.adopt_within_ms (600 s) for a daemon that never comes.

The window is made by removing supervisor.json (the state that window leaves on disk) before
the kill, instead of racing a kill against the supervisor's start. Exit 0: no supervisor of the
run is left 15 s after the recovered run's stream.closed; 1 otherwise."""

import json
import os
import pathlib
import shutil
import signal
import sys
import tempfile
import time

SOURCE = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(SOURCE / "clients" / "python"))
sys.path.insert(0, str(SOURCE / "bench" / "soak"))

import metaharness  # noqa: E402
from soak_faults import cmdline  # noqa: E402
from soak_host import DaemonHost  # noqa: E402


def supervisors_of(spec_path):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and spec_path in cmdline(int(p))]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)  # polling a file or a process: neither has an event to wait on from here


def main():
    bin_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else SOURCE / "build" / "bin").resolve()
    work = tempfile.mkdtemp(prefix="mh-soak-recov-")
    os.chmod(work, 0o755)
    scripts = os.path.join(work, "scripts")
    os.mkdir(scripts)
    os.chmod(scripts, 0o755)
    script = os.path.join(scripts, "wait.json")
    with open(script, "w") as f:
        json.dump({"format": "mh-standin-claude.script/1", "description": "one call, held",
                   "turns": [[{"type": "tool_use", "id": "toolu_held", "name": "Bash",
                               "input": {"command": "touch held.txt", "description": "held"}}]]}, f)
    os.chmod(script, 0o644)
    host = DaemonHost(bin_dir / "metaharness", {"claude": bin_dir / "mh-standin-claude"}, scripts,
                      os.path.join(work, "d"))
    host.start()
    left = []
    try:
        client = metaharness.Client(host.socket, timeout=30)
        run_id = client.submit(adapter="claude", prompt="go", decisions="ask", decision_deadline_ms=600000,
                               model_endpoint={"base_url": "http://127.0.0.1:9"},
                               vendor_env={"MH_STANDIN_SCRIPT": script})
        run_dir = host.state_dir / "runs" / run_id
        spec_path = str(run_dir / "supervisor-spec.json")
        wait_for(lambda: (run_dir / "supervisor.json").exists(), 30, "supervisor.json")
        with client.tail(run_id, follow=True, timeout=30) as tail:
            for event in tail:
                if event.event == "tool.requested":
                    break
        (run_dir / "supervisor.json").unlink()  # the window: spawned, not yet recorded
        host.proc.send_signal(signal.SIGKILL)
        host.proc.wait()
        host.start()
        closed = [e for e in client.tail(run_id, follow=True, timeout=30) if e.event == "stream.closed"]
        print(f"run {run_id} closed: {closed[0].reason if closed else None}")
        deadline = time.monotonic() + 15
        while supervisors_of(spec_path) and time.monotonic() < deadline:
            time.sleep(0.1)  # the supervisor's exit has no event to wait on from here
        left = supervisors_of(spec_path)
    finally:
        host.stop()
        for pid in left:  # the run's supervisor, found by its spec path in its command line
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    if left:
        print(f"FAIL: the recovered run's supervisor is still running 15 s after its stream.closed: pids {left}")
        return 1
    print("ok: no supervisor left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
