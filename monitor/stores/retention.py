"""Retention of raw telemetry: off unless ``[daemon] retention_days`` is set, and never below three years.

Why it exists: a site polling a few dozen channels every second writes ~1 GB of readings a year; a small
control-manhole PC may need to shed the oldest. Why it is careful: the raw readings are evidence. 40 CFR
403.12(o) requires monitoring records to be kept at least 3 years (longer during enforcement), so
`config.loader` refuses a ``retention_days`` below 1,096 (``config.schema.MIN_RETENTION_DAYS``), and by
default nothing is ever deleted.

What a purge deletes and keeps:
- deleted: rows of ``readings`` older than ``retention_days`` before now;
- kept regardless of age: every reading of a site within a day of any exceedance episode there (from 24 hours
  before its start, the span of the slug rule's 24-hour baseline, to 24 hours after its end; an episode
  still open holds everything after its start), so `pretreat exceedances --evidence` can always show the
  readings behind an episode; the per-day pre-aggregates (daily summaries and periodic reports keep working
  for purged days); episodes, alarms and the journal (never purged here).
Deletion runs in a worker thread on its own connection, one channel-day per transaction, so the historian's
writer waits at most one short transaction (its ``busy_timeout`` covers that; a failed write is retried
anyway). Every purge is logged with its cutoff and counts.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

HOLD_MARGIN = 86_400.0  # s kept around an episode: the slug rule's 24-hour baseline precedes its start
_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class PurgeResult:
    cutoff: float  # Unix time: readings before it were eligible
    deleted: int  # rows removed
    holds: int  # episode windows whose readings were kept


def hold_windows(episodes: Iterable[tuple[str, float, float | None]]) -> dict[str, list[tuple[float, float]]]:
    """Per site, the merged [lo, hi) windows kept for episodes given as (site, start, end or None if open)."""
    by_site: dict[str, list[tuple[float, float]]] = {}
    for site, start, end in episodes:
        hi = float("inf") if end is None else end + HOLD_MARGIN
        by_site.setdefault(site, []).append((start - HOLD_MARGIN, hi))
    merged: dict[str, list[tuple[float, float]]] = {}
    for site, spans in by_site.items():
        out: list[tuple[float, float]] = []
        for lo, hi in sorted(spans):
            if out and lo <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            else:
                out.append((lo, hi))
        merged[site] = out
    return merged


def eligible(cutoff: float, holds: Sequence[tuple[float, float]], first: float) -> list[tuple[float, float]]:
    """The [lo, hi) spans before ``cutoff`` (from ``first``, the oldest reading) outside every hold."""
    spans, lo = [], first
    for h_lo, h_hi in holds:
        if h_lo >= cutoff:
            break
        if h_lo > lo:
            spans.append((lo, h_lo))
        lo = max(lo, h_hi)
    if lo < cutoff:
        spans.append((lo, cutoff))
    return spans


def purge(path: Path, *, cutoff: float, episodes: Iterable[tuple[str, float, float | None]],
          busy_timeout: float = 5.0) -> PurgeResult:
    """Delete the readings before ``cutoff`` outside the episodes' hold windows (see the module doc)."""
    holds = hold_windows(episodes)
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    deleted = 0
    try:
        channels = conn.execute("SELECT id, site FROM channels").fetchall()
        for cid, site in channels:
            first = conn.execute("SELECT min(time) FROM readings WHERE channel_id = ?", (cid,)).fetchone()[0]
            if first is None or first >= cutoff:
                continue
            for lo, hi in eligible(cutoff, holds.get(site, []), first):
                t = lo
                while t < hi:  # a channel-day per transaction: the writer never waits long
                    step_end = min(hi, t + _DAY)
                    cur = conn.execute("DELETE FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                                       (cid, t, step_end))
                    deleted += max(cur.rowcount, 0)
                    t = step_end
    finally:
        conn.close()
    return PurgeResult(cutoff=cutoff, deleted=deleted, holds=sum(len(v) for v in holds.values()))
