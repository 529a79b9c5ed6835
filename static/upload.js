// Upload with a progress bar; without JavaScript the form posts normally.
(function () {
  const form = document.getElementById("upload-form");
  if (!form) return;
  const zone = document.getElementById("drop-zone");
  const input = document.getElementById("bundle");
  const chosen = document.getElementById("chosen");
  const bar = document.getElementById("progress");
  const message = document.getElementById("upload-message");

  function show(file) { chosen.textContent = file ? file.name + " (" + file.size.toLocaleString() + " bytes)" : ""; }
  input.addEventListener("change", () => show(input.files[0]));
  ["dragenter", "dragover"].forEach((name) => zone.addEventListener(name, (event) => {
    event.preventDefault(); zone.classList.add("dragover");
  }));
  ["dragleave", "drop"].forEach((name) => zone.addEventListener(name, (event) => {
    event.preventDefault(); zone.classList.remove("dragover");
  }));
  zone.addEventListener("drop", (event) => {
    if (event.dataTransfer.files.length) { input.files = event.dataTransfer.files; show(input.files[0]); }
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) { bar.hidden = false; bar.value = Math.round((100 * e.loaded) / e.total); }
    });
    request.addEventListener("load", () => {
      let body = {};
      try { body = JSON.parse(request.responseText); } catch (error) { body = { detail: "Unexpected answer from the server." }; }
      if (request.status === 200 || request.status === 201) {
        message.textContent = "Uploaded; opening its status page…";
        window.location.assign(body.url);
      } else {
        bar.hidden = true;
        message.textContent = body.detail || "The upload failed.";
        message.className = "noncompliant";
      }
    });
    request.addEventListener("error", () => { message.textContent = "Network error; try again."; });
    request.send(new FormData(form));
  });
})();
