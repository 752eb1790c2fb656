"""Where the daemon's memory is: the resident set, SQLite's own allocations, and Python's objects.

Why split it: a daemon that runs for months must not grow, but two of its stores legitimately fill bounded
caches as their files grow (the historian's page cache, see `historian_db.open_for_writing`). RSS alone cannot
tell a cache filling up to its bound from a leak; SQLite's ``sqlite3_memory_used()`` (every connection's page
cache, schema and statements, process-wide) and Python's allocated-block count can. They are published in
the health snapshot and `bench/soak.py` reports each over time.

``sqlite3_memory_used`` is read through ctypes from the same ``libsqlite3`` that Python's ``_sqlite3`` module
is linked against (dlopen of an already-loaded soname returns that instance). Where ``_sqlite3`` embeds its
own SQLite (some builds link it statically), the figure would describe an unused copy, so it is reported only
when the library that ``_sqlite3`` loaded can be found in ``/proc/self/maps``.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
from collections.abc import Callable
from pathlib import Path


def rss_kib() -> int | None:
    """Resident set size now (KiB), from /proc (Linux); None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


@functools.cache
def _sqlite_memory_used() -> Callable[[], int] | None:
    import _sqlite3  # noqa: F401  (loads libsqlite3 if Python links it dynamically)

    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if "/libsqlite3.so" in line}
    if len(paths) != 1:
        return None
    try:
        lib = ctypes.CDLL(paths.pop())
    except OSError:
        return None
    fn = lib.sqlite3_memory_used
    fn.restype = ctypes.c_int64
    fn.argtypes = []
    return lambda: int(fn())


def sqlite_bytes() -> int | None:
    """Bytes SQLite has allocated in this process (page caches, schemas, statements), or None if unknown."""
    fn = _sqlite_memory_used()
    return fn() if fn is not None else None


# Collect the youngest generation after 10,000 net new container objects (CPython's default: 700), the middle
# one after 10 of those, the oldest after 10 of those (and only once it grew by a quarter, CPython's own rule).
# 50,000 was not measurably faster flat out (within run-to-run noise) and let ~60,000 blocks of garbage cycles
# pile up between passes in the soak (bench/soak.py): RSS +5.2 % after warm-up.
GC_THRESHOLDS: tuple[int, int, int] = (10_000, 10, 10)


def settle_gc() -> None:
    """Tune the cyclic garbage collector for the running daemon; call once, when start-up is done.

    Why: flat out the daemon makes ~100,000 samples a second and the historian holds each for up to a commit
    interval, so with CPython's defaults they survive into the oldest generation and set off a full collection
    several times a second: 50 ms each, scanning every object start-up made (the configuration, the modules),
    with the GIL held, so polling and the historian both stop. That was ~15 % of the event loop at 7,000
    polls/s (bench/bench_polling.py). `gc.freeze` moves what start-up made out of the collector's sight for
    good (it lives as long as the process), and the higher thresholds let short-lived samples die by reference
    counting before a collection looks at them. Garbage cycles (an exception and its traceback) are still
    collected, in fewer, larger passes (a pass of the youngest generation takes about a millisecond).
    """
    global _frozen
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    _frozen = gc.get_freeze_count()  # counted once: it walks every frozen object


_frozen = 0  # objects settle_gc set aside (0 until it runs)


def snapshot() -> dict[str, int | None]:
    """The health snapshot's ``memory`` section."""
    sq = sqlite_bytes()
    return {"rss_kib": rss_kib(), "sqlite_kib": None if sq is None else sq // 1024,
            "python_blocks": sys.getallocatedblocks(),
            # the collector's passes since start (all generations) and the objects `settle_gc` set aside
            "gc_collections": sum(g["collections"] for g in gc.get_stats()), "gc_frozen": _frozen}
