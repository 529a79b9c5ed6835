// Draws every <div data-chart data-src="…json"> on the page with plotly.js (served by Podium at
// /vendor/plotly.min.js). The JSON is {figure: {data, layout}, notes, caption, empty, table}, built in
// leaderboard/charts.py. The page is readable without this script: tables and notes are server-rendered.
// Each container gets data-state="loading" | "ready" | "error", which browser tests wait on; an empty
// chart is "ready" with data-empty="true" and shows its message as text instead of bare axes.
(function () {
  "use strict";

  const narrow = window.matchMedia("(max-width: 40rem)");
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  // The neutral line colours of leaderboard/charts.py (FRONT_COLOUR, TARGET_COLOUR): repainted in the
  // page's text colour so that they stay visible on a dark background.
  const NEUTRALS = new Set(["#111111", "#444444"]);
  const drawn = [];

  function cssVar(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }

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

  // The caption goes under the plot: into a server-rendered [data-caption] slot when the page has one.
  function showCaption(container, caption) {
    if (typeof caption !== "string" || !caption) return;
    let slot = container.querySelector("[data-caption]");
    if (!slot) {
      slot = document.createElement("p");
      slot.className = "chart-caption";
      slot.dataset.caption = "";
      (container.querySelector(".plot") || container).after(slot);
    }
    if (!slot.textContent.trim()) slot.textContent = caption;
  }

  function showEmpty(container, text) {
    const plot = container.querySelector(".plot") || container;
    plot.style.minHeight = "0";
    const message = document.createElement("p");
    message.className = "chart-empty";
    message.textContent = text;
    plot.replaceChildren(message);
    container.dataset.empty = "true";
  }

  // Phones: the legend goes below the plot (horizontal), the title goes (the page's heading names the
  // chart), and the margins shrink; wide screens get the figure's own layout back.
  function responsiveLayout(layout) {
    const out = structuredClone(layout);
    if (dark.matches) {
      const fg = cssVar("--fg", "#e6e9ef");
      const grid = cssVar("--line", "#2e3642");
      out.paper_bgcolor = "rgba(0,0,0,0)";
      out.plot_bgcolor = "rgba(0,0,0,0)";
      out.font = Object.assign({}, out.font, { color: fg });
      for (const key of Object.keys(out)) {
        if (/^[xy]axis\d*$/.test(key)) {
          out[key] = Object.assign({ gridcolor: grid, zerolinecolor: grid, linecolor: grid }, out[key]);
        }
      }
      if (out.legend) out.legend = Object.assign({ bgcolor: "rgba(0,0,0,0)" }, out.legend);
    }
    if (narrow.matches) {
      out.legend = Object.assign({}, out.legend, {
        orientation: "h", x: 0, xanchor: "left", y: -0.22, yanchor: "top", font: { size: 11 },
      });
      if (out.title) out.title = Object.assign({}, out.title, { text: "" });
      const margin = out.margin || {};
      out.margin = { l: Math.min(margin.l || 60, 56), r: Math.min(margin.r || 20, 48), t: out.xaxis2 ? 70 : 20,
        b: Math.max(margin.b || 60, 80) };
      out.height = Math.max(out.height || 450, 420) + 20 * Math.min(countLegendItems(out._traces || []), 8);
      for (const key of Object.keys(out)) {
        if (/^[xy]axis\d*$/.test(key) && out[key].title) {
          out[key] = Object.assign({}, out[key], { title: Object.assign({}, out[key].title, { font: { size: 11 } }) });
        }
      }
      if (out.yaxis && out.yaxis.type === "category") out.margin.l = 8;
    }
    delete out._traces;
    return out;
  }

  function countLegendItems(traces) {
    return traces.filter((t) => t.showlegend !== false).length;
  }

  function recolour(traces) {
    if (!dark.matches) return traces;
    const fg = cssVar("--fg", "#e6e9ef");
    return traces.map((trace) => {
      const t = structuredClone(trace);
      if (t.line && NEUTRALS.has(t.line.color)) t.line.color = fg;
      if (t.marker && NEUTRALS.has(t.marker.color)) t.marker.color = fg;
      return t;
    });
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

  async function render(entry) {
    const { plot, figure } = entry;
    const layout = responsiveLayout(Object.assign({}, figure.layout, { _traces: figure.data }));
    await window.Plotly.react(plot, recolour(figure.data), layout,
      { responsive: true, displaylogo: false, displayModeBar: "hover" });
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
      showNotes(container, body.notes);
      showCaption(container, body.caption);
      if (body.empty) {
        showEmpty(container, body.empty);
        container.dataset.state = "ready";
        return;
      }
      if (!window.Plotly) throw new Error("plotly.js did not load");
      const plot = container.querySelector(".plot") || container;
      const entry = { plot, figure: body.figure };
      await render(entry);
      plot.setAttribute("role", "figure");
      plot.setAttribute("aria-label", (body.figure.layout.title && body.figure.layout.title.text) || "Chart");
      openResultOnClick(plot);
      drawn.push(entry);
      container.dataset.state = "ready";
    } catch (error) {
      showError(container, error.message || String(error));
    }
  }

  function redrawAll() {
    drawn.forEach((entry) => { render(entry); });
  }

  function drawAll() {
    document.querySelectorAll("[data-chart][data-src]").forEach(draw);
  }

  narrow.addEventListener("change", redrawAll);
  dark.addEventListener("change", redrawAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
