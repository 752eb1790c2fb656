// County edges: the hub's view of every edge (online, last birth, last seq, gaps), its hub alarms with the sites
// affected, and the alarm transitions and seals the edges sent (monitor/console/county.py). Text only.
"use strict";
(() => {
  const { api, el, time } = PT;

  function edgeRow(e) {
    const state = e.online ? "online" : "OFFLINE" + (e.offline_detail ? ": " + e.offline_detail : "");
    const birth = e.born === null ? "never" : `bdSeq ${e.bdseq} at ${time(e.born)}`;
    return el("tr", { "data-node": e.node, "data-online": String(e.online), "data-gap": String(e.gap_detail !== null) },
      el("td", {}, e.node), el("td", {}, e.sites.join(", ")),
      el("td", { class: "q " + (e.online ? "good" : "bad") }, state), el("td", {}, birth),
      el("td", {}, e.last_seen === null ? "never" : time(e.last_seen)),
      el("td", {}, e.last_seq === null ? "–" : String(e.last_seq)),
      el("td", { class: "q " + (e.gap_detail ? "bad" : "good") }, e.gap_detail || "none"));
  }

  function alarmRow(a) {
    return el("tr", { "data-kind": a.kind, "data-node": a.node, "data-open": String(a.cleared === null) },
      el("td", { class: "q " + (a.cleared === null ? "bad" : "none") }, a.kind), el("td", {}, a.node),
      el("td", {}, a.sites.join(", ")), el("td", {}, a.detail), el("td", {}, time(a.raised)),
      el("td", {}, a.cleared === null ? "open" : time(a.cleared)));
  }

  function journalRow(r) {
    const what = r.type === "seal" ? `seal: journal #${r.seq} ${String(r.hash || "").slice(0, 16)}…`
      : `${r.alarm}: ${r.from} → ${r.state}` + (r.value !== null && r.value !== undefined ? ` (value ${r.value}, limit ${r.limit})` : "");
    const site = r.type === "seal" ? (r.sites || []).join(", ") : (r.site || "");
    return el("tr", { "data-type": r.type, "data-site": site, "data-node": r.node },
      el("td", {}, time(r.time)), el("td", {}, r.node), el("td", {}, site), el("td", {}, what),
      el("td", {}, [r.who, r.why].filter((x) => x).join(": ")));
  }

  async function refresh() {
    const [edges, journal] = await Promise.all([api("/api/county/edges"), api("/api/county/journal?limit=100")]);
    const head = document.getElementById("c-headline");
    if (!edges.ok) { head.textContent = edges.data.detail || "not available"; head.className = "headline bad"; return; }
    const down = edges.data.edges.filter((e) => !e.online).length;
    const gaps = edges.data.edges.filter((e) => e.gap_detail).length;
    head.textContent = `${edges.data.edges.length} edge(s): ${down} offline, ${gaps} with missing messages`;
    head.className = "headline " + (down || gaps ? "bad" : "good");
    document.getElementById("c-edges").replaceChildren(...edges.data.edges.map(edgeRow));
    document.getElementById("c-alarms").replaceChildren(...edges.data.alarms.map(alarmRow));
    if (journal.ok) document.getElementById("c-journal").replaceChildren(...journal.data.map(journalRow));
  }
  refresh();
  setInterval(refresh, 5000);
})();
