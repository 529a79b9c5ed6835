// Draws every <div data-chart data-src="…json"> on the page with plotly.js (served by Podium at
// /vendor/plotly.min.js). The JSON is {figure: {data, layout}, notes, table}, built in
// leaderboard/charts.py. The page is readable without this script: tables and notes are server-rendered.
// Each container gets data-state="loading" | "ready" | "error", which browser tests wait on.
(function () {
  "use strict";

  function showError(container, text) {
    container.dataset.state = "error";
    const plot = container.querySelector(".plot") || container;
    plot.style.minHeight = "0";
    const message = document.createElement("p");
    message.className = "note warning";
    message.textContent = "Could not draw this chart: " + text + ". The table below has the same data.";
    plot.replaceChildren(message);
  }

  function showNotes(container, notes) {
    const slot = container.querySelector("[data-notes]");
    if (!slot || !Array.isArray(notes)) return;
    slot.replaceChildren(...notes.map((note) => {
      const p = document.createElement("p");
      p.textContent = note;
      return p;
    }));
  }

  // The first customdata entry of a point is its result page (see leaderboard/charts.py).
  function openResultOnClick(plot) {
    plot.on("plotly_click", (event) => {
      const data = event.points && event.points[0] && event.points[0].customdata;
      if (Array.isArray(data) && typeof data[0] === "string" && data[0].startsWith("/")) {
        window.location.href = data[0];
      }
    });
  }

  async function draw(container) {
    container.dataset.state = "loading";
    try {
      const response = await fetch(container.dataset.src, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const body = await response.json();
      if (!response.ok) throw new Error(body.error || "HTTP " + response.status);
      if (!window.Plotly) throw new Error("plotly.js did not load");
      const plot = container.querySelector(".plot") || container;
      const figure = body.figure;
      await window.Plotly.newPlot(plot, figure.data, figure.layout, { responsive: true, displaylogo: false });
      openResultOnClick(plot);
      showNotes(container, body.notes);
      container.dataset.state = "ready";
    } catch (error) {
      showError(container, error.message || String(error));
    }
  }

  function drawAll() {
    document.querySelectorAll("[data-chart][data-src]").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
