// The drawn window of a long alarm list (alarms.js). Styling and laying out one alarm row costs the browser one
// to two milliseconds on a small, busy machine, so 1,000 rows cannot be drawn in 150 ms: past WHOLE rows the
// table holds the rows in the viewport and AROUND more on each side, and two spacer rows stand for the others
// (their height: the drawn rows' mean height times how many). A new list (the snapshot, a filter) is first
// drawn with NEAR rows on each side and widened once that is on screen. Scrolling moves the window; the
// keyboard, selection, "acknowledge all shown" and the counts work on the whole list, never on what happens to
// be drawn. The tbody carries data-shown (rows in the list) and data-drawn ("from-to").
"use strict";
const AlarmWindow = (() => {
  const WHOLE = 100, AROUND = 30, NEAR = 3;

  // body: the tbody; rowFor(row) gives a row's <tr> (kept while the row is unchanged); patch(body, trs) puts
  // exactly those elements in the tbody in that order.
  function create(body, rowFor, patch) {
    const { el } = PT;
    let list = [];  // the whole list, in display order
    let drawn = [];  // the <tr>s of list[from, to)
    let rowHeight = 60;  // px, the drawn rows' mean, measured once a new list is on screen
    let bodyTop = null;  // px from the document's top to the tbody's, measured then and at each scroll
    let from = 0, to = 0;
    let around = null;  // a row index the next window must hold (the keyboard moved there)
    const spacers = [0, 1].map(() => {
      const td = el("td", { colspan: 11 });
      return { tr: el("tr", { class: "spacer", "aria-hidden": "true" }, td), td };
    });

    function range(margin) {
      const n = list.length;
      if (n <= WHOLE) return [0, n];
      let first, last;
      if (around !== null) { first = last = around; around = null; }
      else {
        const top = bodyTop ?? 0;
        first = Math.floor((window.scrollY - top) / rowHeight);
        last = Math.ceil((window.scrollY + window.innerHeight - top) / rowHeight);
      }
      first = Math.max(0, Math.min(n - 1, first));
      last = Math.max(first, Math.min(n - 1, last));
      return [Math.max(0, first - margin), Math.min(n, last + margin + 1)];
    }
    function place(margin) {
      [from, to] = range(margin);
      drawn = list.slice(from, to).map(rowFor);
      spacers[0].td.style.height = `${from * rowHeight}px`;
      spacers[1].td.style.height = `${(list.length - to) * rowHeight}px`;
      if (list.length) patch(body, list.length > WHOLE ? [spacers[0].tr, ...drawn, spacers[1].tr] : drawn);
      body.dataset.shown = String(list.length);
      body.dataset.drawn = `${from}-${to}`;
    }
    // a new list (narrow: NEAR rows around the viewport, `widen` after the paint) or a changed one (AROUND)
    function draw(shown, narrow) { list = shown; place(narrow ? NEAR : AROUND); }
    function widen() {  // after a paint: layout is clean, reading it costs nothing
      bodyTop = body.getBoundingClientRect().top + window.scrollY;
      const first = drawn[0], last = drawn[drawn.length - 1];
      if (drawn.length >= 2 && first.isConnected && last.isConnected) {
        const h = (last.getBoundingClientRect().bottom - first.getBoundingClientRect().top) / drawn.length;
        if (h > 0) rowHeight = h;
      }
      if (list.length > WHOLE) { place(AROUND); PT.mark("alarms-widened"); }
    }
    let scrolling = false;
    window.addEventListener("scroll", () => {
      if (scrolling || list.length <= WHOLE) return;
      scrolling = true;
      requestAnimationFrame(() => {
        scrolling = false;
        bodyTop = body.getBoundingClientRect().top + window.scrollY;  // nothing changed since the last frame: cheap
        const [a, b] = range(AROUND);
        // again once the viewport comes within half the margin of the drawn rows' edge
        if (a + AROUND / 2 < from || b - AROUND / 2 > to) place(AROUND);
      });
    }, { passive: true });
    return { draw, widen, reveal: (i) => { around = i; } };
  }
  return { create };
})();
