"""Readers of a run's stream, each keeping the exact bytes it received per seq, so the end can
compare them with the record byte for byte.

RawReader speaks the socket API itself (a `tail` with `follow`): it stalls, drops its connection
mid-line and reconnects from the seq after the last whole line it has, as its plan says, and
reconnects whenever the daemon goes away (killed, stopped, restarted). CliReader is a
`metaharness tail --follow --json` process: the soak freezes it (SIGSTOP/SIGCONT) as a fault,
and since it does not reconnect, what it wrote must be a gap-free, byte-equal part of the record."""

import json
import re
import signal
import socket
import subprocess
import time

SOCKET_FORMAT = "metaharness.socket/1"
PAST_END = re.compile(r"last committed seq (\d+)")


class RawReader:
    def __init__(self, host, run_id, rng, name, give_up_s):
        self.host, self.run_id, self.name = host, run_id, name
        self.from_seq = rng.choice([1, 1, 1, rng.randint(1, 12), 0])
        self.stall_after = rng.choice([None, None, rng.randint(1, 30)])
        self.stall_s = rng.uniform(0.5, 4.0)
        self.drop_after = rng.choice([None, rng.randint(1, 40)])
        self.drop_mid_line = rng.random() < 0.5
        self.give_up_s = give_up_s
        self.lines = {}  # seq -> bytes, as received
        self.first_seq = None
        self.closed = False
        self.ended = False
        self.connections = 0
        self.errors = []

    def _connect(self, from_seq):
        deadline = time.monotonic() + self.give_up_s
        while True:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(5)
                s.connect(self.host.socket)
                s.sendall((json.dumps({"format": SOCKET_FORMAT, "request": "tail", "id": self.name,
                                       "run_id": self.run_id, "from_seq": from_seq, "follow": True})
                           + "\n").encode())
                s.settimeout(None)
                self.connections += 1
                return s
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                self.host.up.wait(timeout=1.0)
                time.sleep(0.05)  # a retry pace while the daemon restarts, not a synchronisation

    def run(self, deadline):
        next_seq = self.from_seq
        stalled = dropped = False
        count = 0
        s = None
        try:
            while not self.closed and time.monotonic() < deadline:
                if s is None:
                    s = self._connect(next_seq)
                    buf = b""
                s.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except (OSError, socket.timeout):
                    chunk = b""
                if not chunk:
                    s.close()
                    s = None  # the daemon went away (or ended the tail early): follow on
                    if time.monotonic() > deadline:
                        break
                    continue
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    obj = json.loads(line)
                    if obj.get("format") == SOCKET_FORMAT:
                        if obj.get("reply") == "refused":
                            past = PAST_END.search(obj.get("reason") or "")
                            if obj.get("code") == "MALFORMED" and past:
                                # The plan's seq is not written yet: start at the stream's end instead
                                # (the next seq), which the daemon takes.
                                next_seq = min(next_seq, int(past.group(1)) + 1)
                                s.close()
                                s = None
                                break
                            self.errors.append(f"tail refused: {obj.get('code')} {obj.get('reason')}")
                            return
                        if obj.get("reply") == "end":
                            # A follow ends after stream.closed; one that began past it ends at once.
                            self.ended = True
                            if obj.get("next_seq") != next_seq:
                                self.errors.append(f"end says next_seq {obj.get('next_seq')}, read up to {next_seq}")
                            return
                        if obj.get("reply") == "tailing" and next_seq == 0:
                            next_seq = obj["from_seq"]
                        continue
                    seq = obj["seq"]
                    if self.first_seq is None:
                        self.first_seq = seq
                    if seq in self.lines:
                        self.errors.append(f"seq {seq} received twice")
                    elif seq != next_seq:
                        self.errors.append(f"expected seq {next_seq}, got {seq}")
                    self.lines[seq] = line + b"\n"
                    next_seq = seq + 1
                    count += 1
                    if obj.get("event") == "stream.closed":
                        self.closed = True
                if self.closed or s is None:
                    continue
                if self.stall_after is not None and not stalled and count >= self.stall_after:
                    stalled = True
                    time.sleep(self.stall_s)  # the stall is the fault itself
                if self.drop_after is not None and not dropped and count >= self.drop_after and (
                        buf or not self.drop_mid_line):
                    dropped = True  # drop the connection, a half line in hand when there is one
                    s.close()
                    s = None
        except OSError as e:
            self.errors.append(f"connection: {e}")
        finally:
            if s is not None:
                s.close()


class CliReader:
    def __init__(self, metaharness, host, run_id, rng, out_path):
        self.from_seq = rng.choice([1, rng.randint(1, 8)])
        self.out_path = out_path
        self.out = open(out_path, "wb")
        self.proc = subprocess.Popen(
            [metaharness, "tail", run_id, "--follow", "--json", "--from", str(self.from_seq), "--socket",
             host.socket], stdout=self.out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.frozen = False

    def freeze(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)
            self.frozen = True

    def thaw(self):
        if self.frozen:
            self.proc.send_signal(signal.SIGCONT)
            self.frozen = False

    def finish(self, timeout):
        """Waits for it to end (it ends at stream.closed or when its connection goes); a reader
        still running after `timeout` is killed. Returns {seq: bytes}."""
        self.thaw()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        lines = {}
        for raw in open(self.out_path, "rb").read().splitlines(keepends=True):
            if raw.endswith(b"\n"):
                lines[json.loads(raw)["seq"]] = raw
        return lines
