// Calibration: each channel's status and its latest entries, and the form that records a calibration (pH
// two-buffer check: buffer pH and the probe's reading; flow verification: reference flow and the meter's
// reading), sent to POST /api/calibration, which validates it as `pretreat calibration add` does.
"use strict";
(() => {
  const { api, el } = PT;
  const mayRecord = document.body.dataset.mayRecord === "true";

  function points(prefix) {
    const out = [];
    for (const i of [1, 2]) {
      const r = document.getElementById(`c-${prefix}${i}r`).value.trim();
      const v = document.getElementById(`c-${prefix}${i}v`).value.trim();
      if (r || v) out.push(`${r}:${v}`);
    }
    return out;
  }

  function entryText(e) {
    const pts = (ps) => ps.map(([r, v]) => `${r} read ${v}`).join(", ");
    return `${e.time} ${e.who} (${e.method}): as found ${pts(e.as_found)}; as left ${pts(e.as_left)}`;
  }

  async function load() {
    const resp = await api("/api/calibration");
    const body = document.getElementById("c-rows");
    if (!resp.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 4 }, resp.data.detail || String(resp.status)))); return; }
    const frag = document.createDocumentFragment();
    const select = document.getElementById("c-channel");
    const chosen = select.value;
    select.replaceChildren();
    for (const row of resp.data.channels) {
      frag.append(el("tr", { class: row.overdue ? "overdue" : "", "data-channel": `${row.site}/${row.channel}` },
        el("td", {}, row.site), el("td", {}, `${row.channel} (${row.kind})`),
        el("td", { class: "status" }, row.text),
        el("td", {}, row.entries.length ? entryText(row.entries[0]) + (row.entries.length > 1 ? ` (+${row.entries.length - 1} earlier)` : "") : "none")));
      select.append(el("option", { value: `${row.site}/${row.channel}` }, `${row.site} / ${row.channel} (${row.kind})`));
    }
    if (chosen) select.value = chosen;
    body.replaceChildren(frag);
    const method = document.getElementById("c-method");
    if (!method.options.length) {
      for (const [k, label] of Object.entries(resp.data.methods)) method.append(el("option", { value: k }, label));
    }
  }

  async function record(ev) {
    ev.preventDefault();
    const [site, channel] = document.getElementById("c-channel").value.split("/");
    const v = (id) => document.getElementById(id).value.trim();
    const body = {
      site, channel, date: v("c-date") ? v("c-date") + "Z" : "", who: v("c-who"), method: v("c-method"),
      found: points("f"), left: points("l"), next_due: v("c-due") ? v("c-due") + "Z" : "", note: v("c-note"),
    };
    const resp = await api("/api/calibration", { method: "POST", body: JSON.stringify(body) });
    const out = document.getElementById("c-result");
    if (resp.ok) {
      out.textContent = `Recorded (journal record ${resp.data.journal_seq}): ${site}/${channel} calibrated ${resp.data.recorded.time}.`;
      document.getElementById("c-form").reset();
      await load();
    } else {
      out.textContent = `Not recorded: ${resp.data.detail || resp.status}`;
    }
  }

  if (mayRecord) document.getElementById("c-form").addEventListener("submit", record);
  else { document.getElementById("c-form").hidden = true; document.getElementById("record").hidden = true; }
  load();
})();
