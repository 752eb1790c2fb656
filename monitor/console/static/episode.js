// One exceedance episode: its facts and the readings around it, with the limit line.
"use strict";
(() => {
  const { api, el, num, time, duration } = PT;
  const id = document.body.dataset.episode;

  async function start() {
    const resp = await api(`/api/episodes/${encodeURIComponent(id)}`);
    if (!resp.ok) { document.getElementById("ep-title").textContent = resp.data.detail || "Not available"; return; }
    const d = resp.data, e = d.episode;
    document.getElementById("ep-title").textContent = `${d.site_name}: ${e.rule} on ${e.channel}`;
    const facts = [["Status", e.status], ["Start", e.start ? time(Date.parse(e.start) / 1000) : "(not recorded)"],
      ["End", e.end ? time(Date.parse(e.end) / 1000) : e.status], ["Duration", duration(e.duration_s)],
      ["Start value", `${num(e.start_value)} ${e.unit}`], ["Peak", `${num(e.peak)} ${e.unit}`],
      ["Limit", `${num(e.limit)} ${e.unit}`], ["Completeness", e.completeness_pct === null ? "" : `${e.completeness_pct} % (${e.readings_good} of ${e.readings_expected})`],
      ["Citation", e.citation],
      ...(e.revisions && e.revisions.length ? [["Revisions (late readings)", e.revisions.join("; ")]] : [])];
    document.getElementById("ep-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    const q = new URLSearchParams({ site: d.site, channel: e.channel, rule: e.rule, from: new Date(d.window.start * 1000).toISOString(),
      to: new Date(d.window.end * 1000).toISOString(), format: "csv", evidence: "true", download: "true" });
    document.getElementById("ep-csv").href = "/api/history?" + q;
    if (!d.channel_known) return;
    const box = document.getElementById("ep-chart");
    const show = async (a, b) => {
      const tq = new URLSearchParams({ channel: e.channel, start: a, end: b, buckets: Math.max(100, Math.round(box.clientWidth || 1000)) });
      const tr = await api(`/api/sites/${encodeURIComponent(d.site)}/trend?${tq}`);
      if (tr.ok) PTChart.draw(box, { ...tr.data, live: [], slug: [], limits: d.limits.length ? d.limits : tr.data.limits }, show);
    };
    await show(d.window.start, d.window.end);
  }
  // Enforcement staff draft the notice of violation (the server refuses every other role as well).
  if (document.body.dataset.role === "enforcement") {
    for (const fmt of ["pdf", "docx"]) document.getElementById("nov-" + fmt).href = `/api/nov/${encodeURIComponent(id)}?format=${fmt}`;
    document.getElementById("ep-nov").hidden = false;
  }
  start();
})();
