"""The historian's SQLite file: its layout, schema versioning, and the read side.

Layout (schema version 4, kept in ``PRAGMA user_version``; version 1, 2 and 3 files lack only quality codes (8;
9 and 10; 11) and are upgraded in place when opened for writing; the episode store shares the file with its own
tables and must not touch ``user_version``):

- ``channels(id, site, channel, unit)``, unique on (site, channel, unit). The unit is part of a series'
  identity: if a site file changes a channel's unit, later readings start a new series and earlier ones keep
  the unit they were recorded in (rewriting it would misstate old evidence). Readers merge the series of one
  (site, channel) in time order.
- ``readings(channel_id, time, seq, value, quality, reason)``: a ``WITHOUT ROWID`` table clustered on
  (channel_id, time, seq), so one channel's readings over a time range are one contiguous run of pages
  (a month export reads them sequentially; a separate index would cost a row look-up per reading).
  ``time`` is REAL seconds since the epoch, UTC (the `Sample` float, stored exactly). ``seq`` is the
  arrival order (a counter kept in ``historian_meta``): it keeps two readings of one channel with the same
  timestamp (an MQTT redelivery, a device clock that did not move) apart, since silently dropping a duplicate
  would lose evidence. ``value`` is NULL for bad readings, except ``over_range`` ones, which keep the number the
  instrument reported above its span. (SQLite stores a whole-valued REAL as an
  integer, so ``-0.0`` reads back as ``0.0``; every other double reads back bit-identical.) ``quality``
  is a small code, spelled out in the ``qualities`` table so plain ``sqlite3`` users can join it.
- ``rejected_samples``: anything submitted that cannot be a row of ``readings`` (a NaN timestamp, a value
  of the wrong type, a good reading without a value) is kept here as text with the error, counted and
  logged, instead of blocking the queue or vanishing.

Tables are ``STRICT``: a wrong type is an error, never a silent conversion. The read side opens the file
read-only (``mode=ro``) through its own connection, so tools and other processes read beside a running
daemon (WAL lets readers and the single writer proceed together).
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections.abc import Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

from monitor.sample import QUALITY_BY_CODE, QUALITY_CODES, Sample
from monitor.stores.hub_record import HubReader, is_database_url
from monitor.stores.readonly import connect_readonly, has_table

SCHEMA_VERSION: Final = 4  # 2: code 8, over_range; 3: codes 9 and 10; 4: code 11, clock_skew (older: upgraded)
# The quality codes stored in the readings table are `monitor.sample.QUALITY_CODES`: adding a quality needs a new
# code there and a SCHEMA_VERSION bump here (older readers would not know the code).


_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS channels (
        id INTEGER PRIMARY KEY,
        site TEXT NOT NULL,
        channel TEXT NOT NULL,
        unit TEXT NOT NULL,
        UNIQUE (site, channel, unit)
    ) STRICT""",
    "CREATE TABLE IF NOT EXISTS qualities (code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT",
    """CREATE TABLE IF NOT EXISTS readings (
        channel_id INTEGER NOT NULL REFERENCES channels (id),
        time REAL NOT NULL,
        seq INTEGER NOT NULL,
        value REAL,
        quality INTEGER NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (channel_id, time, seq),
        CHECK (quality != 0 OR value IS NOT NULL)
    ) STRICT, WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS historian_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT",
    """CREATE TABLE IF NOT EXISTS rejected_samples (
        id INTEGER PRIMARY KEY,
        received REAL NOT NULL,
        sample TEXT NOT NULL,
        error TEXT NOT NULL
    ) STRICT""",
)
_READINGS_COLUMNS: Final = ["channel_id", "time", "seq", "value", "quality", "reason"]


class HistorianError(Exception):
    """The historian file cannot be used (newer schema, not a historian, missing, unreadable)."""


def writer_cache_kib(channels: int) -> int:
    """The writer's page cache (KiB) for ``channels`` series: 8 KiB (two 4 KiB pages) a channel, 2–64 MiB.

    Readings are clustered by channel and each batch is inserted in key order, so a commit touches each
    channel's newest leaf page and the interior pages above them: two pages a channel keep every one of them
    cached (with 1,000 channels, 8 MiB writes as fast as 64 MiB; 4 MiB costs ~10 % more CPU). A bigger cache
    only fills with pages the writer never touches again, growing the daemon for hours as the file grows,
    which a soak cannot tell from a leak. Unknown (0): the 64 MiB ceiling (tools writing in bulk)."""
    return 65_536 if channels <= 0 else max(2_048, min(65_536, 8 * channels))


def open_for_writing(path: Path, *, busy_timeout: float, cache_kib: int = 65_536) -> sqlite3.Connection:
    """Open (creating if needed) the file for the single writer: WAL, ``synchronous=NORMAL``, schema checked.

    Durability trade-off: in WAL mode with ``synchronous=NORMAL`` a committed batch survives the process
    being killed, but the last batches since the previous checkpoint may be lost on a power cut or kernel
    crash (the WAL is not fsynced at every commit). The file itself stays consistent. ``FULL`` would fsync
    every commit (every ``commit_interval``), which a control-manhole PC with an SD card or a busy disk pays
    for dearly; the daemon's own outage window is the smaller risk.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise HistorianError(f"{path}: cannot switch to WAL journal mode (got {mode!r})")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Readings are clustered by channel, so a batch from 1,000 channels touches ~1,000 leaf pages: keep
        # them cached (see writer_cache_kib) or every commit re-reads them from the OS and ingest CPU doubles.
        conn.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
        _ensure_schema(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _check_version(conn, path)
        if version == 0:
            for ddl in _SCHEMA:
                conn.execute(ddl)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version < SCHEMA_VERSION:  # older versions lack only quality codes, added below
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        _check_layout(conn, path)
        conn.executemany("INSERT OR IGNORE INTO qualities (code, name) VALUES (?, ?)",
                         [(c, q.value) for q, c in QUALITY_CODES.items()])
        conn.execute("INSERT OR IGNORE INTO historian_meta (key, value) VALUES ('next_seq', 1)")
        _check_qualities(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_version(conn: sqlite3.Connection, path: Path) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise HistorianError(
            f"{path} was written by a newer pretreat-monitor (historian schema {version}; this version "
            f"understands up to {SCHEMA_VERSION}). Upgrade pretreat-monitor, or point [daemon].historian "
            "at another file; the file was not modified."
        )
    return version


def _check_layout(conn: sqlite3.Connection, path: Path) -> None:
    columns = [row[1] for row in conn.execute("PRAGMA table_info(readings)")]
    if columns != _READINGS_COLUMNS:
        raise HistorianError(f"{path} has a 'readings' table that is not a pretreat historian's "
                             f"(columns {columns}, expected {_READINGS_COLUMNS})")


def _check_qualities(conn: sqlite3.Connection, path: Path) -> None:
    for code, name in conn.execute("SELECT code, name FROM qualities"):
        known = QUALITY_BY_CODE.get(code)
        if known is None or known.value != name:
            raise HistorianError(f"{path}: quality code {code} is {name!r} in the file but "
                                 f"{known.value if known else 'unknown'!r} here; refusing to mix them")


def open_for_reading(path: Path | str) -> sqlite3.Connection:
    """A read-only connection; raises `HistorianError` if the file is missing or from a newer version.

    A file without historian tables yet (user_version 0, e.g. created by the episode store first) reads as
    empty rather than failing: nothing has been recorded, which is a fact, not an error. A ``postgresql://``
    URL opens the county hub's database through its ``record`` views (`monitor.stores.hub_record`), which
    answer the same queries.
    """
    if isinstance(path, str) and is_database_url(path):
        return _open_hub(path)
    path = Path(path)
    if not path.is_file():
        raise HistorianError(f"no historian file at {path}")
    try:
        conn = connect_readonly(path)
        version = _check_version(conn, path)
    except sqlite3.Error as exc:
        raise HistorianError(f"{path}: cannot read it as a historian ({exc})") from exc
    if version == 0:
        conn.close()
        conn = sqlite3.connect(":memory:")
        for ddl in _SCHEMA:
            conn.execute(ddl)
    return conn


def _open_hub(url: str) -> Any:
    import psycopg

    try:
        conn = HubReader(url)
    except psycopg.Error as exc:
        raise HistorianError(f"cannot connect to the hub's database: {exc}") from exc
    if not has_table(conn, "record.readings"):
        conn.close()
        raise HistorianError("the hub's database has no record views yet: has `pretreat hub` run against it?")
    return conn


def list_channels(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """Every recorded series as (site, channel, unit), sorted."""
    return [(str(s), str(c), str(u)) for s, c, u in
            conn.execute("SELECT site, channel, unit FROM channels ORDER BY site, channel, unit")]


def series_of(conn: sqlite3.Connection, site: str, channel: str) -> list[tuple[int, str]]:
    """(channel_id, unit) of every series of one channel, oldest first; empty if never recorded."""
    return [(int(i), str(u)) for i, u in
            conn.execute("SELECT id, unit FROM channels WHERE site = ? AND channel = ? ORDER BY id",
                         (site, channel))]


def time_bounds(start: float | None, end: float | None) -> tuple[str, tuple[float, ...]]:
    """SQL condition and parameters for ``start <= time < end`` (either side may be open)."""
    sql = ""
    params: list[float] = []
    if start is not None:
        sql += " AND time >= ?"
        params.append(float(start))
    if end is not None:
        sql += " AND time < ?"
        params.append(float(end))
    return sql, tuple(params)


def iter_samples(conn: sqlite3.Connection, *, site: str, channel: str, start: float | None = None,
                 end: float | None = None) -> Iterator[Sample]:
    """Readings of one channel in time order (equal times in arrival order), ``start`` inclusive, ``end``
    exclusive. Streams: memory stays constant however long the range."""
    series = series_of(conn, site, channel)
    streams = [_one_series(conn, cid, unit, site, channel, start, end) for cid, unit in series]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda r: (r[0], r[1]))
    for _time, _seq, sample in merged:
        yield sample


def _one_series(conn: sqlite3.Connection, cid: int, unit: str, site: str, channel: str,
                start: float | None, end: float | None) -> Iterator[tuple[float, int, Sample]]:
    cond, params = time_bounds(start, end)
    cur = conn.execute("SELECT time, seq, value, quality, reason FROM readings "
                       f"WHERE channel_id = ?{cond} ORDER BY time, seq", (cid, *params))
    by_code = QUALITY_BY_CODE
    while rows := cur.fetchmany(2000):
        for t, seq, value, code, reason in rows:
            yield t, seq, Sample(time=t, site=site, channel=channel, value=value, unit=unit,
                                 quality=by_code[code], reason=reason)


def iter_by_seq(conn: sqlite3.Connection, *, first: int, end: int, chunk: int = 2000) -> Iterator[Sample]:
    """Every reading with ``first <= seq < end``, all channels, in storage order (channel, time), not seq
    order. Streams ``chunk`` rows at a time: memory stays constant however many rows match.

    Why no seq order: ``seq`` has no index (one would cost every insert), so this is one pass over the
    table, which a crash recovery (the InfluxDB sink re-queuing what it lost) pays once; ordering would
    sort every match first."""
    cur = conn.execute("SELECT c.site, c.channel, c.unit, r.time, r.value, r.quality, r.reason "
                       "FROM readings r JOIN channels c ON c.id = r.channel_id WHERE r.seq >= ? AND r.seq < ?",
                       (int(first), int(end)))
    by_code = QUALITY_BY_CODE
    while rows := cur.fetchmany(chunk):
        for site, channel, unit, t, value, code, reason in rows:
            yield Sample(time=t, site=site, channel=channel, value=value, unit=unit, quality=by_code[code],
                         reason=reason)


class HistorianReader:
    """A read-only view of a historian file, for tools (export, backfill, tail) and other processes."""

    def __init__(self, *, path: Path) -> None:
        self.path = Path(path)
        self.conn = open_for_reading(self.path)

    def channels(self) -> list[tuple[str, str, str]]:
        return list_channels(self.conn)

    def query(self, *, site: str, channel: str, start: float | None = None,
              end: float | None = None) -> Iterator[Sample]:
        return iter_samples(self.conn, site=site, channel=channel, start=start, end=end)

    def by_seq(self, *, first: int, end: int) -> Iterator[Sample]:
        """Readings with ``first <= seq < end`` (see `iter_by_seq`)."""
        return iter_by_seq(self.conn, first=first, end=end)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> HistorianReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# The last few commits, as a ring in ``historian_meta``: each slot's first seq and earliest reading time (whole
# ms, rounded down: the table's values are integers). What a crash can leave committed but unacknowledged (an
# MQTT message committed, its PUBACK not yet sent) lies in these, and a buffer re-sent with its real times may
# be hours older than the channel's newest readings, so "the newest by time" does not find it (`recent_samples`).
ARRIVAL_SLOTS = 8
ARRIVALS_SQL = "INSERT OR REPLACE INTO historian_meta (key, value) VALUES (?, ?), (?, ?)"
_INT64 = (1 << 63) - 1
_TIME = attrgetter("time")


def arrivals_row(commit: int, first_seq: int, batch: Sequence[Sample],
                 earliest: float | None = None) -> tuple[str, int, str, int]:
    """The `ARRIVALS_SQL` parameters of commit number ``commit`` (the slot it overwrites), in its transaction.
    ``earliest`` is the batch's least time where the writer's insert found it (Python's ``min``, NaN and all);
    otherwise one pass over the batch's times (about 1 ms per 50,000 samples)."""
    slot = commit % ARRIVAL_SLOTS
    if earliest is None:
        earliest = min(map(_TIME, batch)) if batch else math.inf
    ms = max(-_INT64, min(_INT64, math.floor(earliest * 1000))) if math.isfinite(earliest) else _INT64
    return f"arrival{slot}_seq", first_seq, f"arrival{slot}_tmin_ms", ms


def _arrivals(conn: sqlite3.Connection) -> tuple[int, float] | None:
    """(first seq, earliest reading time) over the ring's commits; None for a file without it."""
    rows = dict(conn.execute("SELECT key, value FROM historian_meta WHERE key LIKE 'arrival%'").fetchall())
    seqs = [v for k, v in rows.items() if k.endswith("_seq")]
    times = [v for k, v in rows.items() if k.endswith("_tmin_ms")]
    if not seqs or not times:
        return None
    return min(seqs), min(times) / 1000.0 - 0.001


def recent_samples(path: Path, *, site: str, channel: str, limit: int) -> list[Sample]:
    """The readings of one channel (each unit series) a duplicate filter must know at start, the last arrival
    first (a filter seeded from the end of this list keeps the last arrivals when it forgets); [] if none or no
    file. For seeding the MQTT duplicate filter (`drivers.mqtt.dedupe`): a message committed just
    before a kill is delivered again after it.

    Two sets, each of at most ``limit``: the newest by time, and the last arrivals (the readings of the last
    `ARRIVAL_SLOTS` commits, by seq): a buffer an instrument re-sent with its real times just before the kill
    may be hours older than the newest readings. The second set is found through the time key (from the ring's
    earliest reading time), not by scanning the table for seq, which has no index."""
    if not Path(path).is_file():
        return []
    conn = open_for_reading(path)
    try:
        out: list[Sample] = []
        arrivals = _arrivals(conn)
        for cid, unit in series_of(conn, site, channel):
            queries: list[tuple[str, tuple[Any, ...]]] = [
                ("SELECT time, value, quality, reason, seq FROM readings WHERE channel_id = ? "
                 "ORDER BY time DESC, seq DESC LIMIT ?", (cid, limit))]
            if arrivals is not None:
                queries.append(("SELECT time, value, quality, reason, seq FROM readings WHERE channel_id = ? "
                                "AND time >= ? AND seq >= ? ORDER BY seq DESC LIMIT ?",
                                (cid, arrivals[1], arrivals[0], limit)))
            found: dict[int, tuple[float, float | None, int, str]] = {}
            for sql, args in queries:
                for t, value, code, reason, seq in conn.execute(sql, args):
                    found[seq] = (t, value, code, reason)
            for _seq, (t, value, code, reason) in sorted(found.items(), reverse=True):  # last arrival first
                out.append(Sample(time=t, site=site, channel=channel, value=value, unit=unit,
                                  quality=QUALITY_BY_CODE[code], reason=reason))
        return out
    finally:
        conn.close()


def read_readings(path: Path, *, site: str, channel: str, start: float | None = None,
                  end: float | None = None) -> Iterator[Sample]:
    """Sync helper for tools and tests: open ``path`` read-only and stream one channel's samples.

    The connection closes when the iterator is exhausted or closed.
    """
    conn = open_for_reading(path)
    try:
        yield from iter_samples(conn, site=site, channel=channel, start=start, end=end)
    finally:
        conn.close()


def read_channels(path: Path) -> list[tuple[str, str, str]]:
    """(site, channel, unit) of every series recorded in ``path``."""
    conn = open_for_reading(path)
    try:
        return list_channels(conn)
    finally:
        conn.close()


def opening_reason(conn: sqlite3.Connection, site: str, channel: str, start: float) -> str:
    """The reason recorded with the bad reading that opened a data-quality episode at ``start``: for a
    ``sensor_fault`` the instrument's own words (``instrument fault: Sensor Missing - Sensor 1 (fault_status bit
    1)``, the vendor's text) or why the value was refused. The episode store keeps no reason (live equals
    replay: the rules see qualities only), so it is read from the readings; "" when none is recorded."""
    if not has_table(conn, "channels") or not has_table(conn, "readings"):
        return ""
    row = conn.execute(
        "SELECT r.reason FROM readings r JOIN channels c ON r.channel_id = c.id WHERE c.site = ? AND c.channel = ? "
        "AND r.time >= ? AND r.time <= ? AND r.quality != 0 AND r.reason != '' ORDER BY r.time, r.seq LIMIT 1",
        (site, channel, start - 0.001, start + 0.001)).fetchone()
    return str(row[0]) if row else ""
