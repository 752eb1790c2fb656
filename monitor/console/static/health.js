// Health: `pretreat status` in the browser (link state, last good readings, counters, queue depths).
"use strict";
(() => {
  const { api, el, num, time } = PT;

  function counters(c) { return Object.entries(c).map(([k, v]) => `${k} ${typeof v === "number" ? num(v) : v}`).join(" · "); }
  function reading(r, unit) { return r ? `${r.value === null ? "–" : num(r.value) + " " + unit} at ${time(r.time)}` : "none"; }

  async function refresh() {
    const resp = await api("/api/health");
    if (!resp.ok) { document.getElementById("h-headline").textContent = resp.data.detail || "not available"; return; }
    const r = resp.data;
    const head = document.getElementById("h-headline");
    head.textContent = r.running ? `Daemon ${r.status}` + (r.snapshot_age !== null ? ` (snapshot ${num(r.snapshot_age, 3)} s old)` : "")
      : `Daemon NOT RUNNING: ${r.reason}`;
    head.className = "headline " + (r.exit_code === 0 ? "good" : "bad");
    document.getElementById("h-problems").replaceChildren(...r.problems.map((p) => el("li", {}, p)));
    const inst = [], chans = [];
    for (const i of r.instruments) {
      inst.push(el("tr", { "data-instrument": i.key }, el("td", {}, i.key), el("td", {}, i.driver),
        el("td", { class: "link " + i.link }, i.link), el("td", {}, counters(i.counters))));
      for (const c of i.channels) {
        chans.push(el("tr", {}, el("td", {}, `${i.key.split("/")[0]}/${c.id}` + (c.stale ? " (STALE)" : "")),
          el("td", {}, reading(c.last, c.unit)), el("td", {}, c.last ? c.last.quality + (c.last.reason ? ": " + c.last.reason : "") : ""),
          el("td", {}, reading(c.last_good, c.unit))));
      }
    }
    document.getElementById("h-instruments").replaceChildren(...inst);
    document.getElementById("h-channels").replaceChildren(...chans);
    const snap = r.snapshot || {};
    const queues = Object.entries(snap)
      .filter(([k, v]) => v && typeof v === "object" && !Array.isArray(v) && !["instruments", "links", "streaming"].includes(k))
      .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, counters(v))));
    document.getElementById("h-queues").replaceChildren(...queues);
  }
  refresh();
  setInterval(refresh, 5000);
})();
