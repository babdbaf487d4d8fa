// The logos page: a workspace. A sidebar lists the projects and runs (their live state, a dot
// for what happened since you looked); the main pane shows one of them as it streams (a run's
// timeline, a project's chat) or a form; a side pane holds its details (model, runner, the
// team), what waits for approval, and the files it changed. The token comes from the URL
// fragment (#token=…), which browsers never send to a server; it is kept in sessionStorage
// (gone with the tab) and sent as a bearer header. What a model, a command or a person wrote
// is put in the page as text, or as Markdown rendered and sanitised (markdown.js): never as
// raw HTML. Projects are in projects.js, files changed in changes.js.
"use strict";

const TOKEN_KEY = "logos-token";
const MODE_KEY = "logos-mode";
const SEEN_KEY = "logos-seen:";
const FOLD_LINES = 40;
const FOLD_KEEP = 12;
const FOLD_CHARS = 6000;
const LIVE_KEEP = 64 * 1024;  // characters of a running command's live output kept on its card (the newest)
const FRAME_BUDGET_MS = 8;
const LIST_EVERY_MS = 5000;  // besides the change streams: keeps elapsed times moving
const DECLINED = "the user declined to run this command";
const NEVER_RUN = "not run: approval mode never-run";
const $ = (id) => document.getElementById(id);

// Helpers -----------------------------------------------------------------------------------

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(className, text, onclick, label) {
  const node = element("button", className, text);
  node.type = "button";
  node.onclick = onclick;
  if (label) node.setAttribute("aria-label", label);
  return node;
}

function setText(node, text) {
  const value = String(text);
  if (node.textContent !== value) node.textContent = value;
}

function chip(kind, text) {
  // A state's own look and words: a coloured dot and what it means.
  return element("span", "chip " + kind, text);
}

function setChip(node, kind, text) {
  node.className = "chip " + kind;
  setText(node, text);
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
  if (!entries.length) list.append(element("li", "empty", empty));
}

// The token and the API ----------------------------------------------------------------------

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

class ApiFailure extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = authorization();
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new ApiFailure(0, "the server cannot be reached: is `logos serve` still running?");
  }
  if (response.status === 401) { showLogin(); throw new ApiFailure(401, "the token was refused"); }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiFailure(response.status, data.error || response.statusText);
  return data;
}

// Numbers and states as people read them ----------------------------------------------------

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

const STOP_WORDS = {
  final: ["ok", "done"], canceled: ["stopped", "stopped"], error: ["failed", "failed"],
  max_steps: ["cut", "step limit reached"], max_cost: ["cut", "cost limit reached"],
  max_time: ["cut", "time limit reached"], max_tokens: ["cut", "token limit reached"],
};

function runState(run) {
  // [look, words] of a run in the list: waiting for a person, running, or how it ended.
  if (run.status === "running") {
    return run.pending_approvals && run.pending_approvals.length ? ["waiting", "waiting for approval"] : ["running", "running"];
  }
  if (run.status === "interrupted") return ["failed", "interrupted"];
  const [look, words] = STOP_WORDS[run.stop_reason] || ["cut", (run.stop_reason || "ended").replaceAll("_", " ")];
  return [look, words];
}

// Seen and unread: how far you read each run and project, kept in this browser.

function seenOf(kind, id) {
  return Number(localStorage.getItem(SEEN_KEY + kind + ":" + id) || 0);
}

function markSeen(kind, id, events) {
  if (events > seenOf(kind, id)) localStorage.setItem(SEEN_KEY + kind + ":" + id, String(events));
}

// Layout: views, the drawer, the scroller, the keyboard --------------------------------------

function showView(name) {
  // WHY read again as shown: a run may have saved a session since the list was read.
  if (name === "sessions") refreshSessions().catch(() => {});
  if (name === "memory") refreshNotes().catch(() => {});
  document.body.dataset.view = name;
  for (const view of document.querySelectorAll("main .view")) view.hidden = view.dataset.view !== name;
  closeDrawer();
}

function openDrawer() {
  document.body.classList.add("drawer-open");
  $("menu-button").setAttribute("aria-expanded", "true");
  void $("sidebar").offsetWidth;  // WHY: lay it out as shown, so it can take the focus
  $("search").focus();
}

function closeDrawer() {
  if (!document.body.classList.contains("drawer-open")) return;
  document.body.classList.remove("drawer-open");
  $("menu-button").setAttribute("aria-expanded", "false");
}

function scroller() {
  // The element that scrolls the main pane: the pane itself on wide screens, else the page.
  const main = $("main");
  return getComputedStyle(main).overflowY === "auto" ? main : document.scrollingElement;
}

function go(hash) {
  history.replaceState(null, "", location.pathname + (hash ? "#" + hash : ""));
}

function onKey(event) {
  if (event.key === "Escape") {
    if (document.body.classList.contains("drawer-open")) { closeDrawer(); $("menu-button").focus(); return; }
    if (closeOpenDiff()) return;
    const open = document.querySelector("details.form[open]");
    if (open) { open.open = false; open.querySelector("summary").focus(); }
    return;
  }
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    const form = event.target.closest && event.target.closest("form");
    if (form && event.target.tagName === "TEXTAREA") {
      event.preventDefault();
      form.requestSubmit();
    }
  }
}

// The run viewer -------------------------------------------------------------------------------

const view = freshView(null);
window.logosShown = [];  // the ids of the events shown, in order (tests check each appears once)

function freshView(runId) {
  return {
    runId, lastId: 0, prose: null, dirty: new Set(), cards: new Map(), jobs: new Map(), openApprovals: [],
    runner: "", approval: "", controller: null, queue: [], pumping: false, finished: false, stopReason: null,
    steps: 0, input: 0, output: 0, cost: null, waiting: 0,
  };
}

function openRun(runId) {
  if (view.controller) view.controller.abort();
  Object.assign(view, freshView(runId));
  window.logosShown = [];
  $("transcript").replaceChildren();
  for (const id of ["run-end", "run-meta", "run-stats"]) $(id).textContent = "";
  const known = knownRuns.find((run) => run.id === runId);
  setText($("run-title"), known && known.task ? known.task : "Run " + runId);
  setChip($("run-state"), "running", "connecting");
  $("cancel-button").hidden = true;
  following = true;
  go("run=" + encodeURIComponent(runId));
  showView("run");
  markSelected();
  openChanges("run", runId);
  if (!viewing()) refreshRuns().catch(() => {});
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
  while (!ended() && wanted() && !leaving) {
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
    // WHY here: a finished block's Markdown is drawn within the frame's budget, not after it.
    for (const block of view.dirty) {
      if (block !== view.prose) { setMarkdown(block, block.logosPending); view.dirty.delete(block); }
    }
  }
  view.queue.splice(0, index);
  renderDirty(view.dirty);
  markSeen("run", view.runId, view.lastId);
  if (following) requestAnimationFrame(scrollToEnd);
  if (view.queue.length) setTimeout(pump, 0);
  else view.pumping = false;
}

function renderDirty(dirty) {
  // Prose blocks that grew: rendered once per frame, not once per delta.
  for (const node of dirty) setMarkdown(node, node.logosPending);
  dirty.clear();
}

// WHY follow by a flag the reader sets by scrolling: measuring the timeline after each batch
// would lay out all of it, many times a frame.
let following = true;

function timelineEnd() {
  // How far below the window's bottom the open timeline ends (on a phone the page scrolls,
  // and the details follow the timeline: its end is not the page's).
  const timeline = document.body.dataset.view === "project" ? $("project-chat") : $("transcript");
  return timeline.getBoundingClientRect().bottom - window.innerHeight;
}

function scrollToEnd() {
  const box = scroller();
  if (box !== document.scrollingElement) box.scrollTop = box.scrollHeight;
  else window.scrollTo(0, Math.max(0, window.scrollY + timelineEnd() + $("project-send").offsetHeight));
}

function noticeScroll() {
  const box = scroller();
  following = box !== document.scrollingElement
    ? box.scrollHeight - box.scrollTop - box.clientHeight < 80
    : timelineEnd() < 160;
}

function timelineItem(node) {
  $("transcript").append(node);
  view.prose = null;
  return node;
}

function proseBlock() {
  if (!view.prose) {
    view.prose = element("div", "prose md");
    view.prose.logosPending = "";
    $("transcript").append(view.prose);
  }
  return view.prose;
}

function appendProse(block, text, dirty) {
  block.logosPending += text;
  dirty.add(block);
}

// Command cards: a state with its own look and words, the command, its output, where it ran.

function newCard(command) {
  const node = element("div", "command running");
  const head = element("div", "card-head");
  const state = chip("running", "running");
  state.classList.add("card-state");
  const foot = element("span", "card-foot");
  head.append(state, foot);
  const line = element("pre", "line");
  line.textContent = "$ " + command;
  const approval = element("div", "card-approval");
  node.append(head, line, approval);
  return { node, state, foot, approval, command, result: null };
}

function setCardState(card, kind, words) {
  card.node.classList.remove("running", "waiting", "ok", "failed", "denied", "job");
  card.node.classList.add(kind);
  setChip(card.state, kind, words);
  card.state.classList.add("card-state");
}

function cardFor(turn, index, command) {
  const key = turn + ":" + index;
  let card = view.cards.get(key);
  if (!card) {
    card = Object.assign(newCard(command), { key, turn, index });
    view.cards.set(key, card);
    timelineItem(card.node);
  }
  return card;
}

function openCardFor(cards, command) {
  // The latest command of that text still without a result (approvals name no block).
  let found = null;
  for (const card of cards.values()) if (card.command === command && !card.result) found = card;
  return found;
}

function statusOf(result) {
  // [ok, look, words] of a command's end.
  if (result.error && result.error.startsWith(DECLINED)) {
    const reason = result.error.slice(DECLINED.length).replace(/^: /, "").replace(/^ \(no reason given\)$/, "");
    return [false, "denied", "denied" + (reason ? ": " + reason : "")];
  }
  if (result.error === NEVER_RUN) return [false, "denied", "not run (never-run mode)"];
  if (result.error) return [false, "failed", "could not run: " + result.error];
  if (result.timed_out) return [false, "failed", "timed out"];
  if (result.oom_killed) return [false, "failed", "killed: out of memory"];
  if (result.signal) return [false, "failed", "killed by signal " + result.signal];
  if (result.exit_code === null || result.exit_code === undefined) return [false, "failed", "no exit code"];
  return [result.exit_code === 0, result.exit_code === 0 ? "ok" : "failed", "exit " + result.exit_code];
}

function ran(result) {
  // Whether the command ran at all (a denied one did not: no output, no duration).
  return !(result.error && (result.error.startsWith(DECLINED) || result.error === NEVER_RUN));
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
  for (const [kind, text] of pieces) {
    live.node.append(element("span", kind, text));
    live.length += text.length;
  }
  while (live.length > LIVE_KEEP && live.node.childNodes.length > 1) {
    live.length -= live.node.firstChild.textContent.length;
    live.node.firstChild.remove();
  }
}

function fillResult(card, result, where, showAll) {
  // A card's end: its state, its output (folded), where and how long it ran.
  card.result = result;
  card.live = null;
  card.node.querySelectorAll(".output, .show-all, .blocked").forEach((node) => node.remove());
  if (result.job) {
    setCardState(card, "job", "went on as job " + result.job.id + " (running in the background)");
  } else {
    const [, look, words] = statusOf(result);
    setCardState(card, look, words);
  }
  if (!ran(result)) { setText(card.foot, "did not run"); return; }
  const text = outputText(result);
  const saved = (result.stdout_file && result.stdout_dropped_bytes) || (result.stderr_file && result.stderr_dropped_bytes);
  const shown = folded(text || (result.job ? "(no output yet)" : "(no output)"));
  const output = element("pre", "output" + (text ? "" : " none"), shown.text);
  card.node.append(output);
  if (showAll && (shown.cut || saved)) {
    card.node.append(button("show-all link", "Show all output", () => showAll(card, output, result)));
  }
  if (result.blocked && result.blocked.length) {
    card.node.append(element("div", "blocked", "the sandbox's proxy refused: " + result.blocked.join("; ")));
  }
  setText(card.foot, [seconds(result.duration_s), where].filter(Boolean).join(" · "));
}

function runPlace() {
  return view.runner === "sandbox" ? "in this run's sandbox" : view.runner ? "on this machine (local bash)" : "";
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
  if (result.job) view.jobs.set(result.job.id, card);
  fillResult(card, result, runPlace(), showAll);
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

function approvalBox(event, answer, always) {
  // Approve, deny with a reason, or allow commands like it for good; what became of an answer
  // that came too late is said in the box, in words.
  const box = element("div", "approval-box");
  box.dataset.id = event.id;
  const asks = element("span", "asks", (event.agent || "This command") + " waits for your approval");
  const reason = element("input", "reason");
  reason.placeholder = "reason, if you deny (the model reads it)";
  reason.setAttribute("aria-label", "reason for denying");
  const note = element("span", "approval-note");
  note.setAttribute("role", "status");
  const act = async (approve, forGood) => {
    note.textContent = "";
    try {
      await answer(approve, approve ? null : (reason.value || null), forGood, note);
    } catch (error) {
      note.textContent = error.message;
      if (error.status === 409 || error.status === 404) box.querySelectorAll("button, input").forEach((node) => node.remove());
    }
  };
  const actions = element("div", "actions");
  actions.append(button("approve primary", "Approve", () => act(true, false)), reason,
    button("deny danger", "Deny", () => act(false, false)));
  if (always) actions.append(button("always ghost", "Always allow commands like this", () => act(true, true)));
  box.append(asks, actions, note);
  return box;
}

function askInline(event) {
  // A command waits: its card says so, and holds the question.
  const card = openCardFor(view.cards, event.command);
  const box = approvalBox(event, (approve, reason, forGood, note) => forGood
    ? alwaysAllow(event, note) : decide(event.id, approve, reason), true);
  if (card) {
    setCardState(card, "waiting", "waiting for approval");
    card.approval.append(box);
  } else {
    const loose = timelineItem(newCard(event.command).node);
    loose.classList.replace("running", "waiting");
    loose.querySelector(".card-approval").append(box);
  }
  view.openApprovals.push({ command: event.command, box, card });
  view.waiting += 1;
  showRunState();
}

function settleInline(event) {
  const at = view.openApprovals.findIndex((open) => open.command === event.command);
  const said = describeDecision(event);
  if (at >= 0) {
    const open = view.openApprovals.splice(at, 1)[0];
    settled(open.box, event.action, said);
    if (open.card && (event.action === "yes" || event.action === "edit")) setCardState(open.card, "running", "running");
    if (open.card && event.action === "no") {
      setCardState(open.card, "denied", said);
      open.box.remove();  // WHY: the card's state says it, in the same words
    }
    view.waiting = Math.max(0, view.waiting - 1);
    showRunState();
    return;
  }
  const card = openCardFor(view.cards, event.command);
  // WHY auto only where the run asks: in a run that asks nothing, every command is auto.
  if (event.action === "auto" && view.approval !== "confirm") return;
  if (card) card.approval.append(element("div", "decided " + event.action, said));
  else timelineItem(element("div", "notice", "`" + event.command + "`: " + said));
}

function settled(box, action, said) {
  // The question answered: the box keeps what was decided, without the question's look.
  box.classList.add("answered");
  box.replaceChildren(element("span", "decided " + action, said));
}

function describeDecision(event) {
  const reason = event.reason ? ": " + event.reason : "";
  if (event.action === "yes") return "you approved it";
  if (event.action === "no") return event.reason === "expired" ? "denied: nobody answered in time" : "denied" + reason;
  if (event.action === "auto") return "ran without asking (an approval rule allows it)" + reason;
  if (event.action === "edit") return "edited to `" + event.edited_command + "`";
  return event.action + reason;
}

function showRunState() {
  if (view.finished && view.stopReason !== null) {
    const [look, words] = runState({ status: "finished", stop_reason: view.stopReason });
    setChip($("run-state"), look, words);
  } else if (view.waiting) setChip($("run-state"), "waiting", "waiting for approval");
  else setChip($("run-state"), "running", "running");
}

function showStats() {
  const parts = [view.steps + (view.steps === 1 ? " step" : " steps"), tokens(view.input, view.output), dollars(view.cost)];
  $("run-stats").textContent = parts.filter(Boolean).join(" · ");
}

function showEvent(type, event) {
  if (type === "prompt") {
    const prompt = timelineItem(element("div", "prompt"));
    prompt.append(element("div", "author", "you"), element("div", "prompt-text", event.content));
  } else if (type === "start") {
    view.runner = event.runner;
    view.approval = event.approval;
    $("run-meta").replaceChildren(
      metaItem("model", event.model), metaItem("runs", event.runner === "sandbox" ? "in a sandbox" : "local bash"),
      metaItem("in", event.cwd), metaItem("approval", event.approval));
    showRunState();
    $("cancel-button").hidden = viewing();
  } else if (type === "delta") appendProse(proseBlock(), event.text, view.dirty);
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
  } else if (type === "files_changed") {
    timelineItem(changedFilesNote(event, "turn " + event.key));
    refreshChanges();
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
    view.stopReason = event.stop_reason;
    view.finished = true;
    showRunState();
    $("run-end").textContent = "finished: " + event.stop_reason + " after " + seconds(event.wall_s)
      + (event.error ? " · " + event.error : "");
    $("cancel-button").hidden = true;
    for (const open of view.openApprovals) settled(open.box, "", "no longer waiting: the run ended");
    view.openApprovals = [];
    view.waiting = 0;
    refreshChanges();
    if (!viewing()) refreshSessions().catch(() => {});
  }
}

function metaItem(label, value) {
  const item = element("span", "meta-item");
  item.append(element("span", "meta-label", label + " "), element("span", "meta-value", value));
  return item;
}

// The sidebar's runs ---------------------------------------------------------------------------

let knownRuns = [];

const streams = new Set();  // the controllers of the page's open streams (closed as it is left)

async function followChanges(refreshers) {
  // The server says when a list changed (a `runs` or `projects` event, on one connection:
  // a browser holds few to one server); that list is read again. A dropped stream comes
  // back after a second.
  while (!leaving) {
    const controller = new AbortController();
    streams.add(controller);
    try {
      const response = await fetch("/v1/changes", { headers: authorization(), signal: controller.signal });
      if (response.ok) {
        await readServerEvents(response.body.getReader(), () => !leaving, (id, type) => {
          if (refreshers[type]) refreshers[type]().catch(() => {});
        });
      }
    } catch (error) {
      // the server went away or the network dropped: try again below
    } finally {
      streams.delete(controller);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

let leaving = false;

function closeStreams() {
  // WHY: a page kept in the browser's back-forward cache would keep its streams open, and
  // the browser's few connections to the server with them.
  leaving = true;
  for (const controller of streams) controller.abort();
  for (const state of [view, chat]) if (state.controller) state.controller.abort();
}

const runItems = new Map();  // run id → its item, kept across refreshes so a click never lands on a stale one

function runItem(run) {
  let entry = runItems.get(run.id);
  if (!entry) {
    const item = element("li", "nav-item run-item");
    item.dataset.id = run.id;
    const open = element("a", "nav-link");
    open.href = "#run=" + encodeURIComponent(run.id);
    open.onclick = (event) => { event.preventDefault(); openRun(run.id); };
    const title = element("span", "nav-title");
    const unread = element("span", "unread", "new");
    const state = chip("running", "");
    const meta = element("span", "nav-meta");
    const steps = element("span", "steps");
    const when = element("span", "when");
    meta.append(state, steps, when);
    open.append(title, unread, meta);
    item.append(open);
    entry = { item, open, title, unread, state, steps, when };
    runItems.set(run.id, entry);
  }
  return entry;
}

async function refreshRuns() {
  const { runs } = await api("GET", "/v1/runs");
  knownRuns = runs;
  const items = runs.map((run) => {
    const entry = runItem(run);
    const live = run.live || {};
    const elapsed = run.wall_s !== undefined && run.wall_s !== null ? run.wall_s : sinceIso(run.created_at, run.ended_at);
    const [look, words] = runState(run);
    entry.item.className = "nav-item run-item " + look + (run.id === view.runId ? " selected" : "");
    setText(entry.title, run.task || run.id);
    entry.open.title = (run.task || run.id) + " · " + (run.model || "") + " · " + run.runner;
    setChip(entry.state, look, words);
    const steps = typeof run.turns === "number" ? run.turns : (live.steps || 0);
    setText(entry.steps, steps);
    entry.steps.title = steps + " model turns";
    setText(entry.when, seconds(elapsed));
    const unread = run.id !== view.runId && run.events > seenOf("run", run.id);
    entry.unread.hidden = !unread;
    entry.item.classList.toggle("has-unread", unread);
    if (run.id === view.runId) updateRunPane(run);
    return entry.item;
  });
  const listed = new Set(runs.map((run) => run.id));
  for (const id of runItems.keys()) if (!listed.has(id)) runItems.delete(id);
  const list = $("run-list");
  const current = Array.from(list.children);
  if (current.length !== items.length || current.some((item, index) => item !== items[index])) list.replaceChildren(...items);
  if (!runs.length) list.append(element("li", "empty", "No runs yet."));
  applySearch();
}

function updateRunPane(run) {
  const live = run.live || {};
  const usage = run.usage || {};
  const input = run.usage ? usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens : live.input_tokens;
  const output = run.usage ? usage.output_tokens : live.output_tokens;
  const cost = run.cost_usd !== null && run.cost_usd !== undefined ? run.cost_usd : live.cost_usd;
  const elapsed = run.wall_s !== undefined && run.wall_s !== null ? run.wall_s : sinceIso(run.created_at, run.ended_at);
  if (run.task) setText($("run-title"), run.task);
  const rows = [["Model", run.model || ""], ["Runner", run.runner === "sandbox" ? "sandbox" : "local bash"],
    ["Approval", run.approval || ""], ["Elapsed", seconds(elapsed)],
    ["Tokens", tokens(input || 0, output || 0) || "none yet"], ["Cost", dollars(cost) || "unknown"]];
  $("run-facts").replaceChildren(...rows.filter(([, value]) => value !== "").flatMap(([label, value]) =>
    [element("dt", "", label), element("dd", "", value)]));
  $("cancel-button").hidden = viewing() || run.status !== "running";
}

function markSelected() {
  for (const item of $("run-list").children) item.classList.toggle("selected", item.dataset.id === view.runId);
  for (const item of $("project-list").children) item.classList.toggle("selected", item.dataset.id === chat.projectId && document.body.dataset.view === "project");
}

async function stop(runId) {
  try { await api("POST", "/v1/runs/" + encodeURIComponent(runId) + "/cancel"); }
  catch (error) { $("run-end").textContent = error.message; }
  refreshRuns().catch(() => {});
}

function applySearch() {
  // The sidebar shows the projects and runs whose name or task holds the search's words.
  const words = $("search").value.trim().toLowerCase();
  for (const list of [$("project-list"), $("run-list")]) {
    let shown = 0;
    for (const item of list.querySelectorAll(".nav-item")) {
      const match = !words || item.textContent.toLowerCase().includes(words);
      item.hidden = !match;
      if (match) shown += 1;
    }
    const none = list.querySelector(".no-match");
    if (words && !shown && list.querySelector(".nav-item")) {
      if (!none) list.append(element("li", "empty no-match", "Nothing matches “" + $("search").value.trim() + "”."));
    } else if (none) none.remove();
  }
}

// Waiting for approval: every command that waits, across runs and projects --------------------

let shownApprovals = null;

async function refreshApprovals() {
  const { approvals } = await api("GET", "/v1/approvals");
  const badge = $("approvals-badge");
  badge.hidden = !approvals.length;
  setText(badge, approvals.length + " waiting for approval");
  // WHY only when the questions changed: a reason being typed must not be drawn away.
  const asked = approvals.map((pending) => pending.id).join(" ") + "|" + knownProjects.length + "|" + knownRuns.length;
  if (asked === shownApprovals) return;
  shownApprovals = asked;
  fillList("approval-list", approvals, "pending", "Nothing waits for your approval.", (item, pending) => {
    // A project's agent asks under "PROJECT/AGENT": its chat shows the question too.
    const [project, agent] = pending.run.includes("/") ? pending.run.split("/") : [null, null];
    const head = element("div", "pending-head");
    const origin = project
      ? (knownProjects.find((known) => known.id === project) || { name: "a project" }).name + " · " + agent
      : (knownRuns.find((run) => run.id === pending.run) || { task: "a run" }).task;
    const show = element("a", "origin", origin);
    show.href = project ? "#project=" + encodeURIComponent(project) : "#run=" + encodeURIComponent(pending.run);
    show.onclick = (event) => { event.preventDefault(); if (project) openProject(project); else openRun(pending.run); };
    head.append(show);
    item.append(head, element("code", "cmd", pending.summary));
    item.append(approvalBox(pending, (approve, reason) => project
      ? api("POST", "/v1/projects/" + encodeURIComponent(project) + "/approvals/" + pending.id, { approve, reason, always: false })
        .then(() => refreshApprovals())
      : decide(pending.id, approve, reason), false));
  });
}

async function decide(id, approve, reason) {
  try {
    await api("POST", "/v1/approvals/" + id, { approve, reason });
  } finally {
    setTimeout(() => refreshApprovals().catch(() => {}), 1500);
  }
}

async function alwaysAllow(event, note) {
  const rule = await api("POST", "/v1/approval-rules", { command: event.command });
  note.textContent = "rule added: " + rule.name + " (" + rule.file + ")";
  await decide(event.id, true, null);
}

// Starting a run --------------------------------------------------------------------------------

const RUN_FORM_WORDS = [
  // The API's names of the fields, and the form's: an error speaks of what the person sees.
  [/runner\.allowed_paths/g, "Directory"], [/runner\.workdir/g, "Directory"],
  [/limits\.max_steps/g, "Max steps"], [/limits\.max_cost_usd/g, "Max cost"],
  [/limits\.max_wall_s/g, "Max time"], [/limits\.timeout_s/g, "Command timeout"],
  [/\bfield 'prompt'/g, "the task"], [/approval "auto"/g, "approval “auto”"],
];

function inFormWords(message, words) {
  return words.reduce((text, [pattern, said]) => text.replace(pattern, said), message)
    .replace(/: e\.g\. \[\{.*\}\]/, "");
}

function number(id) {
  const text = $(id).value.trim();
  return text ? Number(text) : undefined;
}

function fieldError(field, errorId, message) {
  $(errorId).textContent = message;
  if (field) { field.setAttribute("aria-invalid", "true"); field.focus(); }
}

function syncRunnerField() {
  const sandbox = $("runner").value === "sandbox";
  setText($("workdir-label"), sandbox ? "Directory the sandbox sees (and may write)" : "Directory");
  $("workdir").placeholder = sandbox ? "required: /path/to/project" : "(the server's: " + (serverInfo.workdir || "") + ")";
  $("workdir").required = sandbox;
}

async function start(event) {
  event.preventDefault();
  $("start-error").textContent = "";
  for (const field of $("start-form").querySelectorAll("[aria-invalid]")) field.removeAttribute("aria-invalid");
  if (!$("prompt").value.trim()) return fieldError($("prompt"), "start-error", "Write the task first: what should the model do?");
  const runner = { kind: $("runner").value };
  const directory = $("workdir").value.trim();
  if (runner.kind === "sandbox" && !directory) {
    return fieldError($("workdir"), "start-error", "Give the sandbox a directory: it sees only that folder (and may write in it).");
  }
  if (directory && !directory.startsWith("/")) {
    return fieldError($("workdir"), "start-error", "Give the directory as a full path, starting with /.");
  }
  if (directory && runner.kind === "local") runner.workdir = directory;
  if (directory && runner.kind === "sandbox") runner.allowed_paths = [{ path: directory, read_only: false }];
  const limits = { max_steps: number("max-steps"), max_cost_usd: number("max-cost"),
    max_wall_s: number("max-wall"), timeout_s: number("timeout") };
  const body = { prompt: $("prompt").value, runner, limits: JSON.parse(JSON.stringify(limits)) };
  if ($("approval").value) body.approval = $("approval").value;
  if ($("session").value) body.session = $("session").value;
  try {
    const started = await api("POST", "/v1/runs", body);
    $("prompt").value = "";
    openRun(started.run);
    refreshRuns().catch(() => {});
  } catch (error) {
    const field = /allowed_paths|workdir/.test(error.message) ? $("workdir") : null;
    fieldError(field, "start-error", inFormWords(error.message, RUN_FORM_WORDS));
  }
}

// Sessions and memory ------------------------------------------------------------------------

async function refreshSessions() {
  const { sessions } = await api("GET", "/v1/sessions");
  const select = $("session");
  const chosen = select.value;
  select.replaceChildren(element("option", "", "a new session"));
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
    const remove = button("delete ghost", "Delete", async () => {
      try { await api("DELETE", "/v1/sessions/" + session.id); refreshSessions(); }
      catch (error) { item.append(element("span", "error", error.message)); }
    }, "Delete the session " + (session.title || session.id));
    item.append(open, element("small", "muted", session.started_at + " · " + session.runner), remove);
    return item;
  }));
  if (!sessions.length) list.append(element("li", "empty", "No saved sessions."));
  select.value = chosen;
}

async function showSession(id) {
  const session = await api("GET", "/v1/sessions/" + id);
  $("session-view").hidden = false;
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
    const said = element("span", "note-text");
    said.append(element("strong", "", note.key), ": " + note.text);
    item.append(said);
    item.append(button("forget ghost", "Forget", async () => {
      await api("DELETE", "/v1/memory/" + encodeURIComponent(note.key));
      refreshNotes();
    }, "Forget the note " + note.key));
    return item;
  }));
  if (!notes.length) $("note-list").append(element("li", "empty", "No notes yet."));
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

// Wiring --------------------------------------------------------------------------------------

let serverInfo = {};

function showLogin() {
  $("app").hidden = true;
  $("login").hidden = false;
}

function route() {
  // The view the URL's fragment names (#run=…, #project=…, #new-run, …), else the start.
  const fragment = new URLSearchParams(location.hash.slice(1));
  const run = fragment.get("run");
  const project = fragment.get("project");
  const name = location.hash.slice(1);
  if (run) openRun(run);
  else if (project && typeof openProject === "function") openProject(project).catch((error) => { $("project-error").textContent = error.message; });
  else if (viewing() && knownRuns.length) openRun(knownRuns[0].id);
  else if (["new-run", "new-project", "sessions", "memory", "batch"].includes(name)) showView(name);
  else showView(viewing() ? "batch" : "home");
}

function wire() {
  $("menu-button").onclick = () => document.body.classList.contains("drawer-open") ? closeDrawer() : openDrawer();
  $("scrim").onclick = closeDrawer;
  $("search").addEventListener("input", applySearch);
  document.addEventListener("keydown", onKey);
  for (const link of document.querySelectorAll("[data-go]")) {
    link.onclick = (event) => {
      event.preventDefault();
      go(link.dataset.go);
      showView(link.dataset.go || "home");
      const focus = document.querySelector("main .view:not([hidden]) [data-autofocus]");
      if (focus) focus.focus();
    };
  }
  window.addEventListener("hashchange", route);
  window.addEventListener("pagehide", closeStreams);
  window.addEventListener("pageshow", (event) => { if (event.persisted) location.reload(); });
  // WHY a size watch: a reply, an output or a diff grows inside what is already drawn; the
  // view follows its end while the reader is there.
  const follower = new ResizeObserver(() => { if (following) scrollToEnd(); });
  follower.observe($("transcript"));
  follower.observe($("project-chat"));
  $("main").addEventListener("scroll", noticeScroll, { passive: true });
  window.addEventListener("scroll", noticeScroll, { passive: true });
}

async function main() {
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    main();
  };
  $("batch-file").onchange = () => openBatchFile($("batch-file").files[0]);
  // WHY the shell shows before the API answers: its frame paints at once, the lists fill in.
  if (!takeFragment()) { showLogin(); return; }
  document.body.dataset.mode = mode();
  try {
    if (mode() === "batch") await openServedBatch();
    else if (viewing()) await refreshRuns();
    else {
      serverInfo = await api("GET", "/v1/server");
      await Promise.all([refreshRuns(), refreshApprovals(), refreshSessions(), refreshNotes()]);
    }
  } catch (error) {
    if (error.status !== 401) $("status").textContent = "cannot reach the server: " + error.message;
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  wire();
  $("status").textContent = { serve: "connected", run: "viewing a saved run", batch: "viewing a batch report" }[mode()] || "";
  if (serverInfo.model) setText($("server-model"), "model " + serverInfo.model);
  $("cancel-button").onclick = () => stop(view.runId);
  if (!viewing()) {
    $("start-form").onsubmit = start;
    $("runner").onchange = syncRunnerField;
    syncRunnerField();
    $("note-form").onsubmit = saveNote;
    $("refresh-sessions").onclick = refreshSessions;
    followChanges({ runs: refreshRuns, projects: () => refreshProjects() });
    setInterval(() => { if (!document.hidden) refreshRuns().catch(() => {}); }, LIST_EVERY_MS);
    setInterval(() => refreshApprovals().catch(() => {}), LIST_EVERY_MS);
  }
  window.dispatchEvent(new Event("logos-ready"));
  route();
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
  const width = Math.min(360, Math.max(240, $("batch-report").clientWidth - 16));
  const bars = uPlot.paths.bars({ size: [0.6, 80] });
  const outcomes = $("batch-outcomes");
  outcomes.replaceChildren();
  new uPlot({
    title: "Outcome by task", width, height: 220, legend: { show: false },
    scales: { x: { time: false, range: [-0.5, OUTCOMES.length - 0.5] }, y: { range: [0, Math.max(...counts) + 1] } },
    axes: [{ values: (self, ticks) => ticks.map((tick) => OUTCOMES[tick] || "") , splits: () => OUTCOMES.map((_, at) => at) }, {}],
    series: [{}, { label: "tasks", fill: "#5b8def", stroke: "#2b5cc4", paths: bars, points: { show: false } }],
  }, [OUTCOMES.map((_, at) => at), counts], outcomes);
  const bins = Math.min(20, Math.max(1, Math.ceil(Math.sqrt(times.length))));
  const top = Math.max(...times, 1e-9);
  const step = top / bins;
  const heights = new Array(bins).fill(0);
  for (const time of times) heights[Math.min(bins - 1, Math.floor(time / step))] += 1;
  const timesChart = $("batch-times");
  timesChart.replaceChildren();
  new uPlot({
    title: "Time per task (s)", width, height: 220, legend: { show: false },
    scales: { x: { time: false }, y: { range: [0, Math.max(...heights) + 1] } },
    series: [{}, { label: "tasks", fill: "#8bc48a", stroke: "#3c8b3a", paths: bars, points: { show: false } }],
  }, [heights.map((_, at) => (at + 0.5) * step), heights], timesChart);
}

document.addEventListener("DOMContentLoaded", main);
