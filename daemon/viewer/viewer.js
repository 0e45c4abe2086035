// The metaharness viewer: the runs, one run's stream live, its pending approvals answered from
// the page. Everything it shows comes from /viewer/api/* with the page's token (docs/viewer.md).
// Every text from a run (vendor output included) goes into the page as text, never as markup.
"use strict";

const state = {
  token: null,
  role: null,
  runId: null,       // the run shown
  generation: 0,     // bumped when another run is chosen: an old stream loop stops
  nextSeq: 1,
  calls: new Map(),  // call_id -> {row, cells}
  pending: [],       // [{call_id, requested_seq, deadline (ms since epoch, local clock)}]
  canDecide: false,
  answering: new Set(),
  refreshing: false, // the once-a-second refresh is running
};

// The token arrives in the URL's fragment (never sent to the server, so never in its logs) and is
// kept for this tab only; the fragment is then replaced so it does not stay in the address bar.
function readToken() {
  const params = new URLSearchParams(location.hash.slice(1));
  const fromUrl = params.get("token");
  if (fromUrl) {
    sessionStorage.setItem("metaharness.viewer.token", fromUrl);
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  return sessionStorage.getItem("metaharness.viewer.token");
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function setStatus(text, isError = false) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = isError ? "refused" : "muted";
}

async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + state.token }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const why = body && body.reason ? body.code + ": " + body.reason : "HTTP " + response.status;
    const error = new Error(why);
    error.status = response.status;
    throw error;
  }
  return body;
}

function age(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

// Spend as the run summary carries it: priced USD when known (an unpriced run's cost is unknown,
// not zero), and its tokens; a run found on disk has no spend on record (null).
function spendText(spend) {
  if (!spend) return "unknown";
  const usd = spend.usd === null || spend.usd === undefined ? "USD unknown" : "$" + Number(spend.usd).toFixed(4);
  return usd + ", " + spend.input_tokens + " in / " + spend.output_tokens + " out tokens";
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => k + "=" + v).join(" ");
}

async function refreshRuns() {
  const body = await api("/viewer/api/runs");
  state.role = body.role;
  document.getElementById("access").textContent =
      "role " + body.role + " (uid " + body.uid + "), token valid until " + body.expires_at;
  // Rows are kept and updated in place (keyed by run id), so a row being clicked or read is
  // never swapped out under the pointer.
  const tbody = document.querySelector("#runs tbody");
  const rows = new Map([...tbody.querySelectorAll("tr")].map((r) => [r.dataset.runId, r]));
  const runs = body.runs.slice().sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  const wanted = [];
  for (const run of runs) {
    let row = rows.get(run.run_id);
    if (!row) {
      row = el("tr", { "data-run-id": run.run_id });
      for (const name of ["run-id", "adapter", "state", "age", "pending-count", "progress", "turns", "spend", "closed",
                          "labels"])
        row.append(el("td", { class: name }));
      row.addEventListener("click", () => showRun(row.dataset.runId));
    }
    row.dataset.state = run.state;
    row.classList.toggle("selected", run.run_id === state.runId);
    const cells = {
      "run-id": run.run_id, adapter: run.adapter, state: run.state, age: age(run.age_ms),
      "pending-count": String(run.pending_decisions), progress: progressText(run), turns: run.turns === null ? "unknown" : String(run.turns),
      spend: spendText(run.spend), closed: run.close_reason || "", labels: labelsText(run.labels),
    };
    for (const [name, text] of Object.entries(cells)) {
      const cell = row.querySelector("td." + name);
      if (cell.textContent !== text) cell.textContent = text;
    }
    wanted.push(row);
  }
  rows.forEach((row, id) => { if (!runs.some((r) => r.run_id === id)) row.remove(); });
  wanted.forEach((row, i) => { if (tbody.children[i] !== row) tbody.insertBefore(row, tbody.children[i] || null); });
  document.getElementById("no-runs").hidden = runs.length > 0;
}

function showRun(runId) {
  if (state.runId === runId) return;
  state.runId = runId;
  state.generation += 1;
  state.nextSeq = 1;
  state.calls = new Map();
  state.pending = [];
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("run", runId);
  history.replaceState(null, "", "#" + params.toString());
  document.getElementById("run").hidden = false;
  document.getElementById("run-id").textContent = runId;
  document.getElementById("stream").replaceChildren();
  document.querySelector("#calls tbody").replaceChildren();
  renderPending();
  for (const row of document.querySelectorAll("#runs tbody tr"))
    row.classList.toggle("selected", row.dataset.runId === runId);
  followStream(runId, state.generation);
  refreshRun();
}

function callRow(callId) {
  let call = state.calls.get(callId);
  if (call) return call;
  const row = el("tr", { class: "call", "data-call-id": callId });
  const cells = {};
  for (const name of ["id", "tool", "input", "decision", "by", "result"]) {
    cells[name] = el("td", { class: name });
    row.append(cells[name]);
  }
  cells.id.textContent = callId;
  document.querySelector("#calls tbody").append(row);
  call = { row, cells };
  state.calls.set(callId, call);
  return call;
}

function gist(value, max = 160) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (text === undefined || text === null) return "";
  return text.length > max ? text.slice(0, max) + "…" : text;
}

function decidedByText(record) {
  let by = record.decided_by || "";
  const peer = record.peer;
  if (peer) by += " (uid " + peer.uid + (peer.via ? ", " + peer.via : ", pid " + peer.pid) + ")";
  return by;
}

function applyRecord(record) {
  const callId = record.call_id;
  if (record.event === "tool.requested") {
    const call = callRow(callId);
    call.cells.tool.textContent = record.name || "";
    call.cells.input.textContent = gist(record.input);
    if (record.decision_required) call.cells.decision.textContent = "awaiting";
  } else if (record.event === "tool.decided") {
    const call = callRow(callId);
    const decision = record.decision ? record.decision.decision : "?";
    let text = decision;
    if (decision === "deny" && record.decision.reason) text += ": " + record.decision.reason;
    call.cells.decision.textContent = text;
    call.cells.decision.className = "decision " + decision;
    call.cells.by.textContent = decidedByText(record);
    call.row.dataset.decision = decision;
    call.row.dataset.decidedBy = record.decided_by || "";
  } else if (record.event === "tool.result") {
    const call = callRow(callId);
    // is_error null: the vendor did not say (Claude's Write says nothing): the result is shown as
    // it is, with no verdict in front of it (never "unknown File created…").
    const status = record.is_error === true ? "error" : record.is_error === false ? "ok" : "unflagged";
    const content = gist(record.content, 100);
    call.cells.result.textContent = status === "unflagged" ? content : status + " " + content;
    call.cells.result.title = status === "unflagged" ? "the vendor did not say whether this call failed" : "";
    call.row.dataset.result = status;
  } else if (record.event === "stream.closed") {
    closedFailures.set(record.run, record.failure || null);
    showRunState("closed", record.reason, record.failure);
  }
}

function appendLines(events) {
  const stream = document.getElementById("stream");
  const stick = stream.scrollTop + stream.clientHeight >= stream.scrollHeight - 4;
  for (const e of events) {
    const record = e.record || {};
    const kind = (record.event || "unreadable").replace(/\./g, "-");
    const line = el("div", { class: "ev ev-" + kind, "data-seq": String(record.seq || "") }, e.text);
    if (record.event === "tool.decided" && record.decision) line.classList.add(record.decision.decision);
    stream.append(line);
    if (e.record) applyRecord(record);
  }
  if (stick) stream.scrollTop = stream.scrollHeight;
}

// The stream, live: each call returns what exists from next_seq on, or waits (up to 15 s) for
// more. The server reads the run's events.jsonl, so a slow page holds nothing in the daemon.
async function followStream(runId, generation) {
  while (generation === state.generation) {
    let body;
    try {
      body = await api("/viewer/api/events?run_id=" + encodeURIComponent(runId) + "&from_seq=" + state.nextSeq +
                       "&wait_ms=15000");
    } catch (error) {
      if (generation !== state.generation) return;
      setStatus("stream: " + error.message, true);
      if (error.status === 401 || error.status === 403 || error.status === 404) return;
      await new Promise((r) => setTimeout(r, 2000));
      continue;
    }
    if (generation !== state.generation) return;
    appendLines(body.events);
    state.nextSeq = body.next_seq;
    if (body.closed) {
      document.getElementById("stream").dataset.closed = "true";
      return;
    }
  }
}

// Why a closed run failed, as its stream.closed said (by run id): the summary the page polls may
// not carry it.
const closedFailures = new Map();

// Whether a live run is making progress (docs/policies.md, "Stalls"): a run waiting on a decision
// is not stalled, and says since when it waits; a run named stalled says since when, until its
// vendor makes output again. "" for neither (and for a closed run: the summary has both null).
function progressText(run) {
  const at = (iso) => new Date(iso).toLocaleTimeString();
  if (run.waiting_on_decision_since) return "waiting on a decision since " + at(run.waiting_on_decision_since);
  if (run.stalled_since) return "stalled since " + at(run.stalled_since);
  return "";
}

// "closed (error: launch, not retryable)": the state, the close reason, and why it failed in the
// closed vocabulary (docs/socket-api.md, "Failures"; none when it completed), its detail the title.
function showRunState(runState, reason, failure) {
  const element = document.getElementById("run-state");
  const why = failure ? ": " + failure.category + (failure.retryable ? ", retryable" : ", not retryable") : "";
  element.textContent = runState + (reason ? " (" + reason + why + ")" : "");
  element.title = failure ? failure.detail : "";
}

async function refreshRun() {
  const runId = state.runId;
  if (!runId) return;
  const body = await api("/viewer/api/run?run_id=" + encodeURIComponent(runId));
  if (runId !== state.runId) return;
  const run = body.run;
  state.canDecide = body.can_decide;
  showRunState(run.state, run.close_reason, run.failure || closedFailures.get(runId));
  // Why nothing can be answered: a closed run has nothing left to answer, whatever the token.
  const why = body.can_decide ? "" : run.state === "closed" ? " — the run is closed: nothing is left to answer"
                                                             : " — this token may look, not answer";
  const progress = progressText(run);
  document.getElementById("run-facts").textContent =
      run.adapter + ", " + age(run.age_ms) + " old, " + run.turns + " turn(s), spend " + spendText(run.spend) +
      (progress ? ", " + progress : "") + why;
  const now = Date.now();
  state.pending = body.pending.map((p) => ({ call_id: p.call_id, requested_seq: p.requested_seq,
                                             deadline: now + p.remaining_ms }));
  renderPending();
}

function renderPending() {
  const box = document.getElementById("pending");
  const present = new Set(state.pending.map((p) => p.call_id));
  for (const node of box.querySelectorAll(".pending"))
    if (!present.has(node.dataset.callId)) node.remove();
  document.getElementById("no-pending").hidden = state.pending.length > 0;
  for (const p of state.pending) {
    let node = box.querySelector('.pending[data-call-id="' + CSS.escape(p.call_id) + '"]');
    if (!node) node = pendingNode(p);
    const left = Math.max(0, p.deadline - Date.now());
    node.querySelector(".remaining").textContent = (left / 1000).toFixed(1) + " s left";
  }
}

function pendingNode(p) {
  const node = el("div", { class: "pending", "data-call-id": p.call_id });
  const call = state.calls.get(p.call_id);
  const what = call ? call.cells.tool.textContent + " " + call.cells.input.textContent : "seq " + p.requested_seq;
  node.append(el("span", { class: "call" }, p.call_id + " " + what), el("span", { class: "remaining" }, ""));
  if (state.canDecide) {
    const allow = el("button", { class: "allow", type: "button" }, "Allow");
    const reason = el("input", { class: "reason", type: "text", placeholder: "reason (a deny needs one)" });
    const deny = el("button", { class: "deny", type: "button" }, "Deny");
    allow.addEventListener("click", () => answer(p.call_id, { decision: "allow" }, node));
    deny.addEventListener("click", () => {
      const why = reason.value.trim();
      if (!why) {
        node.querySelector(".answer").textContent = "a deny needs a reason";
        return;
      }
      answer(p.call_id, { decision: "deny", reason: why }, node);
    });
    node.append(" ", allow, reason, deny);
  }
  node.append(el("span", { class: "answer" }, ""));
  document.getElementById("pending").append(node);
  return node;
}

async function answer(callId, decision, node) {
  if (state.answering.has(callId)) return;
  state.answering.add(callId);
  for (const b of node.querySelectorAll("button")) b.disabled = true;
  const out = node.querySelector(".answer");
  try {
    const body = await api("/viewer/api/decide", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ run_id: state.runId, call_id: callId, decision }),
    });
    const outcome = body.outcome;
    if (outcome.result === "ok") {
      out.textContent = "answered (" + body.command_id + ")";
    } else {
      out.textContent = "refused " + outcome.refused.code + ": " + outcome.refused.reason;
      out.className = "answer refused";
    }
  } catch (error) {
    out.textContent = error.message;
    out.className = "answer refused";
    for (const b of node.querySelectorAll("button")) b.disabled = false;
  } finally {
    state.answering.delete(callId);
  }
  refreshRun().catch(() => {});
}

async function tick() {
  try {
    await refreshRuns();
    if (state.runId) await refreshRun();
    setStatus("live");
  } catch (error) {
    setStatus(error.message, true);
    if (error.status === 401) {
      document.getElementById("access").textContent = "the token was refused: ask `metaharness viewer` for a new page";
      return false;
    }
  }
  return true;
}

// Refreshes every second while the token is accepted; started again by a new token.
function keepRefreshing() {
  if (state.refreshing) return;
  state.refreshing = true;
  const loop = async () => {
    if (await tick()) setTimeout(loop, 1000);
    else state.refreshing = false;
  };
  setTimeout(loop, 1000);
}

// Starts (or starts again) with the token in state.token, showing `runId` when given.
async function begin(runId) {
  if (!(await tick())) return;
  if (runId) showRun(runId);
  keepRefreshing();
}

// A new address in this tab (one pasted, or a link followed) changes only the fragment, so the
// page is not loaded again: the token it carries wins over the one kept, and the page starts
// again with it (its role may differ: the run is shown afresh, its answer buttons with it).
function addressChanged() {
  const kept = state.token;
  const token = readToken();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("run");
  if (token && token !== kept) {
    state.token = token;
    const shown = wanted || state.runId;
    state.runId = null;
    state.generation += 1;  // the old stream loop stops
    for (const node of document.querySelectorAll("#pending .pending")) node.remove();
    begin(shown);
  } else if (wanted && wanted !== state.runId) {
    showRun(wanted);
  }
}

async function main() {
  window.addEventListener("hashchange", addressChanged);
  setInterval(renderPending, 200);
  state.token = readToken();
  if (!state.token) {
    document.getElementById("access").textContent = "no token: open the address `metaharness viewer` prints";
    return;
  }
  await begin(new URLSearchParams(location.hash.slice(1)).get("run"));
}

document.addEventListener("DOMContentLoaded", main);
