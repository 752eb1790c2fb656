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

The minute index of a channel-day (the C scanner, the Python path) is `monitor.stores.seal_scan`.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alarms.journal import Entry, Journal, append_in_transaction, canonical, head_of
from monitor.stores.readonly import connect_readonly

# the minute index (`seal_scan`): its names re-exported, as they were defined here before
from monitor.stores.seal_scan import DAY as DAY
from monitor.stores.seal_scan import MINUTE as MINUTE
from monitor.stores.seal_scan import READINGS_SQL as READINGS_SQL
from monitor.stores.seal_scan import DayReader, native_available, path_uri, scan_engine
from monitor.stores.seal_scan import day_index as day_index
from monitor.stores.seal_scan import digest_of as digest_of
from monitor.stores.seal_scan import minute_index as minute_index
from monitor.stores.seal_scan import parse_index as parse_index
from monitor.stores.seal_scan import read_day as read_day

log = logging.getLogger(__name__)

SEAL_AFTER = 3 * 3600.0  # s after a UTC day's end before it is sealed: the late-data window
SEAL = "seal"
EPISODE_EVENT = "episode_event"
SEALING_STARTED = "sealing_started"
EPISODE_WITHDRAWN = "episode_withdrawn"  # an episode event's withdrawn flag changed (`journal_withdrawn`)
EPISODE_REVISION = "episode_revision"  # a correction after late readings (`journal_revision`)
RETENTION = "retention"  # raw readings before ``cutoff`` were purged ([daemon] retention_days)
_SEALS_PER_COMMIT = 200  # channel-days appended in one transaction
_MAX_SEALS_PER_PASS = 5_000  # channel-days one pass computes at most (the rest: the next pass)
SEAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS seal_minutes (
    journal_seq INTEGER PRIMARY KEY,   -- the seal record this minute index belongs to
    channel_id INTEGER NOT NULL,
    day REAL NOT NULL,                 -- epoch s of the UTC day's start
    minutes BLOB NOT NULL              -- <HI16s per minute with readings (see the module doc)
);
CREATE INDEX IF NOT EXISTS seal_minutes_channel ON seal_minutes (channel_id, day);
"""
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
    """Inside the caller's write transaction: the first time, cover the episode rows already present: their
    count and digest, and which of them are withdrawn (the digest leaves that flag out, as every
    ``episode_event`` record does; without the list a row's flag set by hand before its first
    ``episode_withdrawn`` record went unnamed)."""
    if conn.execute("SELECT 1 FROM journal WHERE kind = ? LIMIT 1", (SEALING_STARTED,)).fetchone():
        return
    max_id = int(conn.execute("SELECT coalesce(max(id), 0) FROM episode_events").fetchone()[0])
    count, digest = legacy_episode_digest(conn, max_id)
    withdrawn = [int(i) for (i,) in conn.execute(
        "SELECT id FROM episode_events WHERE id <= ? AND withdrawn = 1 ORDER BY id", (max_id,))]
    append_in_transaction(conn, [Entry(SEALING_STARTED, {"episode_events": count, "max_id": max_id,
                                                         "digest": digest, "withdrawn": withdrawn}, now)])


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
        self.stopping = threading.Event()  # the daemon's stop: the pass ends after the seal in hand
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
                if time.monotonic() - started > self.pass_budget or self.stopping.is_set():
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
        if first > last_complete:  # nothing complete to seal: spare the look-up below (every channel, each pass)
            return []
        t_last = db.execute("SELECT max(time) FROM readings WHERE channel_id = ?", (cid,)).fetchone()[0]
        last = min(last_complete, float(t_last) // DAY * DAY) if t_last is not None else last_complete
        n = int((last - first) // DAY) + 1
        return [first + i * DAY for i in range(max(0, n))]

    def _indexes(self, db: sqlite3.Connection, todo: list[tuple[int, tuple[str, str, str], float]],
                 seq_max: int) -> Iterator[tuple[Entry, tuple[int, float, bytes]]]:
        """Each channel-day's seal record and minute index, in ``todo`` order (reading only; `_commit`
        writes them). In C, ``threads`` threads scan, each through one `DayReader` kept for all its days (a
        connection per day made the threads wait on SQLite's allocator mutex: see `DayReader`); on the Python
        path ``workers`` processes (rows into Python are one core's work per reader); 1: this thread alone."""
        self.stats.engine = scan_engine()
        uri = path_uri(self.path)
        native = native_available()
        parallel = self.threads if native else self.workers
        if parallel > 1 and len(todo) > 1:
            local = threading.local()
            readers: list[DayReader] = []

            def in_thread(job: tuple[int, float]) -> tuple[int, bytes]:
                reader = getattr(local, "reader", None)
                if reader is None:
                    reader = local.reader = DayReader(uri)
                    readers.append(reader)
                return reader.index(job[0], job[1], seq_max)

            pool: Executor
            if native:
                pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="seal-scan")
                results = pool.map(in_thread, [(cid, day) for cid, _, day in todo])
            else:  # never fork a process running an event loop and threads
                pool = ProcessPoolExecutor(max_workers=parallel, mp_context=multiprocessing.get_context("spawn"))
                results = pool.map(_index_job, [(str(self.path), cid, day, seq_max) for cid, _, day in todo])
            try:
                for (cid, series, day), (count, index) in zip(todo, results, strict=True):
                    yield self._entry(cid, series, day, seq_max, count, index)
            finally:  # a pass over its budget stops here: the days not started yet wait for the next pass
                pool.shutdown(wait=True, cancel_futures=True)
                for reader in readers:
                    reader.close()
            return
        with DayReader(uri, db) as reader:
            for cid, series, day in todo:
                count, index = reader.index(cid, day, seq_max)
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
