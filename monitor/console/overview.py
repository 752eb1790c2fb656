"""The overview of many sites (a county program has 20 to 200 industries): one tile per site with its status,
worst active alarm, the age of its newest reading and its compliance this month.

**Status**, worst first: the priority of the site's worst standing alarm (unacknowledged before acknowledged,
then critical > high > medium > low > diagnostic, as the alarm list orders them); else ``no-data`` when the
newest reading is older than `NO_DATA_AFTER` (or there is none); else ``normal``. Shelved and out-of-service
alarms do not count (they are suppressed on purpose) but are counted apart.

**Compliance this month**: exceedance episodes (data-quality rules left out, withdrawn ones too) that began
since local midnight of the first of the month in the site's zone; a site with none is "in compliance so far
this month". Enforcement's invalidations are not subtracted here (the episode's page and the reports do).

Cost: the alarm rows come from the live follower's memory (no database read); the newest reading of every
series is one query using the (channel_id, time) key, and the month's episode starts one range read of the
episode store's time index: a few milliseconds for 200 sites (bench/bench_console.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from config.rule_catalogue import DATA_QUALITY_RULES
from config.schema import Site
from monitor.console import alarm_view
from monitor.logtext import duration
from monitor.stores.readonly import has_table

NO_DATA_AFTER = 3600.0  # s: a site whose newest reading is older than this shows "no recent data"


def month_start(t: float, zone: ZoneInfo) -> float:
    """Epoch s of local midnight on the first of the month containing ``t`` in ``zone``."""
    d = datetime.fromtimestamp(t, zone)
    return datetime(d.year, d.month, 1, tzinfo=zone).timestamp()


def tiles(conn: sqlite3.Connection | None, sites: list[Site], rows: Iterable[dict[str, Any]], *,
          now: float) -> list[dict[str, Any]]:
    """One tile per site of ``sites``, worst first, then by name. ``rows`` are alarm rows (`queries.alarms`)."""
    by_site: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_site.setdefault(r["site"], []).append(r)
    zones = {s.id: ZoneInfo(s.timezone) for s in sites}
    starts = {s.id: month_start(now, zones[s.id]) for s in sites}
    newest = _newest_readings(conn) if conn is not None else {}
    counts = _month_exceedances(conn, starts) if conn is not None else {}
    out = [_tile(s, by_site.get(s.id, []), newest.get(s.id), counts.get(s.id, 0), now) for s in sites]
    out.sort(key=lambda t: (t["rank"], t["name"].lower()))
    return out


def _tile(site: Site, rows: list[dict[str, Any]], newest: float | None, exceedances: int,
          now: float) -> dict[str, Any]:
    standing = sorted((r for r in rows if r.get("tier", 4) < 3), key=alarm_view.sort_key)
    worst = standing[0] if standing else None
    age = None if newest is None else max(0.0, now - newest)
    if worst is not None:
        status = worst["priority"]
        rank = alarm_view.group(worst["state"]) * 10 + alarm_view.PRIORITY_RANK.get(status, 5)
    elif age is None or age > NO_DATA_AFTER:
        status, rank = "no-data", 50
    else:
        status, rank = "normal", 60
    return {
        "id": site.id, "name": site.name, "company": site.company, "jurisdiction": site.jurisdiction,
        "timezone": site.timezone, "status": status, "rank": rank,
        "worst": None if worst is None else {
            "alarm": worst["alarm"], "priority": worst["priority"], "symbol": worst.get("symbol", ""),
            "state": worst["state"], "state_label": worst.get("state_label", worst["state"]),
            "rule_label": worst.get("rule_label", worst["rule"]), "channel": worst["channel"],
            "value_text": worst.get("value_text", ""), "limit_text": worst.get("limit_text", "")},
        "unacked": sum(1 for r in rows if alarm_view.group(r["state"]) == 0),
        "active": len(standing), "suppressed": sum(1 for r in rows if alarm_view.group(r["state"]) == 2),
        "last_reading": newest, "last_reading_age_s": age,
        "last_reading_text": "no readings" if age is None else f"{duration(age)} ago",
        "exceedances_this_month": exceedances,
        "compliance_text": ("in compliance so far this month" if exceedances == 0 else
                            f"{exceedances} exceedance{'s' if exceedances != 1 else ''} this month"),
    }


def _newest_readings(conn: sqlite3.Connection) -> dict[str, float]:
    """The newest reading's time per site (any quality: the instrument answered), from each series' key."""
    if not has_table(conn, "channels") or not has_table(conn, "readings"):
        return {}
    out: dict[str, float] = {}
    for site, t in conn.execute("SELECT site, (SELECT MAX(time) FROM readings WHERE channel_id = channels.id) "
                                "FROM channels"):
        if t is not None and t > out.get(site, float("-inf")):
            out[site] = float(t)
    return out


def _month_exceedances(conn: sqlite3.Connection, starts: dict[str, float]) -> dict[str, int]:
    if not starts or not has_table(conn, "episode_events"):
        return {}
    out: dict[str, int] = {}
    sql = "SELECT site, rule, time FROM episode_events WHERE time >= ? AND event = 'start' AND data_quality = 0"
    try:
        found = conn.execute(sql + " AND withdrawn = 0", (min(starts.values()),)).fetchall()
    except sqlite3.OperationalError:  # an episode store from before withdrawals (schema 2)
        found = conn.execute(sql, (min(starts.values()),)).fetchall()
    for site, rule, t in found:
        if rule in DATA_QUALITY_RULES or site not in starts or t < starts[site]:
            continue
        out[site] = out.get(site, 0) + 1
    return out
