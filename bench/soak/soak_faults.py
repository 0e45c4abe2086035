"""Faults at random moments, from the soak's seeded source: the daemon killed (-9) or stopped
(SIGTERM) and restarted on its state directory, frozen (SIGSTOP/SIGCONT); one run's supervisor
killed (-9); one run's vendor process killed (-9); a `metaharness tail` reader frozen; junk and
half-lines on the socket; the state directory's filesystem filled, then freed. Every signal goes to a pid the soak started or that carries the marker
of a run the soak submitted (checked before it is sent): nothing else on the machine is touched."""

import json
import os
import signal
import socket
import time

from soak_runs import REAL_CLIS

FAULT_KINDS = ("daemon_kill9", "daemon_sigterm", "daemon_sigstop", "supervisor_kill9", "vendor_kill9",
               "reader_sigstop", "socket_junk", "disk_full", "nats_kill9")
# What ends a daemon's incarnation (the growth checks judge each incarnation on its own).
RESTART_KINDS = ("daemon_kill9", "daemon_sigterm")
# Calm windows: in the last half of a soak of CALM_MIN_SOAK_S or more, every other window of
# CALM_S seconds holds the restart kinds back (a draw of one is drawn again among the others), so
# each such window lets one incarnation per host live longer than the growth checks' 60 s
# (soak.GROWTH_MIN_SPAN_S) and be judged. With a daemon fault every ~30 s, a 60-minute soak judged
# 5 of its 64 incarnations before (bench/RESULTS.md, round 8). Every other fault goes on.
CALM_S = 90
CALM_MIN_SOAK_S = 600
WEIGHTS = {"daemon_kill9": 2, "daemon_sigterm": 1, "daemon_sigstop": 2, "supervisor_kill9": 2,
           "vendor_kill9": 2, "reader_sigstop": 2, "socket_junk": 3, "disk_full": 2, "nats_kill9": 2}


def environ_has(pid, marker):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def run_pids(run_ids):
    """Live pids carrying one of these runs' marker (METAHARNESS_RUN=<id>) -> run id."""
    markers = {f"METAHARNESS_RUN={i}".encode(): i for i in run_ids}
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item in markers:
                found[int(entry)] = markers[item]
                break
    return found


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class FaultInjector:
    def __init__(self, soak, rng, mean_interval_s, kinds):
        self.soak, self.rng, self.mean_interval_s = soak, rng, mean_interval_s
        self.kinds = [k for k in FAULT_KINDS if k in kinds]
        self.injected = []  # (moment_s, kind, target, note)
        self.counts = {k: 0 for k in FAULT_KINDS}
        self.skipped = {k: 0 for k in FAULT_KINDS}
        self.held = 0  # faults not injected: only restart kinds were asked for, in a calm window

    def calm(self, moment):
        """Whether `moment` (s since the soak's start) falls in a calm window (CALM_S, above)."""
        total = self.soak.args.minutes * 60
        if total < CALM_MIN_SOAK_S or moment < total / 2:
            return False
        return int((moment - total / 2) // CALM_S) % 2 == 0

    def run(self, stop_at):
        while True:
            wait = self.rng.expovariate(1.0 / self.mean_interval_s)
            if time.monotonic() + wait >= stop_at:
                return
            time.sleep(wait)  # the schedule's moment
            moment = round(time.monotonic() - self.soak.t0, 3)
            kinds = self.kinds
            if self.calm(moment):
                kinds = [k for k in self.kinds if k not in RESTART_KINDS]
            kind = self.rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0] if kinds else None
            pick = self.rng.random()  # which target, among those alive at that moment
            if kind is None:  # only restart kinds asked for, and the window is calm
                self.held += 1
                continue
            try:
                target, note = getattr(self, kind)(pick)
            except Exception as e:  # a fault that could not be applied is reported, not hidden
                target, note = None, f"could not inject: {type(e).__name__}: {e}"
            if target is None:
                self.skipped[kind] += 1
            else:
                self.counts[kind] += 1
            self.injected.append((moment, kind, target, note))
            if kind == "daemon_sigterm":
                self.soak.inv.check("daemon_stops_on_sigterm", not (note or "").startswith("VIOLATION"), note, moment)

    def _live_run(self, pick):
        live = self.soak.open_run_ids()
        if not live:
            return None
        return live[int(pick * len(live)) % len(live)]

    def _host(self, pick):
        hosts = self.soak.hosts
        return hosts[int(pick * len(hosts)) % len(hosts)]

    def _name(self, host):
        return f"daemon {host.host_id} " if host.host_id else "daemon "

    def daemon_kill9(self, pick):
        host = self._host(pick)
        host.kill9_and_restart()
        return f"{self._name(host)}incarnation {host.incarnation - 1}", "restarted"

    def daemon_sigterm(self, pick):
        host = self._host(pick)
        exited = host.term_and_restart()
        return (f"{self._name(host)}incarnation {host.incarnation - 1}",
                "restarted" if exited else "VIOLATION: did not exit within 60 s of SIGTERM (killed)")

    def daemon_sigstop(self, pick):
        host = self._host(pick)
        seconds = round(0.3 + pick * 2.7, 2)
        host.freeze(seconds)
        return self._name(host).strip(), f"stopped {seconds} s"

    def supervisor_kill9(self, pick):
        run_id = self._live_run(pick)
        if run_id is None:
            return None, "no open run"
        run_dir = self.soak.host_of(run_id).state_dir / "runs" / run_id
        try:
            pid = json.loads((run_dir / "supervisor.json").read_text())["supervisor_pid"]
        except (OSError, ValueError, KeyError):
            return None, f"{run_id}: no supervisor.json yet"
        if str(run_dir / "supervisor-spec.json") not in cmdline(pid):
            return None, f"{run_id}: supervisor {pid} gone"
        os.kill(pid, signal.SIGKILL)
        return run_id, f"supervisor pid {pid}"

    def vendor_kill9(self, pick):
        """SIGKILL of one open run's vendor process: the stand-in, or the real CLI's own process
        (by a command name its vendor's descriptor gives, REAL_CLIS' process_names, among the run's
        marked processes, the oldest; the stand-in's begins `mh-standin`)."""
        run_id = self._live_run(pick)
        if run_id is None:
            return None, "no open run"
        cli = self.soak.cli_of(run_id)
        names = REAL_CLIS[cli]["process_names"] if cli in REAL_CLIS else ()
        pids = [p for p, r in run_pids([run_id]).items()
                if (comm(p).startswith("mh-standin") if cli == "standin" else comm(p) in names)]
        if not pids:
            return None, f"{run_id}: no vendor process ({cli})"
        pid = sorted(pids)[0]
        name = comm(pid)
        if not environ_has(pid, f"METAHARNESS_RUN={run_id}".encode()):
            return None, f"{run_id}: vendor {pid} gone"
        os.kill(pid, signal.SIGKILL)
        return run_id, f"vendor pid {pid} ({cli}: {name})"

    def reader_sigstop(self, pick):
        readers = self.soak.cli_readers_now()
        if not readers:
            return None, "no cli reader"
        reader = readers[int(pick * len(readers)) % len(readers)]
        seconds = round(0.5 + pick * 3.5, 2)
        reader.freeze()
        time.sleep(seconds)  # the fault is the duration itself
        reader.thaw()
        return f"cli reader pid {reader.proc.pid}", f"stopped {seconds} s"

    def socket_junk(self, pick):
        variants = [
            b"\x00\xff\xfe garbage \x01\x02\n",
            b'{"format":"metaharness.socket/1","request":"sta',  # a half line, then gone
            b'{"format":"metaharness.socket/1","request":"no-such-request","id":"j"}\n',
            b"not json at all\n" * 50,
            b'{"format":"metaharness.socket/1","request":"tail","run_id":"../../etc","follow":true}\n',
            b'{"format":"metaharness.command/1","command":"halt"}\n',
            b"[" * 10000 + b"\n",
        ]
        data = variants[int(pick * len(variants)) % len(variants)]
        s = socket.socket(socket.AF_UNIX)
        try:
            s.settimeout(3)
            s.connect(self.soak.host.socket)
            s.sendall(data)
            if pick < 0.5:
                s.shutdown(socket.SHUT_WR)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
        except OSError as e:
            return "socket", f"variant {int(pick * len(variants)) % len(variants)}: {e}"
        finally:
            s.close()
        return "socket", f"variant {int(pick * len(variants)) % len(variants)}"

    def disk_full(self, pick):
        """One host's state directory filesystem (the soak's own, soak_statefs.py; one per host
        in a fleet, so hosts fill apart as machines would) filled for 0.5–5 s, then freed. The
        faults are one at a time: no daemon restart happens while it is full."""
        fses = self.soak.statefses
        if not fses:
            return None, "no filesystem of the soak's own"
        host_ids = sorted(fses, key=lambda h: h or "")
        host_id = host_ids[int(pick * 1000) % len(host_ids)]
        fs = fses[host_id]
        seconds = round(0.5 + pick * 4.5, 2)
        started = time.monotonic()
        taken = fs.fill()
        left = fs.free_bytes()
        time.sleep(seconds)  # the fault is the duration itself
        fs.release()
        self.soak.disk_full_windows.append((started - self.soak.t0, time.monotonic() - self.soak.t0, host_id))
        where = "state dir" if host_id is None else f"state dir of {host_id}"
        return where, f"full {seconds} s ({taken // 1024} KiB taken, {left} bytes left)"

    def nats_kill9(self, pick):
        """One node of the fleet's NATS cluster killed (-9), started again 1–5 s later on its
        store; the fault ends once every node answers /healthz again (bounded)."""
        nats = self.soak.nats
        if nats is None:
            return None, "no fleet"
        i = int(pick * len(nats.nodes)) % len(nats.nodes)
        seconds = round(1 + pick * 4, 2)
        pid = nats.kill9(i)
        time.sleep(seconds)  # the fault is the duration itself
        nats.start(i)
        healthy = nats.wait_healthy(timeout=90)
        return f"nats node n{i}", f"pid {pid} killed, down {seconds} s, " + (
            "healthy again" if healthy else "NOT healthy within 90 s of its restart")
