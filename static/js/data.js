// The data page: say at once when a chosen file is over the upload limit, instead of after
// sending it all to the server.
"use strict";

const uploadForm = document.getElementById("upload-form");
if (uploadForm) {
  const input = uploadForm.querySelector("input[type=file]");
  const help = document.querySelector("[data-upload-help]");
  const limit = Number(uploadForm.dataset.maxBytes);
  const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`;
  input.addEventListener("change", () => {
    const file = input.files[0];
    const tooBig = Boolean(file) && file.size > limit;
    input.setCustomValidity(tooBig ? `This file is ${mib(file.size)}; the limit is ${mib(limit)}.` : "");
    input.setAttribute("aria-invalid", tooBig ? "true" : "false");
    help.textContent = tooBig ? input.validationMessage : "";
  });
}
