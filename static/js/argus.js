// Behaviour every page shares: confirmation before destructive forms, and copy buttons.
"use strict";

// <form data-confirm="Delete x?" data-confirm-button="Delete"> asks first, in the page's own
// <dialog> (keyboard-friendly: focus stays inside, Escape cancels) rather than window.confirm.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  if (form.dataset.confirmed === "yes") {
    delete form.dataset.confirmed;
    return;
  }
  event.preventDefault();
  const dialog = document.getElementById("confirm-dialog");
  dialog.querySelector("[data-confirm-message]").textContent = form.dataset.confirm;
  const ok = dialog.querySelector("[data-confirm-ok]");
  ok.textContent = form.dataset.confirmButton || "Confirm";
  dialog.returnValue = "";
  dialog.addEventListener(
    "close",
    () => {
      if (dialog.returnValue !== "ok") return;
      form.dataset.confirmed = "yes";
      form.requestSubmit(event.submitter);
    },
    { once: true },
  );
  dialog.showModal();
  ok.focus();
});

// <button data-copy="text"> puts the text on the clipboard. navigator.clipboard only exists on
// https and localhost, so plain-http deployments fall back to selecting the text.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(button.dataset.copy);
    button.textContent = "Copied";
  } catch {
    const target = button.previousElementSibling;
    if (target) window.getSelection().selectAllChildren(target);
    button.textContent = "Press Ctrl+C";
  }
  setTimeout(() => {
    button.textContent = label;
  }, 1500);
});
