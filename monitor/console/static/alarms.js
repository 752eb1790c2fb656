// The alarm list: a snapshot and then live changes from /api/events; actions go to the daemon's queue.
// Order: unacknowledged first, then priority, then newest (the server's `alarm_view.sort_key`, repeated here
// for live changes). Acknowledge is one click; a critical reset and a shelve ask in the dialog; filters are
// kept in the URL; keys: j/k move, x select, a acknowledge, A acknowledge selected (or all shown), Esc.
"use strict";
(() => {
  const { api, el, num, time, duration, stream, cue, PRIORITIES, UNACKED, badge, header, mark, painted } = PT;
  const RANK = Object.fromEntries(PRIORITIES.map((p, i) => [p.id, i]));
  const ACKED = new Set(["active-acknowledged", "latched-acknowledged"]);
  const SUPPRESSED = new Set(["shelved", "out-of-service"]);
  const STATE_LABEL = { "active-unacknowledged": "Active, unacknowledged", "latched-unacknowledged": "Latched, unacknowledged",
    "returned-to-normal-unacknowledged": "Returned to normal, unacknowledged", "active-acknowledged": "Active, acknowledged",
    "latched-acknowledged": "Latched, acknowledged", shelved: "Shelved", "out-of-service": "Out of service", normal: "Normal" };
  const LABEL = { ack: "Acknowledge", shelve: "Shelve", unshelve: "Unshelve", reset: "Reset", seen: "Acknowledge (seen)",
    comment: "Comment" };
  const DONE = { ack: "Acknowledged", shelve: "Shelved", unshelve: "Unshelved", reset: "Reset",
    seen: "Recorded as seen by your company", comment: "Comment added" };
  const BUTTON = { ack: "Ack", seen: "Ack (seen)", comment: "Comment" };
  let me = null;
  const FILTERS = ["site", "priority", "state", "rule"];
  const rows = new Map();
  const selected = new Set();
  const busy = new Set();
  let actions = new Set();
  let pending = null;
  let shown = [];
  let focused = null;

  function group(state) {
    if (UNACKED.has(state)) return 0;
    if (ACKED.has(state)) return 1;
    if (SUPPRESSED.has(state)) return 2;
    return state === "normal" ? 3 : 4;
  }
  // A row's sort key is worked out once, when the row arrives (`keyed`), not at each of a sort's ~10,000
  // comparisons: group, priority rank, newest first, then the id (the server's `alarm_view.sort_key`).
  function keyed(r) {
    r._g = group(r.state); r._p = RANK[r.priority] ?? 5; r._s = r.since || 0;
    return r;
  }
  function compare(a, b) {
    return a._g - b._g || a._p - b._p || b._s - a._s || (a.alarm < b.alarm ? -1 : a.alarm > b.alarm ? 1 : 0);
  }
  function name(id, named) {  // named: a journal record's own name of the alarm, for one without a row here
    const r = rows.get(id);
    return r ? `${r.site_name} · ${r.channel} · ${r.rule_label}` : named || id;
  }

  // ---- filters, kept in the URL ----
  const filter = () => Object.fromEntries(FILTERS.map((f) => [f, document.getElementById("f-" + f).value]));
  function keep(r, f) {
    if (f.site && r.site !== f.site) return false;
    if (f.priority && r.priority !== f.priority) return false;
    if (f.rule && r.rule !== f.rule) return false;
    if (f.state === "unacked") return UNACKED.has(r.state);
    if (f.state === "active") return r.state.startsWith("active") || r.state.startsWith("latched");
    if (f.state === "suppressed") return SUPPRESSED.has(r.state);
    return document.getElementById("show-normal").checked || r.state !== "normal";
  }
  function toUrl() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filter())) if (v) q.set(k, v);
    if (document.getElementById("show-normal").checked) q.set("normal", "1");
    history.replaceState(null, "", q.toString() ? "?" + q : location.pathname);
  }
  function option(select, value, text) {
    for (const o of select.options) if (o.value === value) return;
    select.append(el("option", { value }, text));
  }
  function siteOptions(sites) {  // 200 sites: one pass, not one search of the options per site
    const select = document.getElementById("f-site"), have = new Set([...select.options].map((o) => o.value));
    const frag = document.createDocumentFragment();
    for (const s of sites) if (!have.has(s.id)) frag.append(el("option", { value: s.id }, s.name));
    select.append(frag);
  }
  function fromUrl(sites) {
    const q = new URLSearchParams(location.search);
    siteOptions(sites);
    for (const p of PRIORITIES) option(document.getElementById("f-priority"), p.id, `${p.symbol} ${p.label}`);
    for (const f of FILTERS) {
      const v = q.get(f) || "", select = document.getElementById("f-" + f);
      if (v) option(select, v, v);  // a rule's label arrives with the rows
      select.value = v;
    }
    document.getElementById("show-normal").checked = q.get("normal") === "1";
  }
  const labelled = new Map();  // rule -> the label its option shows
  function ruleOptions() {
    const select = document.getElementById("f-rule");
    for (const r of rows.values()) {
      if (labelled.get(r.rule) === r.rule_label) continue;
      labelled.set(r.rule, r.rule_label);
      const o = [...select.options].find((x) => x.value === r.rule);
      if (o) o.textContent = r.rule_label; else select.append(el("option", { value: r.rule }, r.rule_label));
    }
  }

  // ---- rows ----
  function possible(r) {
    const out = [];
    if (actions.has("ack") && UNACKED.has(r.state)) out.push("ack");
    if (actions.has("reset") && r.state.startsWith("latched")) out.push("reset");
    if (actions.has("unshelve") && r.state === "shelved") out.push("unshelve");
    if (actions.has("shelve") && !SUPPRESSED.has(r.state)) out.push("shelve");
    // an industry's acknowledgement: "seen" for its company, once per occurrence; the plant's state is untouched
    if (actions.has("seen") && r.state !== "normal" && !(r.seen || []).some((x) => x.user === me.name)) out.push("seen");
    if (actions.has("comment")) out.push("comment");
    return out;
  }
  function note(r) {
    if (SUPPRESSED.has(r.state)) return `${r.state_label}${r.until ? " until " + (r.until_text || time(r.until, r.timezone)) : ""} by ${r.by}: ${r.reason}`;
    return r.configured ? r.citation : `${r.citation} (no longer configured)`;
  }
  function stateCell(r) {
    const seen = (r.seen || []).map((x) => el("span", { class: "seen" }, `Industry seen: ${x.user} ${x.time_text}${x.note ? " — " + x.note : ""}`));
    const parts = [r.state_label || r.state];
    for (const s of seen) parts.push(el("br"), s);
    if (!seen.length && r.state !== "normal" && r.site_company) parts.push(el("br"), el("span", { class: "hint not-seen" }, "not yet seen by the industry"));
    return el("span", {}, ...parts);
  }
  function noteCell(r) {
    const c = r.last_comment;
    if (!c) return note(r);
    return el("span", {}, note(r), el("br"), el("span", { class: "comment" },
      `Comment by ${c.user} ${c.time_text}: ${c.note}${r.comments > 1 ? ` (${r.comments} comments)` : ""}`));
  }
  function valueCell(r) {
    const value = r.value_text || (r.value === null || r.value === undefined ? "–" : num(r.value));
    return r.limit_text ? el("span", {}, value, el("span", { class: "lim" }, ` / limit ${r.limit_text}`)) : value;
  }
  function peakCell(r) {
    if (!r.peak_text) return "";
    return el("span", {}, el("b", {}, r.peak_text), el("br"), el("span", { class: "hint" }, "at " + r.peak_time_text));
  }
  function onsetCell(r) {
    const since = r.since ? el("span", { class: "dur", "data-since": r.since }, duration(Date.now() / 1000 - r.since)) : "";
    const at = r.onset_text || r.since_text;
    return el("span", {}, at ? el("span", { class: "t" }, at) : "", at ? el("br") : "", since ? "for " : "", since);
  }
  function rowElement(r) {
    const g = group(r.state), abnormal = g < 3;
    const buttons = possible(r).map((a) => el("button", { type: "button", class: "act" + (a === "ack" ? " primary" : ""),
      "data-action": a, disabled: busy.has(r.alarm), title: a === "seen" ? "Records that your company has seen this alarm; the plant's operator acknowledges the plant alarm" : "",
      onclick: () => act(r, a) }, BUTTON[a] || LABEL[a]));
    const box = el("input", { type: "checkbox", class: "pick", "aria-label": "select " + name(r.alarm),
      onchange: (ev) => { if (ev.target.checked) selected.add(r.alarm); else selected.delete(r.alarm); bulkButtons(); } });
    box.checked = selected.has(r.alarm);
    return el("tr", { class: `g${g} ${abnormal ? "p-" + r.priority : "p-normal"}${focused === r.alarm ? " focus" : ""}`,
      "data-alarm": r.alarm, "data-state": r.state, "data-priority": r.priority || "", tabindex: "-1",
      onclick: (ev) => { if (ev.target.tagName !== "INPUT" && ev.target.tagName !== "BUTTON" && ev.target.tagName !== "A") focus(r.alarm); } },
      el("td", { class: "sel" }, box),
      el("td", { class: "prio", "data-label": "Priority" }, badge(r.priority, abnormal)),
      el("td", { class: "state", "data-label": "State" }, stateCell(r)),
      el("td", { class: "site", "data-label": "Site" }, el("a", { href: "/sites/" + encodeURIComponent(r.site) }, r.site_name || r.site)),
      el("td", { "data-label": "Channel" }, r.channel),
      el("td", { class: "rule", "data-label": "Rule", title: r.rule }, r.rule_label || r.rule),
      el("td", { class: "num value", "data-label": "Value / limit" }, valueCell(r)),
      el("td", { class: "num peak", "data-label": "Peak" }, peakCell(r)),
      el("td", { class: "onset", "data-label": "Onset" }, onsetCell(r)),
      el("td", { class: "note", "data-label": "Citation" }, noteCell(r)),
      el("td", { class: "actions" }, ...buttons));
  }

  // ---- the table: each row's <tr> is built once and kept while its data and busy state are the same (a live
  // change rebuilds one row, not 1,000), and the tbody is patched in place: rows no longer shown are removed
  // and the others moved only where the order changed, so the browser styles and lays out only what moved.
  const built = new Map();  // alarm -> { r, busy, tr, box }
  function rowFor(r) {
    const b = built.get(r.alarm), isBusy = busy.has(r.alarm);
    if (b && b.r === r && b.busy === isBusy) {
      const sel = selected.has(r.alarm);
      if (b.box.checked !== sel) b.box.checked = sel;
      b.tr.classList.toggle("focus", focused === r.alarm);
      return b.tr;
    }
    const tr = rowElement(r);
    built.set(r.alarm, { r, busy: isBusy, tr, box: tr.querySelector("input.pick") });
    return tr;
  }
  function patch(body, want) {
    const wanted = new Set(want);
    for (const child of [...body.children]) if (!wanted.has(child)) child.remove();
    let cur = body.firstElementChild;
    for (const tr of want) {
      if (cur === tr) { cur = cur.nextElementSibling; continue; }
      if (cur && cur.nextElementSibling === tr) {  // cur moved down: out now, back in at its place
        cur.remove(); cur = tr.nextElementSibling; continue;
      }
      body.insertBefore(tr, cur);
    }
  }

  // past 100 rows only those near the viewport are in the table (alarm_window.js)
  const win = AlarmWindow.create(document.getElementById("alarm-rows"), rowFor, patch);
  let narrow = true;  // the next draw is of a new list: a few rows around the viewport, widened after the paint

  let lastRender = -Infinity;
  function render() {
    clearTimeout(pending);
    pending = null;
    const f = filter();
    shown = [];
    for (const r of rows.values()) if (keep(r, f)) shown.push(r);
    shown.sort(compare);
    if (selected.size) {
      const ids = new Set(shown.map((r) => r.alarm));
      for (const a of [...selected]) if (!ids.has(a)) selected.delete(a);
    }
    const body = document.getElementById("alarm-rows");
    if (shown.length) win.draw(shown, narrow);
    else {
      win.draw([], false);
      body.replaceChildren(el("tr", {}, el("td", { colspan: 11, class: "empty" }, "No alarms.")));
    }
    let unacked = 0;
    for (const r of rows.values()) if (r._g === 0) unacked += 1;
    document.getElementById("counts").textContent = `${shown.length} shown · ${unacked} unacknowledged`;
    header(rows.values());
    ruleOptions();
    bulkButtons();
    lastRender = performance.now();
    window.__alarmsRendered = lastRender;
    window.__renders = (window.__renders || 0) + 1;
    mark("alarms-rendered");
    painted("alarms-painted");
    if (narrow) { narrow = false; requestAnimationFrame(() => setTimeout(win.widen, 0)); }
  }
  // Live changes come in bursts (a storm raises hundreds at once): the first is drawn at once, the rest of a
  // burst at most every 50 ms.
  function schedule() {
    if (!pending) pending = setTimeout(render, Math.max(0, lastRender + 50 - performance.now()));
  }
  const ackable = (list) => list.filter((r) => actions.has("ack") && UNACKED.has(r.state));
  function bulkButtons() {
    const sel = ackable(shown.filter((r) => selected.has(r.alarm))), vis = ackable(shown);
    const a = document.getElementById("ack-selected"), b = document.getElementById("ack-visible");
    a.disabled = !sel.length; a.textContent = `Acknowledge selected (${sel.length})`;
    b.disabled = !vis.length; b.textContent = `Acknowledge all shown (${vis.length})`;
    a.hidden = b.hidden = !actions.has("ack");
    document.getElementById("select-all").checked = shown.length > 0 && shown.every((r) => selected.has(r.alarm));
  }

  // ---- actions: one click for ack, unshelve and a non-critical reset; the dialog otherwise ----
  async function send(alarm, action, body = {}) {
    const [site, channel, rule] = alarm.split("/");
    const path = `/api/alarms/${[site, channel, rule, action].map(encodeURIComponent).join("/")}`;
    busy.add(alarm); schedule();
    try {
      return await api(path, { method: "POST", body: JSON.stringify({ note: "", until: "", reason: "", ...body }) });
    } finally { busy.delete(alarm); schedule(); }
  }
  function status(text, ok) {
    const s = document.getElementById("act-status");
    s.textContent = text; s.className = "result " + (ok ? "ok" : "bad");
  }
  function outcome(alarm, action, resp) {
    const d = resp.data;
    if (resp.ok) return [true, `${DONE[action]}: ${name(alarm)}${d.transitions.length ? ` (journal record ${d.transitions.map((t) => t.seq).join(", ")})` : " (journaled)"}`];
    return [false, `${LABEL[action]} ${name(alarm)} refused: ${d.detail || d.reason || d.status || resp.status}`];
  }
  async function act(r, action) {
    if (action === "shelve" || action === "comment" || (action === "reset" && r.priority === "critical")) { openDialog(action, [r]); return; }
    const resp = await send(r.alarm, action);
    const [ok, text] = outcome(r.alarm, action, resp);
    status(text, ok);
  }
  async function ackMany(list) {
    let done = 0;
    const failed = [];
    for (const r of list) {
      const resp = await send(r.alarm, "ack");
      if (resp.ok) done += 1; else failed.push(outcome(r.alarm, "ack", resp)[1]);
    }
    status(`Acknowledged ${done} of ${list.length} alarm${list.length === 1 ? "" : "s"}.${failed.length ? " " + failed.join("; ") : ""}`, !failed.length);
    selected.clear(); schedule();
  }

  // ---- the dialog: a shelve, a critical reset, or acknowledging several alarms; each shows only its fields ----
  let target = null;
  function openDialog(mode, list) {
    target = { mode, list };
    const one = list[0];
    const title = mode === "ack-many" ? `Acknowledge ${list.length} alarm${list.length === 1 ? "" : "s"}?`
      : mode === "reset" ? "Reset a latched CRITICAL alarm?" : mode === "comment" ? "Comment on the alarm" : "Shelve alarm";
    document.getElementById("act-title").textContent = title;
    document.getElementById("act-alarm").textContent = mode === "ack-many" ? "" : `${name(one.alarm)} · ${one.state_label || one.state}`;
    const warning = document.getElementById("act-warning");
    warning.hidden = mode !== "reset";
    warning.textContent = mode === "reset" ? "The alarm clears and will not sound again until the condition returns. " +
      `Peak ${one.peak_text || "–"}${one.peak_time_text ? " at " + one.peak_time_text : ""}. A note is required.` : "";
    const items = document.getElementById("act-list");
    items.hidden = mode !== "ack-many";
    items.replaceChildren(...(mode === "ack-many" ? list.map((r) => el("li", {}, badge(r.priority), " ", name(r.alarm))) : []));
    document.getElementById("act-note-label").hidden = mode !== "reset" && mode !== "comment";
    document.getElementById("act-until-label").hidden = mode !== "shelve";
    document.getElementById("act-reason-label").hidden = mode !== "shelve";
    for (const id of ["act-note", "act-until", "act-reason"]) document.getElementById(id).value = "";
    document.getElementById("act-result").textContent = "";
    const submit = document.getElementById("act-submit");
    submit.disabled = false;
    submit.textContent = mode === "ack-many" ? "Acknowledge" : mode === "reset" ? "Reset" : mode === "comment" ? "Add comment" : "Shelve";
    document.getElementById("act-dialog").showModal();
  }
  async function submit(ev) {
    ev.preventDefault();
    const dialog = document.getElementById("act-dialog");
    if (ev.submitter && ev.submitter.value === "cancel") { dialog.close(); return; }
    const result = document.getElementById("act-result");
    const button = document.getElementById("act-submit");
    if (target.mode === "reset" && !document.getElementById("act-note").value.trim()) {
      result.textContent = "Write a note: why is it safe to reset?"; result.className = "result bad"; return;
    }
    if (target.mode === "comment" && !document.getElementById("act-note").value.trim()) {
      result.textContent = "Write the comment first."; result.className = "result bad"; return;
    }
    button.disabled = true;
    if (target.mode === "ack-many") { dialog.close(); await ackMany(target.list); return; }
    result.textContent = "Sent to the daemon, waiting for its answer…"; result.className = "result";
    const alarm = target.list[0].alarm;
    const resp = await send(alarm, target.mode, { note: document.getElementById("act-note").value,
      until: document.getElementById("act-until").value, reason: document.getElementById("act-reason").value });
    const [ok, text] = outcome(alarm, target.mode, resp);
    if (ok) { dialog.close(); status(text, true); } else { result.textContent = text; result.className = "result bad"; button.disabled = false; }
  }

  // ---- keyboard ----
  function focus(alarm) {
    const before = built.get(focused);
    if (before) before.tr.classList.remove("focus");
    focused = alarm;
    let b = built.get(alarm);
    if (!b || !b.tr.isConnected) {  // outside the drawn window: draw the window around it first
      const i = shown.findIndex((r) => r.alarm === alarm);
      if (i < 0) return;
      win.reveal(i);
      render();
      b = built.get(alarm);
    }
    if (b && b.tr.isConnected) { b.tr.classList.add("focus"); b.tr.focus({ preventScroll: false }); }
  }
  function move(step) {
    if (!shown.length) return;
    const i = shown.findIndex((r) => r.alarm === focused);
    focus(shown[Math.max(0, Math.min(shown.length - 1, i < 0 ? 0 : i + step))].alarm);
  }
  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || document.getElementById("act-dialog").open) return;
    if (["INPUT", "SELECT", "TEXTAREA", "BUTTON"].includes(ev.target.tagName) && ev.key !== "Escape") return;
    const r = focused ? rows.get(focused) : null;
    if (ev.key === "j" || ev.key === "ArrowDown") move(1);
    else if (ev.key === "k" || ev.key === "ArrowUp") move(-1);
    else if ((ev.key === "x" || ev.key === " ") && r) {
      if (selected.has(r.alarm)) selected.delete(r.alarm); else selected.add(r.alarm);
      render(); focus(r.alarm);
    } else if (ev.key === "a" && r && possible(r).includes("ack")) act(r, "ack");
    else if (ev.key === "A") ackButton(selected.size ? "selected" : "visible");
    else if (ev.key === "Escape") { selected.clear(); render(); }
    else return;
    ev.preventDefault();
  }
  function ackButton(which) {
    const list = ackable(which === "selected" ? shown.filter((r) => selected.has(r.alarm)) : shown);
    if (list.length) openDialog("ack-many", list);
  }

  // ---- journal ----
  function journalItem(j) {
    let text;
    const why = j.why_text || j.why;
    if (j.record === "transition") {
      text = `${name(j.alarm, j.alarm_name)}: ${j.kind} ${STATE_LABEL[j.from] || j.from} → ${STATE_LABEL[j.to] || j.to} by ${j.who}${why ? ": " + why : ""}`;
    } else if (j.record === "action" && j.action === "seen") {
      text = `${name(j.alarm, j.alarm_name)}: seen by the industry (${j.user})${j.note ? ": " + j.note : ""}`;
    } else if (j.record === "action" && j.action === "comment") {
      text = `${name(j.alarm, j.alarm_name)}: comment by ${j.user}: ${j.note}`;
    } else if (j.record === "action") {
      text = `${name(j.alarm, j.alarm_name)}: ${j.action} requested by ${j.user}${j.note ? ": " + j.note : ""}${j.reason ? ": " + j.reason : ""}`;
    } else text = `${name(j.alarm, j.alarm_name)}: ${j.action} by ${j.user} refused: ${j.reason}`;
    return el("li", { class: "j-" + j.record, "data-seq": j.seq, "data-alarm": j.alarm }, el("span", { class: "t" },
      j.time_text || time(j.time)), " ", el("span", { class: "seq" }, "#" + j.seq), " ", text);
  }
  function addJournal(j, atTop) {
    const list = document.getElementById("journal");
    const item = journalItem(j);
    if (atTop) list.prepend(item); else list.append(item);
    while (list.children.length > 200) list.lastChild.remove();
  }

  let journalLoaded = false;
  async function loadJournal() {
    const recent = await api("/api/journal?limit=50");
    if (recent.ok) for (const j of recent.data) addJournal(j, false);
  }

  async function start() {
    const got = await api("/api/me");
    me = got.data;
    actions = new Set(me.actions);
    fromUrl(me.sites);
    document.getElementById("act-form").addEventListener("submit", submit);
    for (const id of FILTERS.map((f) => "f-" + f)) {
      document.getElementById(id).addEventListener("change", () => { mark("alarms-filter"); narrow = true; toUrl(); render(); });
    }
    document.getElementById("show-normal").addEventListener("change", (ev) => {
      toUrl();
      if (ev.target.checked && !withNormal) follow(); else { narrow = true; render(); }
    });
    document.getElementById("f-clear").addEventListener("click", () => {
      for (const f of FILTERS) document.getElementById("f-" + f).value = "";
      narrow = true; toUrl(); render();
    });
    document.getElementById("select-all").addEventListener("change", (ev) => {
      for (const r of shown) if (ev.target.checked) selected.add(r.alarm); else selected.delete(r.alarm);
      render();
    });
    document.getElementById("ack-selected").addEventListener("click", () => ackButton("selected"));
    document.getElementById("ack-visible").addEventListener("click", () => ackButton("visible"));
    document.addEventListener("keydown", onKey);
    follow();
    setInterval(() => {
      const now = Date.now() / 1000;
      for (const s of document.querySelectorAll("#alarm-rows .dur")) {
        const since = parseFloat(s.dataset.since);
        const text = Number.isNaN(since) ? null : duration(now - since);
        if (text !== null && text !== s.textContent) s.textContent = text;  // untouched rows are not laid out again
      }
    }, 1000);
  }

  // The live stream. Its snapshot leaves the normal alarms out (three quarters of a large list's rows) until
  // "show normal" asks for them: then the stream is opened again with them. Every change comes as an `alarm`
  // event either way, so a row that returns to normal is updated (and hidden).
  let events = null, withNormal = false;
  function follow() {
    if (events) events.close();
    withNormal = document.getElementById("show-normal").checked;
    events = stream("/api/events" + (withNormal ? "" : "?normal=0"), {
      snapshot: (d) => {
        rows.clear(); built.clear(); for (const r of d.alarms) rows.set(r.alarm, keyed(r));
        narrow = true; render();
        if (!journalLoaded) { journalLoaded = true; loadJournal(); }  // after the rows: it names alarms by them
      },
      alarm: (r) => { rows.set(r.alarm, keyed(r)); schedule(); },
      "alarm-gone": (d) => { rows.delete(d.alarm); built.delete(d.alarm); schedule(); },
      journal: (j) => {
        addJournal(j, true);
        if (j.record === "transition" && j.kind === "raise" && j.priority === "critical") {
          const r = rows.get(j.alarm), unit = r && r.unit ? " " + r.unit : "";
          cue(`◆1 ${name(j.alarm, j.alarm_name)}: ${num(j.value)}${unit} (limit ${num(j.limit)}${unit})`);
        }
      },
    });
  }
  start();
})();
