// The overview of many sites: one tile per site (status, worst standing alarm, newest reading's age, compliance
// this month), worst first, searchable; the search and status filter are kept in the URL. Refreshed every 5 s.
"use strict";
(() => {
  const { api, el, badge, mark, painted } = PT;
  let timer = null;

  function toUrl() {
    const q = new URLSearchParams();
    const text = document.getElementById("ov-q").value.trim(), status = document.getElementById("ov-status").value;
    if (text) q.set("q", text);
    if (status) q.set("status", status);
    history.replaceState(null, "", q.toString() ? "?" + q : location.pathname);
  }
  function keep(t, status) {
    if (!status) return true;
    if (status === "alarm") return t.worst !== null;
    return t.status === status;
  }
  function tile(t) {
    const abnormal = t.worst !== null;
    const head = el("header", {}, el("a", { href: "/sites/" + encodeURIComponent(t.id), class: "name" }, t.name),
      el("span", { class: "hint company" }, t.company || t.jurisdiction));
    const status = abnormal ? badge(t.worst.priority) : el("span", { class: "badge " + (t.status === "no-data" ? "nodata" : "p-normal") },
      t.status === "no-data" ? "No recent data" : "Normal");
    const worst = abnormal ? el("p", { class: "worst" }, `${t.worst.rule_label} · ${t.worst.channel}`,
      t.worst.value_text ? ` · ${t.worst.value_text}${t.worst.limit_text ? " / " + t.worst.limit_text : ""}` : "",
      el("br"), el("span", { class: "hint" }, t.worst.state_label)) : el("p", { class: "worst hint" }, "No standing alarm");
    const counts = el("p", { class: "counts" }, `${t.unacked} unacknowledged · ${t.active} standing` +
      (t.suppressed ? ` · ${t.suppressed} shelved` : ""));
    return el("article", { class: `site-tile ${abnormal ? "p-" + t.worst.priority : "s-" + t.status}`, "data-site": t.id,
      "data-status": t.status }, head, status, worst, counts,
      el("p", { class: "age" }, "Last reading: ", el("b", {}, t.last_reading_text)),
      el("p", { class: "compliance" + (t.exceedances_this_month ? " bad" : "") }, t.compliance_text));
  }
  async function load() {
    const q = document.getElementById("ov-q").value.trim();
    mark("overview-request");
    const resp = await api("/api/overview" + (q ? "?q=" + encodeURIComponent(q) : ""));
    mark("overview-data");
    const box = document.getElementById("tiles");
    if (!resp.ok) { box.replaceChildren(el("p", { class: "error" }, resp.data.detail || String(resp.status))); return; }
    const status = document.getElementById("ov-status").value;
    const shown = resp.data.sites.filter((t) => keep(t, status));
    box.replaceChildren(...(shown.length ? shown.map(tile) : [el("p", { class: "hint empty" }, "No site matches.")]));
    document.getElementById("ov-count").textContent = `${shown.length} of ${resp.data.total} sites`;
    window.__overviewLoaded = (window.__overviewLoaded || 0) + 1;
    painted("overview-painted");
  }
  function soon() { clearTimeout(timer); timer = setTimeout(() => { toUrl(); load(); }, 150); }

  const q = new URLSearchParams(location.search);
  document.getElementById("ov-q").value = q.get("q") || "";
  document.getElementById("ov-status").value = q.get("status") || "";
  document.getElementById("ov-q").addEventListener("input", soon);
  document.getElementById("ov-status").addEventListener("change", soon);
  document.getElementById("ov-filters").addEventListener("submit", (ev) => { ev.preventDefault(); soon(); });
  load();
  setInterval(load, 5000);
})();
