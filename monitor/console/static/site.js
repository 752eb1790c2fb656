// Site view: each channel's current value, quality, completeness and trend (PTChart, uPlot); live readings
// from the stream; an overlay of chosen channels on one chart; PNG and CSV export of what each chart shows.
"use strict";
(() => {
  const { api, el, num, time, stream } = PT;
  const site = document.body.dataset.site;
  const charts = new Map();  // channel id -> { box, data, card, unit }
  const overlay = { box: null, ids: [], data: null };
  let span = 86400, zoom = null;  // zoom: [start, end] while zoomed in, else the window follows now
  let siteName = site;

  function windowNow() {
    if (zoom) return zoom;
    const end = Date.now() / 1000;
    return [end - span, end];
  }

  function quality(last) {
    if (!last) return el("span", { class: "q none" }, "no reading");
    return el("span", { class: "q " + (last.quality === "good" ? "good" : "bad"), title: last.reason || "" },
      last.quality + (last.reason ? ": " + last.reason : ""));
  }

  function valueText(last, unit) {
    return last && last.value !== null && last.value !== undefined ? `${num(last.value)} ${unit}` : "–";
  }

  function tile(ch, label) {
    return el("div", { class: "tile", id: "tile-" + ch.id },
      el("div", { class: "label" }, label),
      el("div", { class: "big value", "data-channel": ch.id }, valueText(ch.last, ch.unit)),
      el("div", {}, quality(ch.last)), el("div", { class: "hint" }, ch.last ? time(ch.last.time) : ""));
  }

  // "97.2 % complete over 2026-11-25 07:00:00 EST – 2026-12-02 07:00:00 EST (587,520 of 604,801 readings)"
  function completeText(c) {
    if (!c || c.pct === null || c.pct === undefined) return "";
    return `${c.pct.toFixed(1)} % complete over ${time(c.start)} – ${time(c.end)} (${c.good.toLocaleString("en-US")} of ${c.expected.toLocaleString("en-US")} readings)`;
  }

  function chartBox(id, title) {
    const box = el("div", { class: "trend", "data-channel": id }, el("div", { class: "plot" }), el("div", { class: "ep-legend" }));
    const name = () => `${site}_${id}_${new Date(windowNow()[0] * 1000).toISOString().slice(0, 16).replace(":", "")}`;
    const tools = el("div", { class: "chart-tools" },
      el("button", { type: "button", class: "export-png", "data-channel": id }, "PNG"),
      el("button", { type: "button", class: "export-csv", "data-channel": id }, "CSV"));
    tools.querySelector(".export-png").addEventListener("click", () => {
      const [a, b] = windowNow();
      PTChart.exportPng(box, name(), `${siteName} · ${title} · ${time(a)} – ${time(b)}`);
    });
    tools.querySelector(".export-csv").addEventListener("click", () => PTChart.exportCsv(box, name()));
    return [box, tools];
  }

  function card(ch) {
    const pct = completeText(ch.completeness);
    const [canvas, tools] = chartBox(ch.id, ch.id);
    const box = el("article", { class: "channel" + (ch.stale ? " stale" : ""), id: "ch-" + ch.id },
      el("header", {},
        el("h2", {}, ch.id), el("span", { class: "kind" }, ch.kind),
        el("span", { class: "big value", "data-channel": ch.id }, valueText(ch.last, ch.unit)),
        el("span", { class: "quality" }, quality(ch.last)),
        ch.stale ? el("span", { class: "q bad" }, "STALE") : null,
        el("span", { class: "complete" }, pct),
        el("span", { class: "hint" }, ch.last_good ? "last good " + time(ch.last_good.time) : "no good reading")),
      el("div", { class: "chartbox" }, tools, canvas),
      ch.limits.length ? el("p", { class: "hint" }, ch.limits.map((l) => `${l.rule} ${num(l.value)} ${ch.unit} (${l.citation})`).join(" · ")) : null);
    charts.set(ch.id, { box: canvas, data: null, card: box, unit: ch.unit });
    return box;
  }

  const onZoom = (a, b) => { zoom = [a, b]; loadAll(); };

  async function fetchTrend(id, box) {
    const [start, end] = windowNow();
    const buckets = Math.max(100, Math.min(4000, Math.round(box.clientWidth || 800)));
    const q = new URLSearchParams({ channel: id, start, end, buckets });
    const resp = await api(`/api/sites/${encodeURIComponent(site)}/trend?${q}`);
    return resp.ok ? { ...resp.data, live: [], slug: [] } : null;
  }

  // The slug limit line comes apart (its baseline is rebuilt from the record): drawn when it arrives.
  async function addSlug(id, data, box) {
    const q = new URLSearchParams({ channel: id, start: data.start, end: data.end });
    const resp = await api(`/api/sites/${encodeURIComponent(site)}/slug?${q}`);
    if (!resp.ok || !resp.data.length) return;
    data.slug = resp.data;
    PTChart.draw(box, box === overlay.box ? overlay.data : data, onZoom);
  }

  async function load(id) {
    const c = charts.get(id);
    const data = await fetchTrend(id, c.box);
    if (!data) return;
    c.data = data;
    PTChart.draw(c.box, c.data, onZoom);
    const complete = c.card.querySelector(".complete");
    if (complete) complete.textContent = completeText(data.completeness);
    if (data.slug_rule) addSlug(id, data, c.box);
  }

  async function loadOverlay() {
    const wrap = document.getElementById("overlay");
    if (overlay.ids.length < 2) { wrap.hidden = true; overlay.data = null; return; }
    wrap.hidden = false;
    const got = await Promise.all(overlay.ids.map((id) => fetchTrend(id, overlay.box)));
    overlay.data = got.filter(Boolean);
    if (overlay.data.length) PTChart.draw(overlay.box, overlay.data, onZoom);
  }

  async function loadAll() {
    await Promise.all([...charts.keys()].map(load).concat([loadOverlay()]));
    window.__trendsLoaded = performance.now();
  }

  function onReadings(d) {
    const c = charts.get(d.channel);
    const last = d.readings[d.readings.length - 1];
    const reading = { time: last[0], value: last[1], quality: last[2], reason: last[3] };
    for (const node of document.querySelectorAll(`.value[data-channel="${CSS.escape(d.channel)}"]`)) {
      node.textContent = valueText(reading, c ? c.unit : "");
    }
    if (!c || !c.data) return;
    for (const r of d.readings) c.data.live.push([r[0], r[2] === "good" ? r[1] : null]);
    if (!zoom) { const [a, b] = windowNow(); c.data.start = a; c.data.end = b; }
    PTChart.draw(c.box, c.data, onZoom);
    const o = overlay.data && overlay.data.find((x) => x.channel === d.channel);
    if (o) {
      for (const r of d.readings) o.live.push([r[0], r[2] === "good" ? r[1] : null]);
      if (!zoom) for (const x of overlay.data) [x.start, x.end] = windowNow();
      PTChart.draw(overlay.box, overlay.data, onZoom);
    }
  }

  // Channels to compare on one chart (one y axis per unit).
  function overlayPicker(channels) {
    const [box, tools] = chartBox("overlay", "overlay");
    overlay.box = box;
    const pick = document.getElementById("overlay-pick");
    for (const ch of channels) {
      const input = el("input", { type: "checkbox", value: ch.id, "data-overlay": ch.id });
      input.addEventListener("change", () => {
        overlay.ids = [...pick.querySelectorAll("input:checked")].map((x) => x.value);
        loadOverlay();
      });
      pick.append(el("label", {}, input, ` ${ch.id} (${ch.unit})`));
    }
    document.getElementById("overlay").append(el("div", { class: "chartbox" }, tools, box));
  }

  // Alarms of this site: a banner while any is not normal, and each channel's value takes its worst alarm's
  // priority colour and symbol (the same as the alarm list and the header).
  const RANK = Object.fromEntries(PT.PRIORITIES.map((p, i) => [p.id, i]));
  function showAlarms(list) {
    const live = list.filter((r) => r.state !== "normal" && r.state !== "shelved" && r.state !== "out-of-service")
      .sort((a, b) => (RANK[a.priority] ?? 9) - (RANK[b.priority] ?? 9));
    const banner = document.getElementById("site-alarms");
    banner.hidden = !live.length;
    banner.replaceChildren(...(live.length ? [el("strong", {}, `${live.length} alarm${live.length === 1 ? "" : "s"} at this site: `),
      ...live.map((r) => el("span", { class: "site-alarm", "data-alarm": r.alarm }, PT.badge(r.priority), " ",
        `${r.channel} · ${r.rule_label} ${r.value_text}${r.limit_text ? " / limit " + r.limit_text : ""} (${r.state_label})`)),
      el("a", { href: "/?site=" + encodeURIComponent(site) }, "open in the alarm list")] : []));
    for (const node of document.querySelectorAll(".value-alarm")) node.remove();
    const worst = new Map();
    for (const r of live) {
      const w = worst.get(r.channel);
      if (!w || (RANK[r.priority] ?? 9) < (RANK[w.priority] ?? 9)) worst.set(r.channel, r);
    }
    for (const [ch, r] of worst) {
      for (const node of document.querySelectorAll(`.value[data-channel="${CSS.escape(ch)}"]`)) {
        node.classList.add("in-alarm", "p-" + r.priority);
        node.after(el("span", { class: "value-alarm" }, PT.badge(r.priority)));
      }
    }
  }
  async function loadAlarms() {
    const resp = await api(`/api/alarms?site=${encodeURIComponent(site)}&include_normal=false`);
    if (resp.ok) showAlarms(resp.data);
  }

  // The slug baseline in force, on the card of the channel the rule judges: the running daemon's own (from its
  // health snapshot, `monitor.read.baselines`), in the words `pretreat rules` prints; or why none is shown.
  function slugBaseline(b) {
    const source = b.as_of === null ? "" : `the daemon's check engine, as of ${time(b.as_of)}` +
      (b.stale ? ` (${b.stale})` : "");
    return el("div", { class: "slug-baseline", "data-slug": b.channel },
      el("strong", {}, `Slug baseline in force${b.channel === b.card ? "" : " (" + b.channel + ")"}: `),
      el("span", { class: "slug-text" + (b.text ? "" : " unavailable") }, b.text || b.unavailable),
      el("div", { class: "hint" }, b.citation),
      b.reading ? el("div", { class: "hint slug-reading" }, "Reading in force: " + b.reading) : null,
      b.batch ? el("div", { class: "hint slug-batch" }, "Batch operation: " + b.batch) : null,
      source ? el("div", { class: "hint" }, source) : null);
  }

  async function start() {
    const resp = await api(`/api/sites/${encodeURIComponent(site)}`);
    if (!resp.ok) { document.getElementById("channels").textContent = resp.data.detail || "not available"; return; }
    const s = resp.data;
    const byId = new Map(s.channels.map((c) => [c.id, c]));
    const tiles = document.getElementById("sampler");
    for (const id of s.sampler.sampler_temperature) tiles.append(tile(byId.get(id), "Sampler fridge temperature"));
    for (const id of s.sampler.sampler_count) tiles.append(tile(byId.get(id), "Samples taken"));
    siteName = s.name;
    const box = document.getElementById("channels");
    for (const ch of s.channels) box.append(card(ch));
    for (const b of s.slug_baselines || []) document.getElementById("ch-" + b.card)?.append(slugBaseline(b));
    overlayPicker(s.channels);
    let resizing = 0;
    window.addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => { for (const c of charts.values()) PTChart.resize(c.box); PTChart.resize(overlay.box); }, 150);
    });
    for (const b of document.querySelectorAll("[data-range]")) {
      b.addEventListener("click", () => {
        span = Number(b.dataset.range); zoom = null;
        for (const x of document.querySelectorAll("[data-range]")) x.classList.toggle("on", x === b);
        loadAll();
      });
    }
    document.getElementById("zoom-reset").addEventListener("click", () => { zoom = null; loadAll(); });
    document.getElementById("site-zone").textContent = `Times in ${s.timezone} (${PT.parts(Date.now() / 1000).zoneName}).`;
    await loadAll();
    await loadAlarms();
    stream(`/api/events?site=${encodeURIComponent(site)}`, { readings: onReadings, alarm: loadAlarms });
  }
  start();
})();
