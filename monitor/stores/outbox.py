"""A durable on-disk FIFO queue (an "outbox") for store-and-forward to anything that can be down.

Why it exists: a telemetry server or a notification channel can be unreachable for hours, and the daemon can
be restarted (or killed) meanwhile. Whatever must not be lost is appended here *before* the network attempt
and removed only after the receiver acknowledged it, so a crash at any moment leaves each record either still
queued (and sent again: delivery is at-least-once, receivers must be idempotent) or acknowledged.

Semantics:
- A record is an opaque payload (bytes; str is stored UTF-8) with an id, the wall-clock time it was queued
  (``created``, epoch seconds) and ``count``: how many logical items it carries (a record may hold a batch of
  lines; depth and drops are reported in items, which is what an operator cares about).
- Order is append order (ids only grow; AUTOINCREMENT keeps them from being reused after a drain).
- ``peek`` never removes; ``ack(ids)`` removes. Acking an id that is gone (dropped meanwhile) is harmless.
- Disk budget: the sum of queued payload bytes is kept at or under ``budget_bytes``. When an append would
  exceed it, the *oldest* records are dropped first (newest data is the most useful after a long outage) and
  the drop is counted, persistently (``dropped_items`` survives restarts: it is evidence of a gap). The
  newest record is always kept, even if it alone is over budget. On disk add the small SQLite index and at
  most one partly acknowledged segment (``segment_size``, a 16th of the budget, 1–64 MiB).
- Marks: a producer can keep small named integers (``marks``) in the queue file, written in the same
  transaction as an append, so "everything up to here is queued" is durable exactly when the records are
  (the InfluxDB sink keeps the last historian reading it queued, to re-queue what a crash lost).
- Quarantine: a payload a receiver rejected as malformed can be moved to a side table with the reason, so it
  neither blocks the queue nor vanishes. The quarantine is bounded (``quarantine_max`` rows, oldest dropped).

Storage: an SQLite index (WAL, ``synchronous=NORMAL``) of records; payloads under ``INLINE_MAX`` bytes live in
it, larger ones in append-only segment files beside it (`monitor.stores.outbox_segments`: ~10x less CPU per
byte than SQLite blobs). A committed append survives a crash or SIGKILL of the process; after a power loss the
last transactions (up to one WAL checkpoint) may be lost, but the index stays consistent, and a record whose
segment bytes did not reach the disk is counted in ``lost_items`` and skipped, never sent as garbage. That
trade-off (no fsync per append) buys an order of magnitude in throughput; the SQLite historian, not this
queue, is the record of evidence.

Thread safety: one connection guarded by a lock, so a producer thread and a consumer thread can share an
Outbox. A queue file belongs to one process at a time (an exclusive ``flock`` on ``<path>.lock``): a second
daemon pointed at the same file gets a clear `OutboxInUse` instead of interleaved deliveries.

Why one module of about 450 lines: one class over one SQLite index, one lock and one file lock, whose
operations (append, peek, ack, budget drops, marks, quarantine) each change the same tables in one
transaction; the segment files are apart (`monitor.stores.outbox_segments`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from monitor.stores.outbox_segments import SegmentStore

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
INLINE_MAX = 16 * 1024  # payloads at least this large go to segment files
_FREELIST_VACUUM_PAGES = 4096  # give index space back once ~16 MiB sit unused
_IN_CHUNK = 500  # ids per "IN (...)" statement

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    count INTEGER NOT NULL,
    size INTEGER NOT NULL,
    segment INTEGER,            -- NULL: the payload is inline
    offset INTEGER,
    payload BLOB
);
CREATE TABLE IF NOT EXISTS quarantine (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    count INTEGER NOT NULL,
    reason TEXT NOT NULL,
    payload BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS marks (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_TOTALS = ("dropped_records", "dropped_items", "quarantined_items", "lost_items")


class OutboxError(Exception):
    """The queue file cannot be used (newer schema, not a database, unwritable)."""


class OutboxInUse(OutboxError):
    """Another process holds this queue file."""


@dataclass(frozen=True, slots=True)
class Record:
    id: int
    created: float  # epoch seconds when queued
    count: int  # logical items in the payload
    payload: bytes


@dataclass(frozen=True, slots=True)
class Quarantined:
    id: int
    created: float  # when it was quarantined
    count: int
    reason: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """A consistent snapshot. ``dropped_*``, ``quarantined_items`` and ``lost_items`` are lifetime totals."""

    records: int
    items: int
    bytes: int
    budget_bytes: int
    oldest_created: float | None
    dropped_records: int
    dropped_items: int
    quarantined_items: int
    lost_items: int

    @property
    def fill_pct(self) -> float:
        return 100.0 * self.bytes / self.budget_bytes if self.budget_bytes else 0.0


class Outbox:
    """A FIFO of payload records in one SQLite index plus segment files. See the module docstring."""

    def __init__(self, *, path: Path, budget_bytes: int, quarantine_max: int = 10_000,
                 clock: Callable[[], float] = time.time) -> None:
        if budget_bytes <= 0:
            raise ValueError("budget_bytes must be positive")
        self.path = Path(path)
        self.budget_bytes = budget_bytes
        self.quarantine_max = quarantine_max
        self._clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lockfile = _acquire(self.path)
        try:
            self._db = _open(self.path)
            self._segments = SegmentStore(directory=self.path.with_name(self.path.name + ".segments"),
                                          max_size=min(64 << 20, max(1 << 20, budget_bytes // 16)))
            self._load_totals()
            self._segments.collect(set(self._refs))
        except BaseException:
            os.close(self._lockfile)
            raise
        self._closed = False

    def _load_totals(self) -> None:
        db = self._db
        row = db.execute(
            "SELECT count(*), coalesce(sum(count), 0), coalesce(sum(size), 0) FROM outbox").fetchone()
        self._records, self._items, self._bytes = int(row[0]), int(row[1]), int(row[2])
        self._oldest = self._first_created()
        self._refs: Counter[int] = Counter(dict(db.execute(
            "SELECT segment, count(*) FROM outbox WHERE segment IS NOT NULL GROUP BY segment").fetchall()))
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        self._totals = {k: int(meta.get(k, 0)) for k in _TOTALS}

    # -- producer side ---------------------------------------------------------------------------------
    def append(self, payload: bytes | str, *, count: int = 1) -> int:
        """Queue one record durably; returns its id."""
        return self.append_many([(payload, count)])[0]

    def append_many(self, items: Sequence[tuple[bytes | str, int]], *,
                    marks: Mapping[str, int] | None = None) -> list[int]:
        """Queue several records in one transaction (one commit: this is what makes batching cheap), and
        set ``marks`` (see `mark`) in the same transaction: both are durable, or neither."""
        if not items:
            if marks:
                self.set_marks(marks)
            return []
        rows = [(p.encode() if isinstance(p, str) else bytes(p), int(c)) for p, c in items]
        incoming = sum(len(p) for p, _ in rows)
        now = self._clock()
        with self._lock:
            self._check_open()
            big = [p for p, _ in rows if len(p) >= INLINE_MAX]
            places = iter(self._segments.append(big))  # bytes first: a committed row never points at nothing
            db, freed = self._db, Counter[int]()
            db.execute("BEGIN IMMEDIATE")
            try:
                if self._bytes + incoming > self.budget_bytes:
                    freed = self._drop_oldest(self._bytes + incoming - self.budget_bytes)
                ids, refs = [], Counter[int]()
                for p, c in rows:
                    seg, off = next(places) if len(p) >= INLINE_MAX else (None, None)
                    if seg is not None:
                        refs[seg] += 1
                    inline = p if seg is None else None
                    cur = db.execute("INSERT INTO outbox (created, count, size, segment, offset, payload) "
                                     "VALUES (?, ?, ?, ?, ?, ?)", (now, c, len(p), seg, off, inline))
                    ids.append(int(cur.lastrowid or 0))
                if marks:
                    _write_marks(db, marks)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                self._load_totals()  # a drop may have been rolled back with the insert
                raise
            self._refs.update(refs)
            self._release(freed)
            self._records += len(rows)
            self._items += sum(c for _, c in rows)
            self._bytes += incoming
            if self._oldest is None:
                self._oldest = now
        return ids

    def _drop_oldest(self, excess: int) -> Counter[int]:
        """Delete the oldest records until ``excess`` payload bytes are freed (inside the caller's
        transaction); counted in memory and in the meta table. Returns segment references to release."""
        freed = records = items = last_id = 0
        segs = Counter[int]()
        query = "SELECT id, count, size, segment FROM outbox ORDER BY id"
        for rid, count, size, seg in self._db.execute(query):
            if freed >= excess:
                break
            freed, records, items, last_id = freed + size, records + 1, items + count, rid
            if seg is not None:
                segs[seg] += 1
        if records:
            self._db.execute("DELETE FROM outbox WHERE id <= ?", (last_id,))
            self._add_totals(dropped_records=records, dropped_items=items)
            self._records, self._items, self._bytes = self._records - records, self._items - items, \
                self._bytes - freed
            self._oldest = self._first_created()
        return segs

    # -- consumer side ---------------------------------------------------------------------------------
    def peek(self, *, max_items: int, max_records: int = 100_000, after_id: int = 0) -> list[Record]:
        """The oldest records, in order, whose counts add up to at most ``max_items`` (but always at least
        one record if any is queued, so one oversized record cannot stall the queue)."""
        out: list[Record] = []
        lost: list[int] = []
        total = 0
        with self._lock:
            self._check_open()
            cur = self._db.execute(
                "SELECT id, created, count, size, segment, offset, payload FROM outbox WHERE id > ? "
                "ORDER BY id LIMIT ?", (after_id, max(1, min(max_records, max_items))))
            for rid, created, count, size, seg, off, payload in cur:
                if out and total + count > max_items:
                    break
                data = payload if seg is None else self._segments.read(seg, off, size)
                if data is None:
                    lost.append(rid)
                    continue
                out.append(Record(id=rid, created=created, count=count, payload=data))
                total += count
            cur.close()
            if lost:
                self._lose(lost)
        return out

    def ack(self, ids: Iterable[int]) -> int:
        """Remove acknowledged records; returns how many items left the queue."""
        with self._lock:
            self._check_open()
            return self._remove([int(i) for i in ids])

    def _remove(self, ids: list[int]) -> int:
        if not ids:
            return 0
        db = self._db
        records = items = size = 0
        segs = Counter[int]()
        db.execute("BEGIN IMMEDIATE")
        try:
            for i in range(0, len(ids), _IN_CHUNK):
                chunk = ids[i:i + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                for count, sz, seg in db.execute(
                        f"SELECT count, size, segment FROM outbox WHERE id IN ({marks})", chunk):
                    records, items, size = records + 1, items + count, size + sz
                    if seg is not None:
                        segs[seg] += 1
                db.execute(f"DELETE FROM outbox WHERE id IN ({marks})", chunk)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._records, self._items, self._bytes = self._records - records, self._items - items, \
            self._bytes - size
        self._oldest = self._first_created()
        self._release(segs)
        if self._records == 0:
            self._maybe_vacuum()
        return items

    def _lose(self, ids: list[int]) -> None:
        """Records whose segment bytes are missing (power loss): counted and removed, never sent."""
        before = self._items
        self._remove(ids)
        n = before - self._items
        self._db.execute("BEGIN IMMEDIATE")
        self._add_totals(lost_items=n)
        self._db.execute("COMMIT")
        log.error("outbox %s: %d queued items were lost from the segment files (power failure?); they are "
                  "skipped and counted (lost_items)", self.path, n)

    def quarantine(self, payload: bytes | str, *, reason: str, count: int = 1) -> None:
        """Keep a rejected payload aside with the receiver's reason (bounded; oldest dropped first)."""
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        with self._lock:
            self._check_open()
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT INTO quarantine (created, count, reason, payload) VALUES (?, ?, ?, ?)",
                           (self._clock(), count, reason, data))
                db.execute("DELETE FROM quarantine WHERE id <= (SELECT max(id) FROM quarantine) - ?",
                           (self.quarantine_max,))
                self._add_totals(quarantined_items=count)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                self._totals["quarantined_items"] -= count
                raise

    def quarantined(self, *, limit: int = 100) -> list[Quarantined]:
        """The most recent quarantined payloads, newest last."""
        with self._lock:
            self._check_open()
            rows = self._db.execute(
                "SELECT id, created, count, reason, payload FROM quarantine ORDER BY id DESC LIMIT ?",
                (limit,)).fetchall()
        return [Quarantined(id=r[0], created=r[1], count=r[2], reason=r[3], payload=r[4])
                for r in reversed(rows)]

    # -- marks -----------------------------------------------------------------------------------------
    def mark(self, key: str) -> int | None:
        """A producer's mark (see `append_many`), or None if it was never set."""
        with self._lock:
            self._check_open()
            row = self._db.execute("SELECT value FROM marks WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def set_marks(self, marks: Mapping[str, int]) -> None:
        """Set marks without appending anything (one transaction)."""
        with self._lock:
            self._check_open()
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                _write_marks(db, marks)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- state -----------------------------------------------------------------------------------------
    def last_id(self) -> int:
        """The id of the newest queued record, 0 when empty: a consumer's boundary between what was queued
        before a moment and after it (ids only grow)."""
        with self._lock:
            self._check_open()
            row = self._db.execute("SELECT max(id) FROM outbox").fetchone()
        return int(row[0] or 0)

    @property
    def depth(self) -> int:
        """Queued items (sum of record counts)."""
        return self._items

    def oldest_age(self, now: float | None = None) -> float:
        """Seconds since the oldest queued record was appended; 0 when empty."""
        oldest = self._oldest
        if oldest is None:
            return 0.0
        return max(0.0, (self._clock() if now is None else now) - oldest)

    def stats(self) -> OutboxStats:
        with self._lock:
            return OutboxStats(records=self._records, items=self._items, bytes=self._bytes,
                               budget_bytes=self.budget_bytes, oldest_created=self._oldest, **self._totals)

    def disk_bytes(self) -> int:
        """Bytes the queue occupies on disk now (index, WAL and segments)."""
        with self._lock:
            files = [self.path, self.path.with_name(self.path.name + "-wal")]
            return self._segments.disk_bytes() + sum(f.stat().st_size for f in files if f.exists())

    def close(self) -> None:
        """Close the files and release the process lock; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._segments.close()
                self._db.close()
            finally:
                os.close(self._lockfile)

    # -- helpers ---------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise OutboxError(f"outbox {self.path} is closed")

    def _first_created(self) -> float | None:
        row = self._db.execute("SELECT created FROM outbox ORDER BY id LIMIT 1").fetchone()
        return float(row[0]) if row else None

    def _release(self, segs: Counter[int]) -> None:
        if not segs:
            return
        self._refs.subtract(segs)
        empty = [s for s, n in self._refs.items() if n <= 0]
        for s in empty:
            del self._refs[s]
        self._segments.delete(empty)

    def _add_totals(self, **deltas: int) -> None:
        for k, v in deltas.items():
            self._totals[k] += v
        self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?) "
                             "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                             [(k, self._totals[k]) for k in deltas])

    def _maybe_vacuum(self) -> None:
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        if free >= _FREELIST_VACUUM_PAGES:
            self._db.execute("PRAGMA incremental_vacuum")


def _write_marks(db: sqlite3.Connection, marks: Mapping[str, int]) -> None:
    db.executemany("INSERT INTO marks (key, value) VALUES (?, ?) "
                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                   [(k, int(v)) for k, v in marks.items()])


def _acquire(path: Path) -> int:
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutboxInUse(f"queue file {path} is in use by another process") from None
    return fd


def _open(path: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            db.close()
            raise OutboxError(f"queue file {path} has schema version {version}, newer than this program's "
                              f"{SCHEMA_VERSION}: upgrade pretreat-monitor or point queue_path elsewhere")
        # auto_vacuum must be chosen before the first table exists; it is a no-op on an existing file.
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA journal_size_limit = 67108864")
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        raise OutboxError(f"cannot use queue file {path}: {exc}") from exc
    return db
