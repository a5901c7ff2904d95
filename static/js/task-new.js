// The new-task page: template buttons fill the spec (with an Undo for what they replaced), and
// Ctrl+Enter submits from the text area.
"use strict";

const form = document.getElementById("spec-form");
const spec = document.getElementById("id_spec");
const note = document.querySelector("[data-template-note]");

function fill(key) {
  const source = document.getElementById(`spec-template-${key}`);
  const before = spec.value;
  spec.value = source.textContent.trimStart();
  spec.removeAttribute("aria-invalid");
  spec.focus();
  spec.setSelectionRange(0, 0);
  spec.scrollTop = 0;
  note.replaceChildren(`Filled in the ${source.dataset.label} template.`);
  // Whatever was written before is one click away, not lost.
  if (before.trim() && before !== spec.value) {
    const undo = document.createElement("button");
    undo.type = "button";
    undo.className = "outline secondary btn-sm";
    undo.textContent = "Undo";
    undo.addEventListener("click", () => {
      spec.value = before;
      note.replaceChildren("Your text is back.");
      spec.focus();
    });
    note.append(" ", undo);
  }
}

for (const button of document.querySelectorAll("[data-template]")) {
  button.addEventListener("click", () => fill(button.dataset.template));
}

spec.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    form.requestSubmit();
  }
});
