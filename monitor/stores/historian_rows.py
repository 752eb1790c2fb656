"""A batch of samples as rows of the historian's ``readings`` table: the writer thread's hot path.

`insert_batch` is the fast path: where the C extension is built, `monitor.stores._rowflat.insert` inserts the
rows itself with the GIL released (see `native_insert`); otherwise rows grouped by channel, two row shapes,
multi-row INSERT statements (see `flatten` and `insert_many` for why each). `insert_one_by_one` is the slow path
after a sample that cannot be a row, which keeps the others and the bad one as text in ``rejected_samples``. All
run inside a transaction the writer (`monitor.stores.historian.Historian`) owns and commits.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import sys
import time
from itertools import chain
from operator import itemgetter
from typing import Any

from monitor.sample import GOOD, QUALITY_CODES, Sample

try:  # the row parameters built in C (setup.py); absent where it could not be built
    from monitor.stores import _rowflat as _native
except ImportError:  # the install had no C compiler or headers: `flatten` builds them in Python
    _native = None  # type: ignore[assignment]

log = logging.getLogger("monitor.stores.historian")  # the historian's own log, as before the split

Ids = dict[tuple[str, str, str], int]  # (site, channel, unit) -> channels.id
_COLUMNS = ("channel_id", "time", "seq", "value", "quality", "reason")
_ROW = "(" + ", ".join("?" * len(_COLUMNS)) + ")"
_FULL = (len(_COLUMNS), _ROW)  # a row shape for `insert_many`: parameters a row, its VALUES tuple
_PLAIN = (4, f"(?, ?, ?, ?, {QUALITY_CODES[GOOD]}, '')")  # a good reading without a reason
_CHANNEL = itemgetter(0)  # a row's channel id
_INSERT = f"INSERT INTO readings ({', '.join(_COLUMNS)}) VALUES {_ROW}"
_CHUNK_ROWS = 4096  # rows per INSERT statement (24,576 parameters; SQLite >= 3.32 allows 32,766)
# Errors about the data in one row (retrying cannot help); every other sqlite3.Error is about the file.
DATA_ERRORS = (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError, sqlite3.DataError,
                OverflowError, TypeError, ValueError, AttributeError, KeyError)


def insert_batch(conn: sqlite3.Connection, ids: Ids, batch: list[Sample], seq: int) -> tuple[Ids, float | None]:
    """Insert `batch` as rows (seq numbers from ``seq``, in submission order) in the current transaction.
    New channels are registered on a copy of the id map, which is returned (kept only if the transaction
    commits), with the batch's earliest time where the C path found it on the way (None: not computed).
    Raises one of `DATA_ERRORS` when a sample cannot be a row: `insert_one_by_one` then."""
    if native_insert(conn):
        conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)  # Python's checks: the connection open, this thread's
        try:
            earliest = _native.insert(conn, ids, batch, seq, GOOD, QUALITY_CODES)
        except KeyError:
            ids = _registered(conn, ids, batch)
            earliest = _native.insert(conn, ids, batch, seq, GOOD, QUALITY_CODES)
        if earliest is not None:
            return ids, earliest
    try:
        plain, full = flatten(ids, batch, seq)
    except KeyError:
        ids = _registered(conn, ids, batch)
        plain, full = flatten(ids, batch, seq)
    insert_many(conn, plain, _PLAIN)
    insert_many(conn, full, _FULL)
    return ids, None


def _registered(conn: sqlite3.Connection, ids: Ids, batch: list[Sample]) -> Ids:
    """A copy of ``ids`` with every channel of ``batch`` registered."""
    ids = dict(ids)
    for key in dict.fromkeys((s.site, s.channel, s.unit) for s in batch):
        if key not in ids:
            ids[key] = register(conn, key)
    return ids


# The C insert reads the sqlite3 handle from Python's Connection object (see _rowflat.c): only on the CPython
# versions whose layout is known, and only once a connection's handle was seen to name the connection's own file.
NATIVE_INSERT = _native is not None and (3, 8) <= sys.version_info[:2] <= (3, 13)
_probed: bool | None = None  # None: not yet checked on a file-backed connection


def native_insert(conn: sqlite3.Connection) -> bool:
    """Whether `insert_batch` inserts through `_rowflat.insert`: the extension is built, bound to the SQLite
    Python's sqlite3 module loaded, and the handle it reads from a connection names that connection's file
    (checked once, on the first connection to a file; the checks' outcome is then kept for the process)."""
    global _probed
    if not NATIVE_INSERT:
        return False
    if _probed is None:
        files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
        if not files or not files[0]:
            return False  # an in-memory or temporary database: nothing to compare the handle with yet
        _probed = _native.probe(conn) == files[0]
        if not _probed:
            log.warning("historian: the C insert path is off (the sqlite3 connection's handle did not name its "
                        "file); rows are inserted through Python's sqlite3 module")
    return _probed


def insert_one_by_one(conn: sqlite3.Connection, ids: Ids, batch: list[Sample], seq: int) -> tuple[Ids, int, int]:
    """Slow path after a data error: insert each sample alone; keep the ones that fail as text.

    A failed INSERT rolls back only itself (SQLite statement rollback), so the good ones stay.
    File errors (sqlite3.OperationalError ...) still propagate and fail the whole batch. Returns the id map
    (a copy, with the channels registered), how many rows were written and how many samples rejected.
    """
    ids = dict(ids)
    written = rejected = 0
    received = time.time()
    for i, s in enumerate(batch):
        try:
            key = (s.site, s.channel, s.unit)
            if key not in ids:
                ids[key] = register(conn, key)
            row = (ids[key], s.time, seq + i, s.value, QUALITY_CODES[s.quality], s.reason)
            conn.execute(_INSERT, row)
            written += 1
        except DATA_ERRORS as exc:
            rejected += 1
            conn.execute("INSERT INTO rejected_samples (received, sample, error) VALUES (?, ?, ?)",
                         (received, safe_repr(s), f"{type(exc).__name__}: {exc}"))
            if rejected <= 10:
                log.error("historian: sample cannot be recorded as a reading (%s: %s); kept in "
                          "rejected_samples: %s", type(exc).__name__, exc, safe_repr(s))
    return ids, written, rejected


def flatten(ids: dict[tuple[str, str, str], int], batch: list[Sample], seq: int) -> tuple[list[Any], list[Any]]:
    """`flatten_py`'s result, built in C where the extension is built (`monitor.stores._rowflat`: the same lists,
    element for element, in a fifth of the time with the GIL held); in Python for a batch it leaves to Python."""
    if _native is not None and isinstance(batch, list | tuple) and type(seq) is int:
        got = _native.flatten(ids, batch, seq, GOOD, QUALITY_CODES)
        if got is not None:
            return got
    return flatten_py(ids, batch, seq)


def flatten_py(ids: dict[tuple[str, str, str], int], batch: list[Sample], seq: int) -> tuple[list[Any], list[Any]]:
    """The batch's rows grouped by channel, flattened: good readings without a reason as ``_PLAIN`` rows
    (channel, time, seq, value), every other sample as ``_FULL`` rows (all columns). Seq numbers follow
    submission order.

    Why grouped: readings are clustered by channel, so a batch interleaving 1,000 channels inserts all over the
    B-tree; grouped, consecutive rows land on the same leaf page, which halves SQLite's work per row (2.2
    instead of 3.1 µs of CPU with 1,000 channels) and that work runs without the GIL. Sorting on the channel
    alone (stable, so each channel's rows stay in submission order, which is time order for a polled channel)
    compares ints only. Why two shapes: nearly every row is a plain good reading, and binding four parameters
    instead of six (quality 0 and an empty reason are literals in its statement) takes a quarter less of the
    writer's time with the GIL held, which the event loop polling the instruments waits for."""
    plain = [(ids[(s.site, s.channel, s.unit)], s.time, n, s.value) for n, s in enumerate(batch, seq)
             if s.quality is GOOD and not s.reason]
    full: list[tuple[Any, ...]] = []
    if len(plain) < len(batch):
        codes = QUALITY_CODES
        full = [(ids[(s.site, s.channel, s.unit)], s.time, n, s.value, codes[s.quality], s.reason)
                for n, s in enumerate(batch, seq) if s.quality is not GOOD or s.reason]
        full.sort(key=_CHANNEL)
    plain.sort(key=_CHANNEL)
    return list(chain.from_iterable(plain)), list(chain.from_iterable(full))


def insert_many(conn: sqlite3.Connection, flat: list[Any], shape: tuple[int, str]) -> None:
    """Insert rows (each ``shape``'s values, flattened) with multi-row ``INSERT … VALUES (…), (…)`` statements
    of a power-of-two number of rows, at most ``_CHUNK_ROWS`` each.

    Why not ``executemany``: Python's sqlite3 releases the GIL around every ``sqlite3_step``, which for
    ``executemany`` is once per row. While the event loop is busy (polling flat out), taking the GIL back waits
    up to the interpreter's switch interval (5 ms) each time, and the writer managed only a few thousand rows
    a second, falling ever further behind (bench/bench_polling.py). One statement of thousands of rows is one
    step: the B-tree work runs without the GIL, on the other core, and the writer takes the GIL back a few
    times per transaction instead of once per row. The power-of-two sizes keep the number of distinct
    statements small (at most ~13 a shape), so they stay in the connection's statement cache.
    """
    per_row, row = shape
    limit = min(_CHUNK_ROWS, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // per_row)
    rows = len(flat) // per_row
    i = 0
    while i < rows:
        n = 1 << min(rows - i, limit).bit_length() - 1  # the largest power of two that fits
        conn.execute(_insert_sql(n, row), flat[i * per_row:(i + n) * per_row])
        i += n


@functools.cache
def _insert_sql(rows: int, row: str) -> str:
    return f"INSERT INTO readings ({', '.join(_COLUMNS)}) VALUES " + ", ".join([row] * rows)


def register(conn: sqlite3.Connection, key: tuple[str, str, str]) -> int:
    conn.execute("INSERT OR IGNORE INTO channels (site, channel, unit) VALUES (?, ?, ?)", key)
    row = conn.execute("SELECT id FROM channels WHERE site = ? AND channel = ? AND unit = ?", key).fetchone()
    return int(row[0])


def safe_repr(obj: object) -> str:
    try:
        return repr(obj)[:4000]
    except Exception as exc:  # a broken __repr__ must not block the queue either
        return f"<{type(obj).__name__}: repr failed: {exc!r}>"


if _native is not None:
    _native.bind(Sample)
    import _sqlite3

    _library = getattr(_sqlite3, "__file__", None)  # none where the module is built into the interpreter
    if NATIVE_INSERT and (_library is None or not _native.bind_sqlite(_library, sqlite3.Connection)):
        NATIVE_INSERT = False  # SQLite's functions are not visible in the library Python loaded
