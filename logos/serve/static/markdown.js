// Replies rendered: Markdown by the vendored markdown-it with raw HTML off (what a model or a
// command writes as HTML stays text), its output sanitised again by the vendored DOMPurify
// (no script, no handler, no image, no form: only text formatting and links), code blocks
// with a copy button. Returns DOM nodes, never an HTML string the caller could misuse.
"use strict";

const markdown = window.markdownit({ html: false, linkify: true, breaks: true, typographer: false });
// WHY: `calc.py` is no link (.py is a country's domain): only written-out http(s) URLs are.
markdown.linkify.set({ fuzzyLink: false, fuzzyEmail: false, fuzzyIP: false });

const PURIFY = {
  ALLOWED_TAGS: ["p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
    "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th",
    "td", "span"],
  ALLOWED_ATTR: ["href", "title", "class", "start", "colspan", "rowspan", "align"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.hasAttribute("class") && !/^language-[\w-]+$/.test(node.getAttribute("class"))) {
    node.removeAttribute("class");
  }
});

function renderMarkdown(text) {
  // The blocks of `text` as a fragment; each code block gets its copy button.
  const fragment = DOMPurify.sanitize(markdown.render(text), PURIFY);
  for (const pre of fragment.querySelectorAll("pre")) {
    const box = document.createElement("div");
    box.className = "codeblock";
    pre.replaceWith(box);
    box.append(copyButton(() => pre.textContent), pre);
  }
  return fragment;
}

function renderInline(text) {
  // One line of Markdown (code spans, emphasis, links) as a fragment: routing notes, titles.
  return DOMPurify.sanitize(markdown.renderInline(text), PURIFY);
}

function copyButton(textOf) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = "Copy";
  button.setAttribute("aria-label", "Copy this code");
  button.onclick = async () => {
    try {
      await navigator.clipboard.writeText(textOf());
      button.textContent = "Copied";
    } catch (error) {
      button.textContent = "Select and copy by hand";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  };
  return button;
}

function setMarkdown(node, text) {
  // Render `text` into `node` (its previous content replaced); the source kept on the node.
  node.logosSource = text;
  node.replaceChildren(renderMarkdown(text));
}
