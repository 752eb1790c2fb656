"""Trends for the site and episode pages: a channel's readings over a window, downsampled on the server.

A week of a 1-second channel is 604,800 readings; the browser gets at most a few thousand numbers instead:
the window is cut into ``buckets`` equal slices and each slice reports the minimum and maximum good value,
the number of good readings and the number of readings of any quality. Min/max (not a mean) keeps every
excursion visible however far the chart is zoomed out: a 30-second pH spike still reaches its true peak. A
slice with readings but no good one is drawn as a data-quality gap; a slice without readings as missing.

The aggregation is one SQL statement per series over the clustered (channel_id, time) key of ``readings``:
a sequential range read (see bench/bench_console.py for the cost of a week).

Episodes overlapping the window come from `monitor.read.episodes.find_episodes` and `details` (the pairing
`pretreat exceedances` uses), so shaded spans match the history page exactly.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from config.schema import Site, SiteConfig
from monitor.read.episodes import details, find_episodes
from monitor.read.readings import completeness, limits, series
from monitor.stores.readonly import dialect

MAX_BUCKETS = 4000
MAX_SPAN = 31 * 86400.0  # a month: more than the zoom-out the site view offers (a week)


def trend(conn: sqlite3.Connection | None, config: SiteConfig, site: Site, channel: str, *, start: float,
          end: float, buckets: int, now: float) -> dict[str, Any]:
    """Bucketed readings of ``channel`` over [start, end), its limits, the episodes and the completeness.

    ``t`` is each bucket's start (epoch s); ``min``/``max`` are null where a bucket has no good reading.
    Buckets with no reading at all are left out (the chart shows the gap).
    """
    if not end > start:
        raise ValueError("the window's end must be after its start")
    if end - start > MAX_SPAN:
        raise ValueError(f"a trend covers at most {MAX_SPAN / 86400:.0f} days")
    buckets = max(1, min(int(buckets), MAX_BUCKETS))
    width = (end - start) / buckets
    ch = site.channel(channel)
    inst = config.instruments_by_id.get((site.id, ch.instrument))
    interval = inst.poll_interval if inst is not None else None
    merged: dict[int, list[Any]] = {}
    ids = [cid for cid, _u in series(conn, site.id, channel)] if conn is not None else []
    # the bucket: (time - start) / width truncated (time >= start, so toward zero is down); PostgreSQL's CAST
    # rounds instead, so there it is floor()
    bucket = "floor((time - ?) / ?)::bigint" if dialect(conn) == "postgresql" else "CAST((time - ?) / ? AS INTEGER)"
    for cid in ids:
        assert conn is not None
        for b, lo, hi, good, total in conn.execute(
                f"SELECT {bucket} AS b, MIN(value), MAX(value), COUNT(value), COUNT(*) "
                "FROM readings WHERE channel_id = ? AND time >= ? AND time < ? GROUP BY b",
                (start, width, cid, start, end)):
            m = merged.get(b)
            if m is None:
                merged[b] = [lo, hi, good, total]
                continue
            m[0] = lo if m[0] is None else (m[0] if lo is None else min(m[0], lo))
            m[1] = hi if m[1] is None else (m[1] if hi is None else max(m[1], hi))
            m[2] += good
            m[3] += total
    order = sorted(merged)
    episodes = _episodes(conn, site.id, channel, start, end, now)
    return {
        "site": site.id, "channel": channel, "unit": ch.unit, "start": start, "end": end, "bucket_s": width,
        "t": [start + b * width for b in order], "min": [merged[b][0] for b in order],
        "max": [merged[b][1] for b in order], "good": [merged[b][2] for b in order],
        "total": [merged[b][3] for b in order], "limits": limits(site, channel), "episodes": episodes,
        "completeness": (completeness(conn, ids, start, min(end, now), interval)
                         if conn is not None and min(end, now) > start else None),
    }


def _episodes(conn: sqlite3.Connection | None, site: str, channel: str, start: float, end: float,
              now: float) -> list[dict[str, Any]]:
    if conn is None:
        return []
    found = find_episodes(conn, now=now, site=site, channel=channel, start=start, end=end)
    return [{"id": f[5] if f[5] is not None else f[6], "rule": e.rule, "status": e.status, "start": e.start,
             "end": e.end, "until": e.until, "limit": e.limit, "citation": e.citation}
            for f, e in zip(found, details(conn, found), strict=True)]
