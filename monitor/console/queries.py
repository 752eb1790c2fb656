"""What the console reads from the daemon's SQLite file: alarms, journal records, a site's current values.

Every function takes a read-only connection (`connect`) and plain arguments, and returns JSON-ready dicts;
nothing here knows about HTTP or users (the API filters by the caller's sites before and after). The alarm
rows are `monitor.alarms_cli.alarm_rows` (the rows `pretreat alarms list` prints) with the site, channel,
rule, unit and sort tier added, so the console and the CLI can never disagree about an alarm.

Times are epoch seconds UTC throughout; alarm rows and journal records also carry them as text in the
site's zone (``*_text``, `alarm_view`), so no page falls back on the browser's zone.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from alarms.model import State
from config.rules import DATA_QUALITY_RULES
from config.schema import ChannelKind, Site, SiteConfig
from monitor.alarms_cli import alarm_rows
from monitor.console import alarm_view
from monitor.exceedances import NO_READING_PEAK
from monitor.logtext import local_time
from monitor.stores.historian_db import QUALITY_BY_CODE

# How far an alarm needs the operator: 0 active and unacknowledged, 1 other unacknowledged (returned to
# normal or latched), 2 acknowledged but still active or latched, 3 suppressed (shelved, out of service),
# 4 normal. Counts use it ("active": tier < 3); the display order is `alarm_view.sort_key`.
TIER: dict[str, int] = {
    State.ACTIVE_UNACKED.value: 0, State.LATCHED_UNACKED.value: 1, State.RTN_UNACKED.value: 1,
    State.ACTIVE_ACKED.value: 2, State.LATCHED_ACKED.value: 2, State.SHELVED.value: 3,
    State.OUT_OF_SERVICE.value: 3, State.NORMAL.value: 4,
}
JOURNAL_KINDS = ("transition", "action", "refusal")


def connect(db: Path) -> sqlite3.Connection | None:
    """A read-only connection to the daemon's file, or None if the daemon has not created it yet."""
    if not db.is_file():
        return None
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
    return conn


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


# ---- alarms ----------------------------------------------------------------------------------------------

def alarm_sort_key(row: dict[str, Any]) -> tuple[int, int, float, str]:
    """Unacknowledged first, then priority, then newest (`monitor.console.alarm_view`)."""
    return alarm_view.sort_key(row)


def alarms(conn: sqlite3.Connection, config: SiteConfig, sites: Collection[str]) -> list[dict[str, Any]]:
    """Every alarm of ``sites`` (configured ones, and stored ones no longer configured), in display order."""
    units = {(c.site, c.id): c.unit for c in config.channels}
    names = {s.id: s.name for s in config.sites}
    out = []
    for r in alarm_rows(conn, config):
        site, channel, rule = r["alarm"].split("/")
        if site not in sites:
            continue
        row = {**r, "site": site, "channel": channel, "rule": rule, "site_name": names.get(site, site),
               "unit": units.get((site, channel), ""), "tier": TIER.get(r["state"], 5)}
        out.append(alarm_view.enrich(conn, config, row))
    out.sort(key=alarm_sort_key)
    return out


def journal(conn: sqlite3.Connection, *, sites: Collection[str], alarm: str | None = None,
            limit: int = 50, config: SiteConfig | None = None) -> list[dict[str, Any]]:
    """The latest transition, action and refusal records of ``alarm`` (or of every alarm of ``sites``),
    newest first, each as its payload plus ``seq``, ``kind`` and ``time``; with ``config``, also
    ``time_text`` and the daemon's explanation ``why_text`` in the site's local time
    (`alarm_view.explain`)."""
    if not has_table(conn, "journal"):
        return []
    marks = ",".join("?" * len(JOURNAL_KINDS))
    sql = f"SELECT seq, time, kind, payload FROM journal WHERE kind IN ({marks})"
    params: list[Any] = list(JOURNAL_KINDS)
    if alarm is not None:
        sql += " AND json_extract(payload, '$.alarm') = ?"
        params.append(alarm)
    sql += " ORDER BY seq DESC"
    out: list[dict[str, Any]] = []
    for seq, t, kind, text in conn.execute(sql, params):  # newest first; stop once enough are found
        payload = json.loads(text)
        if str(payload.get("alarm", "")).split("/")[0] not in sites:
            continue
        out.append(spoken({**payload, "seq": seq, "record": kind, "time": t}, config))
        if len(out) >= limit:
            break
    return out


def spoken(record: dict[str, Any], config: SiteConfig | None) -> dict[str, Any]:
    if config is None:
        return record
    zones = {s.id: s.timezone for s in config.sites}
    zone = ZoneInfo(zones.get(str(record.get("alarm", "")).split("/")[0], "UTC"))
    record["time_text"] = local_time(record["time"], zone)
    if record.get("who") == "system" and record.get("why"):
        record["why_text"] = alarm_view.explain(str(record["why"]), zone)
    return record


# ---- a site's current values -----------------------------------------------------------------------------

def series(conn: sqlite3.Connection, site: str, channel: str) -> list[tuple[int, str]]:
    """(series id, unit) of a channel in the historian, oldest first (a unit change starts a new series)."""
    if not has_table(conn, "channels"):
        return []
    return [(int(i), str(u)) for i, u in conn.execute(
        "SELECT id, unit FROM channels WHERE site = ? AND channel = ? ORDER BY id", (site, channel))]


def latest(conn: sqlite3.Connection, ids: list[int]) -> dict[str, Any] | None:
    """The newest reading (any quality) across a channel's series."""
    best: tuple[Any, ...] | None = None
    for cid in ids:
        row = conn.execute("SELECT time, value, quality, reason FROM readings WHERE channel_id = ? "
                           "ORDER BY time DESC, seq DESC LIMIT 1", (cid,)).fetchone()
        if row is not None and (best is None or row[0] > best[0]):
            best = row
    return None if best is None else reading(best)


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
            "last_good": _latest_good(conn, ids) if conn is not None else None,
            "stale": f"{site.id}/{ch.id}" in stale,
            "completeness": completeness(conn, ids, now - window, now, interval) if conn is not None else None,
            "limits": limits(site, ch.id),
        })
    sampler = {k.value: [c.id for c in site.channels if c.kind is k]
               for k in (ChannelKind.SAMPLER_TEMPERATURE, ChannelKind.SAMPLER_COUNT)}
    return {"id": site.id, "name": site.name, "company": site.company, "timezone": site.timezone,
            "jurisdiction": site.jurisdiction, "channels": channels, "sampler": sampler, "now": now}


def _latest_good(conn: sqlite3.Connection | None, ids: list[int], lookback: int = 100_000) -> dict[str, Any] | None:
    """The newest good reading among the last ``lookback`` of each series (bounds the cost of a long outage)."""
    if conn is None:
        return None
    best: tuple[Any, ...] | None = None
    for cid in ids:
        row = conn.execute("SELECT time, value, quality, reason FROM (SELECT time, seq, value, quality, reason "
                           "FROM readings WHERE channel_id = ? ORDER BY time DESC, seq DESC LIMIT ?) "
                           "WHERE quality = 0 ORDER BY time DESC LIMIT 1", (cid, lookback)).fetchone()
        if row is not None and (best is None or row[0] > best[0]):
            best = row
    return None if best is None else reading(best)
