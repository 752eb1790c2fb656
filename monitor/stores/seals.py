"""Seals: the journal's hash chain extended over the readings and the episode events.

The journal (`alarms.journal`) proves its own records; the evidence an enforcement notice rests on is also in
``readings`` and ``episode_events``. Those are sealed into the chain:

- **Episode events** are journaled as they are recorded (kind ``episode_event``, the row's id and every
  column), in the same transaction as the row (`journal_episode_events`). Rows that existed before sealing
  began are covered by one ``sealing_started`` record: their count, highest id and a digest of them.
  An episode row a revision changes later (late readings: `monitor.checks.revisions`) is journaled again
  with its new columns (the newest record of an id is the one its row must match), and each change of its
  ``withdrawn`` flag is journaled as an ``episode_withdrawn`` record; each ``episode_revisions`` row is
  journaled as an ``episode_revision`` record.
- **A channel-day of readings** is sealed once it is complete: after the end of its UTC day plus
  ``seal_after`` (default 3 h, the late-data window). Days are **UTC** days, so a seal never depends on a site's
  daylight-saving rules. The ``seal`` record holds the series (site, channel, unit), the day, the highest
  reading ``seq`` it covers (``seq_max``: readings arriving later for that day are reported as *late*, not
  hidden), the count and a digest. The digest is the SHA-256 of the day's minute index: for each minute with
  readings, ``<HI16s`` (minute of the day, count, the first 16 bytes of the SHA-256 of the minute's
  encoding). A minute's readings (ordered by time, then seq; bad ones included) are encoded column after
  column: little-endian float64 times, int64 seqs, float64 values (0 where NULL), one byte each NULL flag,
  one byte each quality code, uint32 reason lengths (code points), then the reasons in UTF-8. The minute
  index itself is kept in ``seal_minutes`` beside the journal: the seal's digest authenticates it, so when
  a day no longer matches, verification names the minute (and whether readings are missing, added or
  altered there) instead of only the day.

Sealing runs in a background thread (`Sealer.run_once`, its own connections), never on the event loop.
Verification is `monitor.stores.seal_verify`.

Where the index is computed: by the C extension `monitor.stores._sealscan` where it is built (setup.py; it
needs gcc, the Python and SQLite headers at install): one call per channel-day opens the file read-only with the
SQLite C API, runs `READINGS_SQL` and returns the count and the index, the GIL released meanwhile: ~1 µs of CPU
a reading (most of it SQLite stepping through the rows) against ~3.6 µs for rows handed to Python. Otherwise
(not built, ``PRETREAT_SEALS_PYTHON=1``, or a row the C code would not read as Python does) `minute_index` over
the rows: the same bytes, slower. `scan_engine` names the path (the health snapshot's seal stats, `pretreat
journal verify`'s summary). See the README (Seals, Benchmarks) for the figures of both.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import multiprocessing
import operator
import os
import sqlite3
import struct
import sys
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from alarms.journal import Entry, Journal, append_in_transaction, canonical, head_of
from monitor.stores.readonly import connect_readonly

try:  # the C scanner (setup.py); absent where it could not be built
    from monitor.stores import _sealscan as _native
except ImportError:  # the install had no C compiler or headers
    _native = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DAY = 86_400.0
MINUTE = 60.0
SEAL_AFTER = 3 * 3600.0  # s after a UTC day's end before it is sealed: the late-data window
SEAL = "seal"
EPISODE_EVENT = "episode_event"
SEALING_STARTED = "sealing_started"
EPISODE_WITHDRAWN = "episode_withdrawn"  # an episode event's withdrawn flag changed (`journal_withdrawn`)
EPISODE_REVISION = "episode_revision"  # a correction after late readings (`journal_revision`)
RETENTION = "retention"  # raw readings before ``cutoff`` were purged ([daemon] retention_days)
_BUCKET = struct.Struct("<HI16s")
_SEALS_PER_COMMIT = 200  # channel-days appended in one transaction
_MAX_SEALS_PER_PASS = 5_000  # channel-days one pass computes at most (the rest: the next pass)
_BIG = sys.byteorder == "big"
SEAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS seal_minutes (
    journal_seq INTEGER PRIMARY KEY,   -- the seal record this minute index belongs to
    channel_id INTEGER NOT NULL,
    day REAL NOT NULL,                 -- epoch s of the UTC day's start
    minutes BLOB NOT NULL              -- <HI16s per minute with readings (see the module doc)
);
CREATE INDEX IF NOT EXISTS seal_minutes_channel ON seal_minutes (channel_id, day);
"""
READINGS_SQL = ("SELECT time, seq, value, quality, reason FROM readings "
                "WHERE channel_id = ? AND time >= ? AND time < ? AND seq <= ? ORDER BY time, seq")
EPISODE_COLUMNS = ("id", "time", "site", "channel", "rule", "event", "value", "limit_value", "peak",
                   "citation", "data_quality", "end_reason", "measured", "unmeasured", "censored")
# columns added later (episode schema 4: ``confirmed``, 5: ``maintenance``), journaled only when set: records
# and the pre-sealing digest made before they existed stay valid, and a row's value set later is covered from
# then on
OPTIONAL_EPISODE_COLUMNS = ("confirmed", "maintenance")


def episode_columns(conn: sqlite3.Connection) -> str:
    """The ``episode_events`` columns a payload is made of, as a SELECT list: `EPISODE_COLUMNS`, then those of
    `OPTIONAL_EPISODE_COLUMNS` the file has (a file not migrated, read-only, lacks them)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(episode_events)")}
    return ", ".join((*EPISODE_COLUMNS, *(c for c in OPTIONAL_EPISODE_COLUMNS if c in have)))


def day_label(day_start: float) -> str:
    return datetime.fromtimestamp(day_start, UTC).strftime("%Y-%m-%d")


def minute_index(rows: list[tuple[Any, ...]], day_start: float) -> bytes:
    """The ``<HI16s`` records of every minute with readings; ``rows`` are (time, seq, value, quality, reason)
    ordered by time, seq.

    Why column-wise: each column is taken out of the rows once (``itemgetter`` mapped in C) into an array, and
    each minute is hashed from slices of them (memoryviews: no copies); a Python loop per reading would cost
    several times what SQLite takes to read it. (``zip(*rows)`` transposes the same, but costs half again as
    much as the whole of this: a day is 86,400 arguments.)"""
    if not rows:
        return b""
    t = array("d", map(itemgetter(0), rows))
    seqs = array("q", map(itemgetter(1), rows))
    v = list(map(itemgetter(2), rows))
    try:
        values, nulls = array("d", v), bytes(len(v))
    except TypeError:  # some bad readings carry no value (NULL): 0 in the column, flagged
        values = array("d", [0.0 if x is None else x for x in v])
        nulls = bytes(map(operator.is_, v, repeat(None)))
    quality = bytes(map(itemgetter(3), rows))
    r = list(map(itemgetter(4), rows))
    lengths = array("I", map(len, r))
    times = array("d", t) if _BIG else t  # `t` stays in native order for the minute search
    if _BIG:
        for arr in (times, seqs, values, lengths):
            arr.byteswap()
    cols = [memoryview(c) for c in (times, seqs, values, nulls, quality, lengths)]
    out = []
    a, end = 0, len(rows)
    while a < end:
        minute = int((t[a] - day_start) // MINUTE)
        b = bisect.bisect_left(t, day_start + (minute + 1) * MINUTE, lo=a)
        h = hashlib.sha256()
        for col in cols:
            h.update(col[a:b])
        h.update("".join(r[a:b]).encode("utf-8", "surrogatepass"))
        out.append(_BUCKET.pack(minute, b - a, h.digest()[:16]))
        a = b
    return b"".join(out)


FORCE_PYTHON_ENV = "PRETREAT_SEALS_PYTHON"  # "1": the Python path even where the C scanner is built


def native_available() -> bool:
    """Whether channel-days are scanned in C: the extension is built and not switched off (`FORCE_PYTHON_ENV`,
    read at each call so a benchmark or test can compare both paths in one process)."""
    return _native is not None and os.environ.get(FORCE_PYTHON_ENV, "") != "1"


def scan_engine() -> str:
    """The path that computes minute indexes, for the health snapshot and `pretreat journal verify`."""
    if _native is None:
        return "Python (the C scanner is not built: gcc, python3-dev and libsqlite3-dev at install)"
    if not native_available():
        return f"Python ({FORCE_PYTHON_ENV}=1)"
    return f"C (_sealscan, SHA-256 {_native.sha256_impl()}, SQLite {_native.sqlite_version})"


def file_uri(conn: sqlite3.Connection) -> str | None:
    """A read-only URI of the file ``conn`` has open as ``main`` (None: an in-memory or temporary database),
    for the C scanner's own connection."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return f"{Path(file).resolve().as_uri()}?mode=ro"
    return None


def day_index(conn: sqlite3.Connection, channel_id: int, day_start: float, seq_max: int,
              uri: str | None = None, *, busy_timeout: float = 30.0) -> tuple[int, bytes]:
    """(count, minute index) of one channel-day: in C over ``uri`` (default: the file ``conn`` has open)
    where `native_available`, else (or when the C scanner declines a row it would read differently from
    Python) `read_day` and `minute_index` on ``conn``. Same bytes either way (tests/unit/test_seal_native.py).
    The C path reads through its own read-only connection, committed rows only, like ``conn`` outside a
    transaction; a file it cannot read raises `sqlite3.OperationalError` with SQLite's message."""
    if native_available():
        assert _native is not None
        uri = uri or file_uri(conn)
        if uri is not None:
            try:
                done = _native.scan_day(uri, READINGS_SQL, channel_id, day_start, day_start + DAY, seq_max,
                                        int(busy_timeout * 1000))
            except _native.Error as exc:
                raise sqlite3.OperationalError(str(exc)) from None
            if done is not None:
                return int(done[0]), bytes(done[1])
    rows = read_day(conn, channel_id, day_start, seq_max)
    return len(rows), minute_index(rows, day_start)


def parse_index(blob: bytes) -> dict[int, tuple[int, bytes]]:
    """minute -> (count, digest) from a minute index."""
    return {m: (c, d) for m, c, d in _BUCKET.iter_unpack(blob)}


def read_day(conn: sqlite3.Connection, channel_id: int, day_start: float, seq_max: int) -> list[Any]:
    return conn.execute(READINGS_SQL, (channel_id, day_start, day_start + DAY, seq_max)).fetchall()


def digest_of(index: bytes) -> str:
    return hashlib.sha256(index).hexdigest()


def episode_payload(row: Sequence[Any]) -> dict[str, Any]:
    """A journal payload from an ``episode_events`` row (columns `EPISODE_COLUMNS`), REALs as floats so the
    row read back encodes the same."""
    n = len(EPISODE_COLUMNS)
    out = dict(zip(EPISODE_COLUMNS, row[:n], strict=True))
    for k, v in zip(OPTIONAL_EPISODE_COLUMNS, row[n:], strict=False):
        if v is not None:
            out[k] = float(v)
    for k in ("time", "value", "limit_value", "peak", "measured", "unmeasured"):
        if out[k] is not None:
            out[k] = float(out[k])
    return out


def journal_episode_events(conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> None:
    """Inside the caller's write transaction: journal newly inserted ``episode_events`` rows."""
    entries = [Entry(EPISODE_EVENT, episode_payload(r), float(r[1])) for r in rows]
    if entries:
        append_in_transaction(conn, entries)


def journal_withdrawn(conn: sqlite3.Connection, row_id: int, withdrawn: bool, t: float) -> None:
    """Inside the caller's write transaction: journal a change of an ``episode_events`` row's ``withdrawn``
    flag (a revision after late readings withdrew it, or it stands again). The flag is not among the columns
    an ``episode_event`` record holds (records made before it existed stay valid); verification compares each
    row's flag with the newest of these records for it (none: 0)."""
    append_in_transaction(conn, [Entry(EPISODE_WITHDRAWN, {"id": row_id, "withdrawn": int(withdrawn)}, t)])


def journal_revision(conn: sqlite3.Connection, row_id: int, payload: dict[str, Any], t: float) -> None:
    """Inside the caller's write transaction: journal an ``episode_revisions`` row (its id and columns)."""
    append_in_transaction(conn, [Entry(EPISODE_REVISION, {"id": row_id, **payload}, t)])


def legacy_episode_digest(conn: sqlite3.Connection, max_id: int) -> tuple[int, str]:
    """(count, SHA-256) of the episode rows with id ≤ ``max_id``, for the ``sealing_started`` record."""
    h = hashlib.sha256()
    n = 0
    for row in conn.execute(f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episode_events WHERE id <= ? "
                            "ORDER BY id", (max_id,)):
        h.update(canonical(episode_payload(row)).encode() + b"\n")
        n += 1
    return n, h.hexdigest()


def start_sealing(conn: sqlite3.Connection, now: float) -> None:
    """Inside the caller's write transaction: the first time, cover the episode rows already present."""
    if conn.execute("SELECT 1 FROM journal WHERE kind = ? LIMIT 1", (SEALING_STARTED,)).fetchone():
        return
    max_id = int(conn.execute("SELECT coalesce(max(id), 0) FROM episode_events").fetchone()[0])
    count, digest = legacy_episode_digest(conn, max_id)
    append_in_transaction(conn, [Entry(SEALING_STARTED, {"episode_events": count, "max_id": max_id,
                                                         "digest": digest}, now)])


@dataclass(slots=True)
class SealStats:
    passes: int = 0
    seals: int = 0
    readings: int = 0
    last_pass_s: float = 0.0
    last_error: str = ""
    engine: str = ""  # the path computing the minute indexes (`scan_engine`; renewed at each pass)


class Sealer:
    """Seals complete channel-days. ``run_once`` is meant for a worker thread (``asyncio.to_thread``);
    it opens its own connections each pass, so a replaced file is never written through a stale handle."""

    def __init__(self, *, path: Path, seal_after: float = SEAL_AFTER, on_sealed: Any = None,
                 pass_budget: float = 60.0, workers: int = 1, threads: int | None = None) -> None:
        """``on_sealed(head)`` is called with the journal head after a pass that sealed something (the
        anchors). ``pass_budget`` (s) bounds one pass: a first start on years of readings catches up over
        several passes. The channel-days are scanned by ``threads`` threads where the C scanner runs (default:
        one a core, at most 2: each scan releases the GIL, so the event loop and polling run beside them), else
        by ``workers`` processes (1: the calling thread itself)."""
        self.path = Path(path)
        self.seal_after = seal_after
        self.on_sealed = on_sealed
        self.pass_budget = pass_budget
        self.workers = workers
        self.threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self.stats = SealStats(engine=scan_engine())  # the health snapshot says which path seals from the start

    def run_once(self, now: float | None = None) -> int:
        """Seal every channel-day complete by ``now`` (epoch s) and not sealed yet; returns how many."""
        now = time.time() if now is None else now
        started = time.monotonic()
        # FULL: a seal's head goes to the anchor file (fsynced) right after; a seal lost to a power cut would
        # leave an anchor naming a record that is not there
        journal = Journal(path=self.path)
        sealed = 0
        try:
            db = journal.connection
            db.executescript(SEAL_SCHEMA)
            last_complete = (now - self.seal_after) // DAY * DAY - DAY  # start of the last complete day
            todo = [(cid, (site, channel, unit), day) for cid, site, channel, unit in db.execute(
                "SELECT id, site, channel, unit FROM channels ORDER BY id").fetchall()
                for day in self._days_to_seal(db, cid, last_complete)]
            todo.sort(key=lambda job: job[2])  # oldest days first, every channel, when catching up
            # every seal of the pass covers the readings committed when it began (seq_max)
            seq_max = int(db.execute("SELECT value FROM historian_meta WHERE key = 'next_seq'").fetchone()[0]) - 1
            done: list[tuple[Entry, tuple[int, float, bytes]]] = []
            for sealed_day in self._indexes(db, todo[:_MAX_SEALS_PER_PASS], seq_max):
                done.append(sealed_day)
                if len(done) == _SEALS_PER_COMMIT:
                    self._commit(journal, done)
                    sealed, done = sealed + len(done), []
                if time.monotonic() - started > self.pass_budget:
                    break
            self._commit(journal, done)
            sealed += len(done)
            head = journal.head()
        finally:
            journal.close()
        self.stats.passes += 1
        self.stats.seals += sealed
        self.stats.last_pass_s = time.monotonic() - started
        if sealed and self.on_sealed is not None:
            self.on_sealed(head)
        return sealed

    @staticmethod
    def _days_to_seal(db: sqlite3.Connection, cid: int, last_complete: float) -> list[float]:
        row = db.execute("SELECT max(day) FROM seal_minutes WHERE channel_id = ?", (cid,)).fetchone()
        if row[0] is not None:
            first = float(row[0]) + DAY
        else:
            t = db.execute("SELECT min(time) FROM readings WHERE channel_id = ?", (cid,)).fetchone()[0]
            if t is None:
                return []
            first = float(t) // DAY * DAY
        t_last = db.execute("SELECT max(time) FROM readings WHERE channel_id = ?", (cid,)).fetchone()[0]
        last = min(last_complete, float(t_last) // DAY * DAY) if t_last is not None else last_complete
        n = int((last - first) // DAY) + 1
        return [first + i * DAY for i in range(max(0, n))]

    def _indexes(self, db: sqlite3.Connection, todo: list[tuple[int, tuple[str, str, str], float]],
                 seq_max: int) -> Iterator[tuple[Entry, tuple[int, float, bytes]]]:
        """Each channel-day's seal record and minute index, in ``todo`` order (reading only; `_commit`
        writes them). In C, ``threads`` threads scan (each call releases the GIL); on the Python path
        ``workers`` processes (rows into Python are one core's work per reader); 1: this thread alone."""
        self.stats.engine = scan_engine()
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        native = native_available()
        parallel = self.threads if native else self.workers
        if parallel > 1 and len(todo) > 1:
            jobs = [(str(self.path), cid, day, seq_max) for cid, _, day in todo]
            pool: Executor
            if native:
                pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="seal-scan")
            else:  # never fork a process running an event loop and threads
                pool = ProcessPoolExecutor(max_workers=parallel, mp_context=multiprocessing.get_context("spawn"))
            with pool:
                for (cid, series, day), (count, index) in zip(todo, pool.map(_index_job, jobs), strict=True):
                    yield self._entry(cid, series, day, seq_max, count, index)
            return
        for cid, series, day in todo:
            count, index = day_index(db, cid, day, seq_max, uri)
            yield self._entry(cid, series, day, seq_max, count, index)

    def _entry(self, cid: int, series: tuple[str, str, str], day: float, seq_max: int, count: int,
               index: bytes) -> tuple[Entry, tuple[int, float, bytes]]:
        site, channel, unit = series
        payload = {"site": site, "channel": channel, "unit": unit, "day": day_label(day), "start": day,
                   "seq_max": seq_max, "count": count, "digest": digest_of(index)}
        self.stats.readings += count
        return Entry(SEAL, payload, day + DAY), (cid, day, index)

    @staticmethod
    def _commit(journal: Journal, done: list[tuple[Entry, tuple[int, float, bytes]]]) -> None:
        """Append seals in one transaction (one fsync for many channel-days), with their minute indexes."""
        if not done:
            return

        def minutes(seqs: list[int]) -> list[tuple[str, list[tuple[Any, ...]]]]:
            return [("INSERT INTO seal_minutes (journal_seq, channel_id, day, minutes) VALUES (?, ?, ?, ?)",
                     [(seq, *extra) for seq, (_, extra) in zip(seqs, done, strict=True)])]

        journal.append_many([entry for entry, _ in done], also=minutes)


def _index_job(job: tuple[str, int, float, int]) -> tuple[int, bytes]:
    """In a worker thread or process: (count, minute index) of one channel-day."""
    path, cid, day, seq_max = job
    conn = connect_readonly(path, timeout=30.0)
    try:
        return day_index(conn, cid, day, seq_max)
    finally:
        conn.close()


def journal_head(path: Path) -> tuple[int, str]:
    conn = connect_readonly(path)
    try:
        return head_of(conn)
    finally:
        conn.close()


def anchor_path(historian: Path) -> Path:
    """The plain anchor file beside the database: one ``<seq> <hash> <UTC time>`` line per sealing pass."""
    return historian.with_name(historian.name + ".anchors")


def append_anchor(path: Path, head: tuple[int, str], now: float) -> None:
    """Append the chain head to the anchor file and fsync it. The daemon only ever appends here; copy the file
    (or let a log shipper follow it) somewhere the daemon cannot write for a protection it cannot undo."""
    line = f"{head[0]} {head[1]} {datetime.fromtimestamp(now, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
    with open(path, "a", encoding="ascii") as f:
        f.write(line)
        f.flush()
        import os
        os.fsync(f.fileno())
