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

  const timeFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short" });
  function time(t) { return t === null || t === undefined ? "" : timeFmt.format(new Date(t * 1000)); }
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

  // The live stream, reconnecting by itself (EventSource does; the banner says so while it is down).
  function stream(path, handlers) {
    const banner = document.getElementById("conn");
    const es = new EventSource(path);
    es.onopen = () => { if (banner) banner.hidden = true; };
    es.onerror = () => { if (banner) banner.hidden = false; };
    for (const [kind, fn] of Object.entries(handlers)) es.addEventListener(kind, (ev) => fn(JSON.parse(ev.data)));
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

  return { me, api, el, num, time, iso, duration, stream, cue };
})();
