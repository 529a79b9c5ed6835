// The round page's filters, live: every change to the filter bar fetches the page for the new view and
// swaps the regions marked data-live-region (chips, derived-metric note, table, export links) in place;
// history.replaceState keeps the address bar the permalink of what is shown. Without this file the bar
// is a plain GET form with an Apply button, the chips are links, and everything still works.
//
// Also: the pickers' search boxes (type to narrow a long list of submitters or accelerators), and the
// compare selection, which is counted ("3 selected"), kept across live updates, pages and a refused
// compare (too few or too many), in sessionStorage per round.
(function () {
  "use strict";
  const form = document.querySelector("form[data-live-form]");
  if (!form) return;
  const live = Boolean(window.fetch && window.DOMParser && window.history && window.history.replaceState);
  const status = document.getElementById("live-status");
  const DEBOUNCE_MS = 350;

  // ---- the view's query string, as the form would submit it, minus empty fields ----------------------
  function viewQuery() {
    const params = new URLSearchParams();
    const boxes = Array.from(form.querySelectorAll(".col-choice"));
    const ticked = boxes.filter((b) => b.checked).map((b) => b.value);
    // A field at its default (data-default: the official score) stays out of the permalink too.
    const defaults = {};
    form.querySelectorAll("[name][data-default]").forEach((el) => { defaults[el.name] = el.dataset.default; });
    for (const [name, value] of new FormData(form)) {
      if (name === "cols" || typeof value !== "string" || value.trim() === "" || defaults[name] === value) continue;
      params.append(name, value);
    }
    // All columns ticked (or none) is the default view: no `cols` in the permalink.
    if (ticked.length && ticked.length < boxes.length) params.set("cols", ticked.join(","));
    return params.toString();
  }

  // ---- pickers -----------------------------------------------------------------------------------
  function pickerState(picker) {
    const state = picker.querySelector("[data-picker-state]");
    if (!state) return;
    const boxes = Array.from(picker.querySelectorAll("input[type=checkbox]"));
    const radio = picker.querySelector("input[type=radio]:checked");
    if (radio) {
      state.textContent = radio.value || "any";
    } else if (picker.id === "column-picker") {
      const n = boxes.filter((b) => b.checked).length;
      state.textContent = n === 0 || n === boxes.length ? "all" : `${n} of ${boxes.length}`;
    } else {
      const n = boxes.filter((b) => b.checked).length;
      state.textContent = n ? `${n} chosen` : "all";
    }
  }

  for (const picker of form.querySelectorAll("details.picker")) {
    const search = picker.querySelector("[data-picker-search]");
    const none = picker.querySelector("[data-picker-none]");
    if (search) {
      search.hidden = false;
      search.addEventListener("input", () => {
        const needle = search.value.trim().toLowerCase();
        let shown = 0;
        for (const label of picker.querySelectorAll(".picker-options label")) {
          const match = !needle || label.textContent.toLowerCase().includes(needle);
          label.hidden = !match;
          if (match) shown += 1;
        }
        if (none) none.hidden = shown > 0;
      });
      // Enter in the search box picks nothing and must not submit the whole form.
      search.addEventListener("keydown", (event) => { if (event.key === "Enter") event.preventDefault(); });
    }
    picker.addEventListener("toggle", () => { if (picker.open && search) search.focus(); });
    // Escape closes the list and gives focus back to its summary (as a native select would).
    picker.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && picker.open) {
        picker.open = false;
        picker.querySelector("summary").focus();
      }
    });
  }

  // A click or focus outside an open picker closes it, as it would a native drop-down.
  function closeOthers(target) {
    for (const open of form.querySelectorAll("details.picker[open]")) {
      if (!open.contains(target)) open.open = false;
    }
  }
  document.addEventListener("click", (event) => closeOthers(event.target));
  document.addEventListener("focusin", (event) => closeOthers(event.target));

  // ---- live update -------------------------------------------------------------------------------
  let controller = null;
  let generation = 0;
  let timer = 0;

  function announce() {
    if (!status) return;
    const paging = document.querySelector("#round-table nav.paging .note");
    const empty = document.querySelector("#round-table .empty");
    status.textContent = empty ? empty.textContent.trim()
      : paging ? paging.textContent.split("·")[0].trim() : "Table updated.";
  }

  async function update() {
    const query = viewQuery();
    const url = window.location.pathname + (query ? `?${query}` : "");
    if (controller) controller.abort();
    controller = new AbortController();
    const mine = ++generation;
    const table = document.getElementById("round-table");
    if (table) table.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(url, {signal: controller.signal, credentials: "same-origin",
                                         headers: {Accept: "text/html"}});
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      if (mine !== generation) return;  // a newer change is on its way
      for (const old of document.querySelectorAll("[data-live-region]")) {
        const next = old.id && fresh.getElementById(old.id);
        if (next) old.replaceWith(document.importNode(next, true));
      }
      // After the swap, in the same task: whoever waits for the new address finds the new table.
      window.history.replaceState(window.history.state, "", url);
      restoreSelection();
      announce();
    } catch (error) {
      if (error.name === "AbortError") return;
      window.location.assign(url);  // a real navigation shows whatever went wrong, and the view
    } finally {
      const now = document.getElementById("round-table");
      if (mine === generation && now) now.removeAttribute("aria-busy");
    }
  }

  function schedule(delay) {
    window.clearTimeout(timer);
    timer = window.setTimeout(update, delay);
  }

  if (live) {
    form.classList.add("live");
    form.addEventListener("change", (event) => {
      const target = event.target;
      if (!target.name) return;  // a picker's search box
      const picker = target.closest("details.picker");
      if (picker) pickerState(picker);
      // A choice applies at once; typed text was scheduled while typing, and its change (on leaving the
      // field) flushes it.
      schedule(0);
    });
    form.addEventListener("input", (event) => {
      const target = event.target;
      if (target.name && (target.type === "search" || target.type === "number" || target.type === "text")) {
        schedule(DEBOUNCE_MS);
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      schedule(0);
    });
  } else {
    // No fetch: the form submits, with an unchanged column set left out of the permalink.
    form.addEventListener("submit", () => {
      const boxes = Array.from(form.querySelectorAll(".col-choice"));
      if (boxes.every((b) => b.checked)) boxes.forEach((b) => { b.disabled = true; });
      Array.from(form.elements).forEach((el) => { if (el.name && el.value === "" && el.type !== "radio") el.disabled = true; });
    });
  }

  // ---- compare selection -------------------------------------------------------------------------
  const compare = document.getElementById("compare-form");
  if (!compare) return;
  const min = Number(compare.dataset.min) || 2;
  const max = Number(compare.dataset.max) || 4;
  const count = document.getElementById("compare-count");
  const error = document.getElementById("compare-error");
  const clear = document.getElementById("compare-clear");
  const KEY = `podium:compare:${window.location.pathname}`;
  let picked = [];
  try { picked = JSON.parse(window.sessionStorage.getItem(KEY) || "[]").filter((id) => /^\d+$/.test(id)); } catch (e) { picked = []; }

  function save() {
    try { window.sessionStorage.setItem(KEY, JSON.stringify(picked)); } catch (e) { /* private mode: the page still counts */ }
  }

  function showCount() {
    count.textContent = picked.length ? `${picked.length} selected` : "";
    if (clear) clear.hidden = picked.length === 0;
    if (picked.length >= min && picked.length <= max) error.textContent = "";
  }

  function boxes() {
    return Array.from(document.querySelectorAll("input[type=checkbox][name=ids][form=compare-form]"));
  }

  function restoreSelection() {
    for (const box of boxes()) {
      // A box the browser restored as ticked (back button) joins the selection.
      if (box.checked && !picked.includes(box.value)) picked.push(box.value);
      box.checked = picked.includes(box.value);
    }
    save();
    showCount();
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.name !== "ids" || box.getAttribute("form") !== "compare-form") return;
    picked = picked.filter((id) => id !== box.value);
    if (box.checked) picked.push(box.value);
    save();
    showCount();
  });

  if (clear) {
    clear.addEventListener("click", () => {
      picked = [];
      boxes().forEach((b) => { b.checked = false; });
      save();
      showCount();
      error.textContent = "";
    });
  }

  compare.addEventListener("submit", (event) => {
    compare.querySelectorAll("input[data-picked]").forEach((el) => el.remove());
    if (picked.length < min || picked.length > max) {
      // Refused here, not on another page: the ticked boxes stay ticked.
      event.preventDefault();
      error.textContent = picked.length < min
        ? `Pick at least ${min} results to compare; ${picked.length || "none"} ${picked.length === 1 ? "is" : "are"} selected.`
        : `Pick at most ${max} results to compare; ${picked.length} are selected.`;
      return;
    }
    // Results ticked on another page of the table (or before a live update) travel as hidden fields.
    const onPage = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
    for (const id of picked) {
      if (onPage.has(id)) continue;
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = "ids";
      input.value = id;
      input.dataset.picked = "";
      compare.appendChild(input);
    }
  });

  restoreSelection();
})();
