// The experiment page (experiment.html.j2): a case row's answers load when it opens
// (/dashboard/case), and while the experiment runs the progress panel, the errors by class, the
// report's table (/dashboard/report) and the case list follow /dashboard/live. No build step;
// every text is set with textContent.
"use strict";
(function () {
  const POLL_MS = 2000;
  const live = document.getElementById("live");

  async function fragment(url) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(response.status + " " + response.statusText);
    const template = document.createElement("template");
    template.innerHTML = await response.text();  // rendered and escaped by the server
    return template.content;
  }

  document.addEventListener("toggle", async (event) => {
    const row = event.target;
    if (!row.matches || !row.matches("details.case-row") || !row.open || row.dataset.loaded) return;
    row.dataset.loaded = "yes";
    const body = row.querySelector(".case-body");
    body.textContent = "Loading…";
    try {
      body.replaceChildren(await fragment(row.dataset.src));
    } catch (error) {
      body.textContent = "Could not load the answers: " + error.message;
      delete row.dataset.loaded;
    }
  }, true);

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function counts(map, sep) {
    return Object.entries(map).map(([k, v]) => k + " " + v).join(sep);
  }

  function renderArms(arms) {
    const body = document.querySelector("#live-arms tbody");
    body.replaceChildren(...arms.map((a) => {
      const row = el("tr");
      row.dataset.arm = a.arm;
      const bar = el("progress");
      bar.max = a.total;
      bar.value = a.done;
      const cell = el("td");
      cell.append(bar);
      row.append(el("td", a.arm), cell, el("td", a.done + " / " + a.total, "num"),
                 el("td", counts(a.by_status, ", ")));
      return row;
    }));
  }

  function renderErrors(errors) {
    const box = document.getElementById("errors-by-class");
    if (!errors.length) { box.replaceChildren(el("p", "No errors.")); return; }
    const table = el("table");
    table.id = "error-classes";
    const head = el("tr");
    for (const h of ["status", "count", "infrastructure", "retry"]) head.append(el("th", h));
    table.append(el("thead"), el("tbody"));
    table.tHead.append(head);
    for (const e of errors) {
      const row = el("tr");
      const command = el("td");
      command.append(el("code", e.command));
      row.append(el("td", e.status), el("td", String(e.count), "num"),
                 el("td", e.infra ? "yes" : "no"), command);
      table.tBodies[0].append(row);
    }
    box.replaceChildren(table);
  }

  async function refreshReport() {
    const report = document.getElementById("report");
    if (report) report.replaceWith(await fragment(report.dataset.src));
  }

  async function refreshCases() {
    const cases = document.getElementById("cases");
    if (!cases) return;
    if (cases.querySelector("details.case-row[open]")) {
      document.getElementById("live-note").textContent = "New results: reload the page to see them in the case list.";
      return;
    }
    cases.replaceWith(await fragment(cases.dataset.src));
  }

  function eta(seconds) {
    if (seconds === null) return "";
    return seconds < 90 ? "about " + Math.round(seconds) + " s left"
                        : "about " + (seconds / 60).toFixed(1) + " min left";
  }

  let lastDone = live ? Number(live.dataset.done) : 0;
  async function poll() {
    let status;
    try {
      const response = await fetch("/dashboard/live?experiment=" + encodeURIComponent(live.dataset.experiment),
                                   { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) throw new Error(String(response.status));
      status = await response.json();
    } catch (error) {
      document.getElementById("live-note").textContent = "Progress unavailable (" + error.message + "); retrying.";
      setTimeout(poll, POLL_MS * 2);
      return;
    }
    document.getElementById("live-summary").textContent =
      status.done + " of " + status.total + " cells · " + status.state;
    renderArms(status.arms);
    document.getElementById("live-stages").textContent = counts(status.stages, " · ");
    document.getElementById("live-eta").textContent = eta(status.eta_s);
    renderErrors(status.errors);
    if (status.done !== lastDone) {
      document.getElementById("live-note").textContent =
        "The report follows the finished cells; the pictures are as of the page's loading: reload to update them.";
      try { await refreshReport(); await refreshCases(); } catch (error) { /* the next poll tries again */ }
    }
    lastDone = status.done;
    live.dataset.done = String(status.done);
    if (status.running) {
      setTimeout(poll, POLL_MS);
    } else {
      live.dataset.running = "no";
      document.getElementById("live-note").textContent = "The experiment is " + status.state + ": reload for the final report.";
    }
  }

  if (live && live.dataset.running === "yes") poll();
})();
