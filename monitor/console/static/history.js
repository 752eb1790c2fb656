// Exceedance history: `pretreat exceedances` in the browser, with CSV and JSON downloads of the same rows (the
// reports are on their own page, reports.js).
"use strict";
(() => {
  const { api, el, num, time } = PT;

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
    if (!resp.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 15 }, resp.data.detail || String(resp.status)))); return; }
    const rows = String(resp.data).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)).reverse();
    const total = resp.headers.get("X-Total-Count");
    document.getElementById("h-count").textContent = `${total} episode(s)${Number(total) > rows.length ? `, the latest ${rows.length} shown` : ""}; newest first.`;
    // 40 CFR 401.17 adopted by the permit: permitted pH excursions are listed apart, never among the violations
    const frag = document.createDocumentFragment(), permitted = document.createDocumentFragment();
    const who = (m) => m ? el("span", {}, m.user, el("br"), el("span", { class: "hint" }, m.time_text)) : "";
    for (const r of rows) {
      // the episode's id in the store: the same for every user and filter (r.n is only this list's count)
      const id = r.episode_id ? el("a", { href: "/episodes/" + r.episode_id, title: r.episode_name }, "E" + r.episode_id) : "";
      const measured = r.measured_text ? el("span", {}, r.measured_text,
        r.unmeasured_text ? el("span", { class: "hint" }, ` +${r.unmeasured_text} unmeasured`) : "") : "";
      const acked = el("span", {}, who(r.acknowledged), r.seen ? el("span", { class: "seen" }, `industry seen: ${r.seen.user} ${r.seen.time_text}`) : "");
      const cause = r.cause ? el("span", {}, el("b", {}, "Cause: "), r.cause, el("br"), el("b", {}, "Corrective action: "),
        r.corrective_action, el("br"), el("span", { class: "hint" }, `${r.annotated.user}, ${r.annotated.time_text}`),
        // an earlier entry is never hidden: the episode's page lists each one with who and when
        r.annotated.earlier > 0 && r.episode_id ? el("a", { class: "hint earlier", href: "/episodes/" + r.episode_id },
          ` (replaces ${r.annotated.earlier} earlier ${r.annotated.earlier === 1 ? "entry" : "entries"})`) : "") : el("span", { class: "hint" }, "none entered");
      // a duration rule starts at its onset; `confirmed` is when the duration was exceeded (the alarm fired)
      const confirmed = r.confirmed ? ` (confirmed ${time(Date.parse(r.confirmed) / 1000, r.timezone)})` : "";
      (r.permitted ? permitted : frag).append(el("tr", { "data-site": r.site, "data-rule": r.rule, "data-episode": r.episode_id, class: r.invalid ? "struck" : null, title: r.invalid || null },
        el("td", { class: "eid", "data-label": "Episode" }, id),
        el("td", { "data-label": "Site" }, r.site_name || r.site), el("td", { "data-label": "Channel" }, r.channel),
        el("td", { "data-label": "Rule", title: r.rule }, r.rule_label || r.rule), el("td", { "data-label": "Status" }, r.status),
        el("td", { class: "t onset", "data-label": "Onset" }, r.start_text + confirmed), el("td", { class: "t end", "data-label": "End" }, r.end_text),
        el("td", { class: "dur", "data-label": "Duration" }, r.duration_text),
        el("td", { class: "measured", "data-label": "Measured" }, measured),
        el("td", { class: "num peak", "data-label": "Peak" }, r.peak_text), el("td", { class: "num limit", "data-label": "Limit" }, r.limit_text),
        el("td", { class: "num", "data-label": "Complete" }, r.completeness_pct === null || r.completeness_pct === undefined ? "" : `${num(r.completeness_pct)} %`),
        el("td", { class: "acked", "data-label": "Acknowledged" }, acked),
        el("td", { class: "cause", "data-label": "Cause / action" }, cause),
        el("td", { "data-label": "Citation" }, r.citation)));
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
