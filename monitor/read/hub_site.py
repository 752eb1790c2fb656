"""One site of the county hub's database as a daemon's SQLite record, for the reads that need the whole record
(the periodic compliance report).

Why a copy and not views: the report is built from the edge's per-day aggregates (``report_daily``, accrued
live by the daemon and rebuilt from the historian by `DailyAggregator.rebuild`), its episode store, its journal
and several stores the hub never receives (annotations, lab results, calibrations, the case file). Teaching
every one of those readers PostgreSQL would be a second report; instead the site's readings and episode events
for the period (plus what the report looks back over: the last good reading before it, the 30-minute peak's
window, the slug baseline's look-back) and the site's episode revisions (withdrawn rows marked) are copied into
a temporary SQLite file with the historian's and episode store's schema, the aggregates are rebuilt from those
readings exactly as ``pretreat report rebuild`` does on an edge (live equals replay), and the report is built
from that file by the same code as on the edge.

What the hub cannot know is absent, and the report says so through its own words for an empty store: causes
and corrective actions entered on the edge's console, lab results imported there, calibration entries, case
file decisions. The journal head printed is the latest seal the edge sent (``seal`` events: the journal's
head seq and hash after a sealing pass), not the edge's head at the moment of the report.

Times: the hub keeps reading times to the millisecond (the Sparkplug timestamp), the edge's file to the
microsecond; an aggregate that depends on exact intervals (covered seconds, the flow integral) can differ from
the edge's by that rounding, which the report's printed precision does not show.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

from config.rule_catalogue import DATA_QUALITY_RULES
from config.schema import SiteConfig
from monitor.reports.plan import PEAK_WINDOW
from monitor.slug_history import SLUG_LOOKBACK
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian_db import open_for_writing
from monitor.stores.hub_record import HubReader

_EPISODE_COLUMNS = ("id, time, site, channel, rule, event, value, limit_value, peak, citation, end_reason, "
                    "measured, unmeasured, censored, confirmed, withdrawn, maintenance")
_REVISION_COLUMNS = "id, recorded, site, channel, rule, reason, late, changes, withdrawn, added"
_BATCH = 20_000


def _lookback(config: SiteConfig, site_id: str) -> float:
    """s before the period's first instant whose readings the report reads: the slug baseline's look-back
    where a trailing-baseline slug rule is configured, else the 30-minute peak window and a day."""
    site = config.site(site_id)
    if any(b.rule == "slug" and "baseline" not in b.params for b in site.checks):
        return SLUG_LOOKBACK
    return PEAK_WINDOW + 86400.0


def copy_site(url: str, config: SiteConfig, site_id: str, lo: float, hi: float, dest: Path) -> SiteConfig:
    """Copy ``site_id``'s record from the hub's database into a new SQLite file ``dest`` for the period
    [lo, hi) (epoch s) and what the report reads before it; returns ``config`` with its historian pointing
    at ``dest`` (the report, the aggregates' rebuild and the slug baselines all read the site file's
    historian). Raises `psycopg.Error` when the database cannot be read."""
    start = lo - _lookback(config, site_id)
    hub = HubReader(url)
    conn = open_for_writing(dest, busy_timeout=10.0)
    try:
        conn.execute("BEGIN")
        _copy_readings(hub, conn, site_id, start, hi)
        conn.execute("COMMIT")
        EpisodeStore(path=dest).close()  # its schema
        conn.execute("BEGIN")
        _copy_episodes(hub, conn, site_id, hi)
        _copy_journal_head(hub, conn, site_id)
        conn.execute("COMMIT")
    finally:
        conn.close()
        hub.close()
    return dataclasses.replace(config, daemon=dataclasses.replace(config.daemon, historian=dest))


def _copy_readings(hub: HubReader, conn: sqlite3.Connection, site: str, start: float, hi: float) -> None:
    channels = hub.execute("SELECT id, channel, unit FROM channels WHERE site = ?", (site,)).fetchall()
    conn.executemany("INSERT INTO channels (id, site, channel, unit) VALUES (?, ?, ?, ?)",
                     [(cid, site, ch, unit) for cid, ch, unit in channels])
    for cid, _ch, _unit in channels:
        # the last good reading before the window: a rebuild accrues the gap (or held value) up to the period
        prior = hub.execute("SELECT max(time) FROM readings WHERE channel_id = ? AND time < ? AND value IS NOT "
                            "NULL", (cid, start)).fetchone()[0]
        since = start if prior is None else prior
        cur = hub.execute("SELECT channel_id, time, seq, value, quality, reason FROM readings "
                          "WHERE channel_id = ? AND time >= ? AND time < ? ORDER BY time, seq", (cid, since, hi))
        while rows := cur.fetchmany(_BATCH):
            conn.executemany("INSERT INTO readings (channel_id, time, seq, value, quality, reason) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows)
    top = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM readings").fetchone()[0]
    conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (top,))


def _copy_episodes(hub: HubReader, conn: sqlite3.Connection, site: str, hi: float) -> None:
    rows: list[Any] = hub.execute(f"SELECT {_EPISODE_COLUMNS} FROM episode_events WHERE site = ? AND time < ? "
                                  "ORDER BY id", (site, hi)).fetchall()
    conn.executemany(
        f"INSERT OR IGNORE INTO episode_events ({_EPISODE_COLUMNS}, data_quality) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*r, int(r[4] in DATA_QUALITY_RULES)) for r in rows])
    # the corrections the edge made after late readings (its revision events): the report shows them
    revisions: list[Any] = hub.execute(f"SELECT {_REVISION_COLUMNS} FROM episode_revisions WHERE site = ? "
                                       "ORDER BY id", (site,)).fetchall()
    conn.executemany(f"INSERT INTO episode_revisions ({_REVISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     revisions)


def _copy_journal_head(hub: HubReader, conn: sqlite3.Connection, site: str) -> None:
    """The latest seal the edge of ``site`` sent, as a one-row ``journal`` head (seq, hash)."""
    row = hub.execute("SELECT (body->>'seq')::bigint, body->>'hash' FROM public.events WHERE type = 'seal' AND "
                      "(site = ? OR jsonb_exists(coalesce(body->'sites', '[]'::jsonb), ?)) "
                      "ORDER BY (body->>'time')::float8 DESC, seq DESC LIMIT 1", (site, site)).fetchone()
    if row is None:
        return
    conn.execute("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL)")
    conn.execute("INSERT INTO journal (seq, hash) VALUES (?, ?)", (int(row[0]), str(row[1])))
