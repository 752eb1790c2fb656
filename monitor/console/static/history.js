// Exceedance history: `pretreat exceedances` in the browser, with CSV and JSON downloads of the same rows (the
// reports are on their own page, reports.js).
"use strict";
(() => {
  const { api, el, num, time, duration } = PT;

  function params() {
    const q = new URLSearchParams();
    const v = (id) => document.getElementById(id).value.trim();
    if (v("f-site")) q.set("site", v("f-site"));
    if (v("f-rule")) q.set("rule", v("f-rule"));
    if (v("f-channel")) q.set("channel", v("f-channel"));
    if (v("f-from")) q.set("from", v("f-from") + "Z");
    if (v("f-to")) q.set("to", v("f-to") + "Z");
    if (document.getElementById("f-dq").checked) q.set("data_quality", "true");
    return q;
  }

  async function show(ev) {
    if (ev) ev.preventDefault();
    const q = params();
    for (const [id, fmt] of [["dl-csv", "csv"], ["dl-json", "json"]]) {
      const d = new URLSearchParams(q); d.set("format", fmt); d.set("download", "true");
      document.getElementById(id).href = "/api/history?" + d;
    }
    q.set("limit", "500");
    const resp = await api("/api/history?" + q);
    const body = document.getElementById("h-rows");
    if (!resp.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 12 }, resp.data.detail || String(resp.status)))); return; }
    const rows = String(resp.data).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)).reverse();
    const total = resp.headers.get("X-Total-Count");
    document.getElementById("h-count").textContent = `${total} episode(s)${Number(total) > rows.length ? `, the latest ${rows.length} shown` : ""}; newest first.`;
    // 40 CFR 401.17 adopted by the permit: permitted pH excursions are listed apart, never among the violations
    const frag = document.createDocumentFragment(), permitted = document.createDocumentFragment();
    for (const r of rows) {
      const start = r.start ? Date.parse(r.start) / 1000 : null, end = r.end ? Date.parse(r.end) / 1000 : null;
      const link = r.episode_id ? el("a", { href: "/episodes/" + r.episode_id }, String(r.n)) : String(r.n);
      // a duration rule starts at its onset; `confirmed` is when the duration was exceeded (the alarm fired)
      const confirmed = r.confirmed ? ` (confirmed ${time(Date.parse(r.confirmed) / 1000)})` : "";
      (r.permitted ? permitted : frag).append(el("tr", { "data-rule": r.rule, class: r.invalid ? "struck" : null, title: r.invalid || null },
        el("td", {}, link), el("td", {}, r.site), el("td", {}, r.channel), el("td", {}, r.rule), el("td", {}, r.status),
        el("td", {}, time(start) + confirmed), el("td", {}, time(end)), el("td", {}, duration(r.duration_s)),
        el("td", { class: "num" }, num(r.peak)), el("td", { class: "num" }, num(r.limit) + (r.unit ? " " + r.unit : "")),
        el("td", { class: "num" }, r.completeness_pct === null || r.completeness_pct === undefined ? "" : `${num(r.completeness_pct)} %`),
        el("td", {}, r.citation)));
    }
    body.replaceChildren(frag);
    document.getElementById("h-permitted").replaceChildren(permitted);
    document.getElementById("h-permitted-box").hidden = !document.getElementById("h-permitted").children.length;
  }

  async function start() {
    const me = await api("/api/me");
    const sel = document.getElementById("f-site");
    for (const s of me.data.sites) sel.append(el("option", { value: s.id }, s.name));
    document.getElementById("filters").addEventListener("submit", show);
    await show();
  }
  start();
})();
