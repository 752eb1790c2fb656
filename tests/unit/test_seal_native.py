"""The seals' C scanner (`monitor.stores._sealscan`) gives the bytes of the Python path (`minute_index` over
`read_day`), over randomized channel-days of a real historian file, and the pinned digests of
tests/unit/test_seal_format.py. Under CI=true the scanner must be built (a missing compiler or header in the
install is a failure there, not a silent fallback to the slow path)."""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from monitor.stores import seal_scan, seal_verify
from monitor.stores.historian_db import open_for_writing
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_scan import DAY, FORCE_PYTHON_ENV, MINUTE, day_index, digest_of, minute_index, read_day
from monitor.stores.seal_verify import verify_seals
from monitor.stores.seals import Sealer
from tests.seal_support import DAY0, pinned_rows
from tests.support import IN_CI

Row = tuple[float, int, float | None, int, str]
REASONS = ["", "", "", "COMM_FAILURE: no reply within 0.5 s", "Temperatur außerhalb ±5 °C", "pH 计 故障",
           "emoji 🚱 past the BMP", "a\x00NUL inside", "x" * 300]


def test_the_c_scanner_is_built_under_ci() -> None:
    if not IN_CI and seal_scan._native is None:
        pytest.skip("the C scanner is not built here (gcc, python3-dev, libsqlite3-dev at install)")
    assert seal_scan._native is not None, "monitor/stores/_sealscan.c was not built: see setup.py"
    assert seal_scan.scan_engine().startswith("C (_sealscan")


@pytest.fixture
def native() -> Any:
    if seal_scan._native is None:
        if IN_CI:
            pytest.fail("the C scanner is not built (see test_the_c_scanner_is_built_under_ci)")
        pytest.skip("the C scanner is not built here")
    return seal_scan._native


def _store(path: Path, days: dict[int, list[Row]]) -> None:
    """A historian file (the real schema: STRICT, WITHOUT ROWID) holding ``days`` channel id -> rows."""
    conn = open_for_writing(path, busy_timeout=5.0)
    try:
        with conn:
            for cid, rows in days.items():
                conn.execute("INSERT INTO channels (id, site, channel, unit) VALUES (?, 's', ?, 'pH')",
                             (cid, f"c{cid}"))
                conn.executemany("INSERT INTO readings (channel_id, time, seq, value, quality, reason) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", [(cid, *r) for r in rows])
    finally:
        conn.close()


def _random_day(rnd: random.Random, day: float, first_seq: int) -> list[Row]:
    """Readings over a few minutes of ``day`` (and a few just outside it): several at one time, NULL values
    of bad readings, ±inf, -0.0, tiny and huge values, every kind of reason."""
    rows: list[Row] = []
    seq = first_seq
    minutes = sorted(rnd.sample(range(-2, 1442), rnd.randint(1, 12)))
    for m in minutes:
        for _ in range(rnd.choice([1, 2, 3, 60, 61, 200])):
            t = day + m * MINUTE + rnd.choice([0.0, 59.999999, rnd.random() * 60, 30.5])
            bad = rnd.random() < 0.2
            value: float | None = None if bad and rnd.random() < 0.7 else rnd.choice(
                [rnd.uniform(-1e3, 1e3), math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 7.0])
            rows.append((t, seq, value, rnd.choice([1, 2, 5, 8, 9, 10]) if bad else 0, rnd.choice(REASONS)))
            seq += rnd.randint(1, 3)
    return rows


def _both(native: Any, conn: sqlite3.Connection, cid: int, day: float, seq_max: int
          ) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    """(count, index) from the C scanner itself (never its fallback) and from the Python path."""
    c = native.scan_day(seal_scan.file_uri(conn), seal_scan.READINGS_SQL, cid, day, day + DAY, seq_max, 5000)
    assert c is not None, "the C scanner declined rows the store holds"
    rows = read_day(conn, cid, day, seq_max)
    return c, (len(rows), minute_index(rows, day))


@pytest.mark.parametrize("seed", range(6))
def test_randomized_days_give_the_same_index_in_c_and_python(native: Any, tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    days = {cid: _random_day(rnd, DAY0, 1 + cid * 100_000) for cid in range(1, 7)}
    path = tmp_path / "h.sqlite"
    _store(path, days)
    conn = connect_readonly(path)
    try:
        for cid, rows in days.items():
            seqs = sorted(r[1] for r in rows)
            for seq_max in (2**62, seqs[len(seqs) // 2], seqs[0] - 1):  # all, cut in the middle, none
                # SQLite keeps a whole-valued REAL as an integer: -0.0 reads back as 0.0
                wanted = [(t, q, 0.0 if v == 0 else v, k, r) for t, q, v, k, r in rows
                          if DAY0 <= t < DAY0 + DAY and q <= seq_max]
                c, py = _both(native, conn, cid, DAY0, seq_max)
                assert c[0] == py[0] == len(wanted)
                assert c[1] == py[1], (seed, cid, seq_max)
                assert py[1] == minute_index(sorted(wanted, key=lambda r: (r[0], r[1])), DAY0)
        assert _both(native, conn, 99, DAY0, 2**62) == ((0, b""), (0, b""))  # no such channel
        assert _both(native, conn, 1, DAY0 + 10 * DAY, 2**62) == ((0, b""), (0, b""))  # a day without rows
    finally:
        conn.close()


def test_c_gives_the_pinned_digests_of_the_format(native: Any, tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    _store(path, {1: pinned_rows(), 2: [(DAY0 + i * MINUTE / 4, 100 + i, 7.0 + i / 100, 0, "") for i in range(10)]})
    conn = connect_readonly(path)
    try:
        assert seal_scan.native_available()
        count, index = day_index(conn, 1, DAY0, 2**62)
        assert count == 7
        assert digest_of(index) == "4a2b443c3a7e106cad6985de2a8f5ae35375ab75b5ab47f79ce5fee99f6c51e8"
        assert digest_of(day_index(conn, 2, DAY0, 2**62)[1]) == \
            "61cb2d1a0dbf3d148a1d6f18bcd90787b1bed76594901766b5fa3f768508a016"
    finally:
        conn.close()


@pytest.mark.parametrize("portable", [True, False])
def test_both_sha256_implementations_match_hashlib(native: Any, portable: bool) -> None:
    import hashlib

    impl = native.use_portable(portable)
    try:
        assert impl == "portable C" or (not portable and impl == "SHA-NI")
        rnd = random.Random(7)
        for n in [*range(0, 130), 1000, 4096, 65_537]:
            data = rnd.randbytes(n)
            assert native.sha256(data) == hashlib.sha256(data).digest(), n
    finally:
        native.use_portable(False)


def test_a_lone_surrogate_cannot_be_stored(tmp_path: Path) -> None:
    """Why the surrogate case is not among the randomized days: Python's sqlite3 cannot write one."""
    with pytest.raises(UnicodeEncodeError):
        _store(tmp_path / "h.sqlite", {1: [(DAY0, 1, 7.0, 0, "bad \udc80")]})


def test_invalid_utf8_in_a_reason_is_left_to_the_python_path(native: Any, tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (an encoded surrogate, written past Python with CAST(X'…' AS TEXT)): the C
    scanner declines the day and the Python path reports it as it always did (SQLite's decode error)."""
    path = tmp_path / "h.sqlite"
    _store(path, {1: [(DAY0, 1, 7.0, 0, "")]})
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO readings VALUES (1, ?, 2, 7.0, 0, CAST(X'41EDA080' AS TEXT))", (DAY0 + 1,))
    conn.close()
    uri = f"{path.resolve().as_uri()}?mode=ro"
    assert native.scan_day(uri, seal_scan.READINGS_SQL, 1, DAY0, DAY0 + DAY, 2**62, 1000) is None
    conn = connect_readonly(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="decode"):
            day_index(conn, 1, DAY0, 2**62)
        assert day_index(conn, 1, DAY0, 1) == (1, minute_index(read_day(conn, 1, DAY0, 1), DAY0))
    finally:
        conn.close()


def test_a_file_the_c_scanner_cannot_read_is_an_sqlite_error(native: Any, tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    _store(path, {1: [(DAY0, 1, 7.0, 0, "")]})
    conn = connect_readonly(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="unable to open"):
            day_index(conn, 1, DAY0, 2**62, f"{(tmp_path / 'gone.sqlite').as_uri()}?mode=ro")
    finally:
        conn.close()


@pytest.mark.parametrize("force_python", [False, True])
def test_sealing_and_verifying_say_which_path_ran(native: Any, tmp_path: Path, force_python: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if force_python:
        monkeypatch.setenv(FORCE_PYTHON_ENV, "1")
    monkeypatch.setattr(seal_verify, "_THREADS_FROM", 0)  # verify's threads even for these few readings
    rnd = random.Random(3)
    days = {cid: _random_day(rnd, DAY0, 1 + cid * 100_000) for cid in (1, 2, 3)}
    path = tmp_path / "h.sqlite"
    _store(path, days)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE historian_meta SET value = 10000000 WHERE key = 'next_seq'")
    conn.close()
    # two scanning threads on the C path (a process pool on the Python path: not started here, its spawn
    # leaves multiprocessing's resource tracker running)
    sealer = Sealer(path=path, workers=1, threads=2)
    expected = "Python" if force_python else "C (_sealscan"
    assert sealer.stats.engine.startswith(expected)  # in the health snapshot from the start
    assert sealer.run_once(now=DAY0 + 3 * DAY) >= 3
    assert sealer.stats.engine.startswith(expected)
    conn = connect_readonly(path)
    try:
        report = verify_seals(conn, path=path, jobs=1 if force_python else 2)
        assert report.ok, report.findings
        assert report.engine.startswith(expected)
        assert report.readings == sealer.stats.readings
    finally:
        conn.close()


def test_a_kept_scanner_gives_every_day_what_a_fresh_connection_gives(native: Any, tmp_path: Path) -> None:
    """One `Scanner` (the connection a scanning thread keeps for all its days) against `scan_day` (a
    connection per day), over randomized days in any order; each scan is its own read transaction, so rows
    committed between two scans are in the second; a declined day leaves the scanner usable."""
    rnd = random.Random(11)
    days = {cid: _random_day(rnd, DAY0, 1 + cid * 100_000) for cid in range(1, 7)}
    path = tmp_path / "h.sqlite"
    _store(path, days)
    uri = seal_scan.path_uri(path)
    scanner = native.Scanner(uri, seal_scan.READINGS_SQL, 5000)
    try:
        jobs = [(cid, day, seq_max) for cid in (*days, 99) for day in (DAY0 - DAY, DAY0, DAY0 + DAY)
                for seq_max in (2**62, 1 + cid * 100_000 + 50)]
        rnd.shuffle(jobs)
        for cid, day, seq_max in jobs:
            assert scanner.scan(cid, day, day + DAY, seq_max) == \
                native.scan_day(uri, seal_scan.READINGS_SQL, cid, day, day + DAY, seq_max, 5000), (cid, day)
        before = scanner.scan(1, DAY0, DAY0 + DAY, 2**62)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("INSERT INTO readings VALUES (1, ?, 9000000, 7.0, 0, '')", (DAY0 + 7 * MINUTE + 1,))
        assert scanner.scan(1, DAY0, DAY0 + DAY, 2**62)[0] == before[0] + 1
        with conn:
            conn.execute("INSERT INTO readings VALUES (2, ?, 9000001, 7.0, 0, CAST(X'41EDA080' AS TEXT))",
                         (DAY0 + 1,))
        conn.close()
        assert scanner.scan(2, DAY0, DAY0 + DAY, 2**62) is None  # not UTF-8: the Python path's day
        assert scanner.scan(1, DAY0, DAY0 + DAY, 2**62)[0] == before[0] + 1
    finally:
        scanner.close()
    scanner.close()  # again: nothing
    with pytest.raises(RuntimeError, match="closed"):
        scanner.scan(1, DAY0, DAY0 + DAY, 2**62)
    with pytest.raises(native.Error, match="unable to open"):
        native.Scanner(seal_scan.path_uri(tmp_path / "gone.sqlite"), seal_scan.READINGS_SQL, 1000)


def test_a_day_reader_sends_only_a_declined_day_to_the_python_path(native: Any, tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    _store(path, {1: [(DAY0, 1, 7.0, 0, "")], 2: [(DAY0 + 5, 2, 7.5, 0, "")]})
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO readings VALUES (2, ?, 3, 7.0, 0, CAST(X'41EDA080' AS TEXT))", (DAY0 + 1,))
    conn.close()
    with seal_scan.DayReader(seal_scan.path_uri(path)) as reader:
        assert reader.index(1, DAY0, 2**62) == day_index(connect_readonly(path), 1, DAY0, 2**62)
        with pytest.raises(sqlite3.OperationalError, match="decode"):  # as `day_index` reports it
            reader.index(2, DAY0, 2**62)
        assert reader.index(2, DAY0, 2) == (1, minute_index([(DAY0 + 5, 2, 7.5, 0, "")], DAY0))
    with seal_scan.DayReader(None, connect_readonly(path)) as reader:  # no file URI: the Python path alone
        assert reader.index(1, DAY0, 2**62) == (1, minute_index([(DAY0, 1, 7.0, 0, "")], DAY0))
