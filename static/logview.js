// The log viewer: a #L135 fragment inside a folded run of lines opens the fold, so the permalink shows
// its line (the page reads without this; the server already opens the fold of a ?line= target).
(function () {
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!/^L\d+$/.test(id)) return;
    var line = document.getElementById(id);
    if (!line) return;
    // The log page's flag form (reviewers, chairs) cites the line whose number was clicked.
    var cite = document.getElementById("flag-line-number");
    if (cite) cite.value = id.slice(1);
    for (var node = line.parentElement; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    line.scrollIntoView({block: "center"});
  }
  window.addEventListener("hashchange", reveal);
  document.addEventListener("DOMContentLoaded", reveal);
})();
