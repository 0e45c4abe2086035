"""The daemon under soak: one `metaharness daemon` on a state directory of its own, started,
killed (-9), stopped (SIGTERM), frozen (SIGSTOP/SIGCONT) and restarted on the same state
directory. Readiness is the daemon's READY=1 on a NOTIFY_SOCKET, never a sleep. Only the
processes this object started are signalled, by pid."""

import os
import pathlib
import signal
import socket
import subprocess
import threading
import time


def pick_http_port():
    """A loopback port in 20000-29999 nobody listens on now: outside the kernel's ephemeral
    range (32768-60999), so another program's bind(0) cannot take it while the daemon restarts."""
    import random
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(20000, 29999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free loopback port in 20000-29999 for the viewer")


class DaemonHost:
    def __init__(self, metaharness, vendor_binaries, scripts_dir, work_dir, extra_config="", host_id=None,
                 read_only=()):
        self.metaharness = str(metaharness)
        self.host_id = host_id  # its fleet host id (--hosts 3), else None
        self.dir = pathlib.Path(work_dir)
        self.socket = str(self.dir / "mh.sock")
        self.state_dir = self.dir / "state"
        (self.state_dir / "runs").mkdir(parents=True, exist_ok=True)
        # on_stop = "detach": a SIGTERM leaves the runs to their supervisors and the next start
        # adopts them, as a kill -9 does; a halt-on-stop would end every run at each SIGTERM
        # and leave the adoption path unexercised by half of the daemon faults.
        # The viewer's listener (its long poll is one of the readers): a port outside the kernel's
        # ephemeral range, free now, kept across restarts.
        self.http_port = pick_http_port()
        read_only_list = ", ".join(f'"{d}"' for d in [scripts_dir, *read_only])
        self.config = (f'[http]\nlisten = "127.0.0.1:{self.http_port}"\n'
                       '[vendor]\n' + "".join(f'{k} = "{v}"\n' for k, v in vendor_binaries.items()) +
                       f'[runs]\nmax_active = 400\non_stop = "detach"\n'
                       f'sandbox_read_only = [{read_only_list}]\n') + extra_config
        self.proc = None
        self.incarnation = 0
        self.lock = threading.RLock()  # one fault at a time on the process
        self.up = threading.Event()
        self.log = None

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout=60):
        with self.lock:
            notify_path = str(self.dir / f"notify-{self.incarnation}.sock")
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            notify.bind(notify_path)
            config_path = self.dir / "config.toml"
            config_path.write_text(self.config)
            env = {k: v for k, v in os.environ.items()
                   if k not in ("NOTIFY_SOCKET", "METAHARNESS_SOCKET") and not k.startswith("LISTEN_")}
            env["NOTIFY_SOCKET"] = notify_path
            if self.log is None:
                self.log = open(self.dir / "daemon.log", "ab")
            self.proc = subprocess.Popen(
                [self.metaharness, "daemon", "--config", str(config_path), "--socket", self.socket,
                 "--state-dir", str(self.state_dir)],
                env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + timeout
                notes = b""
                while b"READY=1" not in notes:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self.proc.poll() is not None:
                        raise RuntimeError(f"the daemon (incarnation {self.incarnation}) did not become ready "
                                           f"(exit {self.proc.poll()}); see {self.dir / 'daemon.log'}")
                    notify.settimeout(min(remaining, 1.0))
                    try:
                        notes += notify.recv(4096) + b"\n"
                    except socket.timeout:
                        continue
            finally:
                notify.close()
                os.unlink(notify_path)
            self.incarnation += 1
            self.up.set()
            return self

    def kill9_and_restart(self):
        with self.lock:
            self.up.clear()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.start()

    def term_and_restart(self, timeout=60):
        """SIGTERM: the daemon detaches its runs and exits; then a start adopts them. Returns
        False when the daemon did not exit within `timeout` (it is then killed: a violation)."""
        with self.lock:
            self.up.clear()
            self.proc.send_signal(signal.SIGTERM)
            exited = True
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                exited = False
                self.proc.kill()
                self.proc.wait()
            self.start()
            return exited

    def freeze(self, seconds):
        with self.lock:
            self.proc.send_signal(signal.SIGSTOP)
            time.sleep(seconds)  # the fault is the duration itself
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout=90):
        """The end: SIGTERM, bounded wait. Returns the exit code (None: it had to be killed)."""
        with self.lock:
            self.up.clear()
            if self.proc is None or self.proc.poll() is not None:
                return self.proc.returncode if self.proc else None
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None

    def sample(self):
        """(rss_kib, fd_count) of the daemon now, or None when it is not running."""
        pid = self.pid
        if pid is None:
            return None
        try:
            rss = 0
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            return rss, fds
        except OSError:
            return None
