"""A real `metaharness daemon` for the tests: its own socket, state dir and NOTIFY_SOCKET (so
readiness is the daemon's READY=1, never a sleep), ended by pid when the tests are done, with a
check that no process of any of its runs is left behind.

Paths come from the environment ctest passes (clients/python/CMakeLists.txt), else from the
source tree's build/."""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

CLIENT_DIR = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CLIENT_DIR))

SOURCE_DIR = pathlib.Path(os.environ.get("MH_SOURCE_DIR") or CLIENT_DIR.parent.parent)
BIN_DIR = pathlib.Path(os.environ.get("MH_BIN_DIR") or SOURCE_DIR / "build" / "bin")
METAHARNESS = pathlib.Path(os.environ.get("METAHARNESS_BIN") or BIN_DIR / "metaharness")
STANDIN = pathlib.Path(os.environ.get("MH_STANDIN_BIN") or BIN_DIR / "mh-standin-claude")
STANDIN_SCRIPTS = SOURCE_DIR / "tests" / "standin" / "scripts"
SCENARIOS = SOURCE_DIR / "tests" / "scenarios"

for needed in (METAHARNESS, STANDIN):
    if not needed.is_file():
        raise RuntimeError(f"{needed} is not built (cmake --build build --target metaharness mh-standin-claude)")


def wait_until(predicate, timeout, what):
    """Polls a condition that has no event to wait on (a file appearing), within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def run_processes(run_ids):
    """Pids of live processes carrying one of these runs' marker (METAHARNESS_RUN=<id>)."""
    markers = {f"METAHARNESS_RUN={i}".encode() for i in run_ids}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if env & markers:
            found.append(int(entry))
    return found


class Daemon:
    """`metaharness daemon` in a directory of its own."""

    def __init__(self, config="", name="mh"):
        # A short path: a Unix socket path is at most 107 bytes.
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=f"mhpy-{name}-"))
        self.socket = str(self.dir / "mh.sock")
        self.state_dir = self.dir / "state"
        self.config = config
        self.proc = None
        (self.state_dir / "runs").mkdir(parents=True)

    def start(self, timeout=30):
        notify_path = str(self.dir / "notify.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        config_path = self.dir / "config.toml"
        config_path.write_text(self.config)
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "METAHARNESS_SOCKET") and not k.startswith("LISTEN_")}
        env["NOTIFY_SOCKET"] = notify_path
        self.log = open(self.dir / "daemon.log", "wb")
        self.proc = subprocess.Popen(
            [str(METAHARNESS), "daemon", "--config", str(config_path), "--socket", self.socket,
             "--state-dir", str(self.state_dir)],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            notes = b""
            while b"READY=1" not in notes:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"the daemon did not become ready: {self.log_text()}")
                notify.settimeout(remaining)
                try:
                    notes += notify.recv(4096) + b"\n"
                except socket.timeout:
                    continue
        finally:
            notify.close()
        return self

    def log_text(self):
        try:
            return (self.dir / "daemon.log").read_text(errors="replace")
        except OSError:
            return ""

    def run_dir(self, run_id):
        return self.state_dir / "runs" / run_id

    def events_file(self, run_id):
        return [json.loads(line) for line in (self.run_dir(run_id) / "events.jsonl").read_text().splitlines()]

    def stop(self):
        """SIGTERM (every run is halted within the grace), bounded wait, then SIGKILL. Then no
        process of any run may be left."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc is not None:
            self.log.close()
        runs = os.listdir(self.state_dir / "runs") if (self.state_dir / "runs").is_dir() else []
        left = run_processes(runs)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert not left, f"processes of the daemon's runs were left behind: {left}"
        if not os.environ.get("MH_KEEP_TEST_DIRS"):
            shutil.rmtree(self.dir, ignore_errors=True)


def standin_config():
    # The stand-in reads its script inside the run's sandbox: the scripts are shown to it read-only
    # (the source tree's, and the `scripts` fixture's under the temporary directory).
    return (f'[vendor]\nclaude = "{STANDIN}"\n[runs]\nmax_active = 200\n'
            f'sandbox_read_only = ["{STANDIN_SCRIPTS}", "{tempfile.gettempdir()}"]\n')


def standin_spec(script, **fields):
    """A run spec for the stand-in harness: `script` is a script file (a name under
    tests/standin/scripts, or a path)."""
    path = pathlib.Path(script)
    if not path.is_absolute():
        path = STANDIN_SCRIPTS / script
    spec = {"adapter": "claude", "prompt": "go", "model_endpoint": {"base_url": "http://127.0.0.1:9"},
            "vendor_env": {"MH_STANDIN_SCRIPT": str(path)}}
    spec.update(fields)
    return spec


def write_script(directory, name, turns, description="a test script"):
    path = pathlib.Path(directory) / name
    path.write_text(json.dumps({"format": "mh-standin-claude.script/1", "description": description, "turns": turns}))
    return path


def bash(call_id, command):
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command, "description": call_id}}


def drop(attachment):
    """The connection breaks under the attachment (as a network or a daemon restart would)."""
    attachment._conn.sock.shutdown(socket.SHUT_RDWR)


def read_deciding_after_a_drop(run, decision):
    """Reads an attachment to its end: the first call offered is left undecided as the
    connection drops under it; every later offer (the re-offer) is decided `decision`, and
    each decision's outcome must be ok. Returns (the offers, the seqs of the events read)."""
    import metaharness

    offers, seqs = [], []
    for item in run:
        if isinstance(item, metaharness.Pending):
            offers.append(item)
            if len(offers) == 1:
                drop(run)  # undecided when the connection goes
                continue
            assert run.decide(item.call_id, decision).ok
        else:
            seqs.append(item.seq)
    return offers, seqs


def sealed_frame(directory, operations):
    """A frame sealed by `metaharness frame seal`."""
    frame = {"format": "metaharness.frame/1", "workflow": {"id": "py", "version": "1"}, "node": {"id": "step"},
             "step": {"workflow": "py", "state": "step", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
             "reaching": [], "next": [], "handoff": {"handoff": "none"},
             "operations": [{"op": op} for op in operations], "entities": None}
    raw = pathlib.Path(directory) / "frame.json"
    raw.write_text(json.dumps(frame))
    sealed = pathlib.Path(directory) / "sealed.json"
    subprocess.run([str(METAHARNESS), "frame", "seal", str(raw), str(sealed)], check=True, capture_output=True,
                   timeout=30)
    return json.loads(sealed.read_text())


@pytest.fixture(scope="session")
def daemon():
    """One daemon for the session, hosting every Claude run on the stand-in harness."""
    d = Daemon(standin_config(), "standin").start()
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    import metaharness

    return metaharness.Client(daemon.socket, timeout=60)


@pytest.fixture
def scripts():
    # Under a root daemon each run is a uid of its own (docs/containment.md): the scripts it reads
    # live where that uid can read them, not in pytest's private (0700) temporary directory.
    directory = tempfile.mkdtemp(prefix="mh-scripts-")
    os.chmod(directory, 0o755)
    yield pathlib.Path(directory)
    shutil.rmtree(directory, ignore_errors=True)


class ReplyDroppingProxy:
    """A socket in front of the daemon that forwards every request and drops the first
    `drop` replies (it closes the client's connection instead): a reply lost on its way."""

    def __init__(self, path, daemon_socket, drop=1):
        self.path, self.daemon_socket, self.drop = str(path), str(daemon_socket), drop
        self.requests = []
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.path)
        self._listener.listen()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                peer, _ = self._listener.accept()
            except OSError:
                return
            with peer, socket.socket(socket.AF_UNIX) as upstream:
                upstream.connect(self.daemon_socket)
                line = peer.makefile("rb").readline()
                self.requests.append(json.loads(line))
                upstream.sendall(line)
                reply = upstream.makefile("rb").readline()
                if self.drop > 0:
                    self.drop -= 1
                    continue  # the reply is lost: the connection closes without it
                peer.sendall(reply)

    def close(self):
        self._listener.close()
