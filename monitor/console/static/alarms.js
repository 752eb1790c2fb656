// The alarm list: a snapshot and then live changes from /api/events; actions go to the daemon's queue.
"use strict";
(() => {
  const { api, el, num, time, duration, stream, cue } = PT;
  const TIER = { "active-unacknowledged": 0, "latched-unacknowledged": 1, "returned-to-normal-unacknowledged": 1,
    "active-acknowledged": 2, "latched-acknowledged": 2, "shelved": 3, "out-of-service": 3, "normal": 4 };
  const RANK = { critical: 0, high: 1, medium: 2, low: 3, diagnostic: 4 };
  const UNACKED = new Set(["active-unacknowledged", "latched-unacknowledged", "returned-to-normal-unacknowledged"]);
  const LABEL = { ack: "Acknowledge", shelve: "Shelve", unshelve: "Unshelve", reset: "Reset" };
  const rows = new Map();
  let actions = new Set();
  let pending = null;

  function key(r) { return [TIER[r.state] ?? 5, RANK[r.priority] ?? 5, -(r.since || 0), r.alarm]; }
  function compare(a, b) {
    const x = key(a), y = key(b);
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
  }

  function possible(r) {
    const out = [];
    if (actions.has("ack") && UNACKED.has(r.state)) out.push("ack");
    if (actions.has("reset") && r.state.startsWith("latched")) out.push("reset");
    if (actions.has("unshelve") && r.state === "shelved") out.push("unshelve");
    if (actions.has("shelve") && r.state !== "shelved" && r.state !== "out-of-service") out.push("shelve");
    return out;
  }

  function note(r) {
    if (r.state === "shelved" || r.state === "out-of-service") {
      return `${r.state}${r.until ? " until " + time(r.until) : ""} by ${r.by}: ${r.reason}`;
    }
    return r.configured ? r.citation : `${r.citation} (no longer configured)`;
  }

  function rowElement(r) {
    const unit = r.unit ? " " + r.unit : "";
    const value = r.value === null || r.value === undefined ? "–" : num(r.value) + unit;
    const limit = r.limit === null || r.limit === undefined ? "" : ` / ${num(r.limit)}${unit}`;
    const buttons = possible(r).map((a) => el("button", { type: "button", class: "act", "data-action": a,
      onclick: () => openDialog(r, a) }, LABEL[a]));
    return el("tr", { class: `tier${TIER[r.state] ?? 5} prio-${r.priority || "none"}`, "data-alarm": r.alarm,
      "data-state": r.state },
      el("td", { class: "prio" }, r.priority || ""),
      el("td", { class: "state" }, r.state),
      el("td", {}, el("a", { href: "/sites/" + encodeURIComponent(r.site) }, r.site)),
      el("td", {}, r.channel), el("td", {}, r.rule),
      el("td", { class: "num" }, value + limit),
      el("td", { class: "dur", "data-since": r.since ?? "" }, r.since ? duration(Date.now() / 1000 - r.since) : ""),
      el("td", { class: "note" }, note(r)),
      el("td", { class: "actions" }, ...buttons));
  }

  function render() {
    pending = null;
    const showNormal = document.getElementById("show-normal").checked;
    const list = [...rows.values()].filter((r) => showNormal || r.state !== "normal").sort(compare);
    const body = document.getElementById("alarm-rows");
    const frag = document.createDocumentFragment();
    for (const r of list) frag.append(rowElement(r));
    if (!list.length) frag.append(el("tr", {}, el("td", { colspan: 9, class: "empty" }, "No alarms.")));
    body.replaceChildren(frag);
    const all = [...rows.values()];
    const active = all.filter((r) => (TIER[r.state] ?? 5) < 3).length;
    const unacked = all.filter((r) => UNACKED.has(r.state)).length;
    document.getElementById("counts").textContent = `${active} active or unacknowledged · ${unacked} unacknowledged`;
    window.__alarmsRendered = performance.now();
    window.__renders = (window.__renders || 0) + 1;
  }
  function schedule() { if (!pending) pending = setTimeout(render, 30); }

  function journalItem(j) {
    let text;
    if (j.record === "transition") text = `${j.alarm} ${j.kind.toUpperCase()} ${j.from} → ${j.to} by ${j.who}${j.why ? ": " + j.why : ""}`;
    else if (j.record === "action") text = `${j.alarm} ${j.action} requested by ${j.user}${j.note ? ": " + j.note : ""}${j.reason ? ": " + j.reason : ""}`;
    else text = `${j.alarm} ${j.action} by ${j.user} refused: ${j.reason}`;
    return el("li", { class: "j-" + j.record, "data-seq": j.seq }, el("span", { class: "t" }, time(j.time)), " ",
      el("span", { class: "seq" }, "#" + j.seq), " ", text);
  }
  function addJournal(j, atTop) {
    const list = document.getElementById("journal");
    const item = journalItem(j);
    if (atTop) list.prepend(item); else list.append(item);
    while (list.children.length > 200) list.lastChild.remove();
  }

  // ---- the action dialog ----
  let target = null;
  function openDialog(r, action) {
    target = { alarm: r.alarm, action };
    document.getElementById("act-title").textContent = `${LABEL[action]} alarm`;
    document.getElementById("act-alarm").textContent = `${r.alarm} · ${r.state}`;
    document.getElementById("act-note-label").hidden = action === "shelve";
    document.getElementById("act-until-label").hidden = action !== "shelve";
    document.getElementById("act-reason-label").hidden = action !== "shelve";
    for (const id of ["act-note", "act-until", "act-reason"]) document.getElementById(id).value = "";
    document.getElementById("act-result").textContent = "";
    document.getElementById("act-submit").disabled = false;
    document.getElementById("act-dialog").showModal();
  }

  async function submit(ev) {
    ev.preventDefault();
    if (ev.submitter && ev.submitter.value === "cancel") { document.getElementById("act-dialog").close(); return; }
    const result = document.getElementById("act-result");
    const button = document.getElementById("act-submit");
    button.disabled = true;
    result.textContent = "Sent to the daemon, waiting for its answer…";
    const body = { note: document.getElementById("act-note").value, until: document.getElementById("act-until").value,
      reason: document.getElementById("act-reason").value };
    const [site, channel, rule] = target.alarm.split("/");
    const path = `/api/alarms/${[site, channel, rule, target.action].map(encodeURIComponent).join("/")}`;
    const resp = await api(path, { method: "POST", body: JSON.stringify(body) });
    const d = resp.data;
    if (resp.ok) {
      result.textContent = "Done: " + d.transitions.map((t) => `${t.kind} by ${t.who} (${t.from} → ${t.to}), journal record ${t.seq}`).join("; ");
      result.className = "result ok";
    } else {
      result.textContent = `${d.status || resp.status}: ${d.detail || JSON.stringify(d)}`;
      result.className = "result bad";
      button.disabled = false;
    }
  }

  async function start() {
    const me = await api("/api/me");
    actions = new Set(me.data.actions);
    document.getElementById("act-form").addEventListener("submit", submit);
    document.getElementById("show-normal").addEventListener("change", render);
    const recent = await api("/api/journal?limit=50");
    if (recent.ok) for (const j of recent.data) addJournal(j, false);
    stream("/api/events", {
      snapshot: (d) => { rows.clear(); for (const r of d.alarms) rows.set(r.alarm, r); render(); },
      alarm: (r) => { rows.set(r.alarm, r); schedule(); },
      "alarm-gone": (d) => { rows.delete(d.alarm); schedule(); },
      journal: (j) => {
        addJournal(j, true);
        if (j.record === "transition" && j.kind === "raise" && j.priority === "critical") {
          cue(`${j.alarm}: value ${num(j.value)} limit ${num(j.limit)}`);
        }
      },
    });
    setInterval(() => {
      const now = Date.now() / 1000;
      for (const td of document.querySelectorAll("#alarm-rows td.dur")) {
        const since = parseFloat(td.dataset.since);
        if (!Number.isNaN(since)) td.textContent = duration(now - since);
      }
    }, 1000);
  }
  start();
})();
