// Trend charts on <canvas>, drawn by hand (no library, nothing fetched): the server's min/max buckets as a
// band, data-quality gaps in grey, exceedance episodes shaded, limits as dashed lines, live readings
// appended, drag to zoom.
"use strict";
const PTChart = (() => {
  const M = { l: 60, r: 12, t: 10, b: 26 };
  const COLORS = { line: "#1f5fa8", band: "rgba(31,95,168,0.35)", bad: "rgba(120,120,120,0.25)",
    episode: "rgba(214,39,40,0.16)", limit: "#d62728", axis: "#444", grid: "#e4e4e4", select: "rgba(0,0,0,0.12)" };

  function niceTicks(lo, hi, n) {
    const span = hi - lo || 1, raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }

  // Tick labels in the page's zone (<body data-timezone>, the site's), never the browser's.
  function timeLabel(t, span) {
    const d = PT.parts(t), p = (x) => String(x).padStart(2, "0");
    const hm = `${p(d.hour)}:${p(d.minute)}`;
    if (span <= 2 * 86400) return span <= 600 ? `${hm}:${p(d.second)}` : hm;
    return `${p(d.month)}-${p(d.day)} ${hm}`;
  }
  // Seconds the zone is ahead of UTC at t (so ticks fall on local round hours and midnights).
  function offset(t) {
    const d = PT.parts(t);
    return Date.UTC(d.year, d.month - 1, d.day, d.hour, d.minute, d.second) / 1000 - Math.floor(t);
  }

  function yRange(data) {
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < data.t.length; i++) {
      if (data.min[i] !== null) lo = Math.min(lo, data.min[i]);
      if (data.max[i] !== null) hi = Math.max(hi, data.max[i]);
    }
    for (const p of data.live || []) if (p[1] !== null) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
    for (const l of data.limits || []) { lo = Math.min(lo, l.value); hi = Math.max(hi, l.value); }
    if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
    if (lo === hi) { lo -= 1; hi += 1; }
    const pad = (hi - lo) * 0.06;
    return [lo - pad, hi + pad];
  }

  function draw(canvas, data, opts = {}) {
    canvas._chart = { data, opts };
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const [y0, y1] = yRange(data);
    const pw = w - M.l - M.r, ph = h - M.t - M.b;
    const X = (t) => M.l + ((t - data.start) / (data.end - data.start)) * pw;
    const Y = (v) => M.t + (1 - (v - y0) / (y1 - y0)) * ph;
    canvas._scale = { X, pw, start: data.start, end: data.end };
    g.font = "11px system-ui, sans-serif";
    // grid and axes
    g.strokeStyle = COLORS.grid; g.fillStyle = COLORS.axis; g.lineWidth = 1;
    for (const v of niceTicks(y0, y1, 5)) {
      g.beginPath(); g.moveTo(M.l, Y(v)); g.lineTo(w - M.r, Y(v)); g.stroke();
      g.textAlign = "right"; g.textBaseline = "middle"; g.fillText(PT.num(v), M.l - 6, Y(v));
    }
    const span = data.end - data.start;
    const steps = [60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800];
    const xs = steps.find((s) => span / s <= 8) || 172800;
    g.textAlign = "center"; g.textBaseline = "top";
    const off = offset(data.start);
    for (let t = Math.ceil((data.start + off) / xs) * xs - off; t <= data.end; t += xs) {
      g.beginPath(); g.moveTo(X(t), M.t); g.lineTo(X(t), M.t + ph); g.stroke();
      g.fillText(timeLabel(t, span), X(t), M.t + ph + 6);
    }
    g.textAlign = "left"; g.fillText(PT.parts(data.end).zoneName, 2, M.t + ph + 6);  // "EST": whose clock
    g.save(); g.beginPath(); g.rect(M.l, M.t, pw, ph); g.clip();
    // episodes, then data-quality gaps
    g.fillStyle = COLORS.episode;
    for (const e of data.episodes || []) {
      const a = Math.max(data.start, e.start ?? data.start), b = Math.min(data.end, e.until ?? e.end ?? data.end);
      if (b > a) g.fillRect(X(a), M.t, Math.max(1, X(b) - X(a)), ph);
    }
    g.fillStyle = COLORS.bad;
    const bw = Math.max(1, (data.bucket_s / span) * pw);
    for (let i = 0; i < data.t.length; i++) if (data.good[i] === 0) g.fillRect(X(data.t[i]), M.t, bw, ph);
    // the band (min to max per bucket) and its edges, broken where buckets are missing or bad
    const runs = [];
    let run = [];
    for (let i = 0; i < data.t.length; i++) {
      const prev = i > 0 ? data.t[i - 1] : null;
      const adjacent = prev !== null && data.t[i] - prev <= data.bucket_s * 1.5;
      if (data.min[i] === null || (!adjacent && run.length)) { if (run.length) runs.push(run); run = []; }
      if (data.min[i] !== null) run.push(i);
    }
    if (run.length) runs.push(run);
    const mid = (i) => X(data.t[i] + data.bucket_s / 2);
    for (const r of runs) {
      g.beginPath();
      r.forEach((i, k) => (k ? g.lineTo(mid(i), Y(data.max[i])) : g.moveTo(mid(i), Y(data.max[i]))));
      for (let k = r.length - 1; k >= 0; k--) g.lineTo(mid(r[k]), Y(data.min[r[k]]));
      g.closePath(); g.fillStyle = COLORS.band; g.fill();
      g.strokeStyle = COLORS.line; g.lineWidth = 1.2; g.stroke();
      if (r.length === 1) { g.fillStyle = COLORS.line; g.fillRect(mid(r[0]) - 1.5, Y(data.max[r[0]]) - 1.5, 3, 3); }
    }
    // live readings since the load
    const live = (data.live || []).filter((p) => p[0] >= data.start && p[0] <= data.end);
    g.strokeStyle = COLORS.line; g.lineWidth = 1.2; g.beginPath();
    let open = false;
    for (const [t, v] of live) {
      if (v === null) { open = false; g.fillStyle = COLORS.bad; g.fillRect(X(t) - 1, M.t, 2, ph); continue; }
      if (open) g.lineTo(X(t), Y(v)); else { g.moveTo(X(t), Y(v)); open = true; }
    }
    g.stroke();
    // limits
    g.setLineDash([6, 4]); g.strokeStyle = COLORS.limit; g.fillStyle = COLORS.limit; g.lineWidth = 1.2;
    for (const l of data.limits || []) {
      g.beginPath(); g.moveTo(M.l, Y(l.value)); g.lineTo(w - M.r, Y(l.value)); g.stroke();
      g.textAlign = "left"; g.textBaseline = "bottom"; g.fillText(`${l.rule} ${PT.num(l.value)}`, M.l + 4, Y(l.value) - 2);
    }
    g.setLineDash([]);
    if (canvas._select) {
      const [a, b] = canvas._select;
      g.fillStyle = COLORS.select; g.fillRect(Math.min(a, b), M.t, Math.abs(b - a), ph);
    }
    g.restore();
    g.strokeStyle = COLORS.axis; g.strokeRect(M.l, M.t, pw, ph);
    canvas.dataset.drawn = String((canvas.dataset.drawn | 0) + 1);
  }

  // Drag across the plot to zoom: calls onZoom(start, end) with the selected time span.
  function zoomable(canvas, onZoom) {
    const x = (ev) => ev.clientX - canvas.getBoundingClientRect().left;
    canvas.addEventListener("mousedown", (ev) => { canvas._select = [x(ev), x(ev)]; });
    canvas.addEventListener("mousemove", (ev) => {
      if (!canvas._select) return;
      canvas._select[1] = x(ev);
      draw(canvas, canvas._chart.data, canvas._chart.opts);
    });
    window.addEventListener("mouseup", () => {
      const sel = canvas._select;
      canvas._select = null;
      if (!sel || !canvas._scale) return;
      const s = canvas._scale, a = Math.min(...sel), b = Math.max(...sel);
      draw(canvas, canvas._chart.data, canvas._chart.opts);
      if (b - a < 5) return;
      const t = (px) => s.start + ((px - M.l) / s.pw) * (s.end - s.start);
      onZoom(Math.max(s.start, t(a)), Math.min(s.end, t(b)));
    });
  }

  return { draw, zoomable };
})();
