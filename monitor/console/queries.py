"""The console's view of the alarms and the journal: the read side's rows (`monitor.read.alarms`, the rows
`pretreat alarms list` prints) with the site, channel, rule, unit, sort tier and local-time texts the pages
show, so the console and the command line can never disagree about an alarm.

Every function takes a read-only connection and plain arguments and returns JSON-ready dicts; nothing here
knows about HTTP or users (the API filters by the caller's sites before and after). Times are epoch seconds
UTC throughout; alarm rows and journal records also carry them as text in the site's zone (``*_text``,
`alarm_view`), so no page falls back on the browser's zone. A site's current values are
`monitor.read.readings`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from alarms.model import State
from config.schema import SiteConfig
from monitor.console import alarm_view, remarks
from monitor.logtext import local_time
from monitor.read.alarms import alarm_rows, journal_records
from monitor.stores.readonly import connect_readonly, connect_record

# How far an alarm needs the operator: 0 active and unacknowledged, 1 other unacknowledged (returned to
# normal or latched), 2 acknowledged but still active or latched, 3 suppressed (shelved, out of service),
# 4 normal. Counts use it ("active": tier < 3); the display order is `alarm_view.sort_key`.
TIER: dict[str, int] = {
    State.ACTIVE_UNACKED.value: 0, State.LATCHED_UNACKED.value: 1, State.RTN_UNACKED.value: 1,
    State.ACTIVE_ACKED.value: 2, State.LATCHED_ACKED.value: 2, State.SHELVED.value: 3,
    State.OUT_OF_SERVICE.value: 3, State.NORMAL.value: 4,
}


def connect(db: Path | str) -> sqlite3.Connection | None:
    """A read-only connection to the daemon's file (usable from the server's worker threads), or None if the
    daemon has not created it yet; or to the county hub's database (a URL: `monitor.stores.hub_record`)."""
    if isinstance(db, str):
        return connect_record(db)
    if not db.is_file():
        return None
    return connect_readonly(db, check_same_thread=False)


# ---- alarms ----------------------------------------------------------------------------------------------

def alarm_sort_key(row: dict[str, Any]) -> tuple[int, int, float, str]:
    """Unacknowledged first, then priority, then newest (`monitor.console.alarm_view`)."""
    return alarm_view.sort_key(row)


def alarms(conn: sqlite3.Connection, config: SiteConfig, sites: Collection[str],
           ids: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Every alarm of ``sites`` (configured ones, and stored ones no longer configured), in display order; with
    ``ids``, only those alarms (the live follower rebuilds the rows of the alarms that changed)."""
    units = {(c.site, c.id): c.unit for c in config.channels}
    names = {s.id: s.name for s in config.sites}
    companies = {s.id: s.company for s in config.sites}
    out = []
    for r in alarm_rows(conn, config, ids):
        site, channel, rule = r["alarm"].split("/")
        if site not in sites:
            continue
        row = {**r, "site": site, "channel": channel, "rule": rule, "site_name": names.get(site, site),
               "site_company": companies.get(site, ""),
               "unit": units.get((site, channel), ""), "tier": TIER.get(r["state"], 5)}
        out.append(alarm_view.enrich(conn, config, row))
    zones = {s.id: ZoneInfo(s.timezone) for s in config.sites}
    remarks.annotate(conn, out, lambda site, t: local_time(t, zones.get(site, ZoneInfo("UTC"))))
    out.sort(key=alarm_sort_key)
    return out


def journal(conn: sqlite3.Connection, *, sites: Collection[str], alarm: str | None = None,
            limit: int = 50, config: SiteConfig | None = None) -> list[dict[str, Any]]:
    """The latest transition, action and refusal records of ``alarm`` (or of every alarm of ``sites``),
    newest first (`monitor.read.alarms.journal_records`); with ``config``, also ``time_text`` and the
    daemon's explanation ``why_text`` in the site's local time (`alarm_view.explain`)."""
    return [spoken(r, config) for r in journal_records(conn, sites=sites, alarm=alarm, limit=limit)]


def spoken(record: dict[str, Any], config: SiteConfig | None) -> dict[str, Any]:
    """``record`` with its time in the site's zone, the daemon's explanation in words, and the alarm's friendly
    name (``alarm_name``: site name · channel · rule label), so a page names alarms it holds no row for."""
    if config is None:
        return record
    site_id, _, rest = str(record.get("alarm", "")).partition("/")
    channel, _, rule = rest.partition("/")
    site = alarm_view.site_of(config, site_id)
    zone = ZoneInfo(site.timezone if site is not None else "UTC")
    if rule:
        record["alarm_name"] = f"{site.name if site is not None else site_id} · {channel} · {alarm_view.label(rule)}"
    record["time_text"] = local_time(record["time"], zone)
    if record.get("who") == "system" and record.get("why"):
        record["why_text"] = alarm_view.explain(str(record["why"]), zone)
    return record
