// The page's projects: several agents in one chat. The list of projects (status, spend), a
// form to make one and to add agents; a project's roster (status, spend), its chat as it
// streams (each message by its author, an agent's command cards with live output inside its
// message, approvals inline, routing notes, guards that ask the person) and a box to write
// in. Uses page.js's helpers (api, element, button, $, authorization, folded, statusOf,
// outputText, readServerEvents, describeDecision, dollars, TOKEN_KEY, viewing); like
// page.js, everything from a model, a command or a person is put in the page as text, never
// as HTML.
"use strict";

const chat = freshChat(null);
window.logosProjectShown = [];  // the ids of the project events shown (tests check each appears once)

function freshChat(projectId) {
  return { projectId, lastId: 0, controller: null, messages: new Map(), cards: new Map(),
    approvals: new Map(), agentNames: [] };
}

async function refreshProjects() {
  const { projects } = await api("GET", "/v1/projects");
  fillList("project-list", projects, "project-item", "No projects yet.", (item, project) => {
    const open = element("a", "", project.name);
    open.href = "#project=" + encodeURIComponent(project.id);
    open.onclick = (event) => { event.preventDefault(); openProject(project.id); };
    const agents = project.agents.map((agent) => agent.name + " (" + agent.role + ", " + agent.status + ")");
    item.append(open, " " + project.status + " · " + project.spent.tokens + " tokens · "
      + (agents.join(", ") || "no agents yet"));
  });
  const metrics = await api("GET", "/v1/metrics");
  $("project-metrics").textContent = metrics.projects.active + " active, " + metrics.projects.paused
    + " paused · agents: " + metrics.agents.busy + " busy, " + metrics.agents.running + " running, "
    + metrics.agents.stopped + " stopped · " + metrics.spend.tokens + " tokens spent";
}

async function openProject(projectId) {
  if (chat.controller) chat.controller.abort();
  Object.assign(chat, freshChat(projectId));
  window.logosProjectShown = [];
  $("project-chat").replaceChildren();
  $("project").hidden = false;
  history.replaceState(null, "", location.pathname + "#project=" + encodeURIComponent(projectId));
  await refreshRoster();
  followProject(projectId);
}

async function refreshRoster() {
  const project = await api("GET", "/v1/projects/" + encodeURIComponent(chat.projectId));
  $("project-name").textContent = project.name;
  $("project-goal").textContent = project.goal ? "Goal: " + project.goal : "";
  $("project-spend").textContent = "spent " + project.spent.tokens + " tokens"
    + (project.spent.cost_known && project.spent.cost_usd ? " · " + dollars(project.spent.cost_usd) : "")
    + " · " + project.status + (project.queue ? " · " + project.queue + " queued" : "");
  chat.agentNames = project.agents.map((agent) => agent.name);
  const body = $("roster").tBodies[0];
  body.replaceChildren(...project.agents.map((agent) => {
    const row = element("tr", "agent-row " + agent.status);
    row.dataset.name = agent.name;
    for (const text of [agent.name, agent.role, agent.runner, agent.status, agent.spent.tokens + " tokens"]) {
      row.append(element("td", "", text));
    }
    return row;
  }));
}

async function followProject(projectId) {
  await followEvents(chat, "/v1/projects/" + encodeURIComponent(projectId) + "/events",
    "project-error", () => chat.projectId === projectId,
    (id, type, data) => showProjectEvent(id || 0, type, JSON.parse(data)));
}

function chatItem(node) {
  $("project-chat").append(node);
  const box = $("project-chat");
  box.scrollTop = box.scrollHeight;
  return node;
}

function messageNode(id, author, kind) {
  let message = chat.messages.get(id);
  if (!message) {
    const node = element("div", "message " + kind);
    node.dataset.id = id;
    node.dataset.author = author;
    const body = element("div", "message-body");
    node.append(element("div", "author", author), body);
    message = { node, body, prose: null };
    chat.messages.set(id, message);
    chatItem(node);
  }
  return message;
}

function showProjectEvent(id, type, event) {
  if (type === "resume") return;  // the stream ends next; the loop resumes after lastId
  if (!(id > chat.lastId)) return;
  chat.lastId = id;
  window.logosProjectShown.push(id);
  if (type === "message") {
    if (event.kind === "user") messageNode(event.id, "you", "user").body.textContent = event.text;
    else if (event.kind === "briefing") {
      const details = chatItem(element("details", "briefing"));
      details.append(element("summary", "", "briefing sent to " + event.to), element("pre", "", event.text));
    } else chatItem(element("div", "note", event.text));
  } else if (type === "routing" && event.agent) chatItem(element("div", "route", "→ " + event.agent + ": " + event.reason));
  else if (type === "message_start") messageNode(event.id, event.author, "agent");
  else if (type === "delta") {
    const message = messageNode(event.message, "", "agent");
    if (!message.prose) { message.prose = element("div", "prose"); message.body.append(message.prose); }
    message.prose.append(event.text);
  } else if (type === "command") showProjectCommand(event);
  else if (type === "message_end") {
    const message = messageNode(event.id, event.author, "agent");
    message.node.classList.add(event.status);
    if (event.status !== "complete") message.node.append(element("div", "message-state", event.status + ": " + event.reason));
  } else if (type === "approval_required") askInChat(event);
  else if (type === "approval_decided") {
    const open = chat.approvals.get(event.id);
    const said = describeDecision(event);
    if (open) open.replaceChildren(element("span", "decided " + event.action, said));
    else if (event.action !== "auto") chatItem(element("div", "note", event.agent + ": `" + event.command + "` " + said));
  } else if (type === "guard") showGuard(event);
  else if (type === "turn" && event.state !== "started") {
    chatItem(element("div", "turn-end", "turn " + event.state + (event.reason ? ": " + event.reason : "")));
    refreshRoster().catch(() => {});
    refreshProjects().catch(() => {});
  } else if (type === "agent" || type === "budget" || type === "project") refreshRoster().catch(() => {});
}

function showProjectCommand(activity) {
  const event = activity.event;
  const message = messageNode(activity.message, activity.agent, "agent");
  const key = activity.message + ":" + event.turn + ":" + event.index;
  let card = chat.cards.get(key);
  if (!card && event.type !== "job_end") {
    const node = element("div", "command running");
    const state = element("span", "card-state", "running");
    const approval = element("div", "card-approval");
    const line = element("pre", "line", "$ " + (event.command || (event.result || {}).command || ""));
    const output = element("pre", "output");
    node.append(state, approval, line, output);
    card = { node, state, approval, output };
    chat.cards.set(key, card);
    message.body.append(node);
    message.prose = null;
  }
  if (!card) return;
  if (event.type === "command_output") card.output.append(event.text);
  else if (event.type === "command_result") {
    const status = statusOf(event.result);
    card.state.textContent = status.text;
    card.node.classList.remove("running");
    card.node.classList.add(status.ok ? "ok" : "failed");
    card.output.textContent = folded(outputText(event.result) || "(no output)").text;
  }
}

function askInChat(event) {
  const box = element("div", "approval-box");
  box.dataset.id = event.id;
  box.append(element("span", "asks", event.agent + " waits for approval" + (event.live ? " " : " (asked before the server restarted) ")));
  const reason = element("input", "reason");
  reason.placeholder = "reason (sent to the agent)";
  const note = element("span", "approval-note");
  const answer = async (approve, always) => {
    try {
      await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/approvals/" + event.id,
        { approve, reason: approve ? null : (reason.value || null), always });
    } catch (error) { note.textContent = error.message; }
  };
  box.append(button("approve", "Approve", () => answer(true, false)), " ", reason, " ",
    button("deny", "Deny", () => answer(false, false)), " ",
    button("always", "Always allow commands like this", () => answer(true, true)), " ", note);
  chat.approvals.set(event.id, box);
  const message = chat.messages.get(event.message);
  let card = null;
  for (const [key, open] of chat.cards) if (key.startsWith(event.message + ":") && open.node.classList.contains("running")) card = open;
  if (card) card.approval.append(box);
  else if (message) message.body.append(box);
  else chatItem(box);
  box.prepend(element("code", "", event.summary + " "));
}

function showGuard(event) {
  const box = chatItem(element("div", "guard-box"));
  box.append(element("span", "", event.reason + ": "));
  const note = element("span", "guard-note");
  const answer = async (action, agent) => {
    try {
      await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/guard", { action, agent });
      box.replaceChildren(element("span", "decided", "you chose " + action + (agent ? " " + agent : "")));
    } catch (error) { note.textContent = error.message; }
  };
  const pick = element("select", "pick");
  for (const name of chat.agentNames || []) pick.append(element("option", "", name));
  box.append(button("continue", "Continue", () => answer("continue")), " ",
    button("stop", "Stop", () => answer("stop")), " ", pick, " ",
    button("pick-agent", "Let this agent go on", () => answer("pick", pick.value)), " ", note);
}

async function sendToProject(event) {
  event.preventDefault();
  const text = $("project-message").value;
  if (!text.trim() || !chat.projectId) return;
  try {
    await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/messages", { text });
    $("project-message").value = "";
    $("project-error").textContent = "";
  } catch (error) { $("project-error").textContent = error.message; }
}

async function createProject(event) {
  event.preventDefault();
  try {
    const project = await api("POST", "/v1/projects", { name: $("new-project-name").value, goal: $("new-project-goal").value });
    await refreshProjects();
    openProject(project.id);
  } catch (error) { $("project-form-error").textContent = error.message; }
}

async function addAgent(event) {
  event.preventDefault();
  const body = { name: $("agent-name").value, role: $("agent-role").value, runner: { kind: $("agent-runner").value } };
  if ($("agent-approval").value) body.approval = $("agent-approval").value;
  try {
    await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/agents", body);
    $("agent-name").value = "";
    $("agent-role").value = "talon";  // WHY: a project has one captain; the next is a talon
    $("agent-error").textContent = "";
    await refreshRoster();
  } catch (error) { $("agent-error").textContent = error.message; }
}

async function stopProjectTurn() {
  try { await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/stop", { scope: "turn" }); }
  catch (error) { $("project-error").textContent = error.message; }
}

function projectsMain() {
  if (!sessionStorage.getItem(TOKEN_KEY) || viewing()) return;
  $("project-form").onsubmit = createProject;
  $("agent-form").onsubmit = addAgent;
  $("project-send").onsubmit = sendToProject;
  $("project-stop").onclick = stopProjectTurn;
  refreshProjects().catch(() => {});
  setInterval(() => { if (!document.hidden) refreshProjects().catch(() => {}); }, 5000);
  const wanted = new URLSearchParams(location.hash.slice(1)).get("project");
  if (wanted) openProject(wanted).catch((error) => { $("project-error").textContent = error.message; });
}

projectsMain();
