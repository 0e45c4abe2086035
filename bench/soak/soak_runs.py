"""One soak run from its plan to its end: a stand-in script made for it, the submit, its
controllers (ask mode: allow or deny with a reason, some answers at the deadline's edge, some
runs with two controllers racing), a halt or an interrupt at a random moment, and its readers.
Everything a plan holds comes from the run's own seeded random source, so a seed replays the
same plans; what the soak observed is kept on the RunLog for the invariants."""

import json
import os
import subprocess
import threading
import time

import metaharness
from soak_readers import CliReader, RawReader
from soak_viewer import ViewerReader


class RunLog:
    """What the soak did to one run and what came back."""

    def __init__(self, index, plan):
        self.index, self.plan = index, plan
        self.run_id = None
        self.submitted_at = None
        self.decisions = []  # (controller, call_id, decision, outcome_ok, code)
        self.commands_sent = 0
        self.commands_answered = 0
        self.command_errors = []
        # Commands the client was told it lost (CommandLost) while the daemon was killed -9 in
        # between: (command id, daemon incarnation when sent, when told). A crash may lose a
        # command it had not recorded; the client is told so by name. The invariants check the
        # record holds no result for it (docs/soak.md).
        self.lost_in_crash = []
        # One-shot requests (halt, interrupt, steer, inject) whose connection the daemon's kill cut
        # before the reply: (what, daemon incarnation when sent, the client's words).
        self.unknown_in_crash = []
        self.host = None  # the DaemonHost that owns the run (the one it was placed on)
        self.submit_host = None  # the one it was submitted to
        self.fleet_submit = False
        self.readers = []  # RawReader
        self.viewer_readers = []  # ViewerReader
        self.cli_readers = []  # (CliReader, lines)
        self.closed_seen = False
        self.errors = []
        self.refusals = []  # (moment_s, what, code): refused by name (a submit, a decision, a command)
        self.controls = []  # (what, ok, code): the answers to the one-shot commands (halt, interrupt, steer, inject)


def make_plan(rng, index):
    mode = rng.choices(["ask", "observe", "frame"], weights=[6, 3, 1])[0]
    steps, calls = [], []
    for k in range(rng.randint(1, 4)):
        kind = rng.choices(["calls", "text", "chatter", "wait", "sleep"], weights=[5, 2, 1, 1, 1])[0]
        if kind == "calls":
            batch = []
            for _ in range(rng.randint(1, 3)):
                call_id = f"toolu_s{index}_{len(calls)}"
                calls.append(call_id)
                batch.append({"id": call_id, "name": "Bash",
                              "input": {"command": f"touch m_{call_id}.txt", "description": call_id}})
            steps.append({"type": "tool_use", "calls": batch})
        elif kind == "text":
            steps.append({"type": "text", "text": f"step {k} of run {index}"})
        elif kind == "chatter":
            steps.append({"type": "chatter", "count": rng.randint(20, 300), "bytes": rng.randint(50, 400)})
        elif kind == "wait":
            steps.append({"type": "wait", "ms": rng.randint(100, 1500)})
        else:
            call_id = f"toolu_s{index}_{len(calls)}"
            calls.append(call_id)
            steps.append({"type": "sleep", "id": call_id, "ms": rng.randint(300, 3000)})
    steps.append({"type": "text", "text": "done"})
    return {
        "mode": mode,
        "script": {"format": STANDIN["script_format"], "description": f"soak run {index}", "turns": [steps]},
        "calls": calls,
        "deadline_ms": rng.choice([1500, 3000, 6000]),
        "deny_share": rng.choice([0.0, 0.3, 0.6]),
        "edge_share": rng.choice([0.0, 0.0, 0.3]),
        "racing": mode == "ask" and rng.random() < 0.3,
        "halt_at_s": rng.uniform(0.2, 4.0) if rng.random() < 0.12 else None,
        "interrupt_at_s": rng.uniform(0.2, 3.0) if rng.random() < 0.12 else None,
        "halt_after_interrupt_s": rng.uniform(0.1, 2.0),
        "raw_readers": rng.randint(1, 2),
        "cli_reader": rng.random() < 0.25,
        "controller_seed": rng.getrandbits(32),
        "reader_seed": rng.getrandbits(32),
        # Drawn last, so every draw above is what it was before the viewer's reader came.
        "viewer_reader": rng.random() < 0.2,
        # A steer or an inject at a random moment (an answer either way: ok, or refused by name),
        # and a tool-call budget that some runs cross (BUDGET_EXHAUSTED, stream.closed budget).
        "steer_at_s": rng.uniform(0.2, 3.0) if rng.random() < 0.1 else None,
        "inject_at_s": rng.uniform(0.2, 3.0) if rng.random() < 0.1 else None,
        "budget_tool_calls": rng.choice([1, 2]) if rng.random() < 0.1 else None,
        # A share of runs on a real vendor CLI (from .vendor) against the daemon's scripted model
        # endpoint, playing the same calls as a scenario in that vendor's words (REAL_CLIS).
        **real_cli_draw(rng.random()),
    }


# The real CLIs a share of runs play on, each REAL_SHARE of the runs (one draw): every vendor the
# daemon's binary registers, in registration order, as `metaharness vendor list --json` gives it
# (load_real_clis fills REAL_CLIS before the first plan; the soak keeps no table of vendors). For
# each: the daemon's adapter, the scenario's wire, its shell tool and that tool's input, the call
# id form, the call id its events report for a scenario call id (`m_<that id>.txt` is the call's
# marker, so the deny and effect checks find it), whether the CLI also asks the model things with
# no tools (a scenario answers those with `aux`), its process names, whether it speaks ACP, and
# the helper programs its runs execute beside it.
REAL_SHARE = 0.02
REAL_CLIS = {}
# The stand-in (tests/standin): its program, the adapter whose wire it speaks and runs as, and its
# scripts' format, as `mh-standin --identity` says (load_standin). The daemon's binary for that
# adapter is the soak's wrapper (soak.py), which runs the real CLI of the same adapter for a run
# with no stand-in script.
STANDIN = {}


def load_standin(bin_dir):
    """Fills STANDIN from `<bin_dir>/mh-standin --identity` (tests/standin/standin_identity.hpp)."""
    out = subprocess.run([os.path.join(bin_dir, "mh-standin"), "--identity"], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"mh-standin --identity: exit {out.returncode}: {out.stderr.strip()[:300]}")
    STANDIN.clear()
    STANDIN.update(json.loads(out.stdout))
    return STANDIN


def load_real_clis(metaharness):
    """Fills REAL_CLIS from `metaharness vendor list --json` (adapters/vendor_descriptor.hpp)."""
    out = subprocess.run([metaharness, "vendor", "list", "--json"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"metaharness vendor list --json: exit {out.returncode}: {out.stderr.strip()[:300]}")
    REAL_CLIS.clear()
    for vendor in json.loads(out.stdout):
        shell = vendor["scripted_shell"]
        REAL_CLIS[vendor["id"]] = {
            "adapter": vendor["id"], "wire": vendor["scenario_wire"],
            "tool": shell["tool"], "key": shell["command_key"], "prefix": shell["call_id_prefix"],
            "reported": shell["reported_call_id"], "aux": shell["side_requests"],
            "process_names": tuple(vendor["process_names"]), "over_acp": vendor["over_acp"],
            "helpers": tuple(vendor["helpers"])}
    return REAL_CLIS


def real_cli_draw(r):
    """{"adapter", "cli"}: `cli` is "standin" or one of REAL_CLIS."""
    for i, cli in enumerate(REAL_CLIS):
        if r < REAL_SHARE * (i + 1):
            return {"adapter": REAL_CLIS[cli]["adapter"], "cli": cli}
    return {"adapter": STANDIN["adapter"], "cli": "standin"}


def plan_cli(plan):
    """The CLI a plan runs on: "standin" or one of REAL_CLIS."""
    return plan.get("cli", "standin")


class RunDriver:
    def __init__(self, soak, index, plan, log):
        self.soak, self.index, self.plan, self.log = soak, index, plan, log
        # One host: every run on it. A fleet: submitted to host index % n, every other one with
        # "fleet": true (placed by whichever host takes it from the queue).
        self.submit_host = soak.hosts[index % len(soak.hosts)]
        self.fleet = len(soak.hosts) > 1 and index % 2 == 0
        self.client = metaharness.Client(self.submit_host.socket, timeout=60)

    def _decide_loop(self, name, rng):
        """One controller: attach, decide every call offered to it, until the stream closes."""
        try:
            with self.client.attach(self.log.run_id, timeout=self.soak.run_timeout_s) as run:
                for item in run:
                    if isinstance(item, metaharness.Pending):
                        deny = rng.random() < self.plan["deny_share"]
                        if rng.random() < self.plan["edge_share"]:
                            # At the deadline's edge: within 60 ms either side of it.
                            time.sleep(max(0.0, item.remaining_ms / 1000.0 + rng.uniform(-0.06, 0.06)))
                        else:
                            time.sleep(rng.uniform(0, 0.2))
                        decision = (metaharness.Deny(f"soak {name} denies {item.call_id}") if deny
                                    else metaharness.Allow())
                        self.log.commands_sent += 1
                        sent_in = self.log.host.incarnation
                        try:
                            outcome = run.decide(item.call_id, decision)
                            self.log.commands_answered += 1
                            self.log.decisions.append((name, item.call_id, "deny" if deny else "allow",
                                                       outcome.ok, outcome.code))
                        except metaharness.CommandLost as e:
                            if self.log.host.incarnation != sent_in:
                                self.log.lost_in_crash.append((e.command_id, sent_in, self.log.host.incarnation))
                            else:
                                self.log.command_errors.append(f"{name} decide {item.call_id}: CommandLost {e}")
                        except metaharness.ConnectionLost as e:
                            self.log.command_errors.append(f"{name} decide {item.call_id}: {type(e).__name__} {e}")
                        except metaharness.Refused as e:
                            # Refused by name on the socket (DISK_FULL while the state dir is full):
                            # an answer; the call waits for its deadline or the next controller.
                            self.log.commands_answered += 1
                            self.log.refusals.append((time.monotonic() - self.soak.t0, "decide", e.code))
                        except metaharness.MetaharnessError as e:  # any other: named in the violation
                            self.log.command_errors.append(f"{name} decide {item.call_id}: {type(e).__name__} {e}")
                            raise
                    elif item.event == "stream.closed":
                        self.log.closed_seen = True
        except metaharness.MetaharnessError as e:
            self.log.errors.append(f"{name}: {type(e).__name__}: {e}")

    def _send_once(self, what):
        """A one-shot request (its own connection). While the daemon restarts nothing listens
        (DaemonUnreachable: the line never left, so sending it again cannot act twice): it is
        sent again once the daemon is up, for up to 60 s."""
        deadline = time.monotonic() + 60
        while True:
            try:
                if what == "halt":
                    return self.client.halt(self.log.run_id, reason="soak halt")
                if what == "steer":
                    return self.client.steer(self.log.run_id, f"soak steer of plan {self.index}")
                if what == "inject":
                    return self.client.inject(self.log.run_id, f"soak inject of plan {self.index}")
                return self.client.interrupt(self.log.run_id, reason="soak interrupt")
            except metaharness.DaemonUnreachable:
                if time.monotonic() > deadline:
                    raise
                self.log.host.up.wait(timeout=1.0)
                time.sleep(0.05)  # a retry pace while the daemon restarts, not a synchronisation

    def _timed_command(self, at_s, what):
        time.sleep(at_s)  # the plan's moment
        self.log.commands_sent += 1
        sent_in = self.log.host.incarnation
        try:
            outcome = self._send_once(what)
            self.log.commands_answered += 1
            # The answer, judged against the adapter's capability table (control_as_documented);
            # a refusal by name is an answer, counted in the report by its code.
            self.log.controls.append((what, bool(outcome.ok), None if outcome.ok else outcome.code))
            if not outcome.ok:
                self.log.refusals.append((time.monotonic() - self.soak.t0, what, outcome.code))
            if what == "interrupt":
                # An interrupt holds the run open for its next input (docs/architecture.md): the
                # soak's next input is a halt, a moment later.
                self._timed_command(self.plan["halt_after_interrupt_s"], "halt")
        except metaharness.ConnectionLost as e:
            if not self.log.host.up.is_set() or self.log.host.incarnation != sent_in:
                # The daemon was killed with the request in flight: whether it acted is unknown, and
                # the client is told so by name (ConnectionLost). Not an answer, not a silence.
                self.log.unknown_in_crash.append((what, sent_in, str(e)))
                if what == "interrupt":  # it may hold the run open: the halt still follows
                    self._timed_command(self.plan["halt_after_interrupt_s"], "halt")
            else:
                self.log.command_errors.append(f"{what}: {type(e).__name__} {e}")
        except (metaharness.CommandLost, metaharness.DaemonUnreachable) as e:
            self.log.command_errors.append(f"{what}: {type(e).__name__} {e}")
        except metaharness.Refused as e:
            self.log.commands_answered += 1  # a refusal is an answer
            self.log.controls.append((what, False, e.code))
            self.log.refusals.append((time.monotonic() - self.soak.t0, what, e.code))
        except metaharness.MetaharnessError as e:
            self.log.commands_answered += 1  # a refusal is an answer
            self.log.controls.append((what, False, getattr(e, "code", None) or type(e).__name__))
        except Exception as e:  # the thread would die silently: named in the violation instead
            self.log.command_errors.append(f"{what}: {type(e).__name__} {e}")

    def _fleet_submit(self, spec):
        """A fleet submit (docs/fleet.md, Placement): the run id and the DaemonHost that placed it.
        A run answered "queued" (no host had room yet) is looked up with `get` on the submitter
        until its record names a host (60 s)."""
        reply = self.client._request("submit", run=spec, request_id=f"soak-{self.soak.seed}-{self.index}",
                                     fleet=True)
        run_id, host_id = reply.run_id, getattr(reply, "host", None)
        deadline = time.monotonic() + 60
        while host_id is None and time.monotonic() < deadline:
            try:
                got = dict(self.client._request("get", run_id=run_id))
                # A remote run's answer is the fleet record's (host at the top); a local one's is
                # the run summary, under `run`.
                host_id = got.get("host") or (got.get("run") or {}).get("host")
            except metaharness.MetaharnessError:
                pass
            if host_id is None:
                time.sleep(0.2)  # polling the fleet's record: placement has no event here
        owner = self.soak.host_by_id(host_id)
        if owner is None:
            raise metaharness.MetaharnessError(f"fleet submit {run_id}: placed on an unknown host {host_id!r}")
        return run_id, owner

    def vendor_scenario(self):
        """The plan's steps as a metaharness.scenario/1 in the words of the plan's real CLI
        (REAL_CLIS): each batch of calls one model response of that CLI's shell tool, each call
        touching its marker `m_<the call id its events report>.txt` in the work dir; a sleep a call
        that touches its marker, then sleeps (in python: Qwen Code refuses a foreground `sleep`);
        texts ride with the next calls (a response of text alone ends the vendor's turn), the
        rest of them the last answer; a model wait delays the next response (`headers_delay_ms`);
        chatter is the stand-in's only."""
        cli = REAL_CLIS[plan_cli(self.plan)]
        steps, texts, delay_ms = [], [], 0

        def call(scenario_id, command_after=""):
            marker = f"m_{cli['reported'].format(id=scenario_id)}.txt"
            command = f"touch {marker}" + command_after
            block = {"type": "tool_call", "id": scenario_id, "name": cli["tool"], "input": {cli["key"]: command}}
            if cli["key"] == "command":
                block["input"]["description"] = scenario_id
            return block

        def emit(content):
            nonlocal texts, delay_ms
            step = {"name": f"step {len(steps)}", "content": [{"type": "text", "text": t} for t in texts] + content}
            if delay_ms:
                step["timing"] = {"headers_delay_ms": delay_ms}
            steps.append(step)
            texts, delay_ms = [], 0

        for step in self.plan["script"]["turns"][0]:
            if step["type"] == "tool_use":
                emit([call(c["id"].replace("toolu_", cli["prefix"])) for c in step["calls"]])
            elif step["type"] == "sleep":
                seconds = step["ms"] / 1000.0
                emit([call(step["id"].replace("toolu_", cli["prefix"]),
                           f"; python3 -c 'import time; time.sleep({seconds:.3f})'")])
            elif step["type"] == "text":
                texts.append(step["text"])
            elif step["type"] == "wait":
                delay_ms += step["ms"]
        if not texts:
            texts.append("done")
        emit([])
        scenario = {"format": "metaharness.scenario/1",
                    "description": f"soak run {self.index} on {plan_cli(self.plan)}",
                    "wires": [cli["wire"]], "steps": steps}
        if cli["aux"]:
            # A session title, any request without tools: answered, consuming no step.
            scenario["aux"] = {"content": [{"type": "text", "text": f"soak run {self.index}"}]}
        return scenario

    def drive(self):
        plan = self.plan
        script_path = os.path.join(self.soak.scripts_dir, f"run{self.index}.json")
        with open(script_path, "w") as f:
            json.dump(plan["script"], f)
        os.chmod(script_path, 0o644)
        spec = {"adapter": STANDIN["adapter"], "prompt": "go", "decisions": plan["mode"],
                "model_endpoint": {"base_url": "http://127.0.0.1:9"},
                "vendor_env": {"MH_STANDIN_SCRIPT": script_path},
                "labels": {"soak": str(self.soak.seed), "index": str(self.index)},
                "budget": {"wall_ms": int(self.soak.run_timeout_s * 1000)}}
        if plan_cli(plan) != "standin":
            # A real CLI on the daemon's scripted endpoint; no MH_STANDIN_SCRIPT, so the soak's
            # wrapper for the stand-in's adapter runs that adapter's real CLI.
            del spec["model_endpoint"], spec["vendor_env"]
            spec["adapter"] = plan["adapter"]
            spec["model_scenario"] = self.vendor_scenario()
        if plan["budget_tool_calls"] is not None:
            spec["budget"]["tool_calls"] = plan["budget_tool_calls"]
        if plan["mode"] == "ask":
            spec["decision_deadline_ms"] = plan["deadline_ms"]
        self.log.submit_host, self.log.host, self.log.fleet_submit = self.submit_host, self.submit_host, self.fleet
        try:
            if self.fleet:
                self.log.run_id, owner = self._fleet_submit(spec)
                self.log.host = owner
                self.client = metaharness.Client(owner.socket, timeout=60)
            else:
                self.log.run_id = self.client.submit(request_id=f"soak-{self.soak.seed}-{self.index}", **spec)
        except metaharness.Refused as e:
            self.log.errors.append(f"submit: {type(e).__name__}: {e}")
            self.log.refusals.append((time.monotonic() - self.soak.t0, "submit", e.code))
            if e.code == "DISK_FULL":
                for fs in self.soak.statefses.values():
                    fs.free.wait(timeout=60)  # no new submit until the disks are freed
            return
        except metaharness.MetaharnessError as e:
            self.log.errors.append(f"submit: {type(e).__name__}: {e}")
            return
        self.log.submitted_at = time.monotonic() - self.soak.t0
        self.soak.register_run(self.log)
        import random
        threads = []
        # The readers outlive the run's wall budget, so a run its budget closes is read to its end.
        deadline = time.monotonic() + self.soak.run_timeout_s + 30
        reader_rng = random.Random(plan["reader_seed"])
        for r in range(plan["raw_readers"]):
            reader = RawReader(self.log.host, self.log.run_id, reader_rng, f"r{self.index}.{r}", give_up_s=120)
            self.log.readers.append(reader)
            threads.append(threading.Thread(target=reader.run, args=(deadline,), daemon=True))
        if plan["viewer_reader"]:
            viewer = ViewerReader(self.soak.metaharness, self.log.host, self.log.run_id,
                                  random.Random(plan["reader_seed"] ^ 0x5EED), f"v{self.index}")
            self.log.viewer_readers.append(viewer)
            threads.append(threading.Thread(target=viewer.run, args=(deadline,), daemon=True))
        cli = None
        if plan["cli_reader"]:
            cli = CliReader(self.soak.metaharness, self.log.host, self.log.run_id, reader_rng,
                            os.path.join(self.soak.dir, f"cli-reader-{self.index}.jsonl"))
            self.soak.register_cli_reader(cli)
        if plan["mode"] == "ask":
            controller_rng = random.Random(plan["controller_seed"])
            names = ["c1", "c2"] if plan["racing"] else ["c1"]
            for name in names:
                threads.append(threading.Thread(target=self._decide_loop,
                                                args=(name, random.Random(controller_rng.getrandbits(32))),
                                                daemon=True))
        if plan["halt_at_s"] is not None:
            threads.append(threading.Thread(target=self._timed_command, args=(plan["halt_at_s"], "halt"), daemon=True))
        for what in ("steer", "inject"):
            if plan[f"{what}_at_s"] is not None:
                threads.append(threading.Thread(target=self._timed_command, args=(plan[f"{what}_at_s"], what),
                                                daemon=True))
        if plan["interrupt_at_s"] is not None:
            threads.append(threading.Thread(target=self._timed_command, args=(plan["interrupt_at_s"], "interrupt"),
                                            daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, deadline - time.monotonic() + 30))
        if cli is not None:
            self.soak.unregister_cli_reader(cli)
            self.log.cli_readers.append((cli, cli.finish(timeout=30)))
