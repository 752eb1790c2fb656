// Alarm KPIs (ISA-18.2 / EEMUA 191) per site and overall for a selectable period, kept in the URL.
"use strict";
(() => {
  const { api, el, num } = PT;
  const pct = (v) => `${num(v)} %`;
  function card(label, value, hint, bad) {
    return el("div", { class: "kpi" + (bad ? " bad" : ""), "data-kpi": label }, el("span", { class: "hint" }, label),
      el("b", {}, String(value)), hint ? el("span", { class: "hint" }, hint) : "");
  }
  function overall(o) {
    return [card("Alarms", o.alarms), card("Per operator-hour", num(o.per_hour), "acceptable ≤ 6, manageable ≤ 12", o.per_hour > 12),
      card("Max per 10 min", o.max_per_10_min, "flood > 10", o.max_per_10_min > 10),
      card("Flood time", pct(o.flood_pct), "target < 1 %", o.flood_pct >= 1), card("Standing", o.standing),
      card("Stale", o.stale, "unchanged > 24 h", o.stale > 0), card("Chattering", o.chattering, "≥ 3 in 60 s", o.chattering > 0),
      card("Time to acknowledge", o.ack_median_text || "–", o.ack_p90_text ? `90 %: ${o.ack_p90_text}` : ""),
      card("Not acknowledged", o.not_acknowledged, "", o.not_acknowledged > 0)];
  }
  function siteRow(s) {
    return el("tr", { "data-site": s.site }, el("td", { "data-label": "Site" }, s.site_name),
      el("td", { class: "num", "data-label": "Alarms" }, s.alarms), el("td", { class: "num", "data-label": "Per hour" }, num(s.per_hour)),
      el("td", { class: "num", "data-label": "Max per 10 min" }, s.max_per_10_min), el("td", { class: "num", "data-label": "Flood" }, pct(s.flood_pct)),
      el("td", { class: "num", "data-label": "Standing" }, s.standing), el("td", { class: "num", "data-label": "Stale" }, s.stale),
      el("td", { class: "num", "data-label": "Chattering" }, s.chattering),
      el("td", { "data-label": "Acknowledge" }, s.ack_median_text ? `${s.ack_median_text} / ${s.ack_p90_text}` : "–"),
      el("td", { class: "num", "data-label": "Not acknowledged" }, s.not_acknowledged));
  }
  function topRow(t, i) {
    return el("tr", { "data-alarm": t.alarm }, el("td", {}, i + 1), el("td", { "data-label": "Site" }, t.site_name),
      el("td", { "data-label": "Channel" }, t.channel), el("td", { "data-label": "Rule" }, t.rule_label),
      el("td", { class: "num", "data-label": "Raised" }, t.count), el("td", { class: "num", "data-label": "Share" }, pct(t.share_pct)));
  }
  async function load() {
    const period = document.getElementById("k-period").value, site = document.getElementById("k-site").value;
    const q = new URLSearchParams({ period });
    if (site) q.set("site", site);
    history.replaceState(null, "", "?" + q);
    const resp = await api("/api/kpi?" + q);
    if (!resp.ok) { document.getElementById("k-overall").replaceChildren(el("p", { class: "error" }, resp.data.detail || String(resp.status))); return; }
    const d = resp.data;
    document.getElementById("k-overall").replaceChildren(...overall(d.overall));
    document.getElementById("k-site-rows").replaceChildren(...d.sites.map(siteRow));
    document.getElementById("k-top-rows").replaceChildren(...(d.top.length ? d.top.map(topRow) : [el("tr", {}, el("td", { colspan: 6 }, "No alarms in the period."))]));
    window.__kpiLoaded = (window.__kpiLoaded || 0) + 1;
  }
  async function start() {
    const me = await api("/api/me");
    const sel = document.getElementById("k-site");
    for (const s of me.data.sites) sel.append(el("option", { value: s.id }, s.name));
    const q = new URLSearchParams(location.search);
    if (q.get("period")) document.getElementById("k-period").value = q.get("period");
    if (q.get("site")) sel.value = q.get("site");
    for (const id of ["k-period", "k-site"]) document.getElementById(id).addEventListener("change", load);
    await load();
  }
  start();
})();
