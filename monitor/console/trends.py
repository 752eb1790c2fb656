"""Trends for the site and episode pages: a channel's readings over a window, downsampled on the server.

A month of a 1-second channel is 2.6 M readings; the browser gets at most a few thousand buckets instead: the
window is cut into ``buckets`` equal slices (one per pixel column of the chart) and each slice reports the
minimum and maximum value, the number of readings with a value ("good") and of all readings, and the times
of its first and last reading with a value. Min/max (not a mean) keeps every excursion visible however far
the chart is zoomed out: a 30-second pH spike still reaches its true peak, and each episode's peak reading
(listed with its time) is inside its bucket's min..max. A slice with readings but none with a value is a
data-quality gap (shaded); the line is broken only where consecutive readings with a value are more than the
channel's ``max_gap`` apart (``gaps``), never merely because a bucket is shorter than the poll interval.

Whole UTC days of windows with buckets of 2 minutes or more come from the per-minute rollups of
`monitor.console.trend_rollup` (a month in well under a second); the rest is one SQL aggregation per series
over the clustered (channel_id, time) key of ``readings``. Ticks and the zone's name come from
`monitor.console.trend_axis` (the site's zone, never the browser's).

Episodes overlapping the window come from `monitor.read.episodes.find_episodes` and `details` (the pairing
`pretreat exceedances` uses), so shaded spans match the history page exactly.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
from typing import Any

from config.schema import ChannelKind, Site, SiteConfig
from monitor.console.trend_axis import ticks, zone_label
from monitor.console.trend_rollup import (
    DAY,
    DENSE_PER_DAY,
    MIN_BUCKET,
    ROLLUPS,
    Agg,
    Rollups,
    from_rollups,
    merge,
)
from monitor.read.episodes import details, find_episodes
from monitor.read.readings import completeness, limits, series
from monitor.stores.readonly import dialect, has_table

MAX_BUCKETS = 4000
MAX_SPAN = 31 * 86400.0  # a month: the longest window the site view offers (30 days)
BOOLEAN_KINDS = frozenset({ChannelKind.SAMPLER_BOTTLE_FULL, ChannelKind.SAMPLER_FAULT})  # 0/1, drawn as steps
WARM_EVERY = 600.0  # s between two warm-ups of the rollups (a new UTC day is rolled up within 10 minutes)

log = logging.getLogger(__name__)


def trend(conn: sqlite3.Connection | None, config: SiteConfig, site: Site, channel: str, *, start: float,
          end: float, buckets: int, now: float, source: str = "", cache: Rollups = ROLLUPS) -> dict[str, Any]:
    """Bucketed readings of ``channel`` over [start, end), its limits, gaps, episodes, ticks, completeness.

    ``t`` is each bucket's start (epoch s) and ``x`` where to draw it (the middle of its first and last
    reading with a value, else its start); ``min``/``max`` are null where a bucket has no value. Buckets with
    no reading at all are left out. ``gaps`` are the [last, next) spans between readings with a value longer
    than ``max_gap`` s. ``source`` names the record for the rollup cache (the historian's path)."""
    if not end > start:
        raise ValueError("the window's end must be after its start")
    if end - start > MAX_SPAN:
        raise ValueError(f"a trend covers at most {MAX_SPAN / 86400:.0f} days")
    buckets = max(1, min(int(buckets), MAX_BUCKETS))
    width = (end - start) / buckets
    ch = site.channel(channel)
    inst = config.instruments_by_id.get((site.id, ch.instrument))
    interval = inst.poll_interval if inst is not None else None
    ids = [cid for cid, _u in series(conn, site.id, channel)] if conn is not None else []
    source = record_key(conn, source) if conn is not None else source
    merged: dict[int, Agg] = {}
    for cid in ids:
        assert conn is not None
        _aggregate(conn, source, cache, cid, start, end, width, merged)
    episodes = _episodes(conn, ids, site.id, channel, start, end, now)
    if _peak_outside(merged, episodes, start, end):  # a late reading the rollups' count check has not seen yet
        merged = {}
        for cid in ids:
            assert conn is not None
            cache.recheck(source, cid)
            _aggregate(conn, source, cache, cid, start, end, width, merged)
    order = sorted(merged)
    rows = [merged[b] for b in order]
    return {
        "site": site.id, "channel": channel, "unit": ch.unit, "kind": ch.kind.value,
        "boolean": ch.kind in BOOLEAN_KINDS, "start": start, "end": end, "bucket_s": width,
        "poll_interval": interval, "max_gap": ch.max_gap,
        "slug_rule": any(b.rule == "slug" and b.channel == channel for b in site.checks), "timezone": site.timezone,
        "zone": zone_label(start, end, site.timezone), "ticks": ticks(start, end, site.timezone, buckets),
        "t": [start + b * width for b in order],
        "x": [(r[4] + r[5]) / 2 if r[4] is not None else start + b * width for b, r in zip(order, rows, strict=True)],
        "min": [r[0] for r in rows], "max": [r[1] for r in rows], "good": [r[2] for r in rows],
        "total": [r[3] for r in rows], "gaps": gaps(rows, ch.max_gap), "limits": limits(site, channel),
        "episodes": episodes,
        "completeness": _completeness(conn, ids, start, end, now, interval, sum(r[2] for r in rows)),
    }


def warm(conn: sqlite3.Connection, source: str, now: float, stop: threading.Event,
         cache: Rollups = ROLLUPS) -> int:
    """Roll up the last 30 whole UTC days of the series with at least `DENSE_PER_DAY` readings in the last
    day, densest first (`Rollups.warm`); returns the channel-days built. Sparser series are left out and
    their trends aggregate their readings (`Rollups.worth`: a month of a 5-s channel in a few hundred ms; a
    dense series whose last day was quiet is aggregated so too until it is dense again). One key-range count
    of the last day per series."""
    if dialect(conn) != "sqlite" or not has_table(conn, "channels"):
        return 0
    t0 = time.perf_counter()
    source = record_key(conn, source)
    day = math.floor(now / DAY) * DAY
    dense = []
    for (cid,) in conn.execute("SELECT id FROM channels ORDER BY id").fetchall():
        (n,) = conn.execute("SELECT COUNT(*) FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                            (cid, day - DAY, day)).fetchone()
        cache.note_density(source, int(cid), int(n))
        if int(n) >= DENSE_PER_DAY:
            dense.append((-int(n), int(cid)))
    built = cache.warm(conn, source, [cid for _n, cid in sorted(dense)], now, stop)
    if built:
        log.info("trend rollups warmed: %d channel-days of %d dense series in %.1f s", built, len(dense),
                 time.perf_counter() - t0)
    return built


def record_key(conn: sqlite3.Connection, source: str) -> str:
    """The rollup cache's name for the record at path ``source``: the path, the file's inode and the hash of
    its journal's first record. Why: a daemon restarted on a fresh record (another file at the same path)
    may hold as many readings in each whole day as the old file did (a 1-s channel: 86,400) with other
    values, which the rollups' count check cannot tell apart; the old file's rollups must then never be used.
    One look-up of the journal's first row; an empty ``source`` (no cache identity) is kept as it is."""
    if not source or dialect(conn) != "sqlite":
        return source
    try:
        inode = os.stat(source).st_ino
    except OSError:
        inode = 0
    first = (conn.execute("SELECT hash FROM journal WHERE seq = 1").fetchone()
             if has_table(conn, "journal") else None)
    return f"{source}#{inode}#{first[0] if first else ''}"


def _peak_outside(merged: dict[int, Agg], episodes: list[dict[str, Any]], start: float, end: float) -> bool:
    """Whether an episode's peak reading, recorded inside the window, lies outside the band's min..max: the
    readings changed since the rollups were last counted (a late reading making an episode). Strict."""
    lows = [r[0] for r in merged.values() if r[0] is not None]
    highs = [r[1] for r in merged.values() if r[1] is not None]
    return any(e["peak"] is not None and e["peak_time"] is not None and start <= e["peak_time"] < end
               and not (lows and min(lows) <= e["peak"] <= max(highs)) for e in episodes)


def _completeness(conn: sqlite3.Connection | None, ids: list[int], start: float, end: float, now: float,
                  interval: float | None, good: int) -> dict[str, Any] | None:
    """`monitor.read.readings.completeness` over [start, min(end, now)] (closed), counted from the buckets'
    readings with a value instead of a second pass over the window: plus those at exactly ``end``, minus any
    stamped after ``now`` (a device clock ahead). Both corrections are index look-ups of an empty range."""
    stop = min(end, now)
    if conn is None or not stop > start:
        return None
    for cid in ids:
        (at_end,) = conn.execute("SELECT COUNT(value) FROM readings WHERE channel_id = ? AND time = ?",
                                 (cid, stop)).fetchone()
        (ahead,) = conn.execute("SELECT COUNT(value) FROM readings WHERE channel_id = ? AND time > ? AND time < ?",
                                (cid, stop, end)).fetchone()
        good += int(at_end) - int(ahead)
    c = completeness(conn, [], start, stop, interval)  # the expected count and the percentage, one definition
    pct = None if not c["expected"] else min(100.0, 100.0 * good / c["expected"])
    return {**c, "good": good, "pct": pct}


def _aggregate(conn: sqlite3.Connection, source: str, cache: Rollups, cid: int, start: float, end: float,
               width: float, into: dict[int, Agg]) -> None:
    """One series' buckets: whole UTC days from the rollups when buckets are wide enough and the series is
    dense (`Rollups.worth`), the rest (and every narrower window or sparser series) aggregated by SQL over the
    readings' primary key range. A series taken as sparse whose window holds `DENSE_PER_DAY` readings a day
    or more (a month imported since the warm-up) is taken as dense from then on: one count of the window, a
    few ms for a truly sparse series, tells."""
    a, b = (start, start)
    if width >= MIN_BUCKET and dialect(conn) == "sqlite":
        if not cache.worth(source, cid) and end - start >= DAY:
            (n,) = conn.execute("SELECT COUNT(*) FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                                (cid, start, end)).fetchone()
            if int(n) * DAY / (end - start) >= DENSE_PER_DAY:
                cache.note_density(source, cid, int(int(n) * DAY / (end - start)))
        if cache.worth(source, cid):
            a, b = from_rollups(cache, conn, source, cid, start, end, width, into)
    for lo, hi in ((start, a), (b, end)) if b > a else ((start, end),):
        if hi > lo:
            _raw(conn, cid, start, width, lo, hi, into)


def _raw(conn: sqlite3.Connection, cid: int, start: float, width: float, lo: float, hi: float,
         into: dict[int, Agg]) -> None:
    # the bucket: (time - start) / width truncated (time >= start, so toward zero is down); PostgreSQL's CAST
    # rounds instead, so there it is floor()
    bucket = "floor((time - ?) / ?)::bigint" if dialect(conn) == "postgresql" else "CAST((time - ?) / ? AS INTEGER)"
    for b, mn, mx, good, total, t0, t1 in conn.execute(
            f"SELECT {bucket} AS b, MIN(value), MAX(value), COUNT(value), COUNT(*), "
            "MIN(CASE WHEN value IS NOT NULL THEN time END), MAX(CASE WHEN value IS NOT NULL THEN time END) "
            "FROM readings WHERE channel_id = ? AND time >= ? AND time < ? GROUP BY b",
            (start, width, cid, lo, hi)):
        merge(into, int(b), mn, mx, int(good), int(total), t0, t1)


def gaps(rows: list[Agg], max_gap: float) -> list[list[float]]:
    """[last, next] between consecutive readings with a value (in bucket order) more than ``max_gap`` s
    apart; none when ``max_gap`` is 0 (no gap detection configured). A gap inside one bucket is narrower than
    a pixel column and is not listed (completeness still counts it)."""
    out: list[list[float]] = []
    last: float | None = None
    for r in rows:
        if r[4] is None:
            continue
        if last is not None and max_gap > 0 and r[4] - last > max_gap:
            out.append([last, r[4]])
        last = r[5]
    return out


def _episodes(conn: sqlite3.Connection | None, ids: list[int], site: str, channel: str, start: float, end: float,
              now: float) -> list[dict[str, Any]]:
    """The episodes overlapping the window, each with its peak reading and when it was reached."""
    if conn is None:
        return []
    found = find_episodes(conn, now=now, site=site, channel=channel, start=start, end=end)
    out = []
    for f, e in zip(found, details(conn, found), strict=True):
        out.append({"id": f[5] if f[5] is not None else f[6], "rule": e.rule, "status": e.status,
                    "start": e.start, "end": e.end, "until": e.until, "limit": e.limit, "peak": e.peak,
                    "peak_time": _peak_time(conn, ids, e.start, e.until, e.peak), "citation": e.citation})
    return out


def _peak_time(conn: sqlite3.Connection, ids: list[int], a: float | None, b: float | None,
               peak: float | None) -> float | None:
    """When the episode's peak reading was recorded (the first reading of that value in its span)."""
    if a is None or b is None or peak is None:
        return None
    for cid in ids:
        row = conn.execute("SELECT time FROM readings WHERE channel_id = ? AND time >= ? AND time <= ? "
                           "AND value = ? ORDER BY time LIMIT 1", (cid, a, b, peak)).fetchone()
        if row is not None:
            return float(row[0])
    return None
