// Shared by every console page: the user from <body data-*>, JSON requests with the CSRF token, formatting,
// element building (text only: nothing recorded is ever inserted as HTML) and the critical-alarm cue.
"use strict";

const PT = (() => {
  const body = document.body;
  const me = { name: body.dataset.user, role: body.dataset.role, company: body.dataset.company, csrf: body.dataset.csrf };

  async function api(path, options = {}) {
    const opts = { credentials: "same-origin", ...options, headers: { ...(options.headers || {}) } };
    if (opts.method && opts.method !== "GET") {
      opts.headers["X-CSRF-Token"] = me.csrf;
      opts.headers["Content-Type"] = "application/json";
    }
    const resp = await fetch(path, opts);
    if (resp.status === 401) { location.href = "/login?next=" + encodeURIComponent(location.pathname); }
    const type = resp.headers.get("content-type") || "";
    const data = type.includes("json") && !type.includes("ndjson") ? await resp.json() : await resp.text();
    return { ok: resp.ok, status: resp.status, data, headers: resp.headers };
  }

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  function num(v, digits = 4) {
    if (v === null || v === undefined) return "–";
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(digits)));
  }

  // Times are shown in a site's zone, named (EST/EDT), never silently in the browser's: a page about one site
  // sets <body data-timezone>; elsewhere each caller passes the row's zone, and without one the time is UTC.
  const formats = new Map();
  function fmt(zone) {
    const z = zone || body.dataset.timezone || "UTC";
    if (!formats.has(z)) {
      formats.set(z, new Intl.DateTimeFormat("en-US", { year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short", timeZone: z }));
    }
    return formats.get(z);
  }
  // "2026-12-01 16:04:05 EST"
  function time(t, zone) {
    if (t === null || t === undefined) return "";
    const p = Object.fromEntries(fmt(zone).formatToParts(new Date(t * 1000)).map((x) => [x.type, x.value]));
    return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
  }
  // The parts of a time in a zone (for chart ticks): { hour, minute, second, month, day, zoneName }
  function parts(t, zone) {
    const p = Object.fromEntries(fmt(zone).formatToParts(new Date(t * 1000)).map((x) => [x.type, x.value]));
    return { year: +p.year, month: +p.month, day: +p.day, hour: +p.hour, minute: +p.minute, second: +p.second,
      zoneName: p.timeZoneName };
  }
  function iso(t) { return t === null || t === undefined ? "" : new Date(t * 1000).toISOString(); }

  function duration(s) {
    if (s === null || s === undefined || s < 0) return "";
    s = Math.round(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
    if (m) return `${m}m ${String(x).padStart(2, "0")}s`;
    return `${x}s`;
  }

  // Timing marks (User Timing, shown by DevTools' performance panel; read by bench/bench_console.py): only the
  // newest of each name is kept, so a console left open for weeks does not collect them, and a count per name.
  // `painted` marks the first moment after the next frame was drawn (the frame's tasks run before its paint).
  window.__marks = {};
  function mark(name) {
    performance.clearMarks(name);
    performance.mark(name);
    window.__marks[name] = (window.__marks[name] || 0) + 1;
  }
  function painted(name) { requestAnimationFrame(() => setTimeout(() => mark(name), 0)); }

  // The live stream, reconnecting by itself (EventSource does; the banner says so while it is down).
  function stream(path, handlers) {
    const banner = document.getElementById("conn");
    const es = new EventSource(path);
    es.onopen = () => { if (banner) banner.hidden = true; };
    es.onerror = () => { if (banner) banner.hidden = false; };
    for (const [kind, fn] of Object.entries(handlers)) {
      es.addEventListener(kind, (ev) => { mark("event-" + kind); fn(JSON.parse(ev.data)); });
    }
    es.addEventListener("logout", () => { es.close(); location.href = "/login"; });
    return es;
  }

  // New critical alarm: a banner that stays until silenced, and a tone when sound is on (a short beep made
  // with Web Audio: no sound file to fetch). Browsers only allow sound after the user has touched the page,
  // hence the "sound" checkbox, which is that touch.
  let audio = null;
  window.__cues = 0;
  function cue(text) {
    window.__cues += 1;
    const box = document.getElementById("cue");
    document.getElementById("cue-text").textContent = text;
    box.hidden = false;
    box.classList.remove("flash"); void box.offsetWidth; box.classList.add("flash");
    const sound = document.getElementById("sound");
    if (sound && sound.checked) beep();
  }
  function beep() {
    try {
      audio = audio || new AudioContext();
      for (const [at, f] of [[0, 880], [0.25, 660], [0.5, 880]]) {
        const o = audio.createOscillator(), g = audio.createGain();
        o.frequency.value = f; g.gain.value = 0.2;
        o.connect(g).connect(audio.destination);
        o.start(audio.currentTime + at); o.stop(audio.currentTime + at + 0.18);
      }
    } catch (e) { /* no audio device: the banner remains */ }
  }
  document.addEventListener("DOMContentLoaded", () => {
    const dismiss = document.getElementById("cue-dismiss");
    if (dismiss) dismiss.addEventListener("click", () => { document.getElementById("cue").hidden = true; });
  });

  // ---- priorities: one colour and one symbol with a number each, the same on every page ----
  const PRIORITIES = [
    { id: "critical", symbol: "◆1", label: "Critical" }, { id: "high", symbol: "▲2", label: "High" },
    { id: "medium", symbol: "■3", label: "Medium" }, { id: "low", symbol: "●4", label: "Low" },
    { id: "diagnostic", symbol: "○5", label: "Diagnostic" }];
  const BY_ID = Object.fromEntries(PRIORITIES.map((p) => [p.id, p]));
  const UNACKED = new Set(["active-unacknowledged", "latched-unacknowledged", "returned-to-normal-unacknowledged"]);
  const STANDING = new Set(["active-unacknowledged", "latched-unacknowledged", "active-acknowledged",
    "latched-acknowledged"]);
  function badge(priority, abnormal = true) {
    const p = BY_ID[priority];
    if (!p) return el("span", { class: "badge none" }, "–");
    return el("span", { class: `badge ${abnormal ? "p-" + p.id : "p-normal"}`, title: p.label, "data-priority": p.id },
      el("span", { class: "sym", "aria-hidden": "true" }, p.symbol), " ", p.label);
  }
  // Counts per priority of unacknowledged and of active (or latched) alarms.
  function counts(rows) {
    const out = Object.fromEntries(PRIORITIES.map((p) => [p.id, { unacked: 0, active: 0 }]));
    for (const r of rows) {
      const c = out[r.priority];
      if (!c) continue;
      if (UNACKED.has(r.state)) c.unacked += 1;
      if (STANDING.has(r.state)) c.active += 1;
    }
    return out;
  }
  // The header on every page, and the tab title: "◆1×2 ▲2×1 · Alarms · pretreat-monitor".
  const baseTitle = document.title;
  function header(rows) {
    const box = document.getElementById("alarm-header");
    if (!box) return;
    const c = counts(rows);
    box.replaceChildren(...PRIORITIES.map((p) => {
      const n = c[p.id], abnormal = n.unacked + n.active > 0;
      return el("a", { class: `hcount ${abnormal ? "p-" + p.id : "p-normal"}`, href: "/?priority=" + p.id,
        "data-priority": p.id, "data-unacked": n.unacked, "data-active": n.active,
        title: `${p.label}: ${n.unacked} unacknowledged, ${n.active} active` },
        el("span", { class: "sym", "aria-hidden": "true" }, p.symbol), el("span", { class: "lbl" }, ` ${p.label}`), " ",
        el("b", { class: "unacked" }, String(n.unacked)), el("span", { class: "lbl" }, " unack"), " · ",
        el("b", { class: "active" }, String(n.active)), el("span", { class: "lbl" }, " active"));
    }));
    const flagged = PRIORITIES.filter((p) => c[p.id].unacked).map((p) => `${p.symbol}×${c[p.id].unacked}`);
    document.title = flagged.length ? `${flagged.join(" ")} · ${baseTitle}` : baseTitle;
  }
  // Pages other than the alarm list keep the header current from the alarm summary.
  async function pollHeader() {
    const resp = await api("/api/alarm-summary");
    if (resp.ok) header(resp.data);
  }
  document.addEventListener("DOMContentLoaded", () => {
    if (body.dataset.page !== "alarms" && document.getElementById("alarm-header")) {
      pollHeader(); setInterval(pollHeader, 5000);
    }
  });

  return { me, api, el, num, time, parts, iso, duration, stream, cue, PRIORITIES, UNACKED, badge, counts, header,
    mark, painted };
})();
