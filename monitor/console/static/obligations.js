// The overview's list of obligations not yet met (open, outstanding or overdue), outstanding and overdue first, each linked to its episode,
// refreshed every minute (deadlines are hours or days apart; the overdue alarm itself arrives live).
"use strict";
(() => {
  const { api, el, time } = PT;

  async function load() {
    const resp = await api("/api/obligations");
    if (!resp.ok) return;
    const zones = Object.fromEntries((await api("/api/sites")).data.map((s) => [s.id, s.timezone]));
    const pending = resp.data.filter((o) => o.status === "open" || o.status === "outstanding" || o.status === "overdue")
      .sort((a, b) => (a.status === "open" ? 1 : 0) - (b.status === "open" ? 1 : 0) || a.due - b.due);
    document.getElementById("ob-rows").replaceChildren(...pending.map((o) => el("tr", { class: o.status, "data-obligation": o.id },
      el("td", { class: "status" }, o.status), el("td", {}, o.status === "outstanding" ? `${o.due_text}, since ${time(o.due, zones[o.site])}` : `${time(o.due, zones[o.site])} (${o.due_text})`), el("td", {}, o.site),
      el("td", {}, `${o.action}, to ${o.recipient}`), el("td", { title: o.quote }, o.citation),
      el("td", {}, o.event_id ? el("a", { href: `/episodes/${o.event_id}` }, `${o.channel} ${o.rule}`) : `${o.channel} ${o.rule}`))));
    document.getElementById("ob-table").hidden = !pending.length;
    document.getElementById("ob-none").hidden = !!pending.length;
    document.body.dataset.obligations = "loaded";
  }
  load();
  setInterval(load, 60000);
})();
