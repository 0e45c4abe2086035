#!/usr/bin/env python3
"""park_rss_bench: the memory 20 runs hold while each waits on a decision, parked (issue 27 §5:
park_after_ms, the vendor deferred the call and exited) against waiting (no park_after_ms: each
vendor process stays up, blocked on its call).

Four phases per vendor, each with its own real `metaharness daemon` (containment as the host gives
it): waiting and parked with runs that are the daemon's own children (runs.supervise = false),
then waiting and parked with supervised runs (the default: each run's supervisor is its own
process, which a parked run keeps while its vendor is gone), each running the REAL pinned CLI
against each run's scripted endpoint (one shell call, then an answer; the call as the vendor's
descriptor says its CLI is asked for one: `metaharness vendor list --json`). The vendors are
--adapter's, else every registered vendor whose capability table honours parking
(`metaharness capabilities`). N runs are submitted in waves (--wave at a time: a 2-core host),
each in ask mode with a 10-minute deadline, and awaited: waiting = its call pending (get:
pending_decisions 1), parked = get's state "parked" and its pid null (the vendor process exited).
With all N there, the processes the runs hold are read from /proc: every descendant of the daemon
and (supervised) of each run's supervisor (supervisor.json names it), their VmRSS and Pss
(smaps_rollup), and the daemon's own. Then every call is allowed and every run must close
`completed`. Every wait is bounded; the daemon is stopped with SIGTERM (it halts what is left).
Output: a table, and JSON (--json FILE). Exit 0; 1 when a run did not get there or did not
complete; 2 when the bench itself failed."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import metaharness  # noqa: E402

def parking_vendors(binary, wanted):
    """Each vendor to measure, as `metaharness vendor list --json` describes it: `wanted`'s, else
    every one whose capability table honours parking. A wanted vendor that is not registered, or
    does not park (its runs would be refused at start, start/park), is refused by name."""
    out = subprocess.run([binary, "vendor", "list", "--json"], capture_output=True, text=True, timeout=60, check=True)
    vendors = json.loads(out.stdout)

    def parks(vendor):
        table = subprocess.run([binary, "capabilities", vendor["id"]], capture_output=True, text=True, timeout=60,
                               check=True)
        return json.loads(table.stdout).get("parking") == "honoured"

    if not wanted:
        return [v for v in vendors if parks(v)]
    known = {v["id"]: v for v in vendors}
    missing = [w for w in wanted if w not in known]
    if missing:
        raise SystemExit(f"park_rss_bench: no such vendor: {', '.join(missing)} ({', '.join(known)})")
    unparked = [w for w in wanted if not parks(known[w])]
    if unparked:
        raise SystemExit(f"park_rss_bench: {', '.join(unparked)}: its capability table does not honour parking "
                         "(`metaharness capabilities`)")
    return [known[w] for w in wanted]


def scenario(vendor):
    """One shell call the vendor's CLI is asked to make (its descriptor's scripted shell), then an
    answer; and the call id the run's events report for it."""
    shell = vendor["scripted_shell"]
    call_id = f"{shell['call_id_prefix']}probe"
    inputs = {shell["command_key"]: "true"}
    if shell["command_key"] == "command":
        inputs["description"] = "probe"
    out = {"format": "metaharness.scenario/1", "wires": [vendor["scenario_wire"]], "steps": [
        {"name": "ask", "content": [{"type": "tool_call", "id": call_id, "name": shell["tool"], "input": inputs}]},
        {"name": "answer", "content": [{"type": "text", "text": "Done."}]}]}
    if shell["side_requests"]:
        out["aux"] = {"content": [{"type": "text", "text": "Park bench"}]}
    return out, shell["reported_call_id"].replace("{id}", call_id)


def until(condition, bound_s, what):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)  # a poll with a bound
    raise TimeoutError(what)


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def supervisors(state_dir, ids):
    """Each run's supervisor pid, from its supervisor.json (supervised runs)."""
    pids = []
    for rid in ids:
        try:
            with open(os.path.join(state_dir, "runs", rid, "supervisor.json")) as f:
                pids.append(int(json.load(f)["supervisor_pid"]))
        except (OSError, ValueError, KeyError):
            continue
    return pids


def phase(binary, vendor, runs, wave, park, supervised):
    with tempfile.TemporaryDirectory(prefix="mh-park-bench-") as d:
        config = os.path.join(d, "config.toml")
        with open(config, "w") as f:
            f.write(f"[runs]\nsupervise = {'true' if supervised else 'false'}\n")
        sock = os.path.join(d, "mh.sock")
        daemon = subprocess.Popen([binary, "daemon", "--config", config, "--socket", sock, "--state-dir",
                                   os.path.join(d, "state")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            until(lambda: os.path.exists(sock), 30, "the daemon's socket")
            client = metaharness.Client(sock, timeout=120)
            def answers():
                try:
                    return client.status() is not None
                except metaharness.MetaharnessError:
                    return False
            until(answers, 30, "the daemon's status")
            model_scenario, call_id = scenario(vendor)
            ids = []
            t0 = time.monotonic()
            for start in range(0, runs, wave):
                batch = []
                for _ in range(start, min(runs, start + wave)):
                    spec = dict(adapter=vendor["id"], prompt="go", decisions="ask", decision_deadline_ms=600000,
                                model_scenario=model_scenario)
                    if park:
                        spec["park_after_ms"] = 200
                    batch.append(client.submit(**spec))  # the run id
                for rid in batch:
                    if park:
                        # Parked is said at the turn's end; the vendor then exits: wait for both.
                        until(lambda: client.get(rid).state == "parked" and client.get(rid).pid is None, 180,
                              f"{rid} parked and its vendor gone")
                    else:
                        until(lambda: client.get(rid).pending_decisions == 1, 180, f"{rid} waiting")
                ids.extend(batch)
            settle_s = time.monotonic() - t0
            procs = descendants(daemon.pid)
            if supervised:
                for sup in supervisors(os.path.join(d, "state"), ids):
                    if sup not in procs:
                        procs.append(sup)
                        procs.extend(p for p in descendants(sup) if p not in procs)
            rss = sum(status_kb(p, "VmRSS") for p in procs)
            pss = sum(pss_kb(p) for p in procs)
            result = {"adapter": vendor["id"], "phase": ("parked" if park else "waiting") + ("/sup" if supervised else ""),
                      "runs": runs, "processes": len(procs),
                      "tree_rss_kib": rss, "tree_pss_kib": pss, "daemon_rss_kib": status_kb(daemon.pid, "VmRSS"),
                      "all_there_s": round(settle_s, 1)}
            t1 = time.monotonic()
            for rid in ids:
                client.decide(rid, call_id, "allow")
            for rid in ids:
                until(lambda: client.get(rid).state == "closed", 300, f"{rid} closed")
            result["all_closed_after_decisions_s"] = round(time.monotonic() - t1, 1)
            result["completed"] = sum(1 for rid in ids if client.get(rid).close_reason == "completed")
            return result
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "metaharness"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--wave", type=int, default=4)
    ap.add_argument("--adapter", action="append", help="a vendor to measure (repeatable); default: every one "
                    "whose capability table honours parking")
    ap.add_argument("--json")
    a = ap.parse_args()
    vendors = parking_vendors(a.binary, a.adapter)
    if not vendors:
        print("park_rss_bench: no registered vendor honours parking", file=sys.stderr)
        return 2
    try:
        results = [phase(a.binary, vendor, a.runs, a.wave, park=park, supervised=supervised)
                   for vendor in vendors for supervised in (False, True) for park in (False, True)]
    except (TimeoutError, metaharness.MetaharnessError) as e:
        print(f"park_rss_bench: {e}", file=sys.stderr)
        return 2
    print(f"{'adapter':9} {'phase':11} {'runs':>4} {'procs':>5} {'tree RSS MiB':>12} {'tree PSS MiB':>12} {'daemon RSS MiB':>14} "
          f"{'completed':>9}")
    for r in results:
        print(f"{r['adapter']:9} {r['phase']:11} {r['runs']:>4} {r['processes']:>5} {r['tree_rss_kib'] / 1024:>12.1f} "
              f"{r['tree_pss_kib'] / 1024:>12.1f} {r['daemon_rss_kib'] / 1024:>14.1f} {r['completed']:>9}")
    summary = {"bench": "park_rss", "results": results}
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if all(r["completed"] == r["runs"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
