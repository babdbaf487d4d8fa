// The logos page: start a task, watch it stream, approve commands, browse sessions and memory.
// The token comes from the URL fragment (#token=…), which browsers never send to a server; it
// is kept in sessionStorage (gone with the tab) and sent as a bearer header. No dependencies.
"use strict";

const TOKEN_KEY = "logos-token";
const $ = (id) => document.getElementById(id);

function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);  // out of the address bar and history
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

async function api(method, path, body) {
  const headers = { authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
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
  if (text !== undefined) node.textContent = text;
  return node;
}

// A run's events ----------------------------------------------------------------------------

const view = { runId: null, lastId: 0, prose: null, commands: new Map(), controller: null };

function resetTranscript(runId) {
  if (view.controller) view.controller.abort();
  Object.assign(view, { runId, lastId: 0, prose: null, commands: new Map(), controller: null });
  $("transcript").replaceChildren();
  $("run-end").textContent = "";
  $("run-id").textContent = runId;
  $("cancel-button").hidden = false;
}

function proseBlock() {
  if (!view.prose) {
    view.prose = element("div", "prose");
    $("transcript").append(view.prose);
  }
  return view.prose;
}

function commandBlock(event) {
  const key = event.turn + ":" + event.index;
  let block = view.commands.get(key);
  if (!block) {
    block = element("div", "command");
    block.append(element("div", "line", "$ " + event.command));
    $("transcript").append(block);
    view.commands.set(key, block);
    view.prose = null;
  }
  return block;
}

function describeResult(result) {
  if (result.error) return result.error;
  if (result.timed_out) return "timed out";
  const output = [result.stdout, result.stderr].filter(Boolean).join("\n").trim();
  if (result.job) return output || "(no output yet)";
  const status = result.exit_code === 0 ? "" : "exit code " + result.exit_code + "\n";
  return status + (output || "(no output)");
}

function showEvent(type, event) {
  if (type === "delta") proseBlock().append(event.text);
  else if (type === "command_start") commandBlock(event);
  else if (type === "command_result") {
    const block = commandBlock(event);
    const ok = !event.result.error && event.result.exit_code === 0 && !event.result.timed_out;
    if (!event.result.job) block.classList.add(ok ? "ok" : "failed");
    block.append(element("pre", "output", describeResult(event.result)));
  } else if (type === "confirm_required") refreshApprovals();
  else if (type === "approval") {
    const said = event.action === "no" ? "denied" + (event.reason ? ": " + event.reason : "")
      : event.action;
    $("transcript").append(element("div", "notice", "approval of `" + event.command + "`: " + said));
    view.prose = null;
    refreshApprovals();
  } else if (type === "job_start") {
    commandBlock(event).append(element("div", "notice", "→ job " + event.id + ", running"));
  } else if (type === "job_end") {
    $("transcript").append(element("div", "notice", "job " + event.id + " ended: " + describeResult(event.result)));
    view.prose = null;
  } else if (type === "step_end" && event.step.role === "assistant") view.prose = null;
  else if (type === "retry") $("transcript").append(element("div", "notice", "retrying: " + event.reason));
  else if (type === "error") $("run-end").textContent = "error: " + event.message;
  else if (type === "done") {
    $("run-end").append(" finished: " + event.stop_reason);
    $("cancel-button").hidden = true;
    refreshSessions();
  }
}

async function watch(runId) {
  resetTranscript(runId);
  let finished = false;
  while (!finished && view.runId === runId) {
    const controller = new AbortController();
    view.controller = controller;
    const headers = { authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
    if (view.lastId) headers["last-event-id"] = String(view.lastId);
    try {
      const response = await fetch("/v1/runs/" + runId + "/events", { headers, signal: controller.signal });
      if (!response.ok) { $("run-end").textContent = (await response.json()).error; return; }
      finished = await readEvents(response.body.getReader());
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    if (!finished) await new Promise((resolve) => setTimeout(resolve, 500));  // then resume
  }
}

async function readEvents(reader) {
  // Server-sent events: fields until a blank line; `id` is remembered for Last-Event-ID.
  const decoder = new TextDecoder();
  let buffer = "";
  let fields = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (fields.data !== undefined) {
          view.lastId = Number(fields.id || view.lastId);
          showEvent(fields.event, JSON.parse(fields.data));
          if (fields.event === "done") return true;
        }
        fields = {};
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, "");
        fields[name] = name === "data" && fields.data !== undefined ? fields.data + "\n" + value : value;
      }
    }
  }
}

// Approvals, sessions, memory ---------------------------------------------------------------

async function refreshApprovals() {
  const { approvals } = await api("GET", "/v1/approvals");
  const list = $("approval-list");
  list.replaceChildren(...approvals.map((pending) => {
    const item = element("li", "pending");
    item.dataset.id = pending.id;
    item.append(element("code", "", pending.summary), " ");
    const approve = element("button", "approve", "Approve");
    approve.onclick = () => decide(pending.id, true, null);
    const reason = element("input", "reason");
    reason.placeholder = "reason (sent to the model)";
    const deny = element("button", "deny", "Deny");
    deny.onclick = () => decide(pending.id, false, reason.value || null);
    item.append(approve, " ", reason, " ", deny);
    return item;
  }));
  if (!approvals.length) list.append(element("li", "notice", "nothing is waiting"));
}

async function decide(id, approve, reason) {
  try { await api("POST", "/v1/approvals/" + id, { approve, reason }); } catch (error) { alert(error.message); }
  refreshApprovals();
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
    const remove = element("button", "delete", "Delete");
    remove.onclick = async () => {
      try { await api("DELETE", "/v1/sessions/" + session.id); } catch (error) { alert(error.message); }
      refreshSessions();
    };
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
    const forget = element("button", "forget", "Forget");
    forget.onclick = async () => { await api("DELETE", "/v1/memory/" + encodeURIComponent(note.key)); refreshNotes(); };
    item.append(forget);
    return item;
  }));
}

// Wiring --------------------------------------------------------------------------------------

function showLogin() {
  $("app").hidden = true;
  $("login").hidden = false;
}

async function start(event) {
  event.preventDefault();
  $("start-error").textContent = "";
  const runner = { kind: $("runner").value };
  const directory = $("workdir").value.trim();
  if (directory && runner.kind === "local") runner.workdir = directory;
  if (directory && runner.kind === "sandbox") runner.allowed_paths = [{ path: directory, read_only: false }];
  const body = { prompt: $("prompt").value, runner };
  if ($("approval").value) body.approval = $("approval").value;
  if ($("session").value) body.session = $("session").value;
  try {
    const started = await api("POST", "/v1/runs", body);
    watch(started.run);
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

async function main() {
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    main();
  };
  if (!takeTokenFromFragment()) { showLogin(); return; }
  try {
    await Promise.all([refreshApprovals(), refreshSessions(), refreshNotes()]);
  } catch (error) {
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("status").textContent = "connected";
  $("start-form").onsubmit = start;
  $("note-form").onsubmit = saveNote;
  $("refresh-sessions").onclick = refreshSessions;
  $("cancel-button").onclick = () => api("POST", "/v1/runs/" + view.runId + "/cancel").catch(() => {});
  setInterval(() => refreshApprovals().catch(() => {}), 5000);
}

main();
