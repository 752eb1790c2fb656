"""The historian's rows with and without their C path (`monitor.stores._rowflat`): the same two lists of row
parameters, element for element, for any batch (good and bad samples, reasons, channels interleaved, seq numbers of
any size), the same rows in the file where the C path inserts them itself, the same KeyError for a channel not
registered yet and the same exceptions from SQLite, and Python's own result for what the C path leaves to it.
Where the extension was not built (no C compiler at install) there is nothing to compare; in CI it must be."""

from __future__ import annotations

import gc
import math
import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.sample import GOOD, QUALITY_CODES, Quality, Sample
from monitor.stores import historian_rows
from monitor.stores.historian_db import open_for_writing
from monitor.stores.historian_rows import _FULL, _PLAIN, flatten, flatten_py, insert_many, register
from tests.support import IN_CI

KEYS = [("s", f"c{n}", "u") for n in range(12)]


@pytest.fixture
def native() -> Any:
    if historian_rows._native is None:
        assert not IN_CI, "monitor/stores/_rowflat.c was not built: see setup.py"
        pytest.skip("monitor.stores._rowflat not built")
    return historian_rows._native


def _batch(rnd: random.Random, n: int) -> list[Sample]:
    out = []
    for i in range(n):
        site, channel, unit = rnd.choice(KEYS)
        r = rnd.random()
        if r < 0.7:
            out.append(Sample(1e9 + i * 0.5, site, channel, rnd.uniform(-5, 5), unit))
        elif r < 0.8:
            out.append(Sample(1e9 + i, site, channel, rnd.randint(0, 9), unit, GOOD, "estimated"))
        else:
            q = rnd.choice([q for q in Quality if q is not GOOD])
            out.append(Sample(1e9 + i, site, channel, None, unit, q, f"why {i}"))
    return out


def _same(a: tuple[list[Any], list[Any]], b: tuple[list[Any], list[Any]]) -> None:
    assert [type(x) for x in a[0]] == [type(x) for x in b[0]] and [type(x) for x in a[1]] == [type(x) for x in b[1]]
    assert a == b


@pytest.mark.parametrize("seed", range(6))
def test_the_c_path_builds_the_rows_python_builds(native: Any, seed: int) -> None:
    rnd = random.Random(seed)
    ids = {k: rnd.randint(1, 40) for k in KEYS}  # ids out of the keys' order: the sort is on the id
    for n in (0, 1, 2, 7, 100, 1000):
        batch = _batch(rnd, n)
        for seq in (1, 12_345, 2**62):
            for form in (batch, tuple(batch)):
                got = native.flatten(ids, form, seq, GOOD, QUALITY_CODES)
                assert got is not None
                _same(got, flatten_py(ids, batch, seq))
                _same(flatten(ids, form, seq), flatten_py(ids, batch, seq))


def test_an_unregistered_channel_is_a_key_error_as_in_python(native: Any) -> None:
    ids = {KEYS[0]: 1}
    batch = [Sample(1.0, *KEYS[0][:2], 1.0, "u"), Sample(2.0, "s", "new", 1.0, "u")]
    with pytest.raises(KeyError) as c_err:
        native.flatten(ids, batch, 1, GOOD, QUALITY_CODES)
    with pytest.raises(KeyError) as py_err:
        flatten_py(ids, batch, 1)
    assert c_err.value.args == py_err.value.args == (("s", "new", "u"),)


def test_what_the_c_path_leaves_to_python(native: Any) -> None:
    """Not a `Sample`, a reason that is not a str, seq numbers past 2**63: None, and `flatten` gives Python's."""
    ids = {k: n for n, k in enumerate(KEYS)}
    good = Sample(1.0, "s", "c1", 2.0, "u")

    class Odd:  # something a plugin might submit: has the fields, is not a Sample
        time, site, channel, value, unit, quality, reason = 1.0, "s", "c2", 3.0, "u", GOOD, ""

    odd_reason = Sample(1.0, "s", "c3", 2.0, "u", GOOD, "")
    object.__setattr__(odd_reason, "reason", 0)  # falsy, not a str: Python's `not s.reason` decides

    class Site(str):  # its hash and equality would be Python code, run in the middle of the C walk
        pass

    odd_site = Sample(1.0, Site("s"), "c4", 2.0, "u")
    for batch, seq in (([good, Odd()], 1), ([good, odd_reason], 1), ([good], 2**63 - 1), ([good, odd_site], 1)):
        assert native.flatten(ids, batch, seq, GOOD, QUALITY_CODES) is None
        _same(flatten(ids, batch, seq), flatten_py(ids, batch, seq))  # type: ignore[arg-type]


def test_a_quality_whose_hash_runs_python_is_left_to_python(native: Any) -> None:
    """A quality given as a str subclass with a ``__hash__`` of its own (Python code, which could change the batch
    in the middle of the C walk; here it also fails when asked twice): the C path leaves the batch to Python, which
    looks its code up once (the C path crashed on a second look-up, once)."""

    class Once(str):
        asked = 0

        def __hash__(self) -> int:
            Once.asked += 1
            if Once.asked > 1:
                raise RuntimeError("hashed twice")
            return str.__hash__(self)

    ids = {k: n for n, k in enumerate(KEYS)}
    stale = Sample(1.0, "s", "c1", None, "u", Quality.STALE, "silent")
    object.__setattr__(stale, "quality", Once(Quality.STALE.value))
    assert native.flatten(ids, [stale], 1, GOOD, QUALITY_CODES) is None and Once.asked == 0
    assert flatten(ids, [stale], 1) == ([], [1, 1.0, 1, None, QUALITY_CODES[Quality.STALE], "silent"])


def test_a_channel_key_comparing_in_python_cannot_free_what_the_c_paths_read(native: Any, tmp_path: Path) -> None:
    """A channel registered from a str subclass compares with its own ``__eq__`` in the C paths' look-up: Python
    code in the middle of their walk. Here it empties the batch and rebinds a sample's reason; both paths keep what
    they read (the batch, the reason), so the rows are the batch as it was when called (it crashed before)."""
    batch: list[Sample] = []

    class Site(str):
        def __hash__(self) -> int:
            return str.__hash__(self)

        def __eq__(self, other: object) -> bool:
            if batch:
                object.__setattr__(batch[0], "reason", "rebound")
                batch.clear()
            return str.__eq__(self, other)

    conn = open_for_writing(tmp_path / "h.sqlite", busy_timeout=1.0)
    try:
        ids = {(Site("s"), "c", "u"): register(conn, ("s", "c", "u"))}
        made = [Sample(1.0 + i, "s", "c", 1.0, "u", GOOD, "kept" * 1000) for i in range(2_000)]
        batch.extend(made)
        plain, full = native.flatten(ids, batch, 1, GOOD, QUALITY_CODES)
        assert len(full) == 6 * 2_000 and plain == []
        if historian_rows.NATIVE_INSERT:
            batch.extend(made)
            object.__setattr__(made[0], "reason", "kept" * 1000)
            conn.execute("BEGIN IMMEDIATE")
            assert native.insert(conn, ids, batch, 1, GOOD, QUALITY_CODES) == 1.0
            reasons = [r for (r,) in conn.execute("SELECT reason FROM readings ORDER BY seq")]
            assert len(reasons) == 2_000 and reasons[0] == "kept" * 1000
    finally:
        conn.close()


# -- the rows inserted in C, the GIL released (`_rowflat.insert`) ---------------------------------------------


@pytest.fixture
def files(native: Any, tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """Two historian files, each in an open write transaction, their channels registered alike."""
    if not historian_rows.NATIVE_INSERT:
        assert not IN_CI, "the C insert path is off on this Python (see historian_rows.NATIVE_INSERT)"
        pytest.skip("the C insert path is off on this Python")
    conns = [open_for_writing(tmp_path / f"{name}.sqlite", busy_timeout=1.0) for name in ("c", "py")]
    for conn in conns:
        conn.execute("BEGIN IMMEDIATE")
    yield conns[0], conns[1]
    for conn in conns:
        conn.close()


def _ids(conn: sqlite3.Connection) -> dict[tuple[str, str, str], int]:
    return {k: register(conn, k) for k in reversed(KEYS)}  # ids in another order than the keys'


def _rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT channel_id, time, seq, value, typeof(value), quality, reason FROM readings "
                        "ORDER BY channel_id, time, seq").fetchall()


@pytest.mark.parametrize("seed", range(4))
def test_the_c_insert_writes_the_rows_python_writes(native: Any, files: Any, seed: int) -> None:
    """Any batch (plain readings, integers, reasons of any script, bad samples): the same rows, value types
    included, as Python's multi-row statements write, and Python's ``min`` of the times for the arrivals ring."""
    c, py = files
    ids = _ids(c)
    assert _ids(py) == ids
    rnd = random.Random(seed)
    seq = 1
    for n in (0, 1, 7, 1000, 5000):
        batch = _batch(rnd, n)
        if n:
            batch[rnd.randrange(n)] = Sample(9e8, "s", "c1", None, "u", Quality.COMM_FAILURE, "Zeitüberschreitung ✗")
        earliest = native.insert(c, ids, batch, seq, GOOD, QUALITY_CODES)
        assert earliest == (min(s.time for s in batch) if batch else math.inf)
        plain, full = flatten_py(ids, batch, seq)
        insert_many(py, plain, _PLAIN)
        insert_many(py, full, _FULL)
        seq += n
    assert _rows(c) == _rows(py) and len(_rows(c)) == 6008


def test_the_c_insert_raises_what_pythons_sqlite3_raises(native: Any, files: Any) -> None:
    """A time that is NaN (NULL to SQLite) and a good reading without a value break the table's constraints:
    IntegrityError with SQLite's message, as Python's statements raise it (the writer then retries row by row);
    the transaction stays open for the writer to roll back. A channel not registered: KeyError, nothing written."""
    c, py = files
    ids = _ids(c)
    _ids(py)
    for bad, words in ((Sample(math.nan, "s", "c1", 1.0, "u"), "NOT NULL"),
                       (Sample(5.0, "s", "c1", None, "u"), "CHECK")):
        batch = [Sample(1.0, "s", "c0", 1.0, "u"), bad]
        with pytest.raises(sqlite3.IntegrityError, match=words) as c_err:
            native.insert(c, ids, batch, 1, GOOD, QUALITY_CODES)
        plain, full = flatten_py(ids, batch, 1)
        with pytest.raises(sqlite3.IntegrityError) as py_err:
            insert_many(py, plain, _PLAIN)
            insert_many(py, full, _FULL)
        assert type(c_err.value) is type(py_err.value) and str(c_err.value) == str(py_err.value)
        assert c.in_transaction
        c.execute("ROLLBACK")
        c.execute("BEGIN IMMEDIATE")
    with pytest.raises(KeyError) as key_err:
        native.insert(c, ids, [Sample(1.0, "s", "c0", 1.0, "u"), Sample(2.0, "s", "new", 1.0, "u")], 1, GOOD,
                      QUALITY_CODES)
    assert key_err.value.args == (("s", "new", "u"),) and _rows(c) == []


def test_a_file_error_in_the_c_insert_is_an_operational_error(native: Any, tmp_path: Path) -> None:
    """SQLite refusing the write (here: a read-only connection) is OperationalError, the exception the writer
    treats as the file's problem (kept and retried), not the data's."""
    if not historian_rows.NATIVE_INSERT:
        pytest.skip("the C insert path is off on this Python")
    path = tmp_path / "h.sqlite"
    conn = open_for_writing(path, busy_timeout=1.0)
    ids = {("s", "c0", "u"): register(conn, ("s", "c0", "u"))}
    conn.close()
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        ro.execute("BEGIN")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            native.insert(ro, ids, [Sample(1.0, "s", "c0", 1.0, "u")], 1, GOOD, QUALITY_CODES)
    finally:
        ro.close()


def test_what_the_c_insert_leaves_to_python(native: Any, files: Any) -> None:
    """None, with nothing written, where Python's sqlite3 module must decide (it converts or raises): a time that
    is an int, a value that is a bool or past 64 bits, a reason it cannot encode, a quality without a code,
    something not a `Sample`; and where no transaction is open or the connection is not exactly a Connection."""
    c, _ = files
    ids = _ids(c)

    def odd(field: str, value: object) -> Sample:
        s = Sample(1.0, "s", "c1", 2.0, "u", Quality.STALE, "why")
        object.__setattr__(s, field, value)
        return s

    good = Sample(1.0, "s", "c0", 1.0, "u")
    for other in (odd("time", 1), odd("value", True), odd("value", 2**70), odd("reason", "\udc80"),
                  odd("quality", "no such quality"), object()):
        assert native.insert(c, ids, [good, other], 1, GOOD, QUALITY_CODES) is None
    assert _rows(c) == []
    c.execute("COMMIT")
    assert native.insert(c, ids, [good], 1, GOOD, QUALITY_CODES) is None  # no transaction open

    class Conn(sqlite3.Connection):
        pass

    sub = sqlite3.connect(":memory:", factory=Conn)
    assert native.insert(sub, ids, [good], 1, GOOD, QUALITY_CODES) is None and native.probe(sub) is None
    sub.close()


def test_the_writer_inserts_in_c_after_checking_the_handle(native: Any, tmp_path: Path) -> None:
    """The handle read from a Connection names its own file (the layout check `native_insert` makes), and the
    historian's writer takes the C path on this Python; in CI it must."""
    if not historian_rows.NATIVE_INSERT:
        assert not IN_CI, "the C insert path is off on this Python (see historian_rows.NATIVE_INSERT)"
        pytest.skip("the C insert path is off on this Python")
    conn = open_for_writing(tmp_path / "h.sqlite", busy_timeout=1.0)
    try:
        assert native.probe(conn) == str(tmp_path / "h.sqlite")
        assert historian_rows.native_insert(conn)
    finally:
        conn.close()


def test_the_c_insert_runs_sqlite_with_the_gil_released_and_the_collector_on(native: Any, files: Any) -> None:
    """SQLite's work runs with the GIL released and the cyclic collector enabled: a Python function SQLite calls
    from a trigger on every row takes the GIL back (so it was free) and sees the collector on (the walk over the
    batch pauses it; a pause held across the insert would be every thread's, for the length of a commit)."""
    c, _ = files
    ids = _ids(c)
    seen: list[bool] = []
    c.create_function("collector_on", 0, lambda: seen.append(gc.isenabled()) or 0)
    c.execute("CREATE TEMP TRIGGER look AFTER INSERT ON readings BEGIN SELECT collector_on(); END")
    batch = [Sample(1.0 + i, "s", f"c{i % 3}", float(i), "u") for i in range(50)]
    assert native.insert(c, ids, batch, 1, GOOD, QUALITY_CODES) == 1.0
    assert seen == [True] * 50


def test_a_quality_that_hashes_in_python_is_left_to_python(native: Any, files: Any) -> None:
    """A quality whose hash is Python code could change the batch in the middle of the C walk: None, nothing
    written, and `insert_batch` writes what Python writes. A long message in a multi-byte script, cut by the C
    path, still reaches the caller as the sqlite3 exception, with SQLite's extended code."""
    c, _ = files
    ids = _ids(c)

    class Hashed(str):
        def __hash__(self) -> int:
            return str.__hash__(self)

    stale = Sample(1.0, "s", "c1", None, "u", Quality.STALE, "silent")
    object.__setattr__(stale, "quality", Hashed(Quality.STALE.value))
    assert native.insert(c, ids, [stale], 1, GOOD, QUALITY_CODES) is None and _rows(c) == []
    c.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON readings WHEN NEW.channel_id = "
              f"{ids[KEYS[2]]} BEGIN SELECT RAISE(ABORT, '{'é' * 400}'); END")
    with pytest.raises(sqlite3.IntegrityError) as err:
        native.insert(c, ids, [Sample(1.0, *KEYS[2][:2], 1.0, "u")], 1, GOOD, QUALITY_CODES)
    assert str(err.value).startswith("é" * 200) and err.value.sqlite_errorcode == 1811  # CONSTRAINT_TRIGGER


def test_the_writers_connection_is_used_from_its_own_thread_only(files: Any) -> None:
    """The C path keeps Python's own check: a connection used from another thread is refused, as Python's sqlite3
    refuses it, before anything is written."""
    c, _ = files
    ids = _ids(c)
    raised: list[BaseException] = []

    def other() -> None:
        try:
            historian_rows.insert_batch(c, ids, [Sample(1.0, "s", "c0", 1.0, "u")], 1)
        except BaseException as exc:  # the exception is what the test looks at
            raised.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert [type(e) for e in raised] == [sqlite3.ProgrammingError] and _rows(c) == []
