// Live parts of the task pages: an element with data-live polls its own URL through htmx
// (hx-trigger="every Ns") and is replaced by the answer. An answer identical to the last one is
// not swapped in, so a poll that changes nothing keeps the reader's text selection, open
// <details> and scroll; when it does swap, htmx gives focus back to the element with the same id.
"use strict";

const lastAnswers = new Map();

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
  // A form's CSRF token is masked afresh on every render: not a change worth a swap.
  const answer = event.detail.serverResponse.replace(/name="csrfmiddlewaretoken" value="[^"]*"/g, "");
  if (lastAnswers.get(target.id) === answer) event.detail.shouldSwap = false;
  lastAnswers.set(target.id, answer);
});
