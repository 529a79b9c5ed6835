// Column chooser: the ticked benchmarks become the `cols` parameter, so the URL stays a permalink.
(function () {
  const form = document.getElementById("view-form");
  if (!form) return;
  const hidden = document.getElementById("cols");
  form.addEventListener("submit", () => {
    const boxes = Array.from(form.querySelectorAll(".col-choice"));
    const ticked = boxes.filter((b) => b.checked).map((b) => b.value);
    hidden.value = ticked.length === boxes.length ? "" : ticked.join(",");
    // Empty fields would clutter the permalink.
    Array.from(form.elements).forEach((el) => { if (el.name && el.value === "" && el.type !== "submit") el.disabled = true; });
  });
  document.getElementById("metric").addEventListener("change", () => form.requestSubmit());
})();
