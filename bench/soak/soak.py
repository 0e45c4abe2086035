#!/usr/bin/env python3
"""The soak (issue 29), one host or a 3-host fleet: many concurrent runs of the stand-in harness
and, 2 % each, of the real CLIs of all five vendors under a real `metaharness daemon`, faults at
random moments, invariants judged over everything kept.

    bench/soak/soak.py --seed 7 --minutes 2 --runs 6 [--bin-dir build/bin] [--report FILE]

Everything random comes from --seed: each run's plan from its own source (seed, index), the
faults' moments and kinds from another, so a seed replays the same plans and the same fault
schedule (the moments a fault lands relative to a run's progress vary with the machine's pace;
the report gives each violation's moment in seconds from the start to find it again). The
report ends with a line `N violations`; the exit status is 1 on any violation, 2 when the soak
could not be set up.

Docs: docs/soak.md."""

import argparse
import json
import os
import pathlib
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
sys.path.insert(0, str(SOURCE / "clients" / "python"))
sys.path.insert(0, str(HERE))

import metaharness  # noqa: E402
from soak_faults import (CALM_MIN_SOAK_S, CALM_S, FAULT_KINDS, RESTART_KINDS, FaultInjector, cmdline,  # noqa: E402
                         run_pids)
from soak_host import DaemonHost  # noqa: E402
from soak_nats import NatsCluster  # noqa: E402
from soak_invariants import INVARIANTS, Invariants, check_refusals, check_run, load_capabilities  # noqa: E402
from soak_leaks import NamespaceWatch, fds_into, in_cgroup_under, mounts_under  # noqa: E402
from soak_runs import (REAL_CLIS, STANDIN, RunDriver, RunLog, load_real_clis, load_standin,  # noqa: E402
                       make_plan, plan_cli)
from soak_statefs import StateFs  # noqa: E402


class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        bin_dir = pathlib.Path(args.bin_dir).resolve()
        self.metaharness = str(bin_dir / "metaharness")
        if not os.path.isfile(self.metaharness):
            raise SystemExit(f"soak: {self.metaharness} is not built (./run build mh-programs mh-standin, as ./run soak does)")
        if not os.path.isfile(bin_dir / "mh-standin"):
            raise SystemExit(f"soak: {bin_dir / 'mh-standin'} is not built (./run build mh-programs mh-standin, as ./run soak does)")
        # The stand-in's program, adapter and script format, as it says them (tests/standin).
        load_standin(bin_dir)
        standin = bin_dir / STANDIN["program"]
        # Every vendor the binary registers, as the drivers play it (adapters/vendor_descriptor.hpp).
        load_real_clis(self.metaharness)
        helpers = [bin_dir / h for cli in REAL_CLIS.values() for h in cli["helpers"]]
        for needed in (standin, bin_dir / "metaharness-supervisor", *helpers):
            if not os.path.isfile(needed):
                raise SystemExit(f"soak: {needed} is not built (./run build mh-programs mh-standin, as ./run soak does)")
        # Each adapter's capability table: how its one-shot controls must be answered.
        self.capabilities = load_capabilities(self.metaharness, sorted({c["adapter"] for c in REAL_CLIS.values()}))
        # A short path: a Unix socket path is at most 107 bytes.
        self.dir = tempfile.mkdtemp(prefix=f"mh-soak-{self.seed}-")
        os.chmod(self.dir, 0o755)
        # Under a root daemon each run is a uid of its own: its script must be world-readable.
        self.scripts_dir = os.path.join(self.dir, "scripts")
        os.mkdir(self.scripts_dir)
        os.chmod(self.scripts_dir, 0o755)
        # The daemon's binary for the stand-in's adapter is a wrapper: the stand-in for a run that
        # names its script (MH_STANDIN_SCRIPT), that adapter's real CLI for the others (docs/soak.md,
        # "The real CLIs").
        self.real_standin_cli, self.real_standin_cli_problem = planned_binary(self.metaharness, STANDIN["adapter"])
        # The stand-in as the wrapper execs it: its real path, its directory bound read-only in
        # every sandbox when it is not the daemon's own program directory (a --bin-dir of links).
        standin_real = os.path.realpath(standin)
        wrapper = write_standin_wrapper(self.scripts_dir, standin_real, self.real_standin_cli)
        daemon_dir = os.path.dirname(os.path.realpath(self.metaharness))
        read_only = [] if os.path.dirname(standin_real) == daemon_dir else [os.path.dirname(standin_real)]
        # Each host's state directory on a filesystem of the soak's own, bounded, for the disk_full
        # fault: one ext4 per host (a fleet's hosts fill apart, as separate machines would).
        self.statefses = {}  # host id (None on one host) -> StateFs
        self.statefs_problem = "--state-fs-mb 0" if args.state_fs_mb <= 0 else None
        if args.state_fs_mb > 0:
            host_ids = [None] if args.hosts == 1 else [f"h{i}" for i in range(args.hosts)]
            try:
                for host_id in host_ids:
                    name = "daemon" if host_id is None else f"daemon-{host_id}"
                    image = "state.img" if host_id is None else f"state-{host_id}.img"
                    self.statefses[host_id] = StateFs(os.path.join(self.dir, image),
                                                      os.path.join(self.dir, name, "state"), args.state_fs_mb)
            except (OSError, subprocess.CalledProcessError) as e:
                # Not root, no loop device, no mkfs.ext4: the soak goes on without the fault, and
                # its report says so by name (never a silent skip). None half made: the ones
                # already mounted go, so every host's state dir is alike.
                for fs in self.statefses.values():
                    fs.close()
                self.statefses = {}
                detail = getattr(e, "stderr", None)
                self.statefs_problem = f"{e}" + (f": {detail.decode(errors='replace').strip()}" if detail else "")
        self.nats = None
        if args.hosts == 1:
            self.hosts = [DaemonHost(self.metaharness, {STANDIN["adapter"]: wrapper}, self.scripts_dir,
                                     os.path.join(self.dir, "daemon"), read_only=read_only)]
        else:
            # A fleet: a 3-node JetStream cluster on loopback, one daemon per host, each given every
            # node's URL (a node's loss is a failover, not its host's loss). Root is a control peer,
            # not an admin: a peer host places runs only for a uid it does not treat as admin.
            self.nats = NatsCluster(os.path.join(self.dir, "nats"), 3)
            self.hosts = []
            for i in range(args.hosts):
                urls = ", ".join(f'"{u}"' for u in self.nats.urls())
                extra = ("[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0]\n"
                         f"[fleet]\nnats_urls = [{urls}]\nhost_id = \"h{i}\"\nreplicas = 3\n"
                         f"lease_ttl_ms = 3000\nprefix = \"mhsoak{self.seed}\"\nrequest_timeout_ms = 4000\n"
                         "insecure_no_credentials = true\n")
                self.hosts.append(DaemonHost(self.metaharness, {STANDIN["adapter"]: wrapper}, self.scripts_dir,
                                             os.path.join(self.dir, f"daemon-h{i}"), extra, f"h{i}", read_only))
        self.host = self.hosts[0]  # the socket junk's target
        self.run_timeout_s = args.run_timeout_s
        self.inv = Invariants()
        self.disk_full_windows = []  # (from_s, to_s, host id) a host's state dir was held full
        self.driver_errors = []  # (moment_s, plan index, what): the soak's own failures, reported
        self.allowed_effects_seen = 0
        self.record_incomplete_runs = 0
        self.budget_closes = 0
        self.budget_warning_in_lost_write = 0  # closed budget, its warning in writes RECORD_INCOMPLETE names lost
        self.refused_as_documented = {}  # "what CODE" -> count: controls refused as the capability table says
        self.completed_by_cli = {}  # cli -> runs closed `completed` (the CLI ran its scenario to the end)
        self.unknown_in_crash = 0
        self.lock = threading.Lock()
        self.logs = []
        self.cli_readers = []
        self.samples = []  # (t, host id, incarnation, rss_kib, fds, active), every host
        self.t0 = time.monotonic()
        self.loadavg_start = loadavg()

    # Shared state the workers and the fault injector use.
    def host_by_id(self, host_id):
        if len(self.hosts) == 1:
            return self.hosts[0]
        return next((h for h in self.hosts if h.host_id == host_id), None)

    def host_of(self, run_id):
        with self.lock:
            return next((log.host for log in self.logs if log.run_id == run_id), self.host)

    def register_run(self, log):
        with self.lock:
            self.logs.append(log)

    def cli_of(self, run_id):
        with self.lock:
            return next((plan_cli(log.plan) for log in self.logs if log.run_id == run_id), "standin")

    def open_run_ids(self):
        with self.lock:
            return [log.run_id for log in self.logs if log.run_id and not log.closed_seen
                    and not all(r.closed for r in log.readers)]

    def register_cli_reader(self, reader):
        with self.lock:
            self.cli_readers.append(reader)

    def unregister_cli_reader(self, reader):
        with self.lock:
            self.cli_readers.remove(reader)

    def cli_readers_now(self):
        with self.lock:
            return list(self.cli_readers)

    def worker(self, w, stop_at):
        index = w
        while time.monotonic() < stop_at:
            rng = random.Random(f"{self.seed}:{index}")
            plan = make_plan(rng, index)
            log = RunLog(index, plan)
            try:
                RunDriver(self, index, plan, log).drive()
                self.inv.check("soak_driver_ok", True, "")
            except Exception as e:  # the soak's own fault: a violation by name (what it planned did not
                # happen), and the worker goes on
                moment = round(time.monotonic() - self.t0, 1)
                with self.lock:
                    self.driver_errors.append((moment, index, f"{type(e).__name__}: {e}"))
                self.inv.check("soak_driver_ok", False, f"plan #{index}: the driver failed: {type(e).__name__}: {e}",
                               moment)
            if log.run_id is None:
                with self.lock:
                    self.logs.append(log)
            index += self.args.runs

    def sampler(self, stop):
        """Every host's daemon, every 2 s: (t, host id, incarnation, rss_kib, fds, active runs)."""
        clients = [(host, metaharness.Client(host.socket, timeout=10)) for host in self.hosts]
        while not stop.wait(2.0):  # the sampling period
            for host, client in clients:
                if not host.up.is_set():
                    continue
                incarnation = host.incarnation
                try:
                    active = client.status().runs["active"]
                except metaharness.MetaharnessError:
                    continue
                s = host.sample()
                if s is not None and host.incarnation == incarnation:
                    self.samples.append((time.monotonic() - self.t0, host.host_id, incarnation, s[0], s[1], active))

    def run(self):
        a = self.args
        if self.nats is not None and not self.nats.wait_healthy(timeout=120):
            raise RuntimeError(f"the NATS cluster did not become healthy; see {self.nats.dir}/n*/nats.log")
        for host in self.hosts:
            host.start(timeout=120)
        duration = a.minutes * 60
        stop_at = self.t0 + duration
        stop_sampling = threading.Event()
        sampler = threading.Thread(target=self.sampler, args=(stop_sampling,), daemon=True)
        sampler.start()
        self.ns_watch = NamespaceWatch(self)
        ns_sampler = threading.Thread(target=self.ns_watch.run, args=(stop_sampling,), daemon=True)
        ns_sampler.start()
        kinds = set(a.faults.split(",")) if a.faults != "all" else set(FAULT_KINDS)
        if not self.statefses:
            kinds.discard("disk_full")  # no filesystem of the soak's own to fill
        if self.nats is None:
            kinds.discard("nats_kill9")  # no fleet
        injector = FaultInjector(self, random.Random(f"{self.seed}:faults"), a.fault_interval_s, kinds)
        fault_thread = threading.Thread(target=injector.run, args=(stop_at,), daemon=True)
        if a.fault_interval_s > 0:
            fault_thread.start()
        workers = [threading.Thread(target=self.worker, args=(w, stop_at), daemon=True) for w in range(a.runs)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        if fault_thread.is_alive():
            fault_thread.join()
        stop_sampling.set()
        sampler.join()
        ns_sampler.join()
        self.finish()
        return injector

    def finish(self):
        """Every run closed (halted if not), then the leak checks, then the daemons' stop."""
        ids = [log.run_id for log in self.logs if log.run_id]
        cgroup_dirs = []
        for host in self.hosts:
            client = metaharness.Client(host.socket, timeout=60)
            mine = {log.run_id for log in self.logs if log.run_id and log.host is host}
            for run in client.list():
                if run.run_id in mine and run.state != "closed":
                    try:
                        client.halt(run.run_id, reason="soak end")
                    except metaharness.MetaharnessError:
                        pass
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(r.state != "closed" for r in client.list() if r.run_id in mine):
                time.sleep(0.2)  # polling the daemon's view; there is no event for "all closed"
            status = client.status()
            cgroup_dir = (status.containment or {}).get("cgroup") or {}
            cgroup_dirs.append(cgroup_dir.get("dir") if isinstance(cgroup_dir, dict) else None)
        moment = round(time.monotonic() - self.t0, 1)
        for cgroup_dir in cgroup_dirs:
            if cgroup_dir and os.path.isdir(cgroup_dir):
                left = [d for d in os.listdir(cgroup_dir) if any(i in d for i in ids)]
                self.inv.check("no_cgroup_left", not left, f"cgroups of closed runs left under {cgroup_dir}: {left[:5]}",
                               moment)
        # Every run closed and every reader gone: no daemon holds an fd into a run's directory.
        for host in self.hosts:
            run_dirs = {i: str(host.state_dir / "runs" / i) for i in ids}
            held = fds_into(host.pid, run_dirs)
            self.inv.check("no_fd_left", not held, f"the daemon's fds into closed runs' directories: {held[:5]}", moment)
        if self.nats is not None:
            self.check_fleet(moment)
        markers = {f"METAHARNESS_RUN={i}".encode() for i in ids}
        daemon_pids = {host.pid for host in self.hosts}
        state_dirs = [str(host.state_dir) for host in self.hosts]

        def supervisor_of_soak(pid):
            line = cmdline(pid)
            return "metaharness-supervisor" in line and any(d in line for d in state_dirs)

        def related(pid):
            if pid in daemon_pids or any(in_cgroup_under(pid, d) for d in cgroup_dirs):
                return True
            if supervisor_of_soak(pid):
                return True
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    return any(item in markers for item in f.read().split(b"\0"))
            except OSError:
                return False

        # Namespaces held while the daemons still run (their fds, their supervisors), then after their stop.
        left_ns = self.ns_watch.still_referenced(related)
        codes = [host.stop() for host in self.hosts]
        self.stop_code = codes[0] if len(codes) == 1 else codes
        # A supervisor released at the last close is still exiting: 5 s for it to go, polled
        # (a process's end has no event to wait on from here).
        grace = time.monotonic() + 5
        while True:
            left = run_pids(ids)
            supervisors = [p for p in os.listdir("/proc") if p.isdigit() and supervisor_of_soak(int(p))]
            if (not left and not supervisors) or time.monotonic() > grace:
                break
            time.sleep(0.1)
        self.inv.check("no_process_left", not left and not supervisors,
                       f"after every run closed and the daemon stopped: run processes {sorted(left)[:10]}, "
                       f"supervisors {supervisors[:10]}", moment)
        # The soak's own leftovers, by pid: each carries a soak run's marker, or is a supervisor
        # of the soak's state dir (its command line checked above).
        for pid in list(left) + [int(p) for p in supervisors]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        # Their namespaces (learnt while they lived) held by nothing; no mount left under the state dir.
        left_ns.update(self.ns_watch.still_referenced(related))
        net = {k: v for k, v in left_ns.items() if k[0] == "net"}
        mnt = {k: v for k, v in left_ns.items() if k[0] == "mnt"}
        self.inv.check("no_netns_left", not net, f"network namespaces of closed runs still held: {list(net.items())[:5]}",
                       moment)
        mounts = [m for host in self.hosts for m in mounts_under(host.state_dir)]
        self.inv.check("no_mount_left", not mnt and not mounts,
                       f"mount namespaces of closed runs still held: {list(mnt.items())[:5]}; "
                       f"mounts under the state dir: {mounts[:5]}", moment)
        self.plant(ids)
        for log in self.logs:
            if log.run_id:
                check_run(self.inv, self, log)
            check_refusals(self.inv, self, log)
        self.check_growth()

    def check_fleet(self, moment):
        """The fleet's invariants, once every run is closed and before the daemons stop: each run
        placed exactly once (one host's state dir has it, the host the soak was told), and closed
        by exactly one host (its fleet copy, read with `tail --fleet` from another host, passes
        check-stream: one stream.closed, seq contiguous)."""
        self.host_lost_closes = 0
        self.fleet_healthy_at_end = self.nats.wait_healthy(timeout=120)
        for log in self.logs:
            if not log.run_id:
                continue
            tag = f"run {log.run_id} (plan #{log.index}, {'fleet' if log.fleet_submit else 'local'} submit to " \
                  f"{log.submit_host.host_id}, owner {log.host.host_id})"
            having = [h.host_id for h in self.hosts if (h.state_dir / "runs" / log.run_id).is_dir()]
            self.inv.check("fleet_placed_once", having == [log.host.host_id],
                           f"{tag}: the run directory is on {having}", log.submitted_at)
            reader = next(h for h in self.hosts if h is not log.host)
            # FLEET_UNAVAILABLE while JetStream elects a leader is "ask again" (docs/fleet.md): up to 60 s.
            deadline = time.monotonic() + 60
            while True:
                copy = subprocess.run([self.metaharness, "tail", "--fleet", "--json", log.run_id, "--socket",
                                       reader.socket], capture_output=True, timeout=120)
                if b"FLEET_UNAVAILABLE" not in copy.stderr or time.monotonic() > deadline:
                    break
                time.sleep(0.5)  # a retry pace while JetStream elects, not a synchronisation
            path = os.path.join(self.dir, "fleet-copy.jsonl")
            with open(path, "wb") as f:
                f.write(copy.stdout)
            checked = subprocess.run([self.metaharness, "check-stream", path], capture_output=True, text=True)
            closes = copy.stdout.count(b'"event":"stream.closed"')
            if b'"code":"HOST_LOST"' in copy.stdout:
                self.host_lost_closes += 1
            self.inv.check("fleet_closed_once", copy.returncode == 0 and checked.returncode == 0 and closes == 1,
                           f"{tag}: its fleet copy read from {reader.host_id}: tail exit {copy.returncode} "
                           f"{copy.stderr.decode(errors='replace').strip()[:200]}, {closes} stream.closed, check-stream: "
                           f"{(checked.stdout + checked.stderr).strip()[:200]}", log.submitted_at)

    def plant(self, ids):
        """--plant: a known violation put where the checks look, so a test can show each check
        catches what it names (tests/soak). Never used in a real soak."""
        closed = [log for log in self.logs if log.run_id]
        if self.args.plant == "torn_record" and closed:
            path = closed[0].host.state_dir / "runs" / closed[0].run_id / "events.jsonl"
            data = path.read_bytes()
            path.write_bytes(data[:data.rstrip(b"\n").rfind(b"\n") + 1])  # the last line (stream.closed) gone
        elif self.args.plant == "reader_lie" and closed:
            reader = next((r for log in closed for r in log.readers if r.lines), None)
            if reader is not None:
                seq = min(reader.lines)
                reader.lines[seq] = reader.lines[seq].replace(b'"seq"', b'"seq" ', 1)
        elif self.args.plant == "lost_vendor_line" and closed:
            # A vendor line the stream never shows: a completed run's transcript gets a second copy
            # of an assistant line (the same request id), which no event of the record accounts for.
            for log in closed:
                path = log.host.state_dir / "runs" / log.run_id / "vendor-stdout.jsonl"
                lines = path.read_bytes().splitlines(keepends=True)
                assistant = [x for x in lines if x.startswith(b'{"type":"assistant"') and b'"text"' in x]
                record = (log.host.state_dir / "runs" / log.run_id / "events.jsonl").read_bytes()
                if assistant and b'"reason":"completed"' in record:
                    path.write_bytes(b"".join(lines) + assistant[-1])
                    break
        elif self.args.plant == "torn_transcript" and closed:
            # A vendor line torn in the middle of a kept transcript: its first half spliced onto the
            # next line, as a write that stopped part-way left it before finding 4 was fixed. Not the
            # last line: a last line without its newline is one a kill cut, which the check allows.
            for log in closed:
                path = log.host.state_dir / "runs" / log.run_id / "vendor-stdout.jsonl"
                lines = path.read_bytes().splitlines(keepends=True)
                if len(lines) >= 2 and len(lines[0]) > 2:
                    lines[0] = lines[0][:len(lines[0]) // 2]
                    path.write_bytes(b"".join(lines))
                    break
        elif self.args.plant == "control_ok" and closed:
            # A steer answered ok on a run whose adapter refuses steer (the stand-in's adapter:
            # UNSUPPORTED_CONTROL): what control_as_documented must name.
            log = next((x for x in closed if plan_cli(x.plan) == "standin"
                        and "refused" in str(self.capabilities.get(STANDIN["adapter"], {}).get("steer"))), None)
            if log is not None:
                log.controls.append(("steer", True, None))
        elif self.args.plant == "leaked_process" and ids:
            env = dict(os.environ, METAHARNESS_RUN=ids[0])
            # It says it is running (its own environment in place) before the check looks.
            leak = subprocess.Popen([sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"],
                                    env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            leak.stdout.readline()
            left = run_pids(ids)
            self.inv.check("no_process_left", not left, f"planted: run processes {sorted(left)[:10]}")
            leak.kill()
            leak.wait()

    def check_growth(self):
        """Over the last half of the soak, every daemon incarnation (of every host) that lived at
        least GROWTH_MIN_SPAN_S of it with GROWTH_MIN_SAMPLES samples is judged on its own (a restart
        resets both figures): the least-squares fit value = a + b*active + c*t over its samples, and
        c * its span below the bound (fds 16, RSS 16 MiB). Shorter incarnations are not judged, and
        the report says how much of the last half was judged; with none long enough the growth
        checks are NOT JUDGED (counted 0, said so by name), never passed."""
        half = self.args.minutes * 60 / 2
        last = [s for s in self.samples if s[0] >= half]
        by_inc = {}
        for s in last:
            by_inc.setdefault((s[1], s[2]), []).append(s)
        judged, skipped = [], []
        for (host_id, inc), samples in sorted(by_inc.items(), key=lambda kv: kv[1][0][0]):
            span = samples[-1][0] - samples[0][0]
            name = f"{host_id + ' ' if host_id else ''}incarnation {inc}"
            if span < GROWTH_MIN_SPAN_S or len(samples) < GROWTH_MIN_SAMPLES:
                skipped.append(span)
                continue
            fds_trend = trend([(x[0], x[5], x[4]) for x in samples]) * span
            rss_trend = trend([(x[0], x[5], x[3]) for x in samples]) * span / 1024
            note = (f"{name}, {len(samples)} samples over {span:.0f} s: fds trend {fds_trend:+.1f}, RSS trend "
                    f"{rss_trend:+.1f} MiB (net of active runs); fds {samples[0][4]}..{samples[-1][4]}, "
                    f"RSS {samples[0][3] // 1024}..{samples[-1][3] // 1024} MiB")
            self.inv.check("daemon_fds_bounded", fds_trend < 16, note, round(samples[-1][0], 1))
            self.inv.check("daemon_rss_bounded", rss_trend < 16, note, round(samples[-1][0], 1))
            judged.append((span, fds_trend, rss_trend, note))
        covered = sum(j[0] for j in judged)
        # The last half as sampled: from its start to the last sample (the drain included), per host.
        sampled = max((x[0] for x in last), default=half) - half
        hosts = len(self.hosts)
        if not judged:
            longest = max(skipped, default=0)
            self.growth_note = (f"NOT JUDGED: no daemon incarnation lived {GROWTH_MIN_SPAN_S} s of the last half "
                                f"({len(by_inc)} incarnations sampled over it, the longest {longest:.0f} s): "
                                f"daemon_fds_bounded and daemon_rss_bounded were not checked")
            return
        worst_fds = max(judged, key=lambda j: j[1])
        worst_rss = max(judged, key=lambda j: j[2])
        self.growth_note = (f"judged {len(judged)} of {len(by_inc)} incarnations (those living >= "
                            f"{GROWTH_MIN_SPAN_S} s of the last half), {covered:.0f} s of the last half's "
                            f"{sampled * hosts:.0f} sampled host-seconds ({100 * covered / max(1, sampled * hosts):.0f} %); "
                            f"the highest fds trend: {worst_fds[3]}; the highest RSS trend: {worst_rss[3]}")


def planned_binary(metaharness, adapter):
    """(path, None) of the real CLI the daemon's binary would run for `adapter` with no `[vendor]`
    key of its own (its default vendor dir, or $METAHARNESS_<ADAPTER>_BIN), from `metaharness plan`;
    or (None, why) when there is none (its real runs then close `error`, as the report counts)."""
    env = {k: v for k, v in os.environ.items() if k != "METAHARNESS_SOCKET"}
    try:
        planned = subprocess.run([metaharness, "plan", adapter, "-p", "go", "--model-endpoint", "http://127.0.0.1:9"],
                                 capture_output=True, text=True,
                                 timeout=60, env=env)
        program = json.loads(planned.stdout)["program"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as e:
        return None, f"`metaharness plan {adapter}` named no program: {type(e).__name__}: {e}"
    if not os.access(program, os.X_OK):
        return None, f"{program} is not an executable file"
    return program, None


def write_standin_wrapper(scripts_dir, standin, real_cli):
    """The daemon's binary for the stand-in's adapter: a shell script in the soak's scripts dir
    (bound read-only in every sandbox) that execs the stand-in when the run declares
    MH_STANDIN_SCRIPT, else that adapter's real CLI (under the daemon's vendor dir, which the
    sandbox binds). exec: the vendor's pid is the script's."""
    path = os.path.join(scripts_dir, "cli-or-standin")
    real = shlex.quote(real_cli) if real_cli else ""
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                "# The soak's wrapper (bench/soak/soak.py): the stand-in for a run with a script, else the real CLI.\n"
                f'if [ -n "${{MH_STANDIN_SCRIPT:-}}" ]; then exec {shlex.quote(str(standin))} "$@"; fi\n'
                + (f'exec {real} "$@"\n' if real else 'echo "soak: no real CLI found for the stand-in\'s adapter" >&2; exit 127\n'))
    os.chmod(path, 0o755)
    return path


# An incarnation is judged for growth when it lived this long within the last half, with this
# many samples (one every 2 s).
GROWTH_MIN_SPAN_S = 60
GROWTH_MIN_SAMPLES = 20


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def trend(points):
    """c of the least-squares fit y = a + b*x + c*t over (t, x, y) points (0 when degenerate)."""
    n = len(points)
    mt = statistics.fmean(p[0] for p in points)
    mx = statistics.fmean(p[1] for p in points)
    my = statistics.fmean(p[2] for p in points)
    stt = sum((p[0] - mt) ** 2 for p in points)
    sxx = sum((p[1] - mx) ** 2 for p in points)
    stx = sum((p[0] - mt) * (p[1] - mx) for p in points)
    sty = sum((p[0] - mt) * (p[2] - my) for p in points)
    sxy = sum((p[1] - mx) * (p[2] - my) for p in points)
    det = stt * sxx - stx * stx
    if n < 3 or abs(det) < 1e-9:
        return sty / stt if stt > 0 else 0.0
    return (sty * sxx - sxy * stx) / det


def refusal_counts(logs):
    counts = {}
    for log in {id(x): x for x in logs}.values():
        for _moment, what, code in log.refusals:
            counts[f"{what} {code}"] = counts.get(f"{what} {code}", 0) + 1
    return counts


def report(soak, injector, wall):
    a = soak.args
    out = []
    out.append(f"soak: seed {a.seed}, {a.minutes} min, {a.runs} concurrent runs, faults every ~{a.fault_interval_s} s "
               f"({a.faults}), wall {wall:.0f} s, daemon incarnations "
               f"{', '.join(str(h.incarnation) for h in soak.hosts)}" + (f", {len(soak.hosts)} hosts over a 3-node NATS "
                                                                         f"cluster" if soak.nats else ""))
    submitted = [log for log in soak.logs if log.run_id]
    modes = {}
    for log in submitted:
        modes[log.plan["mode"]] = modes.get(log.plan["mode"], 0) + 1
    decisions = sum(len(log.decisions) for log in submitted)
    racing = sum(1 for log in submitted if log.plan["racing"])
    readers = sum(len(log.readers) + len(log.cli_readers) + len(log.viewer_readers) for log in submitted)
    out.append(f"load: {len(submitted)} runs ({', '.join(f'{k} {v}' for k, v in sorted(modes.items()))}), "
               f"{racing} with racing controllers, {decisions} decisions sent, {readers} readers; "
               f"{len(soak.logs) - len(submitted)} submits refused")
    out.append("faults injected: " + ", ".join(f"{k} {injector.counts[k]}" for k in FAULT_KINDS)
               + " (skipped, no target: " + ", ".join(f"{k} {v}" for k, v in injector.skipped.items() if v) + ")"
               + (f"; {injector.held} held in calm windows" if injector.held else ""))
    if soak.args.minutes * 60 >= CALM_MIN_SOAK_S:
        out.append(f"calm windows: in the last half, every other {CALM_S} s holds back {', '.join(RESTART_KINDS)} "
                   f"(so incarnations live long enough for the growth checks)")
    if soak.driver_errors:
        out.append(f"DRIVER ERRORS (the soak's own, not the daemon's): {len(soak.driver_errors)}, the first: "
                   f"{soak.driver_errors[:3]}")
    out.append("invariants (checked / violated):")
    for name in INVARIANTS:
        out.append(f"  {name:26} {soak.inv.checked[name]:6} / {soak.inv.violated(name)}")
    steers = sum(1 for log in submitted if log.plan.get("steer_at_s") is not None)
    injects = sum(1 for log in submitted if log.plan.get("inject_at_s") is not None)
    budgets = sum(1 for log in submitted if log.plan.get("budget_tool_calls") is not None)
    clis = {}
    for log in submitted:
        clis[plan_cli(log.plan)] = clis.get(plan_cli(log.plan), 0) + 1
    out.append(f"steers {steers}, injects {injects}, tool-call budgets {budgets} (closed budget: {soak.budget_closes}; "
               f"of them with no BUDGET_EXHAUSTED in a record that says RECORD_INCOMPLETE: "
               f"{soak.budget_warning_in_lost_write})")
    out.append("CLIs (runs, of them closed completed): " + ", ".join(
        f"{k} {clis.get(k, 0)} ({soak.completed_by_cli.get(k, 0)})" for k in ["standin", *REAL_CLIS])
        + f" (standin: {STANDIN['program']} as the {STANDIN['adapter']} adapter; the others the real CLIs from the daemon's "
        f"vendor dir on its scripted endpoint; real {STANDIN['adapter']}: {soak.real_standin_cli or soak.real_standin_cli_problem})")
    out.append("controls refused as the adapter's capability table says (control_as_documented): "
               + (", ".join(f"{k} {v}" for k, v in sorted(soak.refused_as_documented.items())) or "none"))
    out.append(f"one-shot commands whose connection a daemon kill cut before the reply (ConnectionLost, "
               f"counted apart in command_one_result): {soak.unknown_in_crash}")
    out.append(f"allowed calls whose effect was found (the deny check looks in the right place): "
               f"{soak.allowed_effects_seen}")
    watch = getattr(soak, "ns_watch", None)
    if watch is not None:
        kinds = {k: sum(1 for key in watch.seen if key[0] == k) for k in ("net", "mnt")}
        out.append(f"namespaces of runs learnt while they lived (what no_netns_left / no_mount_left look for): "
                   f"net {kinds['net']}, mnt {kinds['mnt']} ({watch.samples} samples)")
    if soak.statefs_problem:
        out.append(f"disk_full NOT INJECTED: no filesystem of the soak's own ({soak.statefs_problem})")
    out.append(f"state dir full {len(soak.disk_full_windows)} times; runs whose record says RECORD_INCOMPLETE: "
               f"{soak.record_incomplete_runs}; refused by name: "
               + ", ".join(f"{k} {v}" for k, v in sorted(refusal_counts(submitted + soak.logs).items())))
    if soak.nats is not None:
        fleet = sum(1 for log in submitted if log.fleet_submit)
        placed_elsewhere = sum(1 for log in submitted if log.host is not log.submit_host)
        out.append(f"fleet: {fleet} fleet submits ({placed_elsewhere} placed on another host than the submitter), "
                   f"{len(submitted) - fleet} local; runs whose fleet copy holds HOST_LOST: "
                   f"{getattr(soak, 'host_lost_closes', 0)}")
    out.append(f"daemon growth: {getattr(soak, 'growth_note', 'NOT JUDGED: no samples over the last half')}")
    out.append(f"daemon stop at the end: exit {soak.stop_code}")
    out.append(f"machine: {os.cpu_count()} cpus, load average (1/5/15 min) {soak.loadavg_start} at the start, "
               f"{loadavg()} at the end")
    for name, moment, detail in soak.inv.violations:
        out.append(f"VIOLATION {name} at {moment if moment is None else round(moment, 2)} s (replay: --seed {a.seed} --minutes {a.minutes} --runs {a.runs}): "
                   f"{detail}")
    out.append("fault log (moment s, kind, target, note):")
    for moment, kind, target, note in injector.injected:
        out.append(f"  {moment:9.3f} {kind:17} {target} {note}")
    out.append(f"{len(soak.inv.violations)} violations")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=6, help="concurrent runs (one worker each)")
    p.add_argument("--fault-interval-s", type=float, default=5.0, help="mean seconds between faults (0: none)")
    p.add_argument("--faults", default="all", help=f"all, or a comma list of {','.join(FAULT_KINDS)}")
    p.add_argument("--run-timeout-s", type=float, default=120.0, help="a run's wall budget and the soak's wait on it")
    p.add_argument("--bin-dir", default=str(SOURCE / "build" / "bin"))
    p.add_argument("--report", help="also write the report here")
    p.add_argument("--plant", choices=["torn_record", "reader_lie", "leaked_process", "lost_vendor_line", "control_ok",
                                         "torn_transcript"],
                   help="put one known violation where the checks look (the soak's own tests)")
    p.add_argument("--hosts", type=int, default=1, choices=[1, 3],
                   help="1: one daemon; 3: three daemons over a 3-node JetStream cluster (nats-server, loopback)")
    p.add_argument("--keep", action="store_true", help="keep the soak's directory (daemon log, state)")
    p.add_argument("--state-fs-mb", type=int, default=4096,
                   help="the state directory's own ext4 (a sparse loop-mounted image) of this size, for the "
                        "disk_full fault; 0: the state directory on the soak's directory's filesystem")
    a = p.parse_args()
    soak = Soak(a)
    started = time.monotonic()
    try:
        injector = soak.run()
    except Exception:
        print(f"soak: set-up or driver failure; the directory is kept: {soak.dir}", file=sys.stderr)
        for host in soak.hosts:
            if host.proc is not None and host.proc.poll() is None:
                host.stop()
        raise
    finally:
        for fs in soak.statefses.values():
            fs.close()
        if soak.nats is not None:
            soak.nats.stop()
    text = report(soak, injector, time.monotonic() - started)
    print(text)
    if a.report:
        pathlib.Path(a.report).write_text(text + "\n")
    # A planted violation is the soak's own test: nothing there to look at afterwards.
    if (soak.inv.violations and not a.plant) or a.keep:
        print(f"soak: the directory is kept: {soak.dir}", file=sys.stderr)
    else:
        shutil.rmtree(soak.dir, ignore_errors=True)  # the state's image with it
    return 1 if soak.inv.violations else 0


if __name__ == "__main__":
    sys.exit(main())
