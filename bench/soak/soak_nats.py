"""The soak's NATS: a 3-node JetStream cluster of nats-server on loopback, in the soak's
directory, started and stopped by the soak (tests/support/nats_cluster.cpp does the same for the
fleet tests). A node is killed (-9) and started again as a fault (`nats_kill9`); readiness is the
node's monitoring endpoint `/healthz` answering 200 (JetStream current), polled with a bound.
The fleet's users and permissions (config/nats-server-fleet.conf) are not used: the daemons log
in with no credentials (`insecure_no_credentials`, loopback only)."""

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request


def free_ports(n):
    held, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        held.append(s)
        ports.append(s.getsockname()[1])
    for s in held:
        s.close()
    return ports


def server_binary():
    for candidate in ("/usr/sbin/nats-server", "/usr/bin/nats-server"):
        if os.path.exists(candidate):
            return candidate
    return shutil.which("nats-server")


class NatsCluster:
    def __init__(self, work_dir, n=3):
        self.dir = str(work_dir)
        self.binary = server_binary()
        if self.binary is None:
            raise RuntimeError("nats-server is not installed (Debian: nats-server)")
        ports = free_ports(3 * n)
        self.nodes = []
        for i in range(n):
            home = os.path.join(self.dir, f"n{i}")
            os.makedirs(os.path.join(home, "store"), exist_ok=True)
            self.nodes.append({"client": ports[3 * i], "route": ports[3 * i + 1], "http": ports[3 * i + 2],
                               "config": os.path.join(home, "nats.conf"), "log": os.path.join(home, "nats.log"),
                               "store": os.path.join(home, "store"), "proc": None})
        for i, node in enumerate(self.nodes):
            routes = "\n".join(f"    nats-route://127.0.0.1:{m['route']}" for j, m in enumerate(self.nodes) if j != i)
            with open(node["config"], "w") as f:
                f.write(f"server_name: n{i}\nlisten: 127.0.0.1:{node['client']}\nhttp: 127.0.0.1:{node['http']}\n"
                        f"max_payload: 4MB\n"
                        f"jetstream {{\n  store_dir: \"{node['store']}\"\n  max_memory_store: 64MB\n"
                        f"  max_file_store: 1GB\n}}\n"
                        f"cluster {{\n  name: mh_soak\n  listen: 127.0.0.1:{node['route']}\n  routes: [\n{routes}\n  ]\n}}\n")
        # Every node is started by one thread that lives as long as the cluster: setpriv's
        # pdeathsig fires when the thread that started the node ends (not the process), so a node
        # restarted by the fault thread would die with that thread at the schedule's end.
        self.requests = queue.Queue()
        self.starter = threading.Thread(target=self._starter, daemon=True)
        self.starter.start()
        for i in range(n):
            self.start(i)

    def _starter(self):
        while True:
            item = self.requests.get()
            if item is None:
                return
            i, done = item
            try:
                self._spawn(i)
            finally:
                done.set()

    def url(self, i):
        return f"nats://127.0.0.1:{self.nodes[i]['client']}"

    def urls(self):
        return [self.url(i) for i in range(len(self.nodes))]

    def start(self, i):
        done = threading.Event()
        self.requests.put((i, done))
        done.wait()

    def _spawn(self, i):
        node = self.nodes[i]
        if node["proc"] is not None:
            return
        argv = [self.binary, "-c", node["config"], "-l", node["log"]]
        if os.path.exists("/usr/bin/setpriv"):  # the node dies with the soak, whatever ends it
            argv = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] + argv
        node["proc"] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def kill9(self, i):
        node = self.nodes[i]
        if node["proc"] is None:
            return None
        pid = node["proc"].pid
        node["proc"].send_signal(signal.SIGKILL)
        node["proc"].wait()
        node["proc"] = None
        return pid

    def healthy(self, i):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.nodes[i]['http']}/healthz", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_healthy(self, timeout=90):
        """Every running node answers /healthz 200 (JetStream current), polled, bounded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.healthy(i) for i, n in enumerate(self.nodes) if n["proc"] is not None):
                return True
            time.sleep(0.2)  # the nodes elect their leaders meanwhile: no event to wait on from here
        return False

    def stop(self):
        for i in range(len(self.nodes)):
            self.kill9(i)
        self.requests.put(None)
