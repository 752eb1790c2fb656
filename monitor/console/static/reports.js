// Reports: the reports the daemon (or a user, below) has written, newest first, each to read in a new tab (PDF,
// HTML) or download; and "generate for period", the periodic compliance report for chosen local days.
"use strict";
(() => {
  const { api, el, num, time } = PT;

  function size(bytes) {
    if (bytes < 1024) return `${bytes} B`;
    return bytes < 1048576 ? `${num(bytes / 1024, 3)} KiB` : `${num(bytes / 1048576, 3)} MiB`;
  }

  async function reports(ev) {
    if (ev) ev.preventDefault();
    const site = document.getElementById("r-site").value.trim();
    const resp = await api("/api/reports" + (site ? "?site=" + encodeURIComponent(site) : ""));
    const body = document.getElementById("r-rows");
    if (!resp.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 7 }, resp.data.detail || String(resp.status)))); return; }
    document.getElementById("r-count").textContent = resp.data.length
      ? `${resp.data.length} report(s); newest first.` : "No reports written yet.";
    const frag = document.createDocumentFragment();
    for (const r of resp.data) {
      const readable = r.format === "pdf" || r.format === "html";
      frag.append(el("tr", { "data-report": `${r.site}/${r.kind}/${r.name}` },
        el("td", { title: r.site_name }, r.site), el("td", {}, r.kind), el("td", {}, r.period),
        el("td", {}, el("a", { href: r.url, download: r.name }, r.name)),
        el("td", {}, readable ? el("a", { href: r.url + "?inline=true", target: "_blank", rel: "noopener", class: "read" }, "Read") : ""),
        el("td", { class: "num" }, size(r.size)), el("td", {}, time(r.modified))));
    }
    body.replaceChildren(frag);
  }

  async function generate(ev) {
    ev.preventDefault();
    const msg = document.getElementById("gen-msg"), go = document.getElementById("gen-go");
    const v = (id) => document.getElementById(id).value;
    go.disabled = true;
    msg.textContent = "Generating…";
    const resp = await api("/api/reports/generate", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ site: v("gen-site"), from: v("gen-from"), to: v("gen-to") }),
    });
    go.disabled = false;
    msg.textContent = resp.ok ? `Written: ${resp.data.files.join(", ")} (due ${resp.data.due})`
      : `Not generated: ${resp.data.detail || resp.status}`;
    msg.dataset.done = resp.ok ? "ok" : "error";
    await reports();
  }

  async function start() {
    const me = await api("/api/me");
    for (const id of ["r-site", "gen-site"]) {
      const sel = document.getElementById(id);
      for (const s of me.data.sites) sel.append(el("option", { value: s.id }, s.name));
    }
    document.getElementById("r-filters").addEventListener("submit", reports);
    document.getElementById("gen-form").addEventListener("submit", generate);
    await reports();
  }
  start();
})();
