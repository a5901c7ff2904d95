// Live parts of the task pages: an element with data-live polls its own URL through htmx
// (hx-trigger="every Ns") and is replaced by the answer (with the elements its hx-select-oob
// names). An answer that shows what the page showed last is not swapped in, so a poll that
// changes nothing keeps the reader's text selection, open <details> and scroll; when it does
// swap, htmx gives focus back to the element with the same id.
"use strict";

// A form's CSRF token is masked afresh on every render: not a change worth a swap.
const CSRF = /name="csrfmiddlewaretoken" value="[^"]*"/g;
const shown = new Map(); // live element id -> what it showed last, as the browser serialises it

function partIds(target) {
  const oob = (target.getAttribute("hx-select-oob") || "").split(",");
  return [target.id, ...oob.map((item) => item.trim().split(":")[0].replace(/^#/, "")).filter(Boolean)];
}

// The parts as HTML, written the same way whether they come from the page or from an answer.
function serialise(root, ids) {
  return ids.map((id) => root.getElementById(id)?.outerHTML ?? "").join("\n").replace(CSRF, "");
}

function parse(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

// Taken before anyone opens a <details>: what the server rendered.
for (const element of document.querySelectorAll("[data-live]")) {
  shown.set(element.id, serialise(document, partIds(element)));
}

document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (!target.matches("[data-live]") || !target.id) return;
  // Signed out meanwhile (the poll was redirected to the sign-in page): load the page again,
  // which lands on that page with ?next= set, rather than show it inside this one.
  const answeredBy = new URL(event.detail.xhr.responseURL || location.href);
  if (answeredBy.pathname !== location.pathname) {
    event.detail.shouldSwap = false;
    location.reload();
    return;
  }
  // Nothing changes under an open dialog: confirming would submit a form no longer on the page.
  if (document.querySelector("dialog[open]")) {
    event.detail.shouldSwap = false;
    return;
  }
  const answer = serialise(parse(event.detail.serverResponse), partIds(target));
  if (shown.get(target.id) === answer) event.detail.shouldSwap = false;
  else shown.set(target.id, answer);
});
