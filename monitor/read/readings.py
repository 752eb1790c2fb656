"""A site's channels as the record holds them now: their series, latest readings, completeness and the limits
drawn on their charts (the console's site view and trends).

Every function takes a read-only connection (`monitor.stores.readonly`) and plain arguments and returns
JSON-ready dicts. Times are epoch seconds UTC; completeness counts good readings in the closed interval
[start, end] against ⌊span / poll interval⌋ + 1 expected, the definition `pretreat exceedances` uses.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, MutableMapping
from pathlib import Path
from typing import Any

from config.rule_catalogue import DATA_QUALITY_RULES, NO_READING_PEAK
from config.schema import ChannelKind, Site, SiteConfig
from monitor.sample import Sample
from monitor.stores.historian_db import QUALITY_BY_CODE, read_readings
from monitor.stores.readonly import has_table

GOOD_LOOKBACK = 100_000  # readings searched back for a channel's last good one (bounds the cost)


def series(conn: sqlite3.Connection, site: str, channel: str) -> list[tuple[int, str]]:
    """(series id, unit) of a channel in the historian, oldest first (a unit change starts a new series)."""
    if not has_table(conn, "channels"):
        return []
    return [(int(i), str(u)) for i, u in conn.execute(
        "SELECT id, unit FROM channels WHERE site = ? AND channel = ? ORDER BY id", (site, channel))]


def latest_row(conn: sqlite3.Connection, ids: list[int]) -> tuple[Any, ...] | None:
    """(time, value, quality code, reason) of the newest reading (any quality) across a channel's series."""
    best: tuple[Any, ...] | None = None
    for cid in ids:
        row = conn.execute("SELECT time, value, quality, reason FROM readings WHERE channel_id = ? "
                           "ORDER BY time DESC, seq DESC LIMIT 1", (cid,)).fetchone()
        if row is not None and (best is None or row[0] > best[0]):
            best = row
    return best


def latest_good_row(conn: sqlite3.Connection, ids: list[int], lookback: int = GOOD_LOOKBACK) -> tuple[Any, ...] | None:
    """(time, value, quality code, reason) of the newest good reading among the last ``lookback`` of each
    series: a channel bad for longer has none, which bounds the cost of a long outage."""
    best: tuple[Any, ...] | None = None
    for cid in ids:
        row = conn.execute("SELECT time, value, quality, reason FROM (SELECT time, seq, value, quality, reason "
                           "FROM readings WHERE channel_id = ? ORDER BY time DESC, seq DESC LIMIT ?) AS latest "
                           "WHERE quality = 0 ORDER BY time DESC, seq DESC LIMIT 1", (cid, lookback)).fetchone()
        if row is not None and (best is None or row[0] > best[0]):
            best = row
    return best


def searched_back(conn: sqlite3.Connection, ids: list[int], lookback: int = GOOD_LOOKBACK) -> tuple[float, int]:
    """(time of the oldest, how many) of the readings `latest_good_row` searched: when it found no good one,
    the channel has had none since that time at least (asked only then: it reads the same rows again)."""
    oldest, count = float("inf"), 0
    for cid in ids:
        t, n = conn.execute("SELECT MIN(time), COUNT(*) FROM (SELECT time FROM readings WHERE channel_id = ? "
                            "ORDER BY time DESC, seq DESC LIMIT ?) AS latest", (cid, lookback)).fetchone()
        if n:
            oldest, count = min(oldest, float(t)), count + int(n)
    return oldest, count


def latest(conn: sqlite3.Connection, ids: list[int]) -> dict[str, Any] | None:
    """The newest reading (any quality) across a channel's series."""
    row = latest_row(conn, ids)
    return None if row is None else reading(row)


def reading(row: tuple[Any, ...]) -> dict[str, Any]:
    t, value, code, reason = row
    q = QUALITY_BY_CODE.get(code)
    return {"time": t, "value": value, "quality": q.value if q else f"code {code}", "reason": reason}


def completeness(conn: sqlite3.Connection, ids: list[int], start: float, end: float,
                 interval: float | None) -> dict[str, Any]:
    """Good readings over [start, end] against the expected ⌊span / poll interval⌋ + 1 (the definition
    `pretreat exceedances` uses), capped at 100 %; both counts are given so nothing is hidden."""
    good = sum(int(conn.execute("SELECT COUNT(value) FROM readings WHERE channel_id = ? AND time >= ? "
                                "AND time <= ?", (cid, start, end)).fetchone()[0]) for cid in ids)
    expected = int((end - start) / interval + 1e-9) + 1 if interval else None
    pct = None if not expected else min(100.0, 100.0 * good / expected)
    return {"good": good, "expected": expected, "pct": pct, "start": start, "end": end}


def limits(site: Site, channel: str) -> list[dict[str, Any]]:
    """The value limits the site's rules apply to a channel (lines on its chart): each with rule, value,
    which side is a violation, and citation. Duration limits (seconds) and data-quality rules draw nothing."""
    out: list[dict[str, Any]] = []
    for b in site.checks:
        if b.channel != channel or b.rule in DATA_QUALITY_RULES:
            continue
        p = b.params
        pairs: list[tuple[Any, str]] = []
        if b.rule in NO_READING_PEAK:
            pairs = [(p.get("min"), "low"), (p.get("max"), "high")]
        elif "low" in p or "high" in p:
            pairs = [(p.get("low"), "low"), (p.get("high"), "high")]
        elif "limit" in p and "multiplier" not in p:
            pairs = [(p["limit"], "low" if str(p.get("operator", ">")).startswith("<") else "high")]
        for value, side in pairs:
            if isinstance(value, int | float) and not any(x["value"] == value and x["side"] == side for x in out):
                out.append({"rule": b.rule, "value": float(value), "side": side, "citation": b.citation})
    return out


def site_summary(conn: sqlite3.Connection | None, config: SiteConfig, site: Site, *, now: float,
                 stale: Collection[str] = (), window: float = 86400.0) -> dict[str, Any]:
    """Everything the site view shows except the trends: each channel's latest reading, latest good one,
    completeness over the last ``window`` s, its limits; the sampler's fridge and count channels."""
    channels = []
    for ch in site.channels:
        inst = config.instruments_by_id.get((site.id, ch.instrument))
        interval = inst.poll_interval if inst is not None else None
        ids = [cid for cid, _u in series(conn, site.id, ch.id)] if conn is not None else []
        channels.append({
            "id": ch.id, "kind": ch.kind.value, "unit": ch.unit, "instrument": ch.instrument,
            "poll_interval": interval, "last": latest(conn, ids) if conn is not None else None,
            "last_good": latest_good(conn, ids) if conn is not None else None,
            "stale": f"{site.id}/{ch.id}" in stale,
            "completeness": completeness(conn, ids, now - window, now, interval) if conn is not None else None,
            "limits": limits(site, ch.id),
        })
    sampler = {k.value: [c.id for c in site.channels if c.kind is k]
               for k in (ChannelKind.SAMPLER_TEMPERATURE, ChannelKind.SAMPLER_COUNT)}
    return {"id": site.id, "name": site.name, "company": site.company, "timezone": site.timezone,
            "jurisdiction": site.jurisdiction, "channels": channels, "sampler": sampler, "now": now}


def latest_good(conn: sqlite3.Connection | None, ids: list[int]) -> dict[str, Any] | None:
    """The newest good reading across a channel's series (`latest_good_row`)."""
    row = latest_good_row(conn, ids) if conn is not None else None
    return None if row is None else reading(row)


def readings_since(db: Path, since: MutableMapping[tuple[str, str], float]) -> list[Sample]:
    """The readings of each (site, channel) of ``since`` recorded at or after its time there, in time order;
    ``since`` moves past each one returned, so the next call returns only newer ones (`pretreat tail`)."""
    rows: list[Sample] = []
    for (site, channel), t in since.items():
        for s in read_readings(db, site=site, channel=channel, start=t):
            rows.append(s)
            since[(site, channel)] = s.time + 1e-6
    return sorted(rows, key=lambda s: s.time)
