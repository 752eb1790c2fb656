"""The historian against a real SQLite file: what goes in comes out, exactly, whatever the disk does."""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from monitor.sample import Quality, Sample
from monitor.stores.historian import Historian, HistorianError, read_channels, read_readings
from monitor.stores.historian_db import SCHEMA_VERSION
from tests.support import PATIENCE, eventually

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
ROOT = Path(__file__).resolve().parents[2]


def good(t: float, value: float, channel: str = "ph", unit: str = "pH") -> Sample:
    return Sample(time=t, site="acme", channel=channel, value=value, unit=unit)


def bad(t: float, reason: str, quality: Quality = Quality.COMM_FAILURE, channel: str = "ph") -> Sample:
    return Sample.bad(time=t, site="acme", channel=channel, unit="pH", quality=quality, reason=reason)


@pytest.fixture
async def hist(tmp_path: Path) -> AsyncIterator[Historian]:
    h = Historian(path=tmp_path / "var" / "h.sqlite", commit_interval=0.05)
    await h.start()
    try:
        yield h
    finally:
        await h.close()


def raw_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM readings").fetchone()[0])


async def test_round_trip_good_and_bad_samples_exactly(hist: Historian) -> None:
    samples = [
        good(T0 + 0.1, 7.01),
        bad(T0 + 1.2, "ph-meter: no reply within 0.5 s"),
        good(T0 + 2.3, 0.1 + 0.2),  # a double whose shortest text is long: must come back bit-identical
        bad(T0 + 3.4, "exception code 2 (illegal address), reply 'x,\"y\"'", Quality.DEVICE_EXCEPTION),
        Sample(time=T0 + 4.5, site="acme", channel="ph", value=-1e-300, unit="pH"),
        bad(T0 + 5.6, "no good reading for 3 s", Quality.STALE),
    ]
    hist.submit(samples)
    await hist.flush()
    assert list(hist.query(site="acme", channel="ph")) == samples
    assert hist.channels() == [("acme", "ph", "pH")]
    c = hist.counters
    assert (c.samples_written, c.queue_depth, c.write_errors, c.samples_rejected) == (6, 0, 0, 0)
    assert c.batches >= 1


async def test_time_order_equal_times_in_arrival_order_and_half_open_bounds(hist: Historian) -> None:
    times = [T0 + s for s in (5, 1, 3, 0, 4, 2)]
    hist.submit([good(t, t - T0) for t in times])
    hist.submit([bad(T0 + 3, "second at 3"), good(T0 + 3, 33.0)])  # same time, later arrival
    await hist.flush()
    got = list(hist.query(site="acme", channel="ph"))
    assert [s.time - T0 for s in got] == [0, 1, 2, 3, 3, 3, 4, 5]
    assert [s.value for s in got if s.time == T0 + 3] == [3.0, None, 33.0]
    window = list(hist.query(site="acme", channel="ph", start=T0 + 1, end=T0 + 4))
    assert [s.time - T0 for s in window] == [1, 2, 3, 3, 3]  # start inclusive, end exclusive
    assert list(hist.query(site="acme", channel="ph", start=T0 + 4, end=T0 + 4)) == []
    assert list(hist.query(site="acme", channel="nope")) == []


async def test_close_flushes_and_data_is_visible_from_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    h = Historian(path=path, commit_interval=30.0)  # no timed commit would happen during this test
    await h.start()
    h.submit([good(T0 + i, float(i)) for i in range(100)])
    await h.flush()
    assert raw_count(path) == 100  # flush returned: committed, visible to a plain sqlite3 connection
    h.submit([good(T0 + 100 + i, float(i)) for i in range(50)])
    await h.close()
    assert raw_count(path) == 150
    await h.close()  # a second close is harmless
    with pytest.raises(HistorianError, match="closed"):
        h.submit([good(T0, 1.0)])
    assert not [t for t in threading.enumerate() if t.name == "historian-writer"]


async def test_readable_from_another_process_while_the_writer_runs(hist: Historian) -> None:
    hist.submit([good(T0 + i, i * 0.5) for i in range(1000)] + [bad(T0 + 1000, "timeout")])
    await hist.flush()
    code = ("import sys; from pathlib import Path; from monitor.stores.historian import read_readings; "
            "s = list(read_readings(Path(sys.argv[1]), site='acme', channel='ph', start=None, end=None)); "
            "print(len(s), s[1].value, s[1000].quality.value, s[1000].reason, sep='|')")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(hist.path), cwd=ROOT,
                                                stdout=subprocess.PIPE)
    hist.submit([good(T0 + 2000 + i, 1.0) for i in range(1000)])  # the writer keeps going meanwhile
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    n, value, quality, reason = out.decode().strip().split("|")
    assert (int(n) in (1001, 2001), value, quality, reason) == (True, "0.5", "comm_failure", "timeout")
    await hist.flush()
    assert sum(1 for _ in hist.query(site="acme", channel="ph")) == 2001


async def test_a_reader_holding_a_snapshot_does_not_block_the_writer(hist: Historian) -> None:
    hist.submit([good(T0 + i, 1.0) for i in range(5000)])
    await hist.flush()
    reader = read_readings(hist.path, site="acme", channel="ph")
    first = next(reader)  # statement open: the reader now holds its snapshot
    hist.submit([good(T0 + 10_000 + i, 2.0) for i in range(5000)])
    await asyncio.wait_for(hist.flush(), PATIENCE)  # WAL: the writer commits while the reader reads
    rest = list(reader)
    assert first.time == T0 and 1 + len(rest) == 5000  # the reader's snapshot: none of the later rows
    assert raw_count(hist.path) == 10_000


async def test_reopen_keeps_series_and_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    for run in range(2):
        h = Historian(path=path)
        await h.start()
        h.submit([good(T0, float(run)), good(T0 + 1, 10.0 + run, channel="flow", unit="gpm")])
        await h.close()
    assert read_channels(path) == [("acme", "flow", "gpm"), ("acme", "ph", "pH")]
    assert [s.value for s in read_readings(path, site="acme", channel="ph")] == [0.0, 1.0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM channels").fetchone()[0] == 2


async def test_a_unit_change_starts_a_new_series_and_reads_merge_in_time_order(hist: Historian) -> None:
    hist.submit([good(T0, 1.0, unit="gpm"), good(T0 + 2, 2.0, unit="gpm")])
    hist.submit([good(T0 + 1, 3.0, unit="L/s"), good(T0 + 3, 4.0, unit="L/s")])
    await hist.flush()
    got = [(s.time - T0, s.value, s.unit) for s in hist.query(site="acme", channel="ph")]
    assert got == [(0, 1.0, "gpm"), (1, 3.0, "L/s"), (2, 2.0, "gpm"), (3, 4.0, "L/s")]
    assert hist.channels() == [("acme", "ph", "L/s"), ("acme", "ph", "gpm")]


async def test_a_locked_file_delays_but_loses_nothing(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.sqlite"
    h = Historian(path=path, commit_interval=0.02, busy_timeout=0.02)
    await h.start()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another program holds the write lock
    try:
        with caplog.at_level(logging.WARNING, logger="monitor.stores.historian"):
            for i in range(10):
                h.submit([good(T0 + i * 10 + k, float(k)) for k in range(10)])
                await asyncio.sleep(0.01)
            assert await eventually(lambda: h.counters.write_errors >= 3), h.counters
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(h.flush(), 0.1)  # backpressure: flush waits while the lock is held
            assert h.counters.queue_depth == 100
        blocker.execute("ROLLBACK")
        await asyncio.wait_for(h.flush(), PATIENCE)
    finally:
        blocker.close()
        await h.close()
    assert [s.time - T0 for s in read_readings(path, site="acme", channel="ph")] == [
        float(i * 10 + k) for i in range(10) for k in range(10)]
    failures = [r for r in caplog.records if "cannot write" in r.getMessage()]
    recoveries = [r for r in caplog.records if "again after" in r.getMessage()]
    assert len(failures) == 1 and len(recoveries) == 1  # logged once per outage, not per attempt


async def test_malformed_samples_are_kept_aside_and_do_not_block_the_rest(hist: Historian) -> None:
    wrong = [
        good(math.nan, 7.0),  # no usable time
        Sample(time=T0 + 1, site="acme", channel="ph", value="7.1x", unit="pH"),  # type: ignore[arg-type]
        Sample(time=T0 + 2, site="acme", channel="ph", value=None, unit="pH"),  # "good" without a value
        Sample(time=T0 + 2.5, site="acme", channel="ph", value=object(), unit="pH"),  # type: ignore[arg-type]
    ]
    # (numeric text such as "7.1" would be stored as 7.1: STRICT tables convert losslessly, by design)
    hist.submit([good(T0, 1.0), *wrong, good(T0 + 3, 2.0)])
    hist.submit([good(T0 + 4, 3.0)])
    await hist.flush()
    assert [s.value for s in hist.query(site="acme", channel="ph")] == [1.0, 2.0, 3.0]
    assert (hist.counters.samples_written, hist.counters.samples_rejected) == (3, 4)
    with sqlite3.connect(hist.path) as conn:
        kept = conn.execute("SELECT sample, error FROM rejected_samples ORDER BY id").fetchall()
    assert len(kept) == 4 and "nan" in kept[0][0] and "'7.1x'" in kept[1][0]
    assert "CHECK constraint" in kept[2][1] and "not supported" in kept[3][1]


async def test_overflow_is_counted_and_logged_once_never_dropped(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    h = Historian(path=tmp_path / "h.sqlite", max_queue=10)
    with caplog.at_level(logging.WARNING, logger="monitor.stores.historian"):
        for i in range(30):  # before start(): nothing is written yet, so the queue only grows
            h.submit([good(T0 + i, float(i))])
    assert h.backlogged and h.counters.queue_overflows == 1
    assert len([r for r in caplog.records if "max_queue" in r.getMessage()]) == 1
    await h.start()
    await h.close()
    assert not h.backlogged and h.counters.samples_written == 30


async def test_a_newer_or_foreign_file_is_refused_untouched(tmp_path: Path) -> None:
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(HistorianError, match="newer pretreat-monitor"):
        await Historian(path=newer).start()
    with pytest.raises(HistorianError, match="newer"):
        list(read_readings(newer, site="acme", channel="ph"))
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE readings (id INTEGER, payload TEXT)")
    with pytest.raises(HistorianError, match="not a pretreat historian"):
        await Historian(path=foreign).start()
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0  # the failed start changed nothing
    with pytest.raises(HistorianError, match="no historian file"):
        read_channels(tmp_path / "missing.sqlite")


async def test_a_file_shared_with_other_tables_reads_as_empty_before_first_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared.sqlite"
    with sqlite3.connect(shared) as conn:  # e.g. the episode store created the file first
        conn.execute("CREATE TABLE episodes (id INTEGER PRIMARY KEY)")
    assert read_channels(shared) == []
    h = Historian(path=shared)
    await h.start()
    h.submit([good(T0, 7.0)])
    await h.close()
    assert read_channels(shared) == [("acme", "ph", "pH")]


async def test_flush_without_start_and_empty_submit(tmp_path: Path) -> None:
    h = Historian(path=tmp_path / "h.sqlite")
    h.submit([])
    await h.flush()  # nothing submitted: nothing to wait for
    h.submit([good(T0, 1.0)])
    with pytest.raises(HistorianError, match="not started"):
        await h.flush()
    await h.start()
    await h.flush()
    await h.close()
    assert h.counters.samples_written == 1


async def test_a_large_batch_spans_statements_in_submission_order(hist: Historian) -> None:
    """Rows go in as multi-row INSERTs of a power-of-two size (`_insert_many`): 4096 + 2048 + ... + 1 rows for
    a batch of 8,191 across 7 channels. Every row must arrive once, in submission (seq) order, exactly."""
    n = 8_191
    samples = [good(T0 + i // 7 * 0.5, i * 0.25 + 0.1, channel=f"c{i % 7}") for i in range(n)]
    samples[4_096] = bad(samples[4_096].time, "a bad one on a statement boundary", channel=samples[4_096].channel)
    hist.submit(samples)
    await hist.flush()
    assert hist.counters.samples_written == n and hist.counters.samples_rejected == 0
    for c in range(7):
        assert list(hist.query(site="acme", channel=f"c{c}")) == samples[c::7]
    with sqlite3.connect(hist.path) as conn:
        seqs = [s for (s,) in conn.execute("SELECT seq FROM readings ORDER BY seq")]
    assert seqs == list(range(seqs[0], seqs[0] + n))


async def test_one_malformed_sample_in_a_large_batch_costs_only_itself(hist: Historian) -> None:
    """A data error anywhere in a multi-row statement rolls the batch back and it is retried row by row: the
    thousands of good rows around the bad one are all recorded."""
    samples = [good(T0 + i, float(i)) for i in range(5_000)]
    samples[4_500] = good(math.nan, 1.0)
    hist.submit(samples)
    await hist.flush()
    assert (hist.counters.samples_written, hist.counters.samples_rejected) == (4_999, 1)
    assert [s.value for s in hist.query(site="acme", channel="ph")] == [float(i) for i in range(5_000) if i != 4_500]


def test_the_writer_cache_is_sized_by_channels_within_bounds() -> None:
    from monitor.stores.historian_db import writer_cache_kib

    assert [writer_cache_kib(n) for n in (0, 10, 180, 1_000, 100_000)] == [65_536, 2_048, 2_048, 8_000, 65_536]
    assert Historian(path=Path("unused.sqlite"), channels=1_000).cache_kib == 8_000


async def test_a_steady_stream_is_committed_once_per_interval_not_back_to_back(tmp_path: Path) -> None:
    """Samples arriving steadily from 1,000 channels (20,000 a second): the writer commits once per commit
    interval. It used to commit again as soon as anything was queued, so under load it committed back to back
    in small transactions, rewriting every channel's newest page for a few rows each time."""
    h = Historian(path=tmp_path / "h.sqlite", commit_interval=0.3, channels=1_000)
    await h.start()
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.5
        n = 0
        while loop.time() < end:
            first = n % 50 * 20  # 20 of the 1,000 channels each time
            h.submit([good(T0 + n + i / 1_000, float(i), channel=f"c{i}") for i in range(first, first + 20)])
            n += 1
            await asyncio.sleep(0.001)
        batches = h.counters.batches
        await h.flush()
    finally:
        await h.close()
    assert h.counters.samples_written == n * 20
    assert 3 <= batches <= 1.5 / 0.3 + 2, batches


async def test_a_full_batch_is_committed_without_waiting_for_the_interval(tmp_path: Path) -> None:
    from monitor.stores.historian import _EARLY_COMMIT

    h = Historian(path=tmp_path / "h.sqlite", commit_interval=30.0)
    await h.start()
    try:
        assert await eventually(lambda: h.counters.batches == 0)  # the writer is waiting out its interval
        h.submit([good(T0 + i, float(i)) for i in range(_EARLY_COMMIT)])
        assert await eventually(lambda: h.counters.samples_written == _EARLY_COMMIT), h.counters
    finally:
        await h.close()


async def test_a_good_reading_with_a_reason_keeps_it_beside_plain_ones(hist: Historian) -> None:
    """Plain good readings go in through a statement with quality and reason as literals; a good reading that
    carries a reason (a note from its driver) must take the full path and keep it, in its place in time."""
    noted = Sample(time=T0 + 1, site="acme", channel="ph", value=7.1, unit="pH", reason="device clock corrected")
    samples = [good(T0, 7.0), noted, bad(T0 + 2, "no reply"), good(T0 + 3, 7.2)]
    hist.submit(samples)
    await hist.flush()
    assert list(hist.query(site="acme", channel="ph")) == samples


async def _older_file(path: Path, version: int, missing: tuple[int, ...], first: Sequence[Sample] = ()) -> None:
    """A historian file as schema ``version`` wrote it (with ``first`` in it): without the quality codes
    ``missing``, added since."""
    h = Historian(path=path)
    await h.start()
    if first:
        h.submit(first)
    await h.close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"DELETE FROM qualities WHERE code IN ({', '.join('?' * len(missing))})", missing)
        conn.execute(f"PRAGMA user_version = {version}")


async def test_an_over_range_reading_keeps_its_number_and_a_version_1_file_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    await _older_file(path, 1, (8,))
    h = Historian(path=path)
    await h.start()
    h.submit([Sample(time=T0, site="acme", channel="lel", value=120.0, unit="%LEL", quality=Quality.OVER_RANGE,
                     reason="120 %LEL above the span [0, 100]: judged as 100")])
    await h.close()
    (s,) = read_readings(path, site="acme", channel="lel")
    assert (s.quality, s.value) == (Quality.OVER_RANGE, 120.0)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT name FROM qualities WHERE code = 8").fetchone() == ("over_range",)


async def test_a_version_2_file_gains_the_maintenance_and_unit_mismatch_codes(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite"
    await _older_file(path, 2, (9, 10))
    h = Historian(path=path)
    await h.start()
    h.submit([Sample(time=T0, site="acme", channel="lel", value=None, unit="%LEL", quality=Quality.MAINTENANCE,
                     reason="instrument in maintenance: Calibration Active - Sensor 1 (general_status bit 1)"),
              Sample(time=T0 + 1, site="acme", channel="lel", value=None, unit="%LEL",
                     quality=Quality.UNIT_MISMATCH, reason="unit mismatch")])
    await h.close()
    assert [s.quality for s in read_readings(path, site="acme", channel="lel")] == [Quality.MAINTENANCE,
                                                                                  Quality.UNIT_MISMATCH]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT name FROM qualities WHERE code IN (9, 10) ORDER BY code").fetchall() == [
            ("maintenance",), ("unit_mismatch",)]


SKEWED = Sample(time=T0, site="acme", channel="lel", value=None, unit="%LEL", quality=Quality.CLOCK_SKEW,
                reason="acme/mh1/lel: device clock more than 300 s fast: device timestamp 'ts' "
                       "'2026-01-01T01:00:00Z' is 3600 s ahead of the receive time (read 4.5 %LEL)")


async def test_a_clock_skew_reading_round_trips_as_code_11_with_its_reason(hist: Historian) -> None:
    samples = [good(T0 - 1, 7.0), SKEWED, good(T0 + 1, 7.1)]
    hist.submit(samples)
    await hist.flush()
    assert list(hist.query(site="acme", channel="lel")) == [SKEWED]
    assert list(read_readings(hist.path, site="acme", channel="lel")) == [SKEWED]
    with sqlite3.connect(hist.path) as conn:
        assert conn.execute("SELECT quality, value FROM readings WHERE quality != 0").fetchall() == [(11, None)]
        assert conn.execute("SELECT name FROM qualities WHERE code = 11").fetchone() == ("clock_skew",)


async def test_a_version_3_file_gains_the_clock_skew_code(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite"
    await _older_file(path, 3, (11,), [Sample(time=T0 - 1, site="acme", channel="lel", value=None, unit="%LEL",
                                              quality=Quality.UNIT_MISMATCH, reason="unit mismatch")])
    h = Historian(path=path)
    await h.start()
    h.submit([SKEWED])
    await h.close()
    assert [s.quality for s in read_readings(path, site="acme", channel="lel")] == [Quality.UNIT_MISMATCH,
                                                                                  Quality.CLOCK_SKEW]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert conn.execute("SELECT name FROM qualities WHERE code = 11").fetchone() == ("clock_skew",)


async def test_the_duplicate_filter_seed_holds_the_last_arrivals_however_old_their_times(tmp_path: Path) -> None:
    """An instrument re-sends a buffer with its real times (3 h old) just before a kill: those readings are the
    last committed, not the newest by time, and the broker delivers their unacknowledged messages again after
    the restart. The seed (`recent_samples`) holds them, so the MQTT filter drops the copies."""
    from drivers.mqtt.dedupe import RecentReadings
    from monitor.stores.historian_db import ARRIVAL_SLOTS, recent_samples

    path = tmp_path / "h.sqlite"
    h = Historian(path=path, commit_interval=3600.0)
    await h.start()
    live = [good(T0 + i, 7.0 + i / 1000) for i in range(300)]
    h.submit(live)
    await h.flush()
    buffered = [good(T0 - 3 * 3600 + i, 6.5) for i in range(5)]
    for s in buffered:  # one commit each, as messages come: the ring of the last commits must reach back
        h.submit([s])
        await h.flush()
    await h.close()
    assert ARRIVAL_SLOTS >= len(buffered)
    seed = recent_samples(path, site="acme", channel="ph", limit=64)
    assert seed[:5] == buffered[::-1]  # the last arrival first
    assert seed[5:] == live[::-1][:64]  # and the newest by time
    f = RecentReadings(size=256)
    f.seed(seed[::-1])  # as the daemon seeds it: the last arrivals remembered last
    kept, repeats = f.judge([*buffered, good(T0 + 300, 7.3)])
    assert (kept, repeats) == ([good(T0 + 300, 7.3)], 5)


async def test_a_file_without_the_arrivals_ring_seeds_the_newest_by_time(tmp_path: Path) -> None:
    """A file written before the ring (or by a daemon that never committed since) seeds as before."""
    from monitor.stores.historian_db import recent_samples

    path = tmp_path / "h.sqlite"
    h = Historian(path=path)
    await h.start()
    h.submit([good(T0 + i, 7.0) for i in range(10)])
    await h.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM historian_meta WHERE key LIKE 'arrival%'")
    conn.close()
    assert [s.time for s in recent_samples(path, site="acme", channel="ph", limit=4)] == [T0 + 9, T0 + 8, T0 + 7,
                                                                                           T0 + 6]
