// The transcript timeline (transcript.html.j2): filter the rows shown by type and text, jump to
// the next error, fold and unfold, and "Load more" the next page in place. No build step.
"use strict";
(function () {
  const timeline = document.getElementById("timeline");
  const kind = document.getElementById("filter-kind");
  const text = document.getElementById("filter-text");
  const count = document.getElementById("filter-count");
  if (!timeline) return;

  function rows() { return Array.from(timeline.querySelectorAll("li.ev")); }

  function applyFilter() {
    const wanted = kind.value;
    const needle = text.value.trim().toLowerCase();
    let shown = 0;
    for (const row of rows()) {
      const okKind = !wanted || row.dataset.kinds.split(" ").includes(wanted);
      const okText = !needle || row.textContent.toLowerCase().includes(needle);
      row.hidden = !(okKind && okText);
      if (!row.hidden) shown += 1;
    }
    count.textContent = (wanted || needle) ? shown + " of " + rows().length + " rows shown" : "";
  }

  let lastError = -1;
  function nextError() {
    const errors = rows().filter((r) => !r.hidden && r.dataset.kinds.split(" ").includes("error"));
    if (!errors.length) { count.textContent = "No error among the rows loaded."; return; }
    lastError = (lastError + 1) % errors.length;
    const row = errors[lastError];
    for (const r of timeline.querySelectorAll(".current")) r.classList.remove("current");
    row.classList.add("current");
    row.scrollIntoView({ block: "center" });
    count.textContent = "error " + (lastError + 1) + " of " + errors.length;
  }

  function fold(open) {
    for (const d of timeline.querySelectorAll("details")) d.open = open;
  }

  async function loadMore(link) {
    link.textContent = "Loading…";
    const response = await fetch(link.dataset.rows, { credentials: "same-origin" });
    if (!response.ok) { link.textContent = "Load more (failed: " + response.status + ")"; return; }
    const template = document.createElement("template");
    template.innerHTML = await response.text();  // rendered and escaped by the server
    link.closest(".more").remove();
    timeline.append(...template.content.childNodes);
    applyFilter();
  }

  kind.addEventListener("change", applyFilter);
  text.addEventListener("input", applyFilter);
  document.getElementById("next-error").addEventListener("click", nextError);
  document.getElementById("fold-all").addEventListener("click", () => fold(false));
  document.getElementById("unfold-all").addEventListener("click", () => fold(true));
  timeline.addEventListener("click", (event) => {
    const link = event.target.closest("a.load-more");
    if (link) { event.preventDefault(); loadMore(link); }
  });
  applyFilter();
})();
