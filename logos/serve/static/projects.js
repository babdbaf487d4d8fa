// The page's projects: several agents in one chat. The sidebar lists them with their state
// as the server tells it (working, waiting for approval, held by a guard, paused, idle) and a
// dot for what happened since you looked; a project's chat streams in the main pane (each
// message by its author, rendered from Markdown, an agent's command cards inside its message,
// approvals and guards inline, routing notes); its team (role, model, where commands run,
// state, spend) and the files it changed are in the side pane. Uses page.js's helpers.
"use strict";

const chat = freshChat(null);
let knownProjects = [];
window.logosProjectShown = [];  // the ids of the project events shown (tests check each appears once)

const PROJECT_WORDS = {
  waiting: "waiting for approval", held: "held: your call", busy: "working", paused: "paused", idle: "idle",
};
const AGENT_WORDS = { waiting: "waiting for approval", busy: "working", idle: "idle", stopped: "stopped" };
const TURN_LOOKS = {
  answered: "ok", held: "held", stopped: "denied", failed: "failed", budget: "failed",
  interrupted: "failed", "no-agent": "failed",
};

function freshChat(projectId) {
  return { projectId, lastId: 0, controller: null, messages: new Map(), cards: new Map(),
    approvals: new Map(), agents: new Map(), dirty: new Set(), drawing: false };
}

// The sidebar's projects ---------------------------------------------------------------------

async function refreshProjects() {
  const { projects } = await api("GET", "/v1/projects");
  knownProjects = projects;
  fillList("project-list", projects, "nav-item project-item", "No projects yet.", (item, project) => {
    const open = element("a", "nav-link");
    open.href = "#project=" + encodeURIComponent(project.id);
    open.onclick = (event) => { event.preventDefault(); openProject(project.id); };
    const unread = project.id !== chat.projectId && project.events > seenOf("project", project.id);
    const meta = element("span", "nav-meta");
    const team = project.agents.length ? project.agents.length + (project.agents.length === 1 ? " agent" : " agents") : "no agents yet";
    meta.append(chip(project.status, PROJECT_WORDS[project.status] || project.status), element("span", "team", team));
    const badge = element("span", "unread", "new");
    badge.hidden = !unread;
    open.append(element("span", "nav-title", project.name), badge, meta);
    open.title = project.name + (project.goal ? ": " + project.goal : "");
    item.classList.toggle("has-unread", unread);
    item.classList.toggle("selected", project.id === chat.projectId && document.body.dataset.view === "project");
    item.append(open);
    if (project.id === chat.projectId) showProjectStatus(project);
  });
  const busy = projects.reduce((sum, project) => sum + project.agents.filter((agent) => agent.state === "busy").length, 0);
  const paused = projects.filter((project) => project.status === "paused").length;
  $("project-metrics").textContent = projects.length
    ? (projects.length - paused) + " active, " + paused + " paused · " + busy + (busy === 1 ? " agent" : " agents") + " working"
    : "";
  applySearch();
}

async function openProject(projectId) {
  if (chat.controller) chat.controller.abort();
  Object.assign(chat, freshChat(projectId));
  window.logosProjectShown = [];
  $("project-chat").replaceChildren();
  $("project-error").textContent = "";
  go("project=" + encodeURIComponent(projectId));
  showView("project");
  markSelected();
  openChanges("project", projectId);
  refreshProjects().catch(() => {});  // its unread mark goes, its selection shows
  await refreshRoster();
  followProject(projectId);
}

async function refreshRoster() {
  showProjectStatus(await api("GET", "/v1/projects/" + encodeURIComponent(chat.projectId)));
}

function showProjectStatus(project) {
  setText($("project-name"), project.name);
  setChip($("project-state"), project.status, PROJECT_WORDS[project.status] || project.status);
  setText($("project-goal"), project.goal ? "Goal: " + project.goal : "No goal written yet.");
  const spent = project.spent;
  setText($("project-spend"), spent.tokens + " tokens"
    + (spent.cost_known && spent.cost_usd ? " · " + dollars(spent.cost_usd) : "")
    + (project.queue ? " · " + project.queue + " queued" : ""));
  $("project-stop").hidden = !["busy", "waiting"].includes(project.status);
  chat.agentNames = project.agents.map((agent) => agent.name);
  for (const agent of project.agents) chat.agents.set(agent.name, agent);
  const roster = $("roster");
  roster.replaceChildren(...project.agents.map((agent) => {
    const card = element("li", "agent-card " + agent.state);
    card.dataset.name = agent.name;
    const head = element("div", "agent-head");
    head.append(element("span", "agent-name", agent.name), element("span", "role " + agent.role, agent.role),
      chip(agent.state, AGENT_WORDS[agent.state] || agent.state));
    const cost = agent.spent.cost_known && agent.spent.cost_usd ? " · " + dollars(agent.spent.cost_usd) : "";
    card.append(head,
      element("div", "agent-line", agent.model + " · " + (agent.runner === "sandbox" ? "sandbox" : "local bash")),
      element("div", "agent-line muted where", agent.where),
      element("div", "agent-line muted", "approval " + agent.approval + " · " + agent.spent.tokens + " tokens" + cost));
    return card;
  }));
  if (!project.agents.length) roster.append(element("li", "empty", "No agents yet: add a captain first."));
  markSeen("project", project.id, chat.lastId);
}

// The chat -------------------------------------------------------------------------------------

async function followProject(projectId) {
  await followEvents(chat, "/v1/projects/" + encodeURIComponent(projectId) + "/events",
    "project-error", () => chat.projectId === projectId,
    (id, type, data) => showProjectEvent(id || 0, type, JSON.parse(data)));
}

function chatItem(node) {
  $("project-chat").append(node);
  if (following) requestAnimationFrame(scrollToEnd);
  return node;
}

function messageNode(id, author, kind) {
  let message = chat.messages.get(id);
  if (!message) {
    const node = element("article", "message " + kind);
    node.dataset.id = id;
    node.dataset.author = author;
    const head = element("header", "author");
    head.append(element("span", "name", author));
    const agent = chat.agents.get(author);
    if (agent) head.append(element("span", "role " + agent.role, agent.role));
    const body = element("div", "message-body");
    node.append(head, body);
    message = { node, head, body, prose: null };
    chat.messages.set(id, message);
    chatItem(node);
  }
  return message;
}

function drawSoon() {
  // Replies grow by small deltas: their Markdown is drawn once per frame.
  if (chat.drawing) return;
  chat.drawing = true;
  requestAnimationFrame(() => {
    chat.drawing = false;
    renderDirty(chat.dirty);
    if (following) scrollToEnd();
  });
}

function showProjectEvent(id, type, event) {
  if (type === "resume") return;  // the stream ends next; the loop resumes after lastId
  if (!(id > chat.lastId)) return;
  chat.lastId = id;
  window.logosProjectShown.push(id);
  markSeen("project", chat.projectId, id);
  if (type === "message") {
    if (event.kind === "user") setMarkdown(messageNode(event.id, "you", "user").body, event.text);
    else if (event.kind === "briefing") {
      const details = chatItem(element("details", "briefing"));
      details.append(element("summary", "", "briefing sent to " + event.to), element("pre", "", event.text));
    } else {
      const note = chatItem(element("div", "note"));
      note.append(renderInline(event.text));
    }
  } else if (type === "routing" && event.agent) {
    const route = chatItem(element("div", "route"));
    route.append("→ " + event.agent + ": ", renderInline(event.reason));
  } else if (type === "message_start") messageNode(event.id, event.author, "agent");
  else if (type === "delta") {
    const message = messageNode(event.message, "", "agent");
    if (!message.prose) {
      message.prose = element("div", "prose md");
      message.prose.logosPending = "";
      message.body.append(message.prose);
    }
    appendProse(message.prose, event.text, chat.dirty);
    drawSoon();
  } else if (type === "command") showProjectCommand(event);
  else if (type === "message_end") {
    const message = messageNode(event.id, event.author, "agent");
    message.node.classList.add(event.status);
    if (event.status !== "complete") message.node.append(element("div", "message-state", event.status + ": " + event.reason));
  } else if (type === "approval_required") askInChat(event);
  else if (type === "approval_decided") settleInChat(event);
  else if (type === "guard") showGuard(event);
  else if (type === "files_changed") showChangedInChat(event);
  else if (type === "turn") {
    if (event.state !== "started") {
      const end = chatItem(element("div", "turn-end"));
      end.append(chip(TURN_LOOKS[event.state] || "idle", "turn " + event.state), element("span", "", event.reason || ""));
      refreshChanges();
    }
    refreshRoster().catch(() => {});
  } else if (type === "agent" || type === "budget" || type === "project") refreshRosterSoon();
}

let rosterTimer = null;

function refreshRosterSoon() {
  // A burst of spend updates reads the project once.
  if (rosterTimer) return;
  rosterTimer = setTimeout(() => { rosterTimer = null; refreshRoster().catch(() => {}); }, 250);
}

function agentPlace(name) {
  const agent = chat.agents.get(name);
  if (!agent) return "";
  return agent.runner === "sandbox" ? "in " + name + "'s sandbox" : "on this machine (local bash)";
}

function showProjectCommand(activity) {
  const event = activity.event;
  const message = messageNode(activity.message, activity.agent, "agent");
  const key = activity.message + ":" + event.turn + ":" + event.index;
  let card = chat.cards.get(key);
  if (!card && event.type !== "job_end") {
    card = Object.assign(newCard(event.command || (event.result || {}).command || ""), { agent: activity.agent });
    card.node.title = (chat.agents.get(activity.agent) || {}).where || "";
    chat.cards.set(key, card);
    message.body.append(card.node);
    message.prose = null;
  }
  if (!card) return;
  if (event.type === "command_output") showLiveOutput(card, event);
  else if (event.type === "command_result") fillResult(card, event.result, agentPlace(activity.agent), null);
}

function askInChat(event) {
  const box = approvalBox(event, async (approve, reason, always) => {
    await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/approvals/" + event.id,
      { approve, reason, always });
    refreshApprovals().catch(() => {});
  }, true);
  if (!event.live) box.querySelector(".asks").append(" (asked before the server restarted)");
  chat.approvals.set(event.id, box);
  const message = chat.messages.get(event.message);
  let card = null;
  for (const [key, open] of chat.cards) if (key.startsWith(event.message + ":") && open.command === event.command && !open.result) card = open;
  if (card) {
    setCardState(card, "waiting", "waiting for approval");
    card.approval.append(box);
  } else {
    box.prepend(element("code", "cmd", event.summary));
    if (message) message.body.append(box);
    else chatItem(box);
  }
  refreshApprovals().catch(() => {});
}

function settleInChat(event) {
  const open = chat.approvals.get(event.id);
  const said = describeDecision(event);
  let card = null;
  for (const [key, candidate] of chat.cards) if (key.startsWith(event.message + ":") && candidate.command === event.command && !candidate.result) card = candidate;
  if (card && (event.action === "yes" || event.action === "auto")) setCardState(card, "running", "running");
  if (card && event.action === "no") setCardState(card, "denied", said);
  if (open && card && event.action === "no") open.remove();  // WHY: the card's state says it
  else if (open) settled(open, event.action, said);
  else if (event.action !== "auto") {
    const note = chatItem(element("div", "note"));
    note.append(renderInline(event.agent + ": `" + event.command + "` " + said));
  }
  refreshApprovals().catch(() => {});
}

function showGuard(event) {
  const box = chatItem(element("div", "guard-box"));
  box.append(element("strong", "", "A guard holds the turn: "), element("span", "", event.reason));
  const note = element("span", "guard-note");
  note.setAttribute("role", "status");
  const answer = async (action, agent) => {
    try {
      await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/guard", { action, agent });
      box.replaceChildren(element("span", "decided", "you chose " + action + (agent ? " " + agent : "")));
    } catch (error) { note.textContent = error.message; }
  };
  const pick = element("select", "pick");
  pick.setAttribute("aria-label", "the agent to go on");
  for (const name of chat.agentNames || []) pick.append(element("option", "", name));
  const actions = element("div", "actions");
  actions.append(button("continue primary", "Continue", () => answer("continue")),
    button("stop danger", "Stop", () => answer("stop")), pick,
    button("pick-agent ghost", "Let this agent go on", () => answer("pick", pick.value)));
  box.append(actions, note);
}

function showChangedInChat(event) {
  const note = changedFilesNote(event, event.scope === "reply" ? "this reply" : "this turn");
  const message = event.scope === "reply" ? chat.messages.get(event.message) : null;
  if (message) message.body.append(note);
  else chatItem(note);
  refreshChanges();
}

// The person's actions --------------------------------------------------------------------------

async function sendToProject(event) {
  event.preventDefault();
  const text = $("project-message").value;
  if (!chat.projectId) return;
  if (!text.trim()) { $("project-error").textContent = "Write a message first."; $("project-message").focus(); return; }
  try {
    await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/messages", { text });
    $("project-message").value = "";
    $("project-error").textContent = "";
    following = true;
  } catch (error) { $("project-error").textContent = error.message; }
}

async function createProject(event) {
  event.preventDefault();
  $("project-form-error").textContent = "";
  const name = $("new-project-name").value.trim();
  if (!name) return fieldError($("new-project-name"), "project-form-error", "Name the project first.");
  const body = { name, goal: $("new-project-goal").value };
  const directory = $("new-project-dir").value.trim();
  if (directory) {
    if (!directory.startsWith("/")) return fieldError($("new-project-dir"), "project-form-error", "Give the directory as a full path, starting with /.");
    body.allowed_paths = [{ path: directory, read_only: false }];
  }
  try {
    const project = await api("POST", "/v1/projects", body);
    $("new-project-name").value = $("new-project-goal").value = $("new-project-dir").value = "";
    await refreshProjects();
    await openProject(project.id);
    $("agent-form-box").open = true;
    $("agent-name").focus();
  } catch (error) {
    const words = [[/allowed path/g, "Directory"], [/allowed_paths/g, "Directory"]];
    $("project-form-error").textContent = inFormWords(error.message, words);
  }
}

async function addAgent(event) {
  event.preventDefault();
  $("agent-error").textContent = "";
  const runner = { kind: $("agent-runner").value };
  const body = { name: $("agent-name").value.trim(), role: $("agent-role").value, runner };
  if ($("agent-approval").value) body.approval = $("agent-approval").value;
  if (!body.name) return fieldError($("agent-name"), "agent-error", "Name the agent first: the chat addresses it as @name.");
  try {
    await api("POST", "/v1/projects/" + encodeURIComponent(chat.projectId) + "/agents", body);
    $("agent-name").value = "";
    $("agent-role").value = "talon";  // WHY: a project has one captain; the next is a talon
    await refreshRoster();
  } catch (error) {
    const words = [[/runner\.kind "sandbox"/g, "the sandbox runner"], [/\bgrant: true\b/g, "a grant"]];
    $("agent-error").textContent = inFormWords(error.message, words);
  }
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
}

window.addEventListener("logos-ready", projectsMain);
