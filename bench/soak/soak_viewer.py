"""A reader of a run's stream through the viewer's long poll (docs/viewer.md, "The API the page
uses"): `GET /viewer/api/events?run_id=R&from_seq=N&wait_ms=M` with a token from `metaharness
viewer`, from seq 1, each call from the `next_seq` the last one gave, until a batch holds
`stream.closed` (or `live` is false). A daemon restart ends every token: a 401 is followed by a
new token and the poll goes on from where it was; a refused connection (the daemon down) waits
for the daemon. What it received is kept per seq (`record`: the line as a JSON object, so
it is compared with the record's line as JSON, not byte for byte), for the invariants."""

import json
import subprocess
import time
import urllib.error
import urllib.request


class ViewerReader:
    def __init__(self, metaharness, host, run_id, rng, name):
        self.metaharness, self.host, self.run_id, self.name = metaharness, host, run_id, name
        self.wait_ms = rng.choice([250, 2000, 20000])
        self.lines = {}  # seq -> the record's line as received (a JSON object)
        self.closed = False
        self.ended = False
        self.polls = 0
        self.tokens = 0
        self.errors = []

    def _token(self):
        r = subprocess.run([self.metaharness, "viewer", "--json", "--role", "observe", "--ttl", "3600", "--socket",
                            self.host.socket], capture_output=True, timeout=30)
        if r.returncode != 0:
            return None
        self.tokens += 1
        return json.loads(r.stdout)["token"]

    def run(self, deadline):
        next_seq, token = 1, None
        while time.monotonic() < deadline:
            if token is None:
                token = self._token()
                if token is None:  # the daemon is restarting
                    self.host.up.wait(timeout=1.0)
                    time.sleep(0.05)  # a retry pace while the daemon restarts, not a synchronisation
                    continue
            url = (f"http://127.0.0.1:{self.host.http_port}/viewer/api/events?run_id={self.run_id}"
                   f"&from_seq={next_seq}&wait_ms={self.wait_ms}")
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(request, timeout=self.wait_ms / 1000 + 30) as r:
                    body = json.loads(r.read())
            except urllib.error.HTTPError as e:
                if e.code == 401:  # a restarted daemon knows no token of the last one
                    token = None
                    continue
                self.errors.append(f"HTTP {e.code} at seq {next_seq}: {e.read()[:200]!r}")
                return
            except (urllib.error.URLError, OSError):
                self.host.up.wait(timeout=1.0)
                time.sleep(0.05)  # a retry pace while the daemon restarts, not a synchronisation
                continue
            self.polls += 1
            for item in body.get("events", []):
                record = item["record"]
                seq = record.get("seq")
                if seq in self.lines and self.lines[seq] != record:
                    self.errors.append(f"seq {seq} received twice, different")
                if seq != next_seq:
                    self.errors.append(f"seq {seq} where {next_seq} was next")
                self.lines[seq] = record
                next_seq = seq + 1
            if body.get("next_seq") is not None and body["next_seq"] != next_seq:
                self.errors.append(f"next_seq {body['next_seq']} after seq {next_seq - 1}")
                next_seq = body["next_seq"]
            if body.get("closed"):
                self.closed = True
                return
            if body.get("live") is False:
                self.ended = True
                return
        self.errors.append(f"gave up at seq {next_seq} (the soak's deadline)")
