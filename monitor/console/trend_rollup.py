"""Per-minute rollups of a channel's readings, kept by the console, so a month's trend does not re-read a month.

Why: a 30-day trend of a 1-second channel is 2.6 M readings. Aggregating them per request costs ~3 s of CPU
in SQLite (the GROUP BY on a computed bucket sorts every row into a temporary B-tree) and ~0.3 s even for a
bare ``COUNT(*)`` of the range. The console therefore keeps, for each whole **UTC day** it has been asked
for, one row per minute: minimum and maximum value, readings with a value ("good": a value is recorded), all
readings, and the times of the first and last reading with a value (for gaps). A month's chart then merges
43,200 minute rows instead of 2.6 M readings.

Nothing stale is ever shown: the readings table is append-only (the historian never updates a row; retention
only deletes whole old days), so a day's reading count changes exactly when a late reading arrives or a
purge removes some. A request counts the readings of the cached days in one range query (a key-only scan,
~10 ms of CPU per day of 1-s readings; for the same span at most every `CHECK_EVERY` s, so a late reading for a
past day is drawn within half a minute) and rebuilds any day whose count differs. Bucket boundaries are not
minute boundaries: a minute goes into the bucket its start falls in, so the rollup is used only when a bucket
spans at least `MIN_BUCKET` s (the misplacement is then under half a bucket, i.e. under half a pixel column);
finer windows aggregate the readings themselves.

The cache is per console process, in memory, bounded (`MAX_DAYS` channel-days, least recently used dropped:
~80 KiB per channel-day). A day is built by SQLite itself (`_MINUTES`, ~25 ms for a day of 1-s readings), and
the console warms the cache when it starts and every `monitor.console.trends.WARM_EVERY` s after
(`Rollups.warm`: the last 30 days of the densest series), so the first 30-day trend an operator opens is
already a merge; a request for a day being built waits for that build instead of repeating it.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import OrderedDict
from typing import Any

DAY = 86400.0
MIN_BUCKET = 120.0  # s: narrower buckets aggregate raw readings (a minute misplaced by < half a bucket)
CHECK_EVERY = 30.0  # s: a span's cached days are counted again at most this often
WARM_DAYS = 30  # days per series the warm-up builds: the site page's longest window
DENSE_PER_DAY = 17_280  # readings in the last whole UTC day (one per 5 s) from which a series is rolled up
MAX_DAYS = 600  # channel-days kept (each 1,440 minutes × 7 doubles ≈ 80 KiB): ~48 MiB at most
NAN = math.nan
Agg = list[Any]  # [min, max, good, total, first good time, last good time] of one bucket (None where no value)


class _Day:
    """One channel-day: minute rows packed in an array of 7 doubles each (minute start, min, max, good,
    total, first good time, last good time; NaN where the minute has no value) and the day's reading count."""

    __slots__ = ("rows", "total")

    def __init__(self, rows: array, total: int) -> None:
        self.rows = rows
        self.total = total


class Rollups:
    """The cache: (source, series id, UTC day start) → `_Day`. Thread-safe (the console's worker threads)."""

    def __init__(self, max_days: int = MAX_DAYS, check_every: float = CHECK_EVERY) -> None:
        self.max_days = max_days
        self.check_every = check_every
        self._days: OrderedDict[tuple[str, int, float], _Day] = OrderedDict()
        self._lock = threading.Lock()
        self._checked: dict[tuple[str, int, float, float], float] = {}  # when a span's days were last counted
        self._building: dict[tuple[str, int, float], threading.Lock] = {}  # one build of a day at a time
        self._sparse: set[tuple[str, int]] = set()  # series the last warm-up found sparse (`worth`)
        self.built = 0  # days built (or rebuilt) since start: tests and the benchmark read it

    def clear(self) -> None:
        with self._lock:
            self._days.clear()

    def recheck(self, source: str, cid: int) -> None:
        """Count ``cid``'s cached days at the next request whenever it was last done. Why: a trend whose
        episode has a peak outside the band drawn (`monitor.console.trends`) is a late reading the rollups
        have not seen yet; it must not wait `check_every` s for the band to reach the peak."""
        with self._lock:
            for k in [k for k in self._checked if k[:2] == (source, cid)]:
                del self._checked[k]

    def _get(self, key: tuple[str, int, float]) -> _Day | None:
        with self._lock:
            d = self._days.get(key)
            if d is not None:
                self._days.move_to_end(key)
            return d

    def _put(self, key: tuple[str, int, float], d: _Day) -> None:
        with self._lock:
            self._days[key] = d
            self._days.move_to_end(key)
            while len(self._days) > self.max_days:
                self._days.popitem(last=False)
            self.built += 1

    def days(self, conn: Any, source: str, cid: int, first: float, last: float) -> list[_Day]:
        """The rollups of the UTC days [first, last) (day starts), built or rebuilt where the record changed."""
        starts = [first + k * DAY for k in range(round((last - first) / DAY))]
        cached = {s: self._get((source, cid, s)) for s in starts}
        known = {s: d for s, d in cached.items() if d is not None}
        key = (source, cid, first, last)
        stale: dict[float, _Day] = {}
        if known and time.monotonic() - self._checked.get(key, -math.inf) >= self.check_every:
            self._checked[key] = time.monotonic()
            lo, hi = min(known), max(known)
            (n,) = conn.execute("SELECT COUNT(*) FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                                (cid, lo, hi + DAY)).fetchone()
            between = [s for s in starts if lo <= s <= hi]
            if len(between) != len(known) or int(n) != sum(d.total for d in known.values()):
                for s, d in known.items():  # which day changed: count each (rare: a late reading, a purge)
                    (k,) = conn.execute("SELECT COUNT(*) FROM readings WHERE channel_id = ? AND time >= ? "
                                        "AND time < ?", (cid, s, s + DAY)).fetchone()
                    if int(k) != d.total:
                        cached[s], stale[s] = None, d
        return [d if d is not None else self.day(conn, source, cid, s, stale=stale.get(s))
                for s, d in cached.items()]

    def day(self, conn: Any, source: str, cid: int, start: float, *, stale: _Day | None = None) -> _Day:
        """The rollup of the UTC day beginning at ``start``, built if not cached or still the ``stale`` one
        (whose count no longer matches the readings'). A day being built by another thread (a request, the
        warm-up) is waited for, not built twice."""
        key = (source, cid, start)
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            d = self._get(key)
            if d is None or d is stale:
                d = build_day(conn, cid, start)
                self._put(key, d)
        with self._lock:
            self._building.pop(key, None)
        return d

    def note_density(self, source: str, cid: int, last_day: int) -> None:
        """What the warm-up counted of a series: its readings in the last whole UTC day."""
        with self._lock:
            (self._sparse.add if last_day < DENSE_PER_DAY else self._sparse.discard)((source, cid))

    def worth(self, source: str, cid: int) -> bool:
        """Whether a series' trends should come from rollups: not when the warm-up found its last day sparse
        (fewer than `DENSE_PER_DAY` readings). Why: a month of such a series aggregates from its readings in
        tens of milliseconds, while its rollups would take cache room from the dense series'. A series the
        warm-up has not counted yet is taken as dense (what a request would build is still correct)."""
        with self._lock:
            return (source, cid) not in self._sparse

    def warm(self, conn: Any, source: str, cids: list[int], now: float, stop: threading.Event) -> int:
        """Build the rollups of the last `WARM_DAYS` whole UTC days before ``now`` of each series in ``cids``
        that are not cached yet, newest first, at most ``max_days`` channel-days in all (the cache's bound);
        returns how many were built. Why: so the first 30-day trend an operator opens merges rollups
        instead of aggregating a month of readings (a month of a 1-s channel: ~0.8 s). Days cached already
        are left to the requests' count check; ``stop`` ends the pass between two days."""
        last = math.floor(now / DAY) * DAY
        built = 0
        for k, cid in enumerate(cids):
            if (k + 1) * WARM_DAYS > self.max_days:
                break
            for n in range(1, WARM_DAYS + 1):
                if stop.is_set():
                    return built
                if self._get((source, cid, last - n * DAY)) is None:
                    self.day(conn, source, cid, last - n * DAY)
                    built += 1
        return built


# A day's minutes: its start and, packed in one text, min, max, readings with a value, all readings, first and
# last time with a value. For a dense day (`SPARSE` readings or more), a correlated aggregate per minute of the
# day searches the clustered (channel_id, time) key and aggregates ~60 rows in SQLite's C, with no sort (a
# GROUP BY on a computed minute sorts every reading into a temporary B-tree: 1.8× slower on a day of 1-s
# readings; reading the rows into Python: 3.4× slower). A sparse day is grouped instead (its 1,440 searches
# would cost more than sorting its few readings). ``%!.17g`` writes 17 significant digits: the same double.
_PACKED = ("printf('%!.17g %!.17g %d %d %!.17g %!.17g', MIN(value), MAX(value), COUNT(value), COUNT(*), "
           "MIN(CASE WHEN value IS NOT NULL THEN time END), MAX(CASE WHEN value IS NOT NULL THEN time END))")
_DENSE = f"""WITH RECURSIVE m(t) AS (SELECT ? UNION ALL SELECT t + 60.0 FROM m WHERE t + 60.0 < ?)
SELECT t, (SELECT {_PACKED} FROM readings WHERE channel_id = ? AND time >= m.t AND time < m.t + 60.0) FROM m"""
_SPARSE = (f"SELECT ? + 60.0 * CAST((time - ?) / 60.0 AS INTEGER) AS t, {_PACKED} FROM readings "
           "WHERE channel_id = ? AND time >= ? AND time < ? GROUP BY t ORDER BY t")
SPARSE = 10_000  # readings in a day below which it is grouped rather than searched minute by minute


def build_day(conn: Any, cid: int, day: float) -> _Day:
    """One UTC day's minute rows (minutes without readings left out), aggregated by SQLite."""
    (n,) = conn.execute("SELECT COUNT(*) FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                        (cid, day, day + DAY)).fetchone()
    rows = array("d")
    if not n:
        return _Day(rows, 0)
    total = 0
    minutes = (conn.execute(_DENSE, (day, day + DAY, cid)) if n >= SPARSE
               else conn.execute(_SPARSE, (day, day, cid, day, day + DAY)))
    for m, packed in minutes:
        lo, hi, good, k, t0, t1 = packed.split(" ")
        if k == "0":
            continue
        total += int(k)
        if good == "0":  # readings, none with a value (their NULL min/max/times print as 0)
            rows.extend((m, NAN, NAN, 0.0, float(k), NAN, NAN))
        else:
            rows.extend((m, float(lo), float(hi), float(good), float(k), float(t0), float(t1)))
    return _Day(rows, total)


def merge(into: dict[int, Agg], b: int, lo: Any, hi: Any, good: int, total: int, t0: Any, t1: Any) -> None:
    """Add one slice's aggregates to bucket ``b`` (None for min/max/times where the slice has no value)."""
    m = into.get(b)
    if m is None:
        into[b] = [lo, hi, good, total, t0, t1]
        return
    if lo is not None:
        m[0] = lo if m[0] is None else min(m[0], lo)
        m[1] = hi if m[1] is None else max(m[1], hi)
        m[4] = t0 if m[4] is None else min(m[4], t0)
        m[5] = t1 if m[5] is None else max(m[5], t1)
    m[2] += good
    m[3] += total


def from_rollups(cache: Rollups, conn: Any, source: str, cid: int, start: float, end: float, width: float,
                 into: dict[int, Agg]) -> tuple[float, float]:
    """Merge the whole UTC days inside [start, end) from the cache into ``into``; returns the span
    [a, b) covered, the rest of the window is left to the readings themselves."""
    a = math.ceil(start / DAY) * DAY
    b = math.floor(end / DAY) * DAY
    if b <= a:
        return (start, start)
    for d in cache.days(conn, source, cid, a, b):
        r = d.rows
        for i in range(0, len(r), 7):
            k = int((r[i] - start) / width)
            g = int(r[i + 3])
            if g:
                merge(into, k, r[i + 1], r[i + 2], g, int(r[i + 4]), r[i + 5], r[i + 6])
            else:
                merge(into, k, None, None, 0, int(r[i + 4]), None, None)
    return (a, b)


ROLLUPS = Rollups()
