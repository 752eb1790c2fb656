"""The minute index of one channel-day of readings (the format: `monitor.stores.seals`), and the two paths
that compute it.

Where the index is computed: by the C extension `monitor.stores._sealscan` where it is built (setup.py; it
needs gcc, the Python and SQLite headers at install): a `DayReader` keeps one read-only connection (SQLite C API)
with `READINGS_SQL` prepared, and each channel-day is one call returning the count and the index, the GIL released
meanwhile: ~0.4 µs of CPU a reading on this project's VM (most of it SQLite stepping through the rows) against
~3.6 µs for rows handed to Python (figures of one machine: the README's Benchmarks). Otherwise
(not built, ``PRETREAT_SEALS_PYTHON=1``, or a row the C code would not read as Python does) `minute_index` over
the rows: the same bytes, slower. `scan_engine` names the path (the health snapshot's seal stats, `pretreat
journal verify`'s summary). See the README (Seals, Benchmarks) for the figures of both.
"""

from __future__ import annotations

import bisect
import hashlib
import operator
import os
import sqlite3
import struct
import sys
from array import array
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

try:  # the C scanner (setup.py); absent where it could not be built
    from monitor.stores import _sealscan as _native
except ImportError:  # the install had no C compiler or headers
    _native = None  # type: ignore[assignment]

DAY = 86_400.0
MINUTE = 60.0
_BUCKET = struct.Struct("<HI16s")
_BIG = sys.byteorder == "big"
READINGS_SQL = ("SELECT time, seq, value, quality, reason FROM readings "
                "WHERE channel_id = ? AND time >= ? AND time < ? AND seq <= ? ORDER BY time, seq")


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


def parse_index(blob: bytes) -> dict[int, tuple[int, bytes]]:
    """minute -> (count, digest) from a minute index."""
    return {m: (c, d) for m, c, d in _BUCKET.iter_unpack(blob)}


def read_day(conn: sqlite3.Connection, channel_id: int, day_start: float, seq_max: int) -> list[Any]:
    return conn.execute(READINGS_SQL, (channel_id, day_start, day_start + DAY, seq_max)).fetchall()


def digest_of(index: bytes) -> str:
    return hashlib.sha256(index).hexdigest()


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
            return path_uri(file)
    return None


def path_uri(path: Path | str) -> str:
    """The read-only URI of the file at ``path`` (resolved: a reader never creates a missing file)."""
    return f"{Path(path).resolve().as_uri()}?mode=ro"


def day_index(conn: sqlite3.Connection, channel_id: int, day_start: float, seq_max: int,
              uri: str | None = None, *, busy_timeout: float = 30.0) -> tuple[int, bytes]:
    """(count, minute index) of one channel-day: in C over ``uri`` (default: the file ``conn`` has open)
    where `native_available`, else (or when the C scanner declines a row it would read differently from
    Python) `read_day` and `minute_index` on ``conn``. Same bytes either way (tests/unit/test_seal_native.py).
    The C path reads through its own read-only connection, committed rows only, like ``conn`` outside a
    transaction; a file it cannot read raises `sqlite3.OperationalError` with SQLite's message."""
    with DayReader(uri or file_uri(conn), conn, busy_timeout=busy_timeout) as reader:
        return reader.index(channel_id, day_start, seq_max)



class DayReader:
    """Reads the minute indexes of many channel-days of one file through one kept connection (`day_index`'s
    result for each), for one thread at a time.

    Why kept: a C scanner per channel-day opened a connection and filled a fresh page cache each time, every
    page through SQLite's allocator and its process-wide memory mutex (see `_sealscan.c`, the Scanner), so two
    scanning threads waited on each other. ``conn`` (opened on first need when not given, closed by `close`
    then) is the Python path's: where the C scanner is not built, is switched off, or declines a day; with no
    ``uri`` (an in-memory database: `file_uri` gave None) it is the only path."""

    def __init__(self, uri: str | None, conn: sqlite3.Connection | None = None, *,
                 busy_timeout: float = 30.0) -> None:
        self.uri = uri
        self.busy_timeout = busy_timeout
        self._conn, self._own_conn = conn, conn is None
        self._scanner: Any = None

    def index(self, channel_id: int, day_start: float, seq_max: int) -> tuple[int, bytes]:
        if native_available() and self.uri is not None:
            assert _native is not None
            try:
                if self._scanner is None:
                    self._scanner = _native.Scanner(self.uri, READINGS_SQL, int(self.busy_timeout * 1000))
                done = self._scanner.scan(channel_id, day_start, day_start + DAY, seq_max)
            except _native.Error as exc:
                raise sqlite3.OperationalError(str(exc)) from None
            if done is not None:
                return int(done[0]), bytes(done[1])
        if self._conn is None:
            assert self.uri is not None
            # closed by whichever thread calls `close` (the sealer's, after its scanning threads)
            self._conn = sqlite3.connect(self.uri, uri=True, timeout=self.busy_timeout, check_same_thread=False)
        rows = read_day(self._conn, channel_id, day_start, seq_max)
        return len(rows), minute_index(rows, day_start)

    def close(self) -> None:
        if self._scanner is not None:
            self._scanner.close()
            self._scanner = None
        if self._own_conn and self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> DayReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
