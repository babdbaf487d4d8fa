// Files changed: the side pane's list of what the open run or project wrote in its paths
// (per turn, per reply, or all of it), each file's diff opened in place, asked of the server
// when opened; and the line in a timeline that says a turn or a reply changed files.
// Uses page.js's helpers.
"use strict";

const changes = { kind: null, id: null, data: null, selected: "", timer: null, openDiff: null, shown: "" };
const STATUS_MARKS = { added: ["A", "added"], modified: ["M", "modified"], removed: ["D", "removed"], renamed: ["R", "renamed"] };

function openChanges(kind, id) {
  if (viewing()) return;  // `logos view`: a saved run keeps no snapshots
  Object.assign(changes, { kind, id, data: null, selected: kind, openDiff: null, shown: "" });
  $("files-list").replaceChildren(element("li", "empty", "Looking for changes…"));
  $("files-notes").replaceChildren();
  $("files-scope").replaceChildren();
  $("files-scope").hidden = true;
  refreshChanges();
}

function refreshChanges() {
  // Asked again a moment after what changed them: a burst of events reads them once.
  if (!changes.id || changes.timer) return;
  changes.timer = setTimeout(() => {
    changes.timer = null;
    loadChanges().catch((error) => { $("files-notes").replaceChildren(element("li", "error", error.message)); });
  }, 300);
}

function changesPath(suffix) {
  return "/v1/" + changes.kind + "s/" + encodeURIComponent(changes.id) + "/changes" + (suffix || "");
}

async function loadChanges() {
  const kind = changes.kind;
  const id = changes.id;
  const data = await api("GET", changesPath());
  if (changes.kind !== kind || changes.id !== id) return;
  changes.data = data;
  const options = [];
  const whole = data[kind];
  if (whole) options.push([kind + ":", kind === "run" ? "Whole run" : "Since the server started", whole]);
  for (const list of (data.turns || []).slice().reverse()) options.push(["turn:" + list.key, turnLabel(list.key), list]);
  for (const list of (data.replies || []).slice().reverse()) options.push(["reply:" + list.key, replyLabel(list.key), list]);
  const select = $("files-scope");
  const chosen = select.value || (options.length ? options[0][0] : "");
  select.replaceChildren(...options.map(([value, label, list]) => {
    const option = element("option", "", label + " (" + list.files.length + ")");
    option.value = value;
    return option;
  }));
  select.hidden = options.length < 2;
  select.value = options.some(([value]) => value === chosen) ? chosen : (options[0] || [""])[0];
  showChangeList();
}

function turnLabel(key) {
  if (changes.kind === "run") return "Turn " + key;
  const asked = chat.messages.get(key);
  const text = asked && asked.body.logosSource ? asked.body.logosSource : "";
  return "Turn: “" + (text.length > 40 ? text.slice(0, 40) + "…" : text) + "”";
}

function replyLabel(key) {
  const reply = chat.messages.get(key);
  return "Reply by " + (reply ? reply.node.dataset.author : "an agent");
}

function selectedList() {
  const data = changes.data;
  if (!data) return null;
  const [scope, key] = $("files-scope").value.split(/:(.*)/s);
  if (scope === changes.kind) return data[scope];
  const lists = scope === "turn" ? data.turns : data.replies;
  return (lists || []).find((list) => list.key === key) || null;
}

function showChangeList() {
  const data = changes.data;
  const list = selectedList();
  // WHY only when it changed: an open diff and the focus stay where they are.
  const shown = JSON.stringify([changes.id, list, data.note]);
  if (shown === changes.shown) return;
  changes.shown = shown;
  const notes = [...(list ? list.notes : []), ...(data.note ? [data.note] : [])];
  $("files-notes").replaceChildren(...notes.map((note) => element("li", "notice", note)));
  const files = list ? list.files : [];
  const roots = new Set(files.map((file) => file.root));
  fillList("files-list", files.map((file) => Object.assign({ id: file.root + "/" + file.path }, file)), "file-item",
    data.kept ? "No files changed yet." : "No list of changed files here.", (item, file) => {
      const [mark, words] = STATUS_MARKS[file.status] || ["?", file.status];
      const toggle = element("button", "file-toggle");
      toggle.type = "button";
      toggle.setAttribute("aria-expanded", "false");
      const path = element("span", "file-path", (roots.size > 1 ? file.root + "/" : "") + (file.old_path ? file.old_path + " → " : "") + file.path);
      const status = element("span", "file-status " + file.status, mark);
      status.title = words;
      status.setAttribute("aria-label", words);
      const counts = element("span", "file-counts");
      if (file.binary) counts.append(element("span", "muted", "binary"));
      else if (file.added !== null && file.added !== undefined) {
        counts.append(element("span", "plus", "+" + file.added), element("span", "minus", "−" + file.removed));
      }
      toggle.append(status, path, counts);
      toggle.onclick = () => toggleDiff(item, toggle, list, file);
      item.append(toggle);
    });
  const summary = list && list.files.length ? list.files.length + (list.files.length === 1 ? " file" : " files") : "";
  setText($("files-count"), summary);
}

async function toggleDiff(item, toggle, list, file) {
  const open = item.querySelector(".diff-box");
  if (open) { open.remove(); toggle.setAttribute("aria-expanded", "false"); changes.openDiff = null; return; }
  closeOpenDiff();
  const box = element("div", "diff-box");
  box.append(element("p", "notice", "Reading the diff…"));
  item.append(box);
  toggle.setAttribute("aria-expanded", "true");
  changes.openDiff = { item, toggle };
  const query = new URLSearchParams({ scope: list.scope, key: list.key, root: file.root, path: file.path });
  try {
    const diff = await api("GET", changesPath("/diff?" + query));
    box.replaceChildren();
    if (diff.note) box.append(element("p", "notice", diff.note));
    if (diff.diff) box.append(diffView(diff.diff));
    else if (!diff.note) box.append(element("p", "notice", "No difference in the text."));
  } catch (error) {
    box.replaceChildren(element("p", "error", error.message));
  }
}

function diffView(text) {
  // A unified diff, each line with the look of what it is (added, removed, a hunk's head).
  const pre = element("pre", "diff");
  const lines = text.replace(/\n$/, "").split("\n");
  for (const line of lines) {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "file"
      : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "same";
    pre.append(element("span", "line " + kind, line + "\n"));
  }
  return pre;
}

function closeOpenDiff() {
  // Escape closes the open diff; whether one was open.
  const open = changes.openDiff;
  if (!open || !open.item.isConnected) return false;
  const box = open.item.querySelector(".diff-box");
  if (box) box.remove();
  open.toggle.setAttribute("aria-expanded", "false");
  open.toggle.focus();
  changes.openDiff = null;
  return true;
}

function changedFilesNote(event, label) {
  // "this turn changed 2 files: a.py, b.py", and a button that shows them in the side pane.
  const note = element("div", "files-note");
  const files = event.files || [];
  const names = files.slice(0, 4).map((file) => file.path).join(", ") + (files.length > 4 ? ", …" : "");
  if (!files.length) {
    note.append(element("span", "muted", label + ": " + (event.notes || []).join("; ")));
    return note;
  }
  note.append(element("span", "files-icon", "✎"),
    element("span", "", label + " changed " + files.length + (files.length === 1 ? " file: " : " files: ") + names));
  note.append(button("link", "Show the changes", async () => {
    await loadChanges();
    const value = event.scope + ":" + event.key;
    if ([...$("files-scope").options].some((option) => option.value === value)) $("files-scope").value = value;
    showChangeList();
    $("files-pane").scrollIntoView({ block: "start" });
    const first = $("files-list").querySelector("button");
    if (first) first.focus();
  }));
  return note;
}

window.addEventListener("logos-ready", () => { $("files-scope").onchange = showChangeList; });
