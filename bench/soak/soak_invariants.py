"""The invariants, each a named counter (checked, violated), judged over what the soak kept:
every run's record, what every reader received, what every controller was answered, and the
host's processes, cgroups and the daemon's memory and fds."""

import hashlib
import json
import os
import subprocess
import threading

from soak_runs import REAL_CLIS, plan_cli

INVARIANTS = (
    "run_closed",             # every submitted run's record ends in stream.closed by the soak's end
    "check_stream",           # `metaharness check-stream` passes: seq contiguous, one stream.closed, last
    "reader_bytes_equal",     # every line a reader received is byte-equal to the record's line of that seq
    "reader_complete",        # every reconnecting reader got each seq once, in order, up to stream.closed
    "cli_reader_contiguous",  # what a `metaharness tail --follow` reader wrote is a gap-free run of seqs
    "viewer_poll_complete",   # a viewer long-poll reader got seq 1.. through stream.closed, in order, as recorded
    "budget_named",           # a run closed `budget` says which budget (a BUDGET_EXHAUSTED warning before its close)
    "command_one_result",     # every command sent got exactly one result; no command id has two command.results
    "control_as_documented",  # a halt/interrupt/steer/inject is answered as the adapter's capability table says
    "command_lost_in_crash",  # a command the client was told it lost across a daemon kill has no result recorded
    "call_decided_once",      # at most one tool.decided per call; at most one controller told ok per call
    "decision_as_answered",   # the recorded decision of a call a controller was told ok for is that controller's
    "no_run_after_deny",      # a denied call's effect (its marker file) never happened
    "no_process_left",        # no process of a closed run (its marker), no supervisor of the soak's state dir
    "no_cgroup_left",         # the daemon's cgroup holds no group of a closed run
    "no_netns_left",          # no network namespace of a closed run held (by a process, an fd, a mount)
    "no_mount_left",          # nor a mount namespace; no mount left under the state dir
    "no_fd_left",             # the daemon holds no fd into a closed run's directory
    "disk_full_only_when_full",  # DISK_FULL only while the soak held the state dir full
    "fleet_placed_once",      # --hosts 3: one host's state dir has the run (the one the soak was told)
    "fleet_closed_once",      # --hosts 3: its fleet copy (tail --fleet from another host) has one stream.closed
    "vendor_lines_accounted",  # every line of the kept vendor transcript is in the stream: mapped, or opaque
    "transcript_lines_whole",  # every line of the kept vendor transcript is one whole vendor line (JSON), but a last one a kill cut
    "daemon_stops_on_sigterm",  # a SIGTERM stops the daemon within 60 s
    "soak_driver_ok",         # the soak's own driver did what each plan said (no exception in it)
    "daemon_fds_bounded",     # the daemon's fds do not grow over the last half beyond noise
    "daemon_rss_bounded",     # nor does its RSS
)


# The one-shot commands the soak sends, by their names in a capability table's `commands`.
CONTROL_COMMANDS = {"halt": "halt", "interrupt": "interrupt", "steer": "steer", "inject": "message.inject"}


def load_capabilities(metaharness, adapters):
    """adapter -> its capability table's `commands` ({name: "honoured" | {"refused": CODE}})."""
    tables = {}
    for adapter in adapters:
        out = subprocess.run([metaharness, "capabilities", adapter], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"metaharness capabilities {adapter}: exit {out.returncode}: {out.stderr.strip()[:300]}")
        tables[adapter] = json.loads(out.stdout)["commands"]
    return tables


class Invariants:
    def __init__(self):
        self.lock = threading.Lock()
        self.checked = {name: 0 for name in INVARIANTS}
        self.violations = []  # (name, moment_s or None, detail)

    def check(self, name, ok, detail, moment=None):
        with self.lock:  # the workers and the fault thread check at once
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
    run_dir = str(log.host.state_dir / "runs" / log.run_id)
    by_seq, events = record_lines(run_dir)
    at = log.submitted_at
    tag = f"run {log.run_id} (plan #{log.index}, submitted at {at:.1f} s)"
    closed = [e for e in events if e.get("event") == "stream.closed"]
    if any(e.get("event") == "warning" and e.get("code") == "RECORD_INCOMPLETE" for e in events):
        soak.record_incomplete_runs += 1  # a write failed (a full disk) and the record says so
    inv.check("run_closed", len(closed) >= 1, f"{tag}: no stream.closed in its record", at)
    checked = subprocess.run([soak.metaharness, "check-stream", os.path.join(run_dir, "events.jsonl")],
                             capture_output=True, text=True)
    inv.check("check_stream", checked.returncode == 0,
              f"{tag}: check-stream: {(checked.stdout + checked.stderr).strip()[:300]}", at)

    check_vendor_lines(inv, soak, run_dir, events, tag, at, log.plan["adapter"])
    if closed and closed[-1].get("reason") == "completed":
        cli = plan_cli(log.plan)  # a real CLI's completed runs say it ran its scenario (not refused at launch)
        soak.completed_by_cli[cli] = soak.completed_by_cli.get(cli, 0) + 1
    if closed and closed[-1].get("reason") == "budget":
        soak.budget_closes += 1
        named = any(e.get("event") == "warning" and e.get("code") == "BUDGET_EXHAUSTED" for e in events)
        # A record that says RECORD_INCOMPLETE lost writes by name ("what the run did meanwhile (its
        # stop included) is not in this stream"): its BUDGET_EXHAUSTED may be among them. Counted apart.
        lost = not named and any(e.get("event") == "warning" and e.get("code") == "RECORD_INCOMPLETE" for e in events)
        if lost:
            soak.budget_warning_in_lost_write += 1
        inv.check("budget_named", named or lost,
                  f"{tag}: closed budget with no BUDGET_EXHAUSTED warning (and no RECORD_INCOMPLETE)", at)

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
    for viewer in log.viewer_readers:
        bad = [s for s, obj in viewer.lines.items() if s not in by_seq or json.loads(by_seq[s]) != obj]
        seqs = sorted(viewer.lines)
        contiguous = seqs == list(range(1, len(seqs) + 1))
        inv.check("viewer_poll_complete", viewer.closed and contiguous and not viewer.errors and not bad,
                  f"{tag}: viewer reader {viewer.name} (wait_ms {viewer.wait_ms}, {viewer.polls} polls, "
                  f"{viewer.tokens} tokens): closed={viewer.closed} ended={viewer.ended} seqs {seqs[:1]}..{seqs[-1:]} "
                  f"contiguous={contiguous} differing from the record {bad[:5]} errors={viewer.errors[:3]}", at)
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
    unknown = len(log.unknown_in_crash)
    soak.unknown_in_crash += unknown
    inv.check("command_one_result",
              not log.command_errors and log.commands_answered + lost + unknown == log.commands_sent,
              f"{tag}: sent {log.commands_sent}, answered {log.commands_answered}, lost in a crash {lost}, "
              f"connection cut by a daemon kill {unknown}: {log.command_errors[:3]}", at)
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

    # One-shot controls against the adapter's capability table (`metaharness capabilities`): one
    # it refuses (a steer where the capability table says UNSUPPORTED_CONTROL) is never answered
    # ok, one it honours is never refused UNSUPPORTED_CONTROL. Other refusals (DISK_FULL, a run
    # already closed, TOO_LATE) are answers by name.
    caps = soak.capabilities.get(log.plan["adapter"], {})
    for what, ok, code in log.controls:
        documented = caps.get(CONTROL_COMMANDS[what])
        refused = documented.get("refused") if isinstance(documented, dict) else None
        if refused is not None and code == refused:
            soak.refused_as_documented[f"{what} {code}"] = soak.refused_as_documented.get(f"{what} {code}", 0) + 1
        inv.check("control_as_documented",
                  not (refused is not None and ok) and not (documented == "honoured" and code == "UNSUPPORTED_CONTROL"),
                  f"{tag}: {what} answered {'ok' if ok else code}; {log.plan['adapter']}'s capability "
                  f"table says {documented}", at)

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


def check_refusals(inv, soak, log):
    """DISK_FULL is said only while a state dir the plan's run touches was held full (2 s of
    margin after: the reply to a check made just before the free arrives after it). In a fleet
    that is the host the plan submitted to or the run's owner (a placed submit is answered by the
    host that was to take the run, which the refused client never learns: any host's full window
    counts for a submit); on one host, its only state dir."""
    tag = f"plan #{log.index}" + (f" (run {log.run_id})" if log.run_id else " (not submitted)")
    hosts = {getattr(h, "host_id", None) for h in (getattr(log, "submit_host", None), getattr(log, "host", None))}
    for moment, what, code in log.refusals:
        if code == "DISK_FULL":
            inside = any(a - 0.5 <= moment <= b + 2.0 for a, b, host_id in soak.disk_full_windows
                         if host_id is None or host_id in hosts or what == "submit")
            inv.check("disk_full_only_when_full", inside,
                      f"{tag}: {what} refused DISK_FULL at {moment:.1f} s, outside every full window", moment)




def event_key(e):
    """What identifies a vendor-made event across the live stream and an offline translation."""
    return (e.get("event"), e.get("call_id"), e.get("request_id"), e.get("source_line"), e.get("turn"))


def check_vendor_lines(inv, soak, run_dir, events, tag, at, adapter):
    """Every line of the kept transcript (vendor-stdout.jsonl) is accounted for in the stream.

    The oracle is `metaharness translate` of the transcript (the adapter's reader alone,
    offline): the events it makes must appear in the live stream in order (the live stream has
    more: decisions, commands, warnings). Control traffic (Claude's control_*, the answers to
    JSON-RPC requests the live client sent: `response`) is the live controller's, offline an
    opaque: left out. A run that did not complete may miss a suffix (what its vendor
    wrote after the run stopped reading: a halt, a kill, a run recovered or left ungoverned), never
    a line in the middle: once one oracle event is missing, none after it may be in the stream.
    Each live `opaque` must name a transcript line (source_line) whose SHA-256 is its digest. A
    record that says RECORD_INCOMPLETE (a full disk cut writes) is exempt from the order check:
    what it lost is said by name there."""
    path = os.path.join(run_dir, "vendor-stdout.jsonl")
    try:
        with open(path, "rb") as f:
            transcript = f.read().split(b"\n")
    except OSError:
        transcript = []
    cut_last = bool(transcript) and transcript[-1] != b""  # a last line without its newline (a kill cut it)
    if transcript and transcript[-1] == b"":
        transcript.pop()
    complete_lines = transcript  # a last line without its newline is still the vendor's (cut by a kill)
    # Every vendor speaks JSON lines on stdout (stream-json, JSON-RPC): a line that is not one whole
    # JSON value is torn (a write that stopped part-way, the next bytes spliced onto it), unless it
    # is the last one, without its newline, that a kill cut.
    torn = []
    for n, line in enumerate(transcript, 1):
        if cut_last and n == len(transcript):
            continue
        try:
            json.loads(line)
        except ValueError:
            torn.append((n, len(line)))
    inv.check("transcript_lines_whole", not torn,
              f"{tag}: transcript lines that are not one whole vendor line (line, bytes): {torn[:5]} of "
              f"{len(transcript)}", at)
    bad_opaque = []
    for e in events:
        if e.get("event") == "opaque" and e.get("source_line") is not None:
            n = e["source_line"]
            line = complete_lines[n - 1] if 0 < n <= len(complete_lines) else None
            digest = (e.get("digest") or "").removeprefix("sha256:")
            if line is None or hashlib.sha256(line).hexdigest() != digest:
                bad_opaque.append(n)
    translated = subprocess.run([soak.metaharness, "translate", adapter, path], capture_output=True)
    # What the run sent that the vendor echoes back (Codex's userMessage items of a steer or an
    # inject, and its raw user message) is recorded live as `injection`; offline, with no view of
    # what was sent, those lines are `opaque`. Such a line, holding the text of an `injection` of the
    # live stream, is accounted for by it.
    injected = [json.dumps(e.get("text"))[1:-1].encode() for e in events
                if e.get("event") == "injection" and e.get("text")]

    def echoes_injection(line):
        return (b'"userMessage"' in line or b'"role":"user"' in line) and any(t in line for t in injected)

    oracle = []
    for raw in translated.stdout.splitlines():
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        if e.get("event") in ("stream.closed", None):
            continue
        if e.get("event") == "opaque":
            n = e.get("source_line")
            line = complete_lines[n - 1] if n and 0 < n <= len(complete_lines) else b""
            if line.startswith(b'{"type":"control_') or e.get("vendor_type") == "response":
                continue  # the live controller's traffic (Claude's control_*, a JSON-RPC response to it)
            if injected and echoes_injection(line):
                continue  # the echo of what the run injected: live, its `injection`
        oracle.append(event_key(e))
    # The calls a turn presents are in the stream, in whatever order the live seam presented them
    # (Codex's parallel calls reach the live stream through its hook in hook order, the offline
    # translation in transcript order): checked as a set, the rest in order.
    oracle_calls = [k for k in oracle if k[0] == "tool.requested"]
    oracle = [k for k in oracle if k[0] != "tool.requested"]
    live_calls = {e.get("call_id") for e in events if e.get("event") == "tool.requested"}
    live_call_ids = {e.get("call_id") for e in events if e.get("call_id")}
    live = [event_key(e) for e in events if e.get("event") != "tool.requested"]
    # On ACP (the vendors whose descriptor says over_acp) a turn is the client's: the live turn.started is made
    # when the run sends its session/prompt (vendor-stdin.jsonl), which the offline reader never
    # sees (it infers a turn from the vendor's next lines). No vendor line makes it: it is left out
    # of the order. And a vendor notification outside any prompt (Qwen's available_commands_update
    # after a cancelled prompt's answer) opens, offline, a turn of the reader's own, ended
    # `agent ended` at the transcript's end, where live it is an `opaque` outside a turn: the
    # turn.ended of a turn the live stream never started is left out too. The vendor lines of such
    # a turn are still checked.
    if REAL_CLIS.get(adapter, {}).get("over_acp"):
        live_turns = {k[4] for k in live if k[0] == "turn.started"}
        oracle = [k for k in oracle
                  if k[0] != "turn.started" and not (k[0] == "turn.ended" and k[4] not in live_turns)]
    closed = [e for e in events if e.get("event") == "stream.closed"]
    completed = bool(closed) and closed[-1].get("reason") == "completed"
    incomplete = any(e.get("event") == "warning" and e.get("code") == "RECORD_INCOMPLETE" for e in events)
    p, missing_at = 0, None
    last_match = -1
    for i, key in enumerate(oracle):
        while p < len(live) and live[p] != key:
            p += 1
        if p == len(live):
            missing_at = i
            break
        last_match = p
        p += 1
    problem = None
    if missing_at is not None and not incomplete:
        later = set(live[last_match + 1:])
        resumed = [k for k in oracle[missing_at + 1:] if k in later]
        if completed:
            problem = f"a completed run's stream lacks {oracle[missing_at]} (and {len(oracle) - missing_at - 1} after)"
        elif resumed:
            problem = f"the stream lacks {oracle[missing_at]} but has later vendor events {resumed[:3]}"
    lost_calls = [k[1] for k in oracle_calls if k[1] not in live_calls and (completed or k[1] in live_call_ids)]
    if lost_calls and not incomplete:
        problem = (problem + "; " if problem else "") + f"calls the transcript presents and the stream does not: {lost_calls[:5]}"
    if translated.returncode != 0 and transcript:
        problem = f"translate failed: {translated.stderr.decode(errors='replace')[:200]}"
    if bad_opaque:
        problem = (problem + "; " if problem else "") + f"opaque events whose line or digest is not the transcript's: {bad_opaque[:5]}"
    inv.check("vendor_lines_accounted", problem is None, f"{tag}: {problem} ({len(transcript)} transcript lines)", at)
