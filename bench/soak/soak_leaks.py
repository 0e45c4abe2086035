"""What a closed run could leave behind beyond its processes and cgroup: its network and mount
namespaces (held by a process, an open fd or a bind mount of nsfs), mounts under the state
directory, and the daemon's file descriptors into its directory.

The namespaces are learnt while the runs live: a sampler reads /proc/<pid>/ns/{net,mnt} of every
process carrying an open run's marker (those the host's own are skipped: a run without a sandbox
shares them). At the end each learnt namespace must be referenced nowhere: no /proc/*/ns link,
no /proc/*/fd link, no nsfs mount in this mount namespace."""

import os
import re
import threading

from soak_faults import run_pids

NS_KINDS = ("net", "mnt")
NSFS = re.compile(r"(net|mnt):\[(\d+)\]")


def ns_inode(pid, kind):
    try:
        link = os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    m = NSFS.fullmatch(link)
    return int(m.group(2)) if m else None


class NamespaceWatch:
    def __init__(self, soak):
        self.soak = soak
        self.host_ns = {kind: ns_inode("self", kind) for kind in NS_KINDS}
        self.seen = {}  # (kind, inode) -> run id
        self.samples = 0
        self.lock = threading.Lock()

    def sample(self):
        ids = self.soak.open_run_ids()
        if not ids:
            return
        for pid, run_id in run_pids(ids).items():
            for kind in NS_KINDS:
                ino = ns_inode(pid, kind)
                if ino is not None and ino != self.host_ns[kind]:
                    with self.lock:
                        self.seen.setdefault((kind, ino), run_id)
        self.samples += 1

    def run(self, stop):
        while not stop.wait(1.0):  # the sampling period
            self.sample()

    def still_referenced(self, related):
        """(kind, inode) -> (run id, where), for every learnt namespace that a process of the soak's
        (`related(pid)`: the daemon, a supervisor of its state dir, a process of a run) still holds
        (as its own, or by an fd), or an nsfs mount holds. A namespace's inode is reused once it is
        freed, so the same number in a process the soak never made is another namespace: not
        counted."""
        with self.lock:
            wanted = dict(self.seen)
        held = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or not related(int(entry)):
                continue
            for kind in NS_KINDS:
                ino = ns_inode(entry, kind)
                if (kind, ino) in wanted:
                    held.setdefault((kind, ino), f"pid {entry}'s {kind} namespace")
            try:
                fds = os.listdir(f"/proc/{entry}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    link = os.readlink(f"/proc/{entry}/fd/{fd}")
                except OSError:
                    continue
                m = NSFS.fullmatch(link)
                if m and (m.group(1), int(m.group(2))) in wanted:
                    held.setdefault((m.group(1), int(m.group(2))), f"fd {fd} of pid {entry}")
        try:
            with open("/proc/self/mountinfo") as f:
                for line in f:
                    for m in NSFS.finditer(line):
                        key = (m.group(1), int(m.group(2)))
                        if key in wanted:
                            held.setdefault(key, f"a mount: {line.split()[4]}")
        except OSError:
            pass
        return {k: (wanted[k], where) for k, where in held.items()}


def mounts_under(path):
    """Mount points strictly under `path` in this mount namespace."""
    path = os.path.realpath(path).rstrip("/") + "/"
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(path):
                found.append(point)
    return found


def fds_into(pid, run_dirs):
    """The daemon's fds whose target lies in one of `run_dirs` (run id -> directory)."""
    found = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    prefixes = {os.path.realpath(d).rstrip("/") + "/": run_id for run_id, d in run_dirs.items()}
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        for prefix, run_id in prefixes.items():
            if link.startswith(prefix) or link + "/" == prefix:
                found.append((run_id, fd, link))
                break
    return found


def in_cgroup_under(pid, cgroup_dir):
    """Whether `pid`'s cgroup (v2) lies under `cgroup_dir` (a path under /sys/fs/cgroup...)."""
    if not cgroup_dir:
        return False
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            paths = [line.rstrip("\n").split(":", 2)[2] for line in f if line.startswith("0::")]
    except (OSError, IndexError):
        return False
    for path in paths:
        for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
            if (root + path).startswith(cgroup_dir.rstrip("/") + "/"):
                return True
    return False
