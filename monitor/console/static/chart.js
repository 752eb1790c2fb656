// Trend charts drawn by uPlot (vendored: uPlot.iife.min.js, MIT; see README "Operator console: trends").
// The server sends per-pixel-column buckets (min/max, counts, gaps, episodes with peaks, ticks in the site's
// zone); this module turns one or several of them into one chart: a min..max band per channel, one y axis
// per unit, booleans as steps on 0/1, limits and the slug line dashed, episodes shaded at least a few pixels
// wide with a marker and a legend, data-quality gaps grey. Times are the site's (uPlot's tzDate with the
// site zone; axis ticks computed by the server at local midnights and round hours), never the browser's.
"use strict";
const PTChart = (() => {
  const LINE = ["#1f5fa8", "#b35806", "#1b7837", "#762a83", "#8c510a", "#01665e"];
  const EPISODE = ["rgba(214,39,40,0.22)", "rgba(148,103,189,0.28)", "rgba(255,127,14,0.28)", "rgba(23,190,207,0.28)"];
  const EP_EDGE = ["#d62728", "#9467bd", "#ff7f0e", "#17becf"];
  const BAD = "rgba(120,120,120,0.22)", LIMIT = "#d62728", SLUG = "#7b3294";
  const MIN_EP_PX = 4;  // an episode is at least this wide, however short, plus a marker above it

  // One x array for every channel: bucket positions, a null point inside each gap (the line breaks there
  // only), live readings. A channel has `undefined` where another channel has a point (uPlot spans those).
  function align(trends) {
    const xs = new Set();
    const per = trends.map((d) => {
      const pts = new Map();
      d.x.forEach((x, i) => { if (d.min[i] !== null) pts.set(x, [d.min[i], d.max[i]]); });
      for (const [a, b] of d.gaps || []) pts.set((a + b) / 2, [null, null]);
      d.t.forEach((t, i) => { if (d.good[i] === 0) pts.set(d.x[i], [null, null]); });  // bad only: no line
      for (const [t, v] of d.live || []) if (t >= d.start && t <= d.end) pts.set(t, v === null ? [null, null] : [v, v]);
      for (const x of pts.keys()) xs.add(x);
      return pts;
    });
    const x = [...xs].sort((a, b) => a - b);
    const cols = [x];
    for (const pts of per) {
      cols.push(x.map((t) => (pts.has(t) ? pts.get(t)[1] : undefined)));  // max
      cols.push(x.map((t) => (pts.has(t) ? pts.get(t)[0] : undefined)));  // min
    }
    return cols;
  }

  function yRange(d, extra) {
    let lo = Infinity, hi = -Infinity;
    const take = (v) => { if (v !== null && v !== undefined && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } };
    d.forEach((t) => { t.min.forEach(take); t.max.forEach(take); (t.live || []).forEach((p) => take(p[1]));
      (t.limits || []).forEach((l) => take(l.value)); (t.slug || []).forEach((s) => take(s.threshold)); });
    (extra || []).forEach(take);
    if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
    if (lo === hi) { lo -= 1; hi += 1; }
    const pad = (hi - lo) * 0.06;
    return [lo - pad, hi + pad];
  }

  function fmtValue(unit) { return (u, v) => (v === null || v === undefined ? "–" : `${PT.num(v)} ${unit}`); }

  // Episodes, data-quality gaps, limits and the slug line, drawn on the plot after the series.
  function overlays(u, trends, units) {
    const g = u.ctx, top = u.bbox.top, h = u.bbox.height, px = (t) => u.valToPos(t, "x", true);
    const dpr = devicePixelRatio || 1;
    g.save();
    g.beginPath(); g.rect(u.bbox.left, top, u.bbox.width, h); g.clip();
    trends.forEach((d) => {
      g.fillStyle = BAD;
      const bw = Math.max(1 * dpr, px(d.start + d.bucket_s) - px(d.start));
      d.t.forEach((t, i) => { if (d.good[i] === 0) g.fillRect(px(t), top, bw, h); });
    });
    // every bucket's min..max as a column at least a pixel wide: an isolated bucket (gaps on both sides,
    // where the line does not reach) is still seen, and so is each column's full spread
    trends.forEach((d, i) => {
      g.fillStyle = LINE[i % LINE.length];
      d.x.forEach((x, k) => {
        if (d.min[k] === null) return;
        const y0 = u.valToPos(d.max[k], d.unit, true), y1 = u.valToPos(d.min[k], d.unit, true);
        g.fillRect(px(x) - dpr / 2, y0 - dpr / 2, Math.max(dpr, 1), Math.max(dpr, y1 - y0 + dpr));
      });
    });
    const eps = episodesOf(trends);
    eps.forEach((e, k) => {
      const a = px(Math.max(e.d.start, e.start ?? e.d.start)), b = px(Math.min(e.d.end, e.until ?? e.end ?? e.d.end));
      const w = Math.max(MIN_EP_PX * dpr, b - a), x0 = w > b - a ? (a + b) / 2 - w / 2 : a;
      g.fillStyle = EPISODE[e.color]; g.fillRect(x0, top, w, h);
      g.fillStyle = EP_EDGE[e.color];  // the marker: a downward triangle above the span, staggered if overlapping
      const mx = x0 + w / 2, my = top + 2 * dpr + (e.lane * 9 * dpr);
      g.beginPath(); g.moveTo(mx - 5 * dpr, my); g.lineTo(mx + 5 * dpr, my); g.lineTo(mx, my + 8 * dpr); g.closePath(); g.fill();
      if (e.peak !== null && e.peak !== undefined && e.peak_time !== null && e.peak_time !== undefined) {
        const scale = units.has(e.d.unit) ? e.d.unit : null;
        if (scale) {
          const py = u.valToPos(e.peak, scale, true);
          g.beginPath(); g.arc(px(e.peak_time), py, 4 * dpr, 0, 2 * Math.PI); g.strokeStyle = EP_EDGE[e.color]; g.lineWidth = 2 * dpr; g.stroke();
        }
      }
      e.k = k;
    });
    g.setLineDash([6 * dpr, 4 * dpr]); g.lineWidth = 1.2 * dpr; g.font = `${11 * dpr}px system-ui, sans-serif`;
    g.textAlign = "left"; g.textBaseline = "alphabetic";  // uPlot leaves its axis alignment on the context
    trends.forEach((d) => {
      g.strokeStyle = LIMIT; g.fillStyle = LIMIT;
      for (const l of d.limits || []) {
        const y = u.valToPos(l.value, d.unit, true);
        g.beginPath(); g.moveTo(u.bbox.left, y); g.lineTo(u.bbox.left + u.bbox.width, y); g.stroke();
        g.fillText(`${l.rule} ${PT.num(l.value)} ${d.unit}`, u.bbox.left + 4 * dpr, y - 3 * dpr);
      }
      g.strokeStyle = SLUG; g.fillStyle = SLUG;
      const slug = (d.slug || []).filter((s) => s.threshold !== null);
      slug.forEach((s, i) => {
        const a = px(Math.max(d.start, s.day)), b = px(Math.min(d.end, i + 1 < slug.length ? slug[i + 1].day : d.end));
        if (b <= a) return;
        const y = u.valToPos(s.threshold, d.unit, true);
        g.beginPath(); g.moveTo(a, y); g.lineTo(b, y); g.stroke();
        if (i === slug.length - 1 || i === 0) g.fillText(`slug ${PT.num(s.multiplier)} × baseline ${PT.num(s.threshold)} ${d.unit}`, a + 4 * dpr, y - 3 * dpr);
      });
    });
    g.restore();
  }

  // Episodes of every channel, each with a colour by rule and a marker lane (overlapping ones stagger).
  function episodesOf(trends) {
    const rules = [], out = [];
    trends.forEach((d) => (d.episodes || []).forEach((e) => {
      if (!rules.includes(e.rule)) rules.push(e.rule);
      const s = e.start ?? d.start, t = e.until ?? e.end ?? d.end;
      const lane = out.filter((o) => (o.start ?? o.d.start) < t && (o.until ?? o.end ?? o.d.end) > s).length;
      out.push({ ...e, d, color: rules.indexOf(e.rule) % EPISODE.length, lane: Math.min(lane, 3) });
    }));
    return out;
  }

  const LEGEND_MAX = 8;  // episodes listed under a chart; the rest are counted (all are on the history page)
  function legendOf(trends) {
    const all = episodesOf(trends);
    if (!all.length) return [];
    const eps = all.slice(-LEGEND_MAX);
    const more = all.length - eps.length;
    return (more ? [PT.el("a", { class: "ep-more", href: `/history?site=${encodeURIComponent(trends[0].site)}` },
      `${more} earlier episode${more === 1 ? "" : "s"} in this window: history`)] : []).concat(eps.map((e) => PT.el("span", { class: "ep-key", "data-episode": String(e.id) },
      PT.el("span", { class: "swatch", "data-color": String(e.color) }),
      `${e.d.channel} · ${e.rule} ${PT.time(e.start)} – ${e.end ? PT.time(e.end) : e.status}` +
      (e.peak !== null && e.peak !== undefined ? ` · peak ${PT.num(e.peak)} ${e.d.unit}` : "") +
      (e.id !== null && e.id !== undefined ? ` (E${e.id})` : ""))));
  }

  function options(box, trends, onZoom) {
    const zone = trends[0].timezone, cur = () => (box._chart ? box._chart.trends : trends);
    const units = new Map();
    trends.forEach((d) => { if (!units.has(d.unit)) units.set(d.unit, []); units.get(d.unit).push(d); });
    const narrow = box.clientWidth < 500;
    const series = [{ label: `Time (${trends[0].zone})`, value: (u, v) => (v === null || v === undefined ? "–" : PT.time(v)) }];
    const bands = [];
    trends.forEach((d, i) => {
      const color = LINE[i % LINE.length], stepped = d.boolean ? uPlot.paths.stepped({ align: 1 }) : undefined;
      series.push({ label: trends.length > 1 ? `${d.channel} max` : "max", scale: d.unit, stroke: color, width: 1.2,
        value: fmtValue(d.unit), paths: stepped, points: { show: false } });
      series.push({ label: trends.length > 1 ? `${d.channel} min` : "min", scale: d.unit, stroke: color, width: 1,
        value: fmtValue(d.unit), paths: stepped, points: { show: false } });
      bands.push({ series: [series.length - 2, series.length - 1], fill: color + "55" });
    });
    const scales = { x: { time: true, range: () => [cur()[0].start, cur()[0].end] } };
    const axes = [{ label: `${zone} time (${trends[0].zone})`, labelSize: 16, size: narrow ? 34 : 40,
      splits: (u) => (cur()[0].ticks || []).map((k) => k.t).filter((t) => t >= u.scales.x.min && t <= u.scales.x.max),
      values: (u, splits) => splits.map((t) => ((cur()[0].ticks || []).find((k) => k.t === t) || {}).label || ""),
      font: `${narrow ? 10 : 11}px system-ui, sans-serif` }];
    let side = 3;
    for (const [unit, list] of units) {
      const boolean = list.every((d) => d.boolean);
      scales[unit] = { range: boolean ? () => [-0.1, 1.1] : () => yRange(cur().filter((d) => d.unit === unit)) };
      axes.push({ scale: unit, label: unit, labelSize: 16, side, size: narrow ? 44 : 56, grid: { show: side === 3 },
        font: `${narrow ? 10 : 11}px system-ui, sans-serif`,
        ...(boolean ? { splits: () => [0, 1], values: () => ["0 off", "1 on"] } : { values: (u, v) => v.map((x) => PT.num(x)) }) });
      side = 1;
    }
    return {
      width: Math.max(280, box.clientWidth), height: narrow ? 200 : 240, series, bands, scales, axes,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), zone),
      cursor: { drag: { x: true, y: false, setScale: false } },
      legend: { live: true },
      hooks: {
        draw: [(u) => { overlays(u, cur(), units); box.dataset.drawn = String((Number(box.dataset.drawn) || 0) + 1); }],
        setSelect: [(u) => {
          if (u.select.width < 5 || !onZoom) return;
          const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, width: 0 }, false);
          onZoom(a, b);
        }],
      },
    };
  }

  // Draw (or redraw) ``trends`` (trend responses, each with optional ``live`` [[t, v|null]] and ``slug``) in
  // ``box``: a <div>. Returns the chart handle; `csv`/`png` export what is shown.
  function draw(box, trends, onZoom) {
    if (!Array.isArray(trends)) trends = [trends];
    const shape = trends.map((d) => `${d.channel}|${d.unit}|${d.boolean}`).join(";") + (box.clientWidth < 500 ? "|narrow" : "");
    let h = box._chart;
    if (h && h.shape === shape) {
      h.trends = trends;
      h.u.setData(align(trends));
    } else {
      if (h) h.u.destroy();
      h = { shape, trends };
      box._chart = h;  // before uPlot: its hooks read the current trends from here
      h.u = new uPlot(options(box, trends, (a, b) => onZoom && onZoom(a, b)), align(trends), box.querySelector(".plot") || box);
    }
    box.dataset.zone = trends[0].zone;
    const legend = box.querySelector(".ep-legend");
    if (legend) legend.replaceChildren(...legendOf(trends));
    return h;
  }

  function resize(box) {
    const h = box._chart;
    if (h) h.u.setSize({ width: Math.max(280, box.clientWidth), height: h.u.height });
  }

  // The rows shown: every bucket (and live reading) inside the visible x range, in the site's local time.
  function rows(box) {
    const h = box._chart;
    if (!h) return [];
    const lo = h.u.scales.x.min, hi = h.u.scales.x.max, out = [];
    for (const d of h.trends) {
      d.t.forEach((t, i) => {
        if (t + d.bucket_s < lo || t > hi) return;
        out.push([d.channel, PT.iso(t), PT.time(t), d.bucket_s, d.min[i], d.max[i], d.good[i], d.total[i], d.unit]);
      });
      for (const [t, v] of d.live || []) if (t >= lo && t <= hi) out.push([d.channel, PT.iso(t), PT.time(t), 0, v, v, v === null ? 0 : 1, 1, d.unit]);
    }
    return out;
  }

  const HEADER = ["channel", "bucket_start_utc", "bucket_start_local", "bucket_s", "min", "max", "readings_with_value", "readings", "unit"];
  function csv(box) {
    const q = (v) => (v === null || v === undefined ? "" : /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
    return [HEADER, ...rows(box)].map((r) => r.map(q).join(",")).join("\n") + "\n";
  }

  function download(name, href) {
    const a = PT.el("a", { href, download: name });
    document.body.append(a); a.click(); a.remove();
  }
  function exportCsv(box, name) {
    const url = URL.createObjectURL(new Blob([csv(box)], { type: "text/csv" }));
    download(name + ".csv", url);
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }
  // The plot as drawn (axes, series, limits, episodes) on white, with a title line naming site, window and zone.
  function png(box, title) {
    const h = box._chart, src = h.u.ctx.canvas, dpr = devicePixelRatio || 1, head = Math.round(22 * dpr);
    const c = document.createElement("canvas");
    c.width = src.width; c.height = src.height + head;
    const g = c.getContext("2d");
    g.fillStyle = "#fff"; g.fillRect(0, 0, c.width, c.height);
    g.fillStyle = "#222"; g.font = `${12 * dpr}px system-ui, sans-serif`; g.fillText(title, 6 * dpr, 15 * dpr);
    g.drawImage(src, 0, head);
    return c.toDataURL("image/png");
  }
  function exportPng(box, name, title) { download(name + ".png", png(box, title)); }

  return { draw, resize, csv, rows, exportCsv, exportPng, png };
})();
