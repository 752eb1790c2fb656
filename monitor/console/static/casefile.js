// An episode's case file: its obligations (and, for the industry, recording one as done with its written
// report), the industry's cause and corrective action, and enforcement's invalidation. The server checks
// every role; the forms shown here only follow what it answers in `may`.
"use strict";
(() => {
  const { api, el, time } = PT;
  const id = document.body.dataset.episode;
  const $ = (x) => document.getElementById(x);
  let zone = "UTC";

  function say(text, bad) { const m = $("cf-message"); m.textContent = text; m.classList.toggle("bad", !!bad); }

  async function upload(file) {
    const resp = await fetch(`/api/files?name=${encodeURIComponent(file.name)}`, { method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": PT.me.csrf, "Content-Type": file.type || "application/octet-stream" }, body: file });
    const data = await resp.json().catch(() => ({ detail: `upload refused (${resp.status})` }));
    if (!resp.ok) throw new Error(data.detail || `upload refused (${resp.status})`);
    return data.sha256;
  }

  function fileLink(sha, files) {
    const f = files[sha];
    return el("a", { href: `/api/files/${sha}`, class: "file" }, f ? f.name : sha.slice(0, 12));
  }

  function obligations(d) {
    const rows = d.obligations.map((o) => {
      const done = o.done ? el("span", {}, `${o.done.how} to ${o.done.recipient}, ${time(o.done.done_at, zone)} (entered by ${o.done.user}, ${time(o.done.recorded, zone)})`,
        o.done.note ? ` — ${o.done.note}` : "", o.done.report ? " · " : "", o.done.report ? fileLink(o.done.report, d.files) : "")
        : o.closed ? el("span", { class: "closed" }, o.closed) : "";
      // a record from before a second fulfilment was refused may hold more: each is shown, the first standing
      const later = (o.later || []).map((f) => el("div", { class: "also" }, `also recorded: ${f.how} to ${f.recipient}, ${time(f.done_at, zone)} (entered by ${f.user}, ${time(f.recorded, zone)})`));
      const act = d.may.fulfil && !o.done && !o.closed ? el("button", { type: "button", class: "cf-record", "data-obligation": o.id,
        onclick: () => openDone(o) }, "Record as done") : "";
      return el("tr", { "data-obligation": o.id, class: o.status === "overdue" || o.status === "outstanding" ? "overdue" : "" },
        el("td", {}, o.action), el("td", {}, o.recipient), el("td", {}, `${o.due_text}: ${time(o.due, zone)}`),
        el("td", { title: o.quote }, o.citation), el("td", { class: "status" }, o.status), el("td", {}, done, ...later), el("td", {}, act));
    });
    $("cf-obligations").tBodies[0].replaceChildren(...rows);
    $("cf-obligations").hidden = !rows.length;
    $("cf-no-obligations").hidden = !!rows.length;
  }

  function openDone(o) {
    $("cf-done-id").value = o.id;
    $("cf-done-title").textContent = `Record as done: ${o.action}`;
    $("cf-done-to").value = o.recipient;
    $("cf-done-report-label").hidden = !o.written;
    $("cf-done-report").required = !!o.written;
    $("cf-done-form").hidden = false;
    $("cf-done-how").focus();
  }

  function annotations(d) {
    const box = $("cf-annotations");
    if (!d.annotations.length) { box.replaceChildren(el("p", { class: "hint" }, "None entered yet.")); return; }
    box.replaceChildren(...d.annotations.map((a, i) => el("div", { class: "note" + (i < d.annotations.length - 1 ? " superseded" : "") },
      el("p", {}, el("strong", {}, "Cause: "), a.cause), el("p", {}, el("strong", {}, "Corrective action: "), a.action),
      el("p", { class: "hint" }, `entered by ${a.user}, ${time(a.time, zone)}`, ...a.attachments.flatMap((s) => [" · ", fileLink(s, d.files)])))));
  }

  function validity(d) {
    const inv = d.invalidation;
    $("cf-invalid").hidden = !inv;
    if (inv) $("cf-invalid").textContent = `Marked invalid by ${inv.user}, ${time(inv.time, zone)}: ${inv.reason}. The episode stays in the record and is left out of violation counts.`;
    for (const x of ["ep-title", "ep-facts"]) $(x).classList.toggle("struck", !!inv);
    $("cf-invalidate-form").hidden = !d.may.invalidate;
    $("cf-annotate-form").hidden = !d.may.annotate;
  }

  async function load() {
    const resp = await api(`/api/episodes/${encodeURIComponent(id)}/casefile`);
    if (!resp.ok) { say(resp.data.detail || "The case file is not available.", true); return; }
    zone = resp.data.timezone;
    obligations(resp.data);
    annotations(resp.data);
    validity(resp.data);
    document.body.dataset.casefile = "loaded";
  }

  async function post(path, body, ok) {
    const resp = await api(path, { method: "POST", body: JSON.stringify(body) });
    if (!resp.ok) { say(resp.data.detail || `refused (${resp.status})`, true); return false; }
    say(ok, false);
    await load();
    return true;
  }

  $("cf-done-cancel").addEventListener("click", () => { $("cf-done-form").hidden = true; });
  $("cf-done-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const file = $("cf-done-report").files[0];
      const report = file ? await upload(file) : null;
      if (await post(`/api/obligations/${$("cf-done-id").value}/done`, { how: $("cf-done-how").value, to: $("cf-done-to").value,
        done_at: $("cf-done-when").value, note: $("cf-done-note").value, report }, "Recorded as done.")) {
        $("cf-done-form").reset(); $("cf-done-form").hidden = true;
      }
    } catch (e) { say(e.message, true); }
  });
  $("cf-annotate-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const attachments = [];
      for (const f of $("cf-attachments").files) attachments.push(await upload(f));
      if (await post(`/api/episodes/${encodeURIComponent(id)}/annotation`, { cause: $("cf-cause").value, action: $("cf-action").value, attachments },
        "Cause and corrective action saved.")) $("cf-annotate-form").reset();
    } catch (e) { say(e.message, true); }
  });
  $("cf-invalidate-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // permanent: the invalidation is journaled and can never be withdrawn, so it is confirmed first
    const sure = window.confirm("Mark this episode invalid? This cannot be undone: the episode stays in the record "
      + "struck through with your justification, is left out of violation counts for good, and its unmet obligations "
      + "are closed as not required.");
    if (!sure) { say("Not marked invalid."); return; }
    await post(`/api/episodes/${encodeURIComponent(id)}/invalidate`, { reason: $("cf-reason").value }, "Marked invalid.");
  });
  load();
})();
