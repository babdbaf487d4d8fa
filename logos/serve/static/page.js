// The logos page: the runs, live and finished; a run's timeline as it streams (its prose, a
// card per command, approvals inline); starting and stopping runs; sessions, memory and batch
// reports. The token comes from the URL fragment (#token=…), which browsers never send to a
// server; it is kept in sessionStorage (gone with the tab) and sent as a bearer header.
// Everything from a model, a command or a person is put in the page as text (textContent,
// text nodes), never as HTML. No dependencies but the vendored chart library (uPlot).
"use strict";

const TOKEN_KEY = "logos-token";
const MODE_KEY = "logos-mode";
const FOLD_LINES = 40;
const FOLD_KEEP = 12;
const FOLD_CHARS = 6000;
const LIVE_KEEP = 64 * 1024;  // characters of a running command's live output kept on its card (the newest)
const FRAME_BUDGET_MS = 8;
const LIST_EVERY_MS = 5000;  // besides the runs stream: keeps a live run's elapsed time moving
const $ = (id) => document.getElementById(id);

function takeFragment() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(MODE_KEY, fragment.get("view") || "serve");  // run, batch: `logos view`
    fragment.delete("token");
    fragment.delete("view");
    const rest = fragment.toString();
    history.replaceState(null, "", location.pathname + (rest ? "#" + rest : ""));  // out of sight
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

const mode = () => sessionStorage.getItem(MODE_KEY) || "serve";
const viewing = () => mode() !== "serve";

function authorization() {
  return { authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
}

async function api(method, path, body) {
  const headers = authorization();
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) { showLogin(); throw new Error("the token was refused"); }
  if (response.status === 204) return null;
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(className, text, onclick) {
  const node = element("button", className, text);
  node.type = "button";
  node.onclick = onclick;
  return node;
}

function fillList(id, entries, className, empty, fill) {
  // One <li> of className per entry, its data-id the entry's id, filled by fill(item, entry);
  // a notice, empty, when there is none.
  const list = $(id);
  list.replaceChildren(...entries.map((entry) => {
    const item = element("li", className);
    item.dataset.id = entry.id;
    fill(item, entry);
    return item;
  }));
  if (!entries.length) list.append(element("li", "notice", empty));
}

// Numbers as people read them ----------------------------------------------------------------

function seconds(value) {
  if (value === null || value === undefined) return "";
  if (value < 60) return value.toFixed(value < 10 ? 2 : 1) + " s";
  const minutes = Math.floor(value / 60);
  return minutes + " min " + Math.round(value - minutes * 60) + " s";
}

function dollars(value) {
  return value === null || value === undefined ? "" : "$" + value.toFixed(value < 1 ? 4 : 2);
}

function tokens(input, output) {
  if (!input && !output) return "";
  return input + " in / " + output + " out";
}

function sinceIso(start, end) {
  const from = Date.parse(start);
  const to = end ? Date.parse(end) : Date.now();
  return Number.isNaN(from) ? null : Math.max(0, (to - from) / 1000);
}

// The run viewer ------------------------------------------------------------------------------

const view = freshView(null);
window.logosShown = [];  // the ids of the events shown, in order (tests check each appears once)

function freshView(runId) {
  return {
    runId, lastId: 0, prose: null, cards: new Map(), jobs: new Map(), openApprovals: [],
    runner: "", controller: null, queue: [], pumping: false, finished: false,
    steps: 0, input: 0, output: 0, cost: null, startedAt: null,
  };
}

function openRun(runId) {
  if (view.controller) view.controller.abort();
  Object.assign(view, freshView(runId));
  window.logosShown = [];
  $("transcript").replaceChildren();
  for (const id of ["run-end", "run-meta", "run-stats", "run-state"]) $(id).textContent = "";
  $("run-id").textContent = runId;
  $("cancel-button").hidden = viewing();
  history.replaceState(null, "", location.pathname + "#run=" + encodeURIComponent(runId));
  markSelected();
  follow(runId);
}

async function follow(runId) {
  // The run's events are queued and drawn a few milliseconds per frame, so a long replay
  // never freezes the page.
  await followEvents(view, "/v1/runs/" + encodeURIComponent(runId) + "/events", "run-end",
    () => view.runId === runId, (id, type, data) => enqueue(runId, id, type, data),
    () => view.finished);
}

async function followEvents(state, path, errorId, wanted, onEvent, ended = () => false) {
  // The server-sent events at path, each to onEvent, while wanted() and until ended(): a
  // dropped stream resumes after the last event shown (state.lastId). A refusal's error
  // goes to the element errorId.
  while (!ended() && wanted()) {
    const controller = new AbortController();
    state.controller = controller;
    const headers = authorization();
    if (state.lastId) headers["last-event-id"] = String(state.lastId);
    try {
      const response = await fetch(path, { headers, signal: controller.signal });
      if (!response.ok) { $(errorId).textContent = (await response.json()).error; return; }
      await readServerEvents(response.body.getReader(), wanted, onEvent);
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    if (!ended()) await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function readServerEvents(reader, wanted, onEvent) {
  // Server-sent events: fields until a blank line; each event goes to onEvent(id, type,
  // data) until the stream ends or wanted() says it is no longer read.
  const decoder = new TextDecoder();
  let buffer = "";
  let fields = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done || !wanted()) return;
    buffer += decoder.decode(value, { stream: true });
    let start = 0;
    let newline;
    while ((newline = buffer.indexOf("\n", start)) >= 0) {
      const line = buffer.slice(start, newline).replace(/\r$/, "");
      start = newline + 1;
      if (line === "") {
        if (fields.data !== undefined) onEvent(Number(fields.id), fields.event, fields.data);
        fields = {};
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon);
        const text = line.slice(colon + 1).replace(/^ /, "");
        fields[name] = name === "data" && fields.data !== undefined ? fields.data + "\n" + text : text;
      }
    }
    buffer = buffer.slice(start);
  }
}

function enqueue(runId, id, type, data) {
  // WHY the id check here: a stream resumed after a drop may repeat what was queued.
  const last = view.queue.length ? view.queue[view.queue.length - 1].id : view.lastId;
  if (!(id > last)) return;
  view.queue.push({ runId, id, type, data });
  if (type === "done") view.finished = true;
  if (!view.pumping) { view.pumping = true; setTimeout(pump, 0); }
}

function pump() {
  const until = performance.now() + FRAME_BUDGET_MS;
  let index = 0;
  while (index < view.queue.length && performance.now() < until) {
    const item = view.queue[index++];
    if (item.runId !== view.runId || item.id <= view.lastId) continue;
    view.lastId = item.id;
    window.logosShown.push(item.id);
    showEvent(item.type, JSON.parse(item.data));
  }
  view.queue.splice(0, index);
  if (following) requestAnimationFrame(scrollToEnd);
  if (view.queue.length) setTimeout(pump, 0);
  else view.pumping = false;
}

// WHY follow by a flag the reader sets by scrolling: measuring the timeline after each batch
// would lay out all of it, many times a frame.
let following = true;

function scrollToEnd() {
  const timeline = $("transcript");
  timeline.scrollTop = timeline.scrollHeight;
}

function noticeScroll() {
  const timeline = $("transcript");
  following = timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 40;
}

function timelineItem(node) {
  $("transcript").append(node);
  view.prose = null;
  return node;
}

function proseBlock() {
  if (!view.prose) {
    view.prose = element("div", "prose");
    $("transcript").append(view.prose);
  }
  return view.prose;
}

function cardFor(turn, index, command) {
  const key = turn + ":" + index;
  let card = view.cards.get(key);
  if (!card) {
    const node = element("div", "command running");
    const head = element("div", "card-head");
    const state = element("span", "card-state", "running");
    const approval = element("div", "card-approval");
    const line = element("pre", "line");
    line.textContent = "$ " + command;
    head.append(state);
    node.append(head, approval, line);
    card = { key, turn, index, command, node, state, approval, result: null, full: null };
    view.cards.set(key, card);
    timelineItem(node);
  }
  return card;
}

function openCardFor(command) {
  // The latest command of that text still without a result (approvals name no block).
  let found = null;
  for (const card of view.cards.values()) if (card.command === command && !card.result) found = card;
  return found;
}

function statusOf(result) {
  if (result.error) return { ok: false, text: "error: " + result.error };
  if (result.timed_out) return { ok: false, text: "timed out" };
  if (result.oom_killed) return { ok: false, text: "killed: out of memory" };
  if (result.signal) return { ok: false, text: "killed by signal " + result.signal };
  if (result.exit_code === null || result.exit_code === undefined) return { ok: false, text: "no exit code" };
  return { ok: result.exit_code === 0, text: "exit " + result.exit_code };
}

function outputText(result) {
  return [result.stdout, result.stderr].filter(Boolean).join(result.stdout && result.stderr ? "\n" : "");
}

function folded(text) {
  // Head and tail of long output, with how much lies between.
  const lines = text.replace(/\n$/, "").split("\n");
  if (lines.length > FOLD_LINES) {
    const hidden = lines.length - 2 * FOLD_KEEP;
    return { text: lines.slice(0, FOLD_KEEP).join("\n") + "\n… " + hidden + " lines hidden …\n"
      + lines.slice(-FOLD_KEEP).join("\n"), cut: true };
  }
  if (text.length > FOLD_CHARS) {
    const keep = FOLD_CHARS / 2;
    return { text: text.slice(0, keep) + "\n… " + (text.length - 2 * keep) + " characters hidden …\n"
      + text.slice(-keep), cut: true };
  }
  return { text, cut: false };
}

function showLiveOutput(card, event) {
  // What a running command printed lately, as it comes; its result replaces it.
  if (card.result) return;
  if (!card.live) {
    card.live = { node: element("pre", "output live"), length: 0 };
    card.node.append(card.live.node);
  }
  const live = card.live;
  const pieces = [];
  if (event.skipped_bytes) pieces.push(["skipped", "\n… " + event.skipped_bytes + " bytes skipped …\n"]);
  pieces.push([event.stream, event.text]);
  if (event.last) pieces.push(["skipped", "\n… live output stops here: the result shows the rest …\n"]);
  const atBottom = live.node.scrollTop + live.node.clientHeight >= live.node.scrollHeight - 4;
  for (const [kind, text] of pieces) {
    live.node.append(element("span", kind, text));
    live.length += text.length;
  }
  while (live.length > LIVE_KEEP && live.node.childNodes.length > 1) {
    live.length -= live.node.firstChild.textContent.length;
    live.node.firstChild.remove();
  }
  if (atBottom) live.node.scrollTop = live.node.scrollHeight;
}

function showResult(card, result) {
  const before = card.result && card.result.job ? card.result : null;
  if (before) {
    // A job's end has only what came after it went on: keep what came before.
    result = Object.assign({}, result, {
      stdout: before.stdout + result.stdout, stderr: before.stderr + result.stderr,
      duration_s: before.duration_s + result.duration_s,
    });
  }
  card.result = result;
  card.live = null;
  card.node.classList.remove("running", "job");
  card.node.querySelectorAll(".output, .card-foot, .show-all").forEach((node) => node.remove());
  if (result.job) {
    card.state.textContent = "went on as job " + result.job.id;
    card.node.classList.add("job");
    view.jobs.set(result.job.id, card);
  } else {
    const status = statusOf(result);
    card.state.textContent = status.text;
    card.node.classList.add(status.ok ? "ok" : "failed");
  }
  const text = outputText(result);
  const saved = (result.stdout_file && result.stdout_dropped_bytes) || (result.stderr_file && result.stderr_dropped_bytes);
  const shown = folded(text || (result.job ? "(no output yet)" : "(no output)"));
  const output = element("pre", "output", shown.text);
  card.node.append(output);
  if (shown.cut || saved) {
    card.node.append(button("show-all", "show all", () => showAll(card, output, result)));
  }
  if (result.blocked && result.blocked.length) {
    card.node.append(element("div", "blocked", "the sandbox's proxy refused: " + result.blocked.join("; ")));
  }
  const where = [seconds(result.duration_s), view.runner].filter(Boolean).join(" · ");
  card.node.append(element("div", "card-foot", where));
}

async function showAll(card, output, result) {
  const parts = [];
  for (const stream of ["stdout", "stderr"]) {
    const dropped = result[stream + "_dropped_bytes"];
    if (result[stream + "_file"] && dropped) {
      try {
        const response = await fetch("/v1/runs/" + encodeURIComponent(view.runId) + "/output?turn="
          + card.turn + "&index=" + card.index + "&stream=" + stream, { headers: authorization() });
        parts.push(response.ok ? await response.text() : (await response.json()).error);
        continue;
      } catch (error) {
        parts.push(error.message);
        continue;
      }
    }
    if (result[stream]) parts.push(result[stream]);
  }
  output.textContent = parts.join("\n");
  output.classList.add("all");
  card.node.querySelectorAll(".show-all").forEach((node) => node.remove());
}

function askInline(event) {
  // A command waits: approve, deny with a reason, or allow its kind for good.
  const card = openCardFor(event.command);
  const box = element("div", "approval-box");
  box.dataset.id = event.id;
  box.append(element("span", "asks", "waits for approval "));
  const reason = element("input", "reason");
  reason.placeholder = "reason (sent to the model)";
  const note = element("span", "approval-note");
  box.append(
    button("approve", "Approve", () => decide(event.id, true, null, note)),
    " ", reason, " ",
    button("deny", "Deny", () => decide(event.id, false, reason.value || null, note)),
    " ",
    button("always", "Always allow commands like this", () => alwaysAllow(event, note)),
    " ", note,
  );
  if (card) card.approval.append(box);
  else {
    const loose = timelineItem(element("div", "command waiting"));
    const line = element("pre", "line");
    line.textContent = "$ " + event.command;
    loose.append(box, line);
  }
  view.openApprovals.push({ command: event.command, box, card });
}

function settleInline(event) {
  const at = view.openApprovals.findIndex((open) => open.command === event.command);
  const said = describeDecision(event);
  if (at >= 0) {
    const open = view.openApprovals.splice(at, 1)[0];
    open.box.replaceChildren(element("span", "decided " + event.action, said));
    return;
  }
  const card = openCardFor(event.command);
  if (card) card.approval.append(element("div", "decided " + event.action, said));
  else timelineItem(element("div", "notice", "`" + event.command + "`: " + said));
}

function describeDecision(event) {
  const reason = event.reason ? ": " + event.reason : "";
  if (event.action === "yes") return "approved";
  if (event.action === "no") return "denied" + reason;
  if (event.action === "auto") return "ran unasked" + reason;
  if (event.action === "edit") return "edited to `" + event.edited_command + "`";
  return event.action + reason;
}

function showStats() {
  const parts = [view.steps + " steps", tokens(view.input, view.output), dollars(view.cost)];
  $("run-stats").textContent = parts.filter(Boolean).join(" · ");
}

function showEvent(type, event) {
  if (type === "prompt") timelineItem(element("div", "prompt", event.content));
  else if (type === "start") {
    view.runner = event.runner;
    $("run-meta").textContent = event.model + " · " + event.runner + " in " + event.cwd
      + " · approval " + event.approval;
    $("run-state").textContent = "running";
  } else if (type === "delta") proseBlock().append(event.text);
  else if (type === "reasoning_delta") {
    let last = $("transcript").lastElementChild;
    if (!last || !last.classList.contains("reasoning")) {
      last = timelineItem(element("details", "reasoning"));
      last.append(element("summary", "", "reasoning"));
    }
    last.append(event.text);
  } else if (type === "command_start") cardFor(event.turn, event.index, event.command);
  else if (type === "command_output") {
    const card = view.cards.get(event.turn + ":" + event.index);
    if (card) showLiveOutput(card, event);
  }
  else if (type === "command_result") showResult(cardFor(event.turn, event.index, event.result.command), event.result);
  else if (type === "confirm_required") { askInline(event); refreshApprovals().catch(() => {}); }
  else if (type === "approval") { settleInline(event); refreshApprovals().catch(() => {}); }
  else if (type === "job_start") {
    const card = cardFor(event.turn, event.index, event.command);
    view.jobs.set(event.id, card);
  } else if (type === "job_end") {
    const card = view.jobs.get(event.id);
    if (card) showResult(card, event.result);
    else timelineItem(element("div", "notice", "job " + event.id + " ended"));
  } else if (type === "step_end") {
    if (event.step.role === "assistant") {
      view.prose = null;
      view.steps += 1;
      const usage = event.step.usage;
      if (usage) {
        view.input += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        view.output += usage.output_tokens;
        if (usage.cost_usd !== null && usage.cost_usd !== undefined) view.cost = (view.cost || 0) + usage.cost_usd;
      }
      showStats();
    }
  } else if (type === "retry") timelineItem(element("div", "notice", "retrying (" + event.attempt + "): " + event.reason));
  else if (type === "error") timelineItem(element("div", "error", "error: " + event.message));
  else if (type === "done") {
    const usage = event.usage || {};
    view.input = (usage.input_tokens || 0) + (usage.cache_read_tokens || 0) + (usage.cache_write_tokens || 0);
    view.output = usage.output_tokens || 0;
    if (event.cost_usd !== null && event.cost_usd !== undefined) view.cost = event.cost_usd;
    if (typeof event.turns === "number") view.steps = event.turns;
    showStats();
    $("run-state").textContent = "finished";
    $("run-end").append(" finished: " + event.stop_reason + " after " + seconds(event.wall_s));
    $("cancel-button").hidden = true;
    for (const open of view.openApprovals) open.box.replaceChildren(element("span", "decided", "no longer waiting"));
    view.openApprovals = [];
    if (!viewing()) refreshSessions().catch(() => {});
  }
}

// The list of runs -----------------------------------------------------------------------------

let knownRuns = [];

async function followRuns() {
  // The server says when any run started, published or ended (`runs` events); the list is read
  // again on each. A dropped stream comes back after a second.
  for (;;) {
    try {
      const response = await fetch("/v1/runs/changes", { headers: authorization() });
      if (response.ok) {
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let pending = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          pending += decoder.decode(value, { stream: true });
          const blocks = pending.split("\n\n");
          pending = blocks.pop();
          if (blocks.some((block) => block.startsWith("event: runs") || block.includes("\nevent: runs"))) {
            await refreshRuns().catch(() => {});
          }
        }
      }
    } catch (error) {
      // the server went away or the network dropped: try again below
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

const runRows = new Map();  // run id → its row, kept across refreshes so a click never lands on a stale one

function runRow(run) {
  let entry = runRows.get(run.id);
  if (!entry) {
    const row = element("tr", "run-row");
    row.dataset.id = run.id;
    const open = element("a", "", "");
    open.href = "#run=" + encodeURIComponent(run.id);
    open.onclick = (event) => { event.preventDefault(); openRun(run.id); };
    const task = element("td", "task");
    task.append(open);
    const cells = ["state", "steps", "", "", "", ""].map((name) => element("td", name));
    const stopCell = element("td");
    stopCell.append(button("stop", "Stop", () => stop(run.id)));
    row.append(task, ...cells, stopCell);
    entry = { row, open, cells, stopCell };
    runRows.set(run.id, entry);
  }
  return entry;
}

function setText(node, text) {
  const value = String(text);
  if (node.textContent !== value) node.textContent = value;
}

async function refreshRuns() {
  const { runs } = await api("GET", "/v1/runs");
  knownRuns = runs;
  const rows = runs.map((run) => {
    const { row, open, cells, stopCell } = runRow(run);
    row.className = "run-row " + run.status + (row.dataset.id === view.runId ? " selected" : "");
    const live = run.live || {};
    const usage = run.usage || {};
    const input = run.usage ? usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens : live.input_tokens;
    const output = run.usage ? usage.output_tokens : live.output_tokens;
    const cost = run.cost_usd !== null && run.cost_usd !== undefined ? run.cost_usd : live.cost_usd;
    const elapsed = run.wall_s !== undefined && run.wall_s !== null ? run.wall_s : sinceIso(run.created_at, run.ended_at);
    setText(open, run.task || run.id);
    const texts = [
      run.status + (run.pending_approvals.length ? " (waits for approval)" : ""),
      typeof run.turns === "number" ? run.turns : (live.steps || 0),
      seconds(elapsed), tokens(input || 0, output || 0), dollars(cost), run.stop_reason || "",
    ];
    texts.forEach((text, index) => setText(cells[index], text));
    stopCell.hidden = run.status !== "running";
    return row;
  });
  const listed = new Set(runs.map((run) => run.id));
  for (const id of runRows.keys()) if (!listed.has(id)) runRows.delete(id);
  const body = $("run-list").tBodies[0];
  const current = Array.from(body.rows);
  if (current.length !== rows.length || current.some((row, index) => row !== rows[index])) body.replaceChildren(...rows);
  $("no-runs").hidden = runs.length > 0;
  markSelected();
}

function markSelected() {
  for (const row of $("run-list").tBodies[0].rows) row.classList.toggle("selected", row.dataset.id === view.runId);
}

async function stop(runId) {
  try { await api("POST", "/v1/runs/" + encodeURIComponent(runId) + "/cancel"); }
  catch (error) { $("run-end").textContent = error.message; }
  refreshRuns().catch(() => {});
}

// Approvals, sessions, memory ----------------------------------------------------------------

async function refreshApprovals() {
  const { approvals } = await api("GET", "/v1/approvals");
  fillList("approval-list", approvals, "pending", "nothing is waiting", (item, pending) => {
    item.append(element("code", "", pending.summary), " ");
    const reason = element("input", "reason");
    reason.placeholder = "reason (sent to the model)";
    item.append(button("approve", "Approve", () => decide(pending.id, true, null, null)), " ", reason, " ",
      button("deny", "Deny", () => decide(pending.id, false, reason.value || null, null)), " ");
    // A project's agent asks under "PROJECT/AGENT": its chat shows the question.
    const project = pending.run.includes("/") ? pending.run.split("/")[0] : null;
    const show = element("a", "", project ? "show project" : "show run");
    show.href = project ? "#project=" + encodeURIComponent(project) : "#run=" + encodeURIComponent(pending.run);
    show.onclick = (event) => { event.preventDefault(); if (project) openProject(project); else openRun(pending.run); };
    item.append(show);
  });
}

async function decide(id, approve, reason, note) {
  try { await api("POST", "/v1/approvals/" + id, { approve, reason }); }
  catch (error) { if (note) note.textContent = error.message; else alert(error.message); }
  refreshApprovals().catch(() => {});
}

async function alwaysAllow(event, note) {
  try {
    const rule = await api("POST", "/v1/approval-rules", { command: event.command });
    note.textContent = "rule added: " + rule.name + " (" + rule.file + ")";
    await decide(event.id, true, null, note);
  } catch (error) {
    note.textContent = error.message;
  }
}

async function refreshSessions() {
  const { sessions } = await api("GET", "/v1/sessions");
  const select = $("session");
  const chosen = select.value;
  select.replaceChildren(element("option", "", "new session"));
  select.firstChild.value = "";
  const list = $("session-list");
  list.replaceChildren(...sessions.map((session) => {
    const option = element("option", "", session.title);
    option.value = session.id;
    select.append(option);
    const item = element("li", "session");
    const open = element("a", "", session.title || session.id);
    open.href = "#";
    open.onclick = (event) => { event.preventDefault(); showSession(session.id); };
    const remove = button("delete", "Delete", async () => {
      try { await api("DELETE", "/v1/sessions/" + session.id); } catch (error) { alert(error.message); }
      refreshSessions();
    });
    item.append(open, " ", element("small", "", session.started_at + " · " + session.runner), " ", remove);
    return item;
  }));
  select.value = chosen;
}

async function showSession(id) {
  const session = await api("GET", "/v1/sessions/" + id);
  $("session-view").textContent = session.entries.map((entry) => {
    if (entry.type === "prompt") return "> " + entry.content;
    if (entry.type === "step") return entry.content;
    if (entry.type === "approval") return "[" + entry.action + "] " + entry.command;
    return "[" + entry.type + "]";
  }).join("\n\n");
}

async function refreshNotes() {
  const { notes } = await api("GET", "/v1/memory");
  $("note-list").replaceChildren(...notes.map((note) => {
    const item = element("li", "note");
    item.append(element("strong", "", note.key), ": " + note.text + " ");
    item.append(button("forget", "Forget", async () => {
      await api("DELETE", "/v1/memory/" + encodeURIComponent(note.key));
      refreshNotes();
    }));
    return item;
  }));
}

// Wiring --------------------------------------------------------------------------------------

function showLogin() {
  $("app").hidden = true;
  $("login").hidden = false;
}

function number(id) {
  const text = $(id).value.trim();
  return text ? Number(text) : undefined;
}

async function start(event) {
  event.preventDefault();
  $("start-error").textContent = "";
  const runner = { kind: $("runner").value };
  const directory = $("workdir").value.trim();
  if (directory && runner.kind === "local") runner.workdir = directory;
  if (directory && runner.kind === "sandbox") runner.allowed_paths = [{ path: directory, read_only: false }];
  const limits = { max_steps: number("max-steps"), max_cost_usd: number("max-cost"),
    max_wall_s: number("max-wall"), timeout_s: number("timeout") };
  const body = { prompt: $("prompt").value, runner, limits: JSON.parse(JSON.stringify(limits)) };
  if ($("approval").value) body.approval = $("approval").value;
  if ($("session").value) body.session = $("session").value;
  try {
    const started = await api("POST", "/v1/runs", body);
    openRun(started.run);
    refreshRuns().catch(() => {});
  } catch (error) {
    $("start-error").textContent = error.message;
  }
}

async function saveNote(event) {
  event.preventDefault();
  $("note-error").textContent = "";
  try {
    await api("PUT", "/v1/memory/" + encodeURIComponent($("note-key").value), { text: $("note-text").value });
    $("note-key").value = $("note-text").value = "";
    refreshNotes();
  } catch (error) {
    $("note-error").textContent = error.message;
  }
}

function runInFragment() {
  return new URLSearchParams(location.hash.slice(1)).get("run");
}

async function main() {
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    main();
  };
  $("batch-file").onchange = () => openBatchFile($("batch-file").files[0]);
  $("transcript").addEventListener("scroll", noticeScroll, { passive: true });
  if (!takeFragment()) { showLogin(); return; }
  document.body.dataset.mode = mode();
  try {
    if (mode() === "batch") await openServedBatch();
    else if (viewing()) await refreshRuns();
    else await Promise.all([refreshRuns(), refreshApprovals(), refreshSessions(), refreshNotes()]);
  } catch (error) {
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("status").textContent = { serve: "connected", run: "viewing a saved run", batch: "viewing a batch report" }[mode()] || "";
  $("cancel-button").onclick = () => stop(view.runId);
  const wanted = runInFragment() || (viewing() && knownRuns.length ? knownRuns[0].id : null);
  if (wanted) openRun(wanted);
  if (viewing()) return;
  $("start-form").onsubmit = start;
  $("note-form").onsubmit = saveNote;
  $("refresh-sessions").onclick = refreshSessions;
  followRuns();
  setInterval(() => { if (!document.hidden) refreshRuns().catch(() => {}); }, LIST_EVERY_MS);
  setInterval(() => refreshApprovals().catch(() => {}), 5000);
}

// Batch reports ----------------------------------------------------------------------------

async function openServedBatch() {
  // `logos view results.jsonl`: the file comes from the server that serves this page.
  const response = await fetch("/v1/batch", { headers: authorization() });
  if (response.status === 401) { showLogin(); throw new Error("the token was refused"); }
  if (!response.ok) throw new Error((await response.json()).error);
  showBatch(await response.text());
}

function openBatchFile(file) {
  if (!file) return;
  $("batch-error").textContent = "";
  file.text().then(showBatch, (error) => { $("batch-error").textContent = error.message; });
}

function latestResults(text) {
  // results.jsonl: one line per run of a task; a task's latest line says where it stands.
  const latest = new Map();
  let skipped = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const result = JSON.parse(line);
      if (typeof result.id !== "string" || typeof result.status !== "string") { skipped++; continue; }
      latest.set(result.id, result);
    } catch (error) {
      skipped++;
    }
  }
  return { results: [...latest.values()], skipped };
}

const OUTCOMES = ["passed", "failed", "error", "canceled"];

function showBatch(text) {
  const { results, skipped } = latestResults(text);
  if (!results.length) { $("batch-error").textContent = "no task results in that file: open the results.jsonl a batch wrote"; return; }
  const counts = OUTCOMES.map((status) => results.filter((result) => result.status === status).length);
  const cost = results.reduce((sum, result) => sum + (result.cost_usd || 0), 0);
  $("batch-summary").textContent = results.length + " tasks: " + OUTCOMES.map((status, at) => counts[at] + " " + status).join(", ")
    + " · " + dollars(cost) + (skipped ? " · " + skipped + " unreadable lines skipped" : "");
  $("batch-table").tBodies[0].replaceChildren(...results.map((result) => {
    const row = element("tr", "batch-row " + result.status);
    row.append(element("td", "", result.id), element("td", "", result.status),
      element("td", "", (result.wall_s || 0).toFixed(1)), element("td", "", result.steps || 0),
      element("td", "", dollars(result.cost_usd)));
    if (result.error) row.title = result.error;
    return row;
  }));
  $("batch-report").hidden = false;
  drawBatchCharts(counts, results.map((result) => result.wall_s || 0));
}

function drawBatchCharts(counts, times) {
  // Outcomes as bars, times as a histogram: both drawn by uPlot (vendored: works offline).
  const bars = uPlot.paths.bars({ size: [0.6, 80] });
  const outcomes = $("batch-outcomes");
  outcomes.replaceChildren();
  new uPlot({
    title: "Outcome by task", width: 360, height: 220, legend: { show: false },
    scales: { x: { time: false, range: [-0.5, OUTCOMES.length - 0.5] }, y: { range: [0, Math.max(...counts) + 1] } },
    axes: [{ values: (self, ticks) => ticks.map((tick) => OUTCOMES[tick] || "") , splits: () => OUTCOMES.map((_, at) => at) }, {}],
    series: [{}, { label: "tasks", fill: "#5b8def", stroke: "#2b5cc4", paths: bars, points: { show: false } }],
  }, [OUTCOMES.map((_, at) => at), counts], outcomes);
  const bins = Math.min(20, Math.max(1, Math.ceil(Math.sqrt(times.length))));
  const top = Math.max(...times, 1e-9);
  const width = top / bins;
  const heights = new Array(bins).fill(0);
  for (const time of times) heights[Math.min(bins - 1, Math.floor(time / width))] += 1;
  const timesChart = $("batch-times");
  timesChart.replaceChildren();
  new uPlot({
    title: "Time per task (s)", width: 360, height: 220, legend: { show: false },
    scales: { x: { time: false }, y: { range: [0, Math.max(...heights) + 1] } },
    series: [{}, { label: "tasks", fill: "#8bc48a", stroke: "#3c8b3a", paths: bars, points: { show: false } }],
  }, [heights.map((_, at) => (at + 0.5) * width), heights], timesChart);
}

main();
