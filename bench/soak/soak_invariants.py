"""The invariants, each a named counter (checked, violated), judged over what the soak kept:
every run's record, what every reader received, what every controller was answered, and the
host's processes, cgroups and the daemon's memory and fds."""

import json
import os
import subprocess

INVARIANTS = (
    "run_closed",             # every submitted run's record ends in stream.closed by the soak's end
    "check_stream",           # `metaharness check-stream` passes: seq contiguous, one stream.closed, last
    "reader_bytes_equal",     # every line a reader received is byte-equal to the record's line of that seq
    "reader_complete",        # every reconnecting reader got each seq once, in order, up to stream.closed
    "cli_reader_contiguous",  # what a `metaharness tail --follow` reader wrote is a gap-free run of seqs
    "command_one_result",     # every command sent got exactly one result; no command id has two command.results
    "command_lost_in_crash",  # a command the client was told it lost across a daemon kill has no result recorded
    "call_decided_once",      # at most one tool.decided per call; at most one controller told ok per call
    "decision_as_answered",   # the recorded decision of a call a controller was told ok for is that controller's
    "no_run_after_deny",      # a denied call's effect (its marker file) never happened
    "no_process_left",        # no process of a closed run (its marker), no supervisor of the soak's state dir
    "no_cgroup_left",         # the daemon's cgroup holds no group of a closed run
    "daemon_stops_on_sigterm",  # a SIGTERM stops the daemon within 60 s
    "daemon_fds_bounded",     # the daemon's fds do not grow over the last half beyond noise
    "daemon_rss_bounded",     # nor does its RSS
)


class Invariants:
    def __init__(self):
        self.checked = {name: 0 for name in INVARIANTS}
        self.violations = []  # (name, moment_s or None, detail)

    def check(self, name, ok, detail, moment=None):
        self.checked[name] += 1
        if not ok:
            self.violations.append((name, moment, detail))
        return ok

    def violated(self, name):
        return sum(1 for v in self.violations if v[0] == name)


def record_lines(run_dir):
    path = os.path.join(run_dir, "events.jsonl")
    try:
        with open(path, "rb") as f:
            raw = f.read().splitlines(keepends=True)
    except OSError:
        return {}, []
    by_seq, events = {}, []
    for line in raw:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        by_seq[obj.get("seq")] = line
        events.append(obj)
    return by_seq, events


def check_run(inv, soak, log):
    run_dir = str(soak.host.state_dir / "runs" / log.run_id)
    by_seq, events = record_lines(run_dir)
    at = log.submitted_at
    tag = f"run {log.run_id} (plan #{log.index}, submitted at {at:.1f} s)"
    closed = [e for e in events if e.get("event") == "stream.closed"]
    inv.check("run_closed", len(closed) >= 1, f"{tag}: no stream.closed in its record", at)
    checked = subprocess.run([soak.metaharness, "check-stream", os.path.join(run_dir, "events.jsonl")],
                             capture_output=True, text=True)
    inv.check("check_stream", checked.returncode == 0,
              f"{tag}: check-stream: {(checked.stdout + checked.stderr).strip()[:300]}", at)

    for reader in log.readers:
        bad = [s for s, line in reader.lines.items() if by_seq.get(s) != line]
        inv.check("reader_bytes_equal", not bad, f"{tag}: reader {reader.name} seqs differ from the record: {bad[:5]}",
                  at)
        if reader.lines:
            first, last = min(reader.lines), max(reader.lines)
            gaps = [s for s in range(first, last + 1) if s not in reader.lines]
        else:
            gaps = []
        complete = (reader.closed or (reader.ended and not reader.lines)) and not gaps and not reader.errors
        inv.check("reader_complete", complete,
                  f"{tag}: reader {reader.name} (from {reader.from_seq}, {reader.connections} connections): "
                  f"closed={reader.closed} ended={reader.ended} gaps={gaps[:5]} errors={reader.errors[:3]}", at)
    for cli, lines in log.cli_readers:
        bad = [s for s, line in lines.items() if by_seq.get(s) != line]
        inv.check("reader_bytes_equal", not bad, f"{tag}: cli reader seqs differ from the record: {bad[:5]}", at)
        gaps = []
        if lines:
            gaps = [s for s in range(min(lines), max(lines) + 1) if s not in lines]
        inv.check("cli_reader_contiguous", not gaps and (not lines or min(lines) == cli.from_seq),
                  f"{tag}: cli reader from {cli.from_seq}: first {min(lines) if lines else None}, gaps {gaps[:5]}", at)

    # Commands: each sent one answered; no command id with two command.results. A command lost in
    # a daemon's crash (the client told CommandLost, the daemon restarted meanwhile) is accounted
    # for apart: it must have no result in the record (the daemon never recorded it).
    lost = len(log.lost_in_crash)
    inv.check("command_one_result",
              not log.command_errors and log.commands_answered + lost == log.commands_sent,
              f"{tag}: sent {log.commands_sent}, answered {log.commands_answered}, lost in a crash {lost}: "
              f"{log.command_errors[:3]}", at)
    result_ids = {}
    for e in events:
        if e.get("event") == "command.result":
            cid = e.get("command_id") or e.get("id")
            result_ids[cid] = result_ids.get(cid, 0) + 1
    for command_id, sent_in, told_in in log.lost_in_crash:
        inv.check("command_lost_in_crash", command_id not in result_ids,
                  f"{tag}: command {command_id} (sent to daemon incarnation {sent_in}, lost by {told_in}) "
                  f"has a result in the record, which the client was never given", at)
    twice = [c for c, n in result_ids.items() if n > 1 and c not in (None, "-")]
    inv.check("command_one_result", not twice, f"{tag}: command ids with more than one command.result: {twice[:5]}",
              at)

    # Decisions.
    decided = {}
    for e in events:
        if e.get("event") == "tool.decided":
            decided.setdefault(e.get("call_id"), []).append(e)
    twice = [c for c, d in decided.items() if len(d) > 1]
    inv.check("call_decided_once", not twice, f"{tag}: calls decided more than once: {twice[:5]}", at)
    oks = {}
    for name, call_id, decision, ok, _code in log.decisions:
        if ok:
            oks.setdefault(call_id, []).append((name, decision))
    told_twice = [c for c, o in oks.items() if len(o) > 1]
    inv.check("call_decided_once", not told_twice, f"{tag}: more than one controller told ok: {told_twice[:5]}", at)
    for call_id, told in oks.items():
        recorded = decided.get(call_id, [])
        kind = recorded[0].get("decision", {}).get("decision") if recorded else None
        if isinstance(recorded[0].get("decision") if recorded else None, str):
            kind = recorded[0]["decision"]
        inv.check("decision_as_answered", bool(recorded) and kind == told[0][1],
                  f"{tag}: {call_id}: controller {told[0][0]} was told ok for {told[0][1]}, the record says "
                  f"{[r.get('decision') for r in recorded]}", at)

    work = os.path.join(run_dir, "scratch", "work")  # the run's default cwd
    for call_id, ds in decided.items():
        d = ds[0].get("decision")
        kind = d.get("decision") if isinstance(d, dict) else d
        if kind == "allow" and os.path.exists(os.path.join(work, f"m_{call_id}.txt")):
            soak.allowed_effects_seen += 1  # shows the deny check looks where the effects land
        if kind == "deny":
            inv.check("no_run_after_deny", not os.path.exists(os.path.join(work, f"m_{call_id}.txt")),
                      f"{tag}: {call_id} was denied and its effect (m_{call_id}.txt) happened", at)
