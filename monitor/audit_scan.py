"""The audit's native path: one channel's stored readings judged with the quiet ones stepped over in C.

`pretreat audit` (`monitor.audit`) replays every stored reading through the check engine. Nearly all of them are
quiet (`monitor.checks.engine.Processor`: good, inside the channel's quiet band, before its deadline, within
``max_gap`` of the previous one) and change nothing but the processor's last time and value and, while a slug
baseline minute accumulates, that minute's sum. The C extension `monitor.stores._quietscan` (setup.py) steps
through the rows with the SQLite C API, the GIL released, runs that same test on each and returns only at a row
that fails it; `feed_channel` judges that row with the engine's slow path and asks again with the new band. For
a channel with one historian id the test runs inside SQLite's scan, as the SQL function ``quiet()`` the
extension registers on its own connection (a quiet row then never leaves SQLite's virtual machine: ~1.4× faster
than stepping to each row); a channel recorded under several ids (its unit changed) is merged by SQLite's sort,
where a stateful function would see the rows out of order, so there the C loop tests each row it steps to.

Exactness: the test is the engine's, comparison for comparison, on the same doubles; the quiet values are added
to the slug minute's sum one by one in row order, as `SlugDetector.add_quiet` adds them, so the state after a
run of quiet readings is the engine's to the bit (tests/unit/test_audit.py compares the episodes with
the plain engine's over randomized records). Where the extension is not built, or the record is not an SQLite
file (the hub's PostgreSQL, an empty historian), `available`/`feed_channel` say so and the caller runs its
Python loop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from monitor.checks.engine import Processor
from monitor.sample import Quality
from monitor.stores.historian_db import QUALITY_CODES
from monitor.stores.seal_scan import file_uri

try:  # the C scanner (setup.py); absent where it could not be built
    from monitor.stores import _quietscan as _native
except ImportError:  # the install had no C compiler or headers
    _native = None  # type: ignore[assignment]

OVER_RANGE = QUALITY_CODES[Quality.OVER_RANGE]  # judged with its number, as `CheckEngine.process_many` does
_BUSY_MS = 30_000  # a writer's lock on the file is waited for this long (ms), as the seals' scanner does


def available() -> bool:
    """Whether the C scanner was built (setup.py: gcc, python3-dev and libsqlite3-dev at install)."""
    return _native is not None


def uri_of(conn: sqlite3.Connection) -> str | None:
    """The read-only URI of the historian file ``conn`` reads (None: no file, or not SQLite: no native path)."""
    if _native is None or not isinstance(conn, sqlite3.Connection):
        return None
    return file_uri(conn)


def rows_sql(n_ids: int) -> str:
    """(time, value, quality) of the readings of ``n_ids`` channel ids in [?, ?), in the order the engine
    judges them; the parameters are the ids, then the period's start and end."""
    return (f"SELECT time, value, quality FROM readings WHERE channel_id IN ({','.join('?' * n_ids)}) "
            "AND time >= ? AND time < ? ORDER BY time, seq")


# one id: the primary key's (time, seq) order, no sort, so ``quiet()`` sees the rows in the engine's order
_FILTERED = ("SELECT time, value, quality FROM readings WHERE channel_id = ? AND time >= ? AND time < ? "
             "AND NOT quiet(time, value, quality) ORDER BY time, seq")


def feed_channel(uri: str, p: Processor, ids: list[int], start: float, end: float, names: dict[int, str]) -> int:
    """Judge the readings of [start, end) of one channel (its historian ids ``ids``) with ``p``, the quiet ones
    in C; returns how many readings were judged. Raises `sqlite3.OperationalError` with SQLite's message when the
    file cannot be read."""
    assert _native is not None
    sql = _FILTERED if len(ids) == 1 else rows_sql(len(ids))
    try:
        scan = _native.Scanner(uri, sql, (*ids, float(start), float(end)), OVER_RANGE, _BUSY_MS)
    except _native.Error as exc:
        raise sqlite3.OperationalError(str(exc)) from None
    n = 0
    try:
        while True:
            acc = p.acc
            quiet, last, gv, total, row = scan.next(p.lo, p.hi, p.until, p.gap, p.last, p.gv,
                                                    acc.minute_sum if acc is not None else None)
            if quiet:
                n += quiet
                p.last, p.gv = last, gv
                if acc is not None and total is not None:
                    acc.quiet_run(total, quiet)
            if row is None:
                return n
            n += 1
            feed_rows(p, (row,), names)
    except _native.Error as exc:
        raise sqlite3.OperationalError(str(exc)) from None
    finally:
        scan.close()


def feed_rows(p: Processor, rows: Iterable[tuple[float, float | None, int]], names: dict[int, str]) -> int:
    """The Python path of `feed_channel` (every row handed to Python; the fallback where the C scanner cannot
    run, so `Processor.good` is called rather than inlined a third time); returns how many rows. The rows come
    in (time, seq) order, so none is refused as out of order."""
    n = 0
    for t, v, q in rows:
        n += 1
        if (q == 0 or q == OVER_RANGE) and v is not None:
            p.good(t, v)
        else:
            p.bad(t, names[q])
    return n


def judge(p: Processor, t: float, v: float | None, q: int, names: dict[int, str]) -> None:
    """One stored reading through ``p`` (the engine's quiet-band test, else its slow path)."""
    feed_rows(p, ((t, v, q),), names)
