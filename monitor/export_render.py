"""The fast path of `pretreat readings`: turning historian rows into CSV or JSON Lines text.

Why it looks like this: a month of 1-second readings is 2.6 M rows, and a per-row Python function call or
`datetime` costs more than the whole budget (< 2 s for that month). So the hot loop has no Python-level
per-row code at all; it is built from C-level ``map``/``zip``/``join`` over columns:

- Rows are read one UTC day (a *window*) at a time. SQLite returns the time as integer milliseconds since
  the window's midnight, so the text of a time is three table look-ups: the day's prefix
  (``YYYY-MM-DDT``), ``HH:MM:SS`` (86,400 strings, built once per process) and ``.mmmZ`` (1,000 strings,
  which also carry the constant ``,site,channel,`` that follows). A window covers the times that *round*
  to its day, so 23:59:59.9996 is written as the next day's 00:00:00Z rather than as a 24:00 of this one.
- Values are formatted with ``repr`` (shortest text that reads back as the same double), each distinct
  value once, through a bounded cache (instrument readings repeat: a pH meter's 0.01 steps). An infinite
  value is written ``inf`` (in JSON, the string ``"inf"``: JSON has no infinity).
- Quality and reason: SQLite returns NULL for the common row (good, no reason, main series) and a small key
  string otherwise, so a day of good readings costs one ``None`` per row and one constant tail.
- Calibration: the ``calibration`` column is part of the tail. A window is split at the bounds of the spans in
  which the instrument was overdue (`ExportPlan.overdue`), and each part is written with its own set of tails,
  so marking the readings of an overdue instrument costs nothing per row.

Time text: ISO 8601 UTC with ``Z``, milliseconds only when the time, rounded to the millisecond, has a
fraction: ``2026-01-01T00:00:01Z``, ``2026-01-01T00:00:01.250Z``. Times outside years 1–9999 (a device
clock gone wrong) cannot be written that way; they are written as the raw epoch seconds (``repr``), in
order, rather than dropped.

Large exports render windows in worker processes (``jobs``), written in order; see `render`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from itertools import chain, repeat
from multiprocessing import get_context
from operator import floordiv, mod
from pathlib import Path

from monitor.stores.historian_db import QUALITY_BY_CODE, open_for_reading, time_bounds

CSV_HEADER = "time,site,channel,value,unit,quality,reason,calibration\n"
DAY = 86_400
_HALF_MS = 0.0005  # windows are shifted by half a millisecond so that a row's rounded time is in its day
_MIN_T = -62_135_596_800.0  # 0001-01-01T00:00:00Z
_MAX_T = 253_402_300_800.0  # 10000-01-01T00:00:00Z
_CHUNK = 8192  # rows per fetchmany: big enough to amortise, small enough for constant memory
_VALUE_CACHE_MAX = 200_000
_R1000 = repeat(1000)


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """What to export. ``series`` are (channel_id, unit) of the channel's series, main (latest) first."""

    path: Path | str  # the historian file, or the hub's database URL
    site: str
    channel: str
    series: tuple[tuple[int, str], ...]
    fmt: str  # "csv" or "json"
    start: float | None = None  # inclusive, epoch s
    end: float | None = None  # exclusive
    # [lo, hi) spans in which the instrument was overdue for calibration, with the word written in the
    # ``calibration`` column of their rows (`monitor.stores.calibration.overdue_spans`); other rows: empty
    overdue: tuple[tuple[float, float, str], ...] = ()


@cache
def _hms() -> list[str]:
    """``HH:MM:SS`` of every second of a day, indexed by second of the day."""
    minutes_seconds = [f":{m:02d}:{s:02d}" for m in range(60) for s in range(60)]
    return [f"{h:02d}" + ms for h in range(24) for ms in minutes_seconds]


def csv_field(text: str) -> str:
    """RFC 4180 quoting, only where needed."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _js(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


class _ValueText:
    """float (or None for a bad reading) -> its text, with no Python code per row in either of two modes.

    - Values that repeat (a pH meter's 0.01 steps): a bounded cache filled chunk by chunk (the chunk's
      distinct values not seen yet go through C-level ``map(repr, ...)``), then every row is a dict hit.
    - Values that do not (float32 noise): plain ``map(repr, values)``. Caching them would cost more than
      formatting: and Python hashes a float32-origin double mostly by its integer part, so such values
      collide in a dict. A chunk is probed (``set``) after a repeating one and every 16th chunk.

    The cache must be an exact ``dict``: ``set.difference`` has a fast path only for that (for a subclass
    it iterates the whole cache on every call)."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json_mode = json_mode
        self.cache: dict[object, str] = {}
        self.distinct = False  # the last probed chunk was mostly distinct values
        self.chunks = 0
        self._seed()

    def _seed(self) -> None:
        c = self.cache
        c[None] = "null" if self.json_mode else ""
        for inf in (math.inf, -math.inf):  # JSON has no infinity: keep it visible as a string
            c[inf] = _js(repr(inf)) if self.json_mode else repr(inf)

    def texts(self, values: tuple[object, ...], *, all_good: bool) -> Iterable[str]:
        """Texts of one chunk. ``all_good``: no bad reading (so no None) in it."""
        self.chunks += 1
        if not (self.distinct and self.chunks % 16):
            unique = set(values)
            self.distinct = len(unique) * 2 > len(values)
            if not self.distinct:
                return self._cached(unique, values)
        if all_good and not (self.json_mode and _has_infinity(values)):
            return map(repr, values)
        out = list(map(repr, values))
        specials: tuple[object, ...] = (None, math.inf, -math.inf) if self.json_mode else (None,)
        for special in specials:  # a few bad readings in a chunk of distinct values: patch them in place
            i = -1
            with contextlib.suppress(ValueError):
                while True:
                    i = values.index(special, i + 1)
                    out[i] = self.cache[special]
        return out

    def _cached(self, unique: set[object], values: tuple[object, ...]) -> Iterator[str]:
        new = unique.difference(self.cache)
        if new:
            if len(self.cache) + len(new) > _VALUE_CACHE_MAX:
                self.cache.clear()
                self._seed()
                new = unique.difference(self.cache)
            self.cache.update(zip(new, map(repr, new), strict=True))
        return map(self.cache.__getitem__, values)


def _has_infinity(values: tuple[object, ...]) -> bool:
    return max(values) == math.inf or min(values) == -math.inf  # type: ignore[type-var]


class _Tails(dict[str | None, str]):
    """marker -> tail text; ``None`` (the common row) is seeded, so that look-up never calls Python."""

    def __init__(self, build: Callable[[str], str]) -> None:
        super().__init__()
        self.build = build

    def __missing__(self, key: str | None) -> str:
        assert key is not None
        text = self.build(key)
        if len(self) < 10_000:
            self[key] = text
        return text


class Renderer:
    """Text of one export, window by window. One per process (it holds the read connection)."""

    def __init__(self, plan: ExportPlan, conn: sqlite3.Connection | None = None) -> None:
        self.plan = plan
        self.conn = conn or open_for_reading(plan.path)
        self.conn.execute("BEGIN")  # one read snapshot for the whole export (per worker when parallel)
        self.ids = [cid for cid, _unit in plan.series]
        self.units = dict(plan.series)
        self.json = plan.fmt == "json"
        site, channel = plan.site, plan.channel
        if self.json:
            mid = f'","site":{_js(site)},"channel":{_js(channel)},"value":'
        else:
            mid = f",{csv_field(site)},{csv_field(channel)},"
        self.frac = ["Z" + mid] + [f".{i:03d}Z{mid}" for i in range(1, 1000)]
        self.values = _ValueText(json_mode=self.json)
        self.rows = 0  # rendered so far
        self.marked: dict[str, tuple[_Tails, str]] = {}  # calibration word -> (tails, good tail)
        self.tails, self.tail_good = self._tails_for("")
        marks = "quality != 0 OR reason != ''"
        if len(self.ids) > 1:
            marks += f" OR channel_id != {self.ids[0]}"
        self.where = f"channel_id IN ({','.join(map(str, self.ids))})"
        self.sql = (f"SELECT CAST(round((time - ?) * 1000) AS INTEGER), value, "
                    f"CASE WHEN {marks} THEN channel_id || ' ' || quality || ' ' || reason END "
                    f"FROM readings WHERE {self.where} AND time >= ? AND time < ? ORDER BY time, seq")

    def _tails_for(self, word: str) -> tuple[_Tails, str]:
        """The tails of rows whose ``calibration`` column says ``word`` ("" when in calibration)."""
        found = self.marked.get(word)
        if found is None:
            tails = _Tails(lambda key: self._tail_of(key, word))
            good = tails[None] = self._tail(self.ids[0], 0, "", word)
            found = self.marked[word] = (tails, good)
        return found

    def _tail(self, cid: int, code: int, reason: str, word: str = "") -> str:
        quality = QUALITY_BY_CODE[code].value if code in QUALITY_BY_CODE else f"unknown-{code}"
        unit = self.units.get(cid, "?")
        if self.json:
            cal = _js(word) if word else "null"
            return f',"unit":{_js(unit)},"quality":{_js(quality)},"reason":{_js(reason)},"calibration":{cal}}}\n'
        return f",{csv_field(unit)},{csv_field(quality)},{csv_field(reason)},{csv_field(word)}\n"

    def _tail_of(self, key: str, word: str = "") -> str:
        """Tail of a marked row (bad, with a reason, or of an older series); key 'cid code reason'."""
        cid, code, reason = key.split(" ", 2)
        return self._tail(int(cid), int(code), reason, word)

    def word_at(self, t: float) -> str:
        return next((w for a, b, w in self.plan.overdue if a <= t < b), "")

    def window(self, day: int, lo: float, hi: float) -> Iterator[str]:
        """Text of the rows with ``lo <= time < hi``, all of which round to UTC day number ``day``, in
        chunks of at most _CHUNK rows; split where the instrument's calibration status changes."""
        cuts = sorted({x for a, b, _w in self.plan.overdue for x in (a, b) if lo < x < hi})
        for a, b in zip([lo, *cuts], [*cuts, hi], strict=True):
            self.tails, self.tail_good = self._tails_for(self.word_at(a))
            yield from self._window(day, a, b)

    def _window(self, day: int, lo: float, hi: float) -> Iterator[str]:
        d0 = day * DAY
        prefix = datetime.fromtimestamp(d0, UTC).strftime("%Y-%m-%dT")
        if self.json:
            prefix = '{"time":"' + prefix
        hms, frac = _hms(), self.frac
        cur = self.conn.execute(self.sql, (float(d0), lo, hi))
        while rows := cur.fetchmany(_CHUNK):
            self.rows += len(rows)
            ms, values, marks = zip(*rows, strict=True)
            if ms[0] < 0 or ms[-1] >= DAY * 1000:  # float ties at the window edge; ms is ordered
                ms = tuple(min(max(m, 0), DAY * 1000 - 1) for m in ms)
            all_good = marks.count(None) == len(marks)
            tails = repeat(self.tail_good) if all_good else map(self.tails.__getitem__, marks)
            yield "".join(chain.from_iterable(zip(
                repeat(prefix), map(hms.__getitem__, map(floordiv, ms, _R1000)),
                map(frac.__getitem__, map(mod, ms, _R1000)), self.values.texts(values, all_good=all_good),
                tails)))

    def odd_rows(self, lo: float | None, hi: float | None) -> Iterator[str]:
        """Rows whose time cannot be written as ISO 8601 (outside years 1-9999): slow path, rare.
        The time is written as the raw epoch seconds."""
        cond, params = time_bounds(lo, hi)
        head, after_time = ('{"time":"' if self.json else ""), self.frac[0][1:]
        for t, value, cid, code, reason in self.conn.execute(
                f"SELECT time, value, channel_id, quality, reason FROM readings WHERE {self.where}{cond} "
                "ORDER BY time, seq", params):
            self.rows += 1
            text = next(iter(self.values.texts((value,), all_good=False)))
            yield f"{head}{t!r}{after_time}{text}{self._tail(cid, code, reason, self.word_at(t))}"

    def close(self) -> None:
        self.conn.close()


def windows(conn: sqlite3.Connection, ids: list[int], start: float,
            end: float) -> Iterator[tuple[int, float, float]]:
    """(day, lo, hi) of every UTC day holding readings in ``[start, end)``, skipping empty days by index
    seeks. Consecutive windows share their bounds, so no row can fall between two of them."""
    lo = start
    while lo < end:
        firsts = [conn.execute("SELECT time FROM readings WHERE channel_id = ? AND time >= ? AND time < ? "
                               "ORDER BY time LIMIT 1", (cid, lo, end)).fetchone() for cid in ids]
        found = [row[0] for row in firsts if row is not None]
        if not found:
            return
        t = min(found)
        day = math.floor((t + _HALF_MS) / DAY)
        while t < day * DAY - _HALF_MS:  # guard against float rounding in the division
            day -= 1
        while t >= (day + 1) * DAY - _HALF_MS:
            day += 1
        hi = min(end, (day + 1) * DAY - _HALF_MS)
        yield day, max(lo, day * DAY - _HALF_MS), hi
        lo = hi


def render(plan: ExportPlan, write: Callable[[str], object], *, jobs: int = 1) -> int:
    """Write the export's rows (no header) through ``write``, in time order, in constant memory; return
    how many rows were written.

    ``jobs`` > 1 renders day windows in that many forked worker processes, written in order, at most
    2 × jobs windows in flight. A fork is only safe from a single-threaded process (it can copy a lock held
    by another thread) that has no SQLite connection open across it; so this closes its own connection
    first, and renders serially if other threads are running.
    """
    with _no_cyclic_gc():
        return _render(plan, write, jobs)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while rendering (forked workers inherit the pause).

    Every fetched row is a new tuple, which the collector tracks: millions of them trigger thousands of
    collections, each also walking every object the process already holds (in the `pretreat` command, all
    the modules its parser imports). That measured 40 % of a month's export. Rendering creates no reference
    cycles (tuples, strings, numbers), so nothing is left for the collector to find; reference counting
    still frees everything at once.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _render(plan: ExportPlan, write: Callable[[str], object], jobs: int) -> int:
    lo = max(plan.start if plan.start is not None else -math.inf, _MIN_T)
    hi = min(plan.end if plan.end is not None else math.inf, _MAX_T)
    renderer = Renderer(plan)
    rows = 0
    try:
        if plan.start is None or plan.start < _MIN_T:
            _write_all(write, renderer.odd_rows(plan.start, min(_MIN_T, hi)))
        spans = list(windows(renderer.conn, renderer.ids, lo, hi)) if lo < hi else []
        if jobs > 1 and len(spans) > 2 and threading.active_count() == 1:
            rows += renderer.rows
            renderer.close()
            _hms()  # built once here, inherited by the forked workers
            rows += _render_parallel(plan, spans, write, jobs)
            renderer = Renderer(plan)
        else:
            for span in spans:
                _write_all(write, renderer.window(*span))
        if plan.end is None or plan.end > _MAX_T:
            _write_all(write, renderer.odd_rows(max(_MAX_T, lo), plan.end))
        return rows + renderer.rows
    finally:
        renderer.close()


def _write_all(write: Callable[[str], object], parts: Iterator[str]) -> None:
    for part in parts:
        write(part)


_worker: Renderer | None = None


def _init_worker(plan: ExportPlan) -> None:
    global _worker
    _worker = Renderer(plan)


def _render_span(day: int, lo: float, hi: float) -> tuple[str, int]:
    assert _worker is not None
    before = _worker.rows
    text = "".join(_worker.window(day, lo, hi))
    return text, _worker.rows - before


def _render_parallel(plan: ExportPlan, spans: list[tuple[int, float, float]], write: Callable[[str], object],
                     jobs: int) -> int:
    ctx = get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                             initargs=(plan,)) as pool:
        pending: list[Future[tuple[str, int]]] = []
        rows = 0
        todo = iter(spans)
        try:
            for span in todo:
                pending.append(pool.submit(_render_span, *span))
                if len(pending) >= 2 * jobs:
                    break
            while pending:
                text, n = pending.pop(0).result()
                write(text)
                rows += n
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(_render_span, *nxt))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return rows
