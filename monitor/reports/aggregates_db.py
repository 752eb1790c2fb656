"""The report tables in the historian's SQLite file: per-day pre-aggregates, pH and fridge excursions, and the
aggregator's per-channel carry-over state.

Tables (their own ``report_`` prefix; the historian's ``PRAGMA user_version`` is never touched):

- ``report_daily(site, channel, day, …)``: one row per channel and local calendar day (``day`` is the ISO date
  in the site's time zone). Every column is *mergeable*: counts and accrued seconds add, minima and maxima
  combine, first/last times take the earlier/later. The aggregator writes only the change since its last flush
  through an upsert that merges, so a restarted daemon adds to the day it was in instead of overwriting it,
  and memory holds only what is not yet flushed. Seconds are real elapsed seconds. ``maintenance`` (added in
  version 2: `connect` adds it to an older file, 0 for the days already there; ``pretreat report rebuild``
  recomputes them) is the time the instrument said it was serviced or calibrated, which is neither covered nor
  downtime.
- ``report_excursions(site, channel, kind, start, end, low, high)``: each closed pH excursion (``kind`` 'ph')
  or fridge excursion ('band'): first out-of-range reading to first in-range reading, as 40 CFR 401.17 times
  it; ``low``/``high`` are the extreme readings during it.
- ``report_state(site, channel, …)``: where each channel's accrual stopped (last reading, last good reading,
  open excursion, maintenance not yet set against an interval), so the next reading after a restart accrues
  the interval in between.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from monitor.stores.readonly import connect_readonly

SCHEMA_VERSION = 2
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS report_daily (
        site TEXT NOT NULL, channel TEXT NOT NULL, day TEXT NOT NULL,
        count INTEGER NOT NULL,     -- samples received (good and bad)
        good INTEGER NOT NULL,      -- of which good quality
        late INTEGER NOT NULL,      -- received out of time order: not accrued (rebuild to include them)
        vmin REAL, vmin_t REAL, vmax REAL, vmax_t REAL,
        vsum REAL NOT NULL,         -- sum of good values
        integral REAL NOT NULL,     -- ∫ value dt over covered time (value held until the next good reading)
        covered REAL NOT NULL,      -- s between good readings no further apart than the channel's max gap
        volume REAL NOT NULL,       -- totaliser / sample counter: sum of increments, apportioned by time
        resets INTEGER NOT NULL,    -- totaliser / counter went backwards (rollover, reset, bottle change)
        outside REAL NOT NULL,      -- s outside the pH range (pH) or the fridge band (sampler temperature)
        peak30 REAL, peak30_t REAL, -- highest 30-minute average rate, and the end of that window
        downtime REAL NOT NULL,     -- s with no good reading within the max gap (closed gaps only)
        first_t REAL, last_t REAL,  -- first and last sample (any quality) of the day
        maintenance REAL NOT NULL DEFAULT 0,  -- s in service/calibration (quality maintenance): not downtime
        PRIMARY KEY (site, channel, day)
    ) STRICT, WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS report_excursions (
        site TEXT NOT NULL, channel TEXT NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('ph', 'band')),
        start REAL NOT NULL, end REAL NOT NULL, low REAL NOT NULL, high REAL NOT NULL,
        PRIMARY KEY (site, channel, kind, start)
    ) STRICT""",
    """CREATE TABLE IF NOT EXISTS report_state (
        site TEXT NOT NULL, channel TEXT NOT NULL,
        last_t REAL, good_t REAL, good_v REAL, outside INTEGER NOT NULL,
        exc_start REAL, exc_low REAL, exc_high REAL,
        maint_t REAL,               -- the last maintenance sample, its stretch not closed by a later sample yet
        serviced TEXT,              -- JSON [[a, b], ...]: maintenance stretches since the last good reading
        PRIMARY KEY (site, channel)
    ) STRICT""",
    "CREATE TABLE IF NOT EXISTS report_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT",
)

_ADD = ("count", "good", "late", "vsum", "integral", "covered", "volume", "resets", "outside", "downtime",
        "maintenance")


def _min(col: str, t: str, less: str) -> tuple[str, str]:
    """SET clauses keeping the extreme of ``col`` and the time it happened (old values on the right)."""
    better = f"excluded.{col} IS NOT NULL AND ({col} IS NULL OR excluded.{col} {less} {col})"
    return (f"{t} = CASE WHEN {better} THEN excluded.{t} ELSE {t} END",
            f"{col} = CASE WHEN {better} THEN excluded.{col} ELSE {col} END")


_SETS = (
    *(f"{c} = {c} + excluded.{c}" for c in _ADD),
    *_min("vmin", "vmin_t", "<"), *_min("vmax", "vmax_t", ">"), *_min("peak30", "peak30_t", ">"),
    "first_t = CASE WHEN first_t IS NULL OR excluded.first_t < first_t THEN excluded.first_t ELSE first_t END",
    "last_t = CASE WHEN last_t IS NULL OR excluded.last_t > last_t THEN excluded.last_t ELSE last_t END",
)
DAY_COLUMNS = ("site", "channel", "day", "count", "good", "late", "vmin", "vmin_t", "vmax", "vmax_t", "vsum",
               "integral", "covered", "volume", "resets", "outside", "peak30", "peak30_t", "downtime",
               "first_t", "last_t", "maintenance")
UPSERT_DAY = (f"INSERT INTO report_daily ({', '.join(DAY_COLUMNS)}) VALUES ({', '.join('?' * len(DAY_COLUMNS))}) "
              f"ON CONFLICT (site, channel, day) DO UPDATE SET {', '.join(_SETS)}")


@dataclass(frozen=True, slots=True)
class DayRow:
    """One channel's aggregates for one local day, as stored (see the table's column comments)."""

    site: str
    channel: str
    day: str
    count: int
    good: int
    late: int
    vmin: float | None
    vmin_t: float | None
    vmax: float | None
    vmax_t: float | None
    vsum: float
    integral: float
    covered: float
    volume: float
    resets: int
    outside: float
    peak30: float | None
    peak30_t: float | None
    downtime: float
    first_t: float | None
    last_t: float | None
    maintenance: float = 0.0

    @property
    def mean(self) -> float | None:
        """Time-weighted mean over covered time (falls back to the plain mean of a single reading)."""
        if self.covered > 0:
            return self.integral / self.covered
        return self.vsum / self.good if self.good else None


@dataclass(frozen=True, slots=True)
class Excursion:
    site: str
    channel: str
    kind: str
    start: float
    end: float | None  # None: still open at the last reading
    low: float
    high: float

    @property
    def duration(self) -> float | None:
        return None if self.end is None else self.end - self.start


@dataclass(frozen=True, slots=True)
class ChannelState:
    site: str
    channel: str
    last_t: float | None
    good_t: float | None
    good_v: float | None
    outside: bool
    exc_start: float | None
    exc_low: float | None
    exc_high: float | None
    maint_t: float | None = None
    serviced: str | None = None


STATE_COLUMNS = ("site", "channel", "last_t", "good_t", "good_v", "outside", "exc_start", "exc_low", "exc_high",
                 "maint_t", "serviced")
assert tuple(f.name for f in fields(ChannelState)) == STATE_COLUMNS
assert tuple(f.name for f in fields(DayRow)) == DAY_COLUMNS


def connect(path: Path, *, busy_timeout: float = 10.0, readonly: bool = False) -> sqlite3.Connection:
    """A connection with the report tables present (created if needed, unless ``readonly``)."""
    if readonly:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no database file at {path}")
        conn = connect_readonly(path, timeout=busy_timeout)
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "report_daily" not in have:  # nothing aggregated yet: an empty in-memory view
            conn.close()
            conn = sqlite3.connect(":memory:")
            _create(conn)
        elif "maintenance" not in _columns(conn, "report_daily"):  # a version 1 file the daemon has not opened
            conn.execute("CREATE TEMP VIEW report_daily AS SELECT *, 0.0 AS maintenance FROM main.report_daily")
            conn.execute("CREATE TEMP VIEW report_state AS SELECT *, NULL AS maint_t, NULL AS serviced "
                         "FROM main.report_state")
        return conn
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        _create(conn)
        conn.execute("INSERT OR IGNORE INTO report_meta (key, value) VALUES ('schema_version', ?)",
                     (SCHEMA_VERSION,))
        version = conn.execute("SELECT value FROM report_meta WHERE key = 'schema_version'").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{path}: report tables are version {version}, newer than this program "
                               f"understands ({SCHEMA_VERSION}); upgrade pretreat-monitor")
        _migrate(conn, version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        conn.close()
        raise
    return conn


def _create(conn: sqlite3.Connection) -> None:
    for ddl in _SCHEMA:
        conn.execute(ddl)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring older report tables up to `SCHEMA_VERSION` (inside the caller's transaction).

    1 → 2: ``report_daily.maintenance``, 0 for the days already aggregated (their maintenance time was counted
    as downtime then; ``pretreat report rebuild`` recomputes a range with it apart)."""
    if version < 2:
        if "maintenance" not in _columns(conn, "report_daily"):
            conn.execute("ALTER TABLE report_daily ADD COLUMN maintenance REAL NOT NULL DEFAULT 0")
        have = _columns(conn, "report_state")
        for col, kind in (("maint_t", "REAL"), ("serviced", "TEXT")):
            if col not in have:
                conn.execute(f"ALTER TABLE report_state ADD COLUMN {col} {kind}")
        conn.execute("UPDATE report_meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))


def read_days(conn: sqlite3.Connection, *, site: str, first: str, last: str) -> list[DayRow]:
    """Rows of one site for days ``first``..``last`` (ISO dates, both included), by channel then day."""
    rows = conn.execute(f"SELECT {', '.join(DAY_COLUMNS)} FROM report_daily WHERE site = ? AND day >= ? "
                        "AND day <= ? ORDER BY channel, day", (site, first, last))
    return [DayRow(*r) for r in rows]


def first_day(conn: sqlite3.Connection, *, site: str, channels: Iterable[str]) -> str | None:
    """The earliest local day (ISO date) on which any of ``channels`` of ``site`` has aggregates: the day the
    site's record begins, None while nothing has been aggregated. One primary-key look-up a channel (a
    ``min(day)`` over the whole site would read every row of its history)."""
    firsts = (conn.execute("SELECT min(day) FROM report_daily WHERE site = ? AND channel = ?", (site, c)).fetchone()[0]
              for c in channels)
    return min((d for d in firsts if d is not None), default=None)


def read_excursions(conn: sqlite3.Connection, *, site: str, start: float, end: float,
                    kind: str | None = None) -> list[Excursion]:
    """Closed excursions overlapping [start, end), in start order."""
    sql = ("SELECT site, channel, kind, start, end, low, high FROM report_excursions WHERE site = ? "
           "AND start < ? AND end > ?")
    args: list[object] = [site, end, start]
    if kind is not None:
        sql += " AND kind = ?"
        args.append(kind)
    return [Excursion(*r) for r in conn.execute(sql + " ORDER BY start, channel", args)]


def read_states(conn: sqlite3.Connection) -> dict[tuple[str, str], ChannelState]:
    rows = conn.execute(f"SELECT {', '.join(STATE_COLUMNS)} FROM report_state")
    return {(r[0], r[1]): ChannelState(r[0], r[1], r[2], r[3], r[4], bool(r[5]), *r[6:]) for r in rows}
