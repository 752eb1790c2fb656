"""The disk holding the historian and the journal fills up, then space comes back: the daemon keeps polling,
holds what it cannot write, retries, and loses nothing; the SQLite file passes its integrity check and the
journal verifies. The full disk is a real one: a 4 MiB tmpfs mounted for the test (needs root, as CI runs;
elsewhere the test is skipped, under CI=true it fails), filled with a file until ``ENOSPC``.

How the daemon tells an operator (there is no alarm transition: the journal that would record it is on the
full disk): the historian logs the outage once and its recovery once, and counts ``write_errors`` and
``queue_depth`` in the health snapshot, which `pretreat status` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.journal import Journal
from config.loader import load_config
from simulators.playback import Hold
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    by_channel,
    channel,
    duplicates,
    polled_rows,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.support import IN_CI, PATIENCE, eventually, free_port

SIZE = "4m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small-disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"cannot mount a small tmpfs here ({done.stderr.strip() or done.returncode}): needs root"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem is full; returns the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                written += os.write(fd, chunk if written < 1 << 30 else b"")
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return written
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)


async def test_disk_full_then_space_back_nothing_lost_nothing_corrupt(tmp_path: Path, small_disk: Path) -> None:
    instruments = [tcp_instrument("flow-meter", port=free_port(), poll=0.25, timeout=0.2),
                   tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.25, timeout=0.2)]
    channels = [channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000),
                channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    site = site_file(tmp_path, instruments=instruments, channels=channels)
    site.write_text(site.read_text().replace('historian = "pretreat.sqlite"',
                                             f'historian = "{small_disk / "pretreat.sqlite"}"'))
    config = load_config(site)
    filler = small_disk / "filler"
    async with SiteSimulator(config=config) as sim, InProcessDaemon(config) as daemon:
        counters = daemon.historian.counters
        assert await eventually(lambda: counters.samples_written > 20)
        await asyncio.to_thread(fill, filler)
        assert await eventually(lambda: counters.write_errors > 0), "writes never failed"
        # an excursion while nothing can be written: its episode and alarm wait for their evidence
        sim.playback.overrides.setdefault(SITE, {})["ph"] = Hold(4.1)
        await asyncio.sleep(1.0)
        depth_while_full = counters.queue_depth
        polls_while_full = sum(s.polls for s in daemon.stats.values())
        # polling never stopped
        assert await eventually(lambda: sum(s.polls for s in daemon.stats.values()) > polls_while_full + 2)
        filler.unlink()
        assert await eventually(lambda: counters.queue_depth == 0), counters.as_dict()
        sim.playback.overrides[SITE].pop("ph")
        assert await eventually(lambda: not daemon.alarming.engine.state(f"{SITE}/ph/ph_low").condition)
        await asyncio.sleep(0.5)
    assert depth_while_full > 0
    rows = recorded(config.daemon.historian)
    assert duplicates(rows) == []
    by = by_channel(rows)
    for cid, inst in (("flow", "flow-meter"), ("ph", "ph-meter")):
        assert len(polled_rows(by[cid])) == daemon.stats[f"{SITE}/{inst}"].polls  # nothing lost
    with contextlib.closing(sqlite3.connect(config.daemon.historian)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    journal = Journal(path=config.daemon.historian)
    kinds = [(r.payload["alarm"], r.payload["kind"]) for r in journal.records(kinds=["transition"])]
    assert journal.verify().ok
    journal.close()
    assert kinds.count((f"{SITE}/ph/ph_low", "raise")) == 1 and (f"{SITE}/ph/ph_low", "clear") in kinds


async def test_episode_store_write_failing_is_retried_not_fatal(tmp_path: Path) -> None:
    """The readings were committed, then the disk filled before the episode and its alarm could be (an injected
    ``SQLITE_FULL`` on the episode store, then on the alarm journal): the daemon keeps running and records the
    episode and raises the alarm once, when the writes succeed again."""
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.25, timeout=0.2)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels))
    full = sqlite3.OperationalError("database or disk is full")
    failures = {"episodes": 2, "journal": 2}
    async with SiteSimulator(config=config) as sim, InProcessDaemon(config) as daemon:
        record, apply_many = daemon.episodes.record_events, daemon.alarming.engine.apply_many

        def failing_record(events, *, recorded):  # type: ignore[no-untyped-def]
            if failures["episodes"]:
                failures["episodes"] -= 1
                raise full
            return record(events, recorded=recorded)

        def failing_apply(inputs, now):  # type: ignore[no-untyped-def]
            if failures["journal"] and any(i.rule == "ph_low" for i in inputs):  # the episode's alarm write
                failures["journal"] -= 1
                raise full
            return apply_many(inputs, now)

        daemon.episodes.record_events = failing_record  # type: ignore[method-assign]
        daemon.alarming.engine.apply_many = failing_apply  # type: ignore[method-assign]
        sim.playback.overrides.setdefault(SITE, {})["ph"] = Hold(4.1)
        alarm = daemon.alarming.engine
        assert await eventually(lambda: alarm.state(f"{SITE}/ph/ph_low").active), failures
        sim.playback.overrides[SITE].pop("ph")
        assert await eventually(lambda: not alarm.state(f"{SITE}/ph/ph_low").condition)
        await asyncio.sleep(0.5)
    assert failures == {"episodes": 0, "journal": 0}
    journal = Journal(path=config.daemon.historian)
    kinds = [r.payload["kind"] for r in journal.records(kinds=["transition"])
             if r.payload["alarm"] == f"{SITE}/ph/ph_low"]
    journal.close()
    assert kinds == ["raise", "clear"]
    with contextlib.closing(sqlite3.connect(config.daemon.historian)) as db:
        events = db.execute("SELECT event FROM episode_events WHERE rule = 'ph_low' ORDER BY time").fetchall()
    assert [e for (e,) in events] == ["start", "end"]


async def test_a_full_disk_is_logged_once_and_status_lists_the_failing_historian(
        tmp_path: Path, small_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The health snapshot lives on the same full disk: it used to log an error every second and freeze, so
    `pretreat status` could not tell the historian was failing (issue 15). Now: one error an outage, one notice
    when it ends, and the snapshot keeps being rewritten in place, listing the historian's write failures."""
    from monitor.health import health_path
    from monitor.read.status import collect

    instruments = [tcp_instrument("flow-meter", port=free_port(), poll=0.25, timeout=0.2)]
    channels = [channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000)]
    site = site_file(tmp_path, instruments=instruments, channels=channels)
    site.write_text(site.read_text().replace('historian = "pretreat.sqlite"',
                                             f'historian = "{small_disk / "pretreat.sqlite"}"'))
    config = load_config(site)
    filler = small_disk / "filler"
    caplog.set_level("INFO")
    async with SiteSimulator(config=config), InProcessDaemon(config) as daemon:
        counters = daemon.historian.counters
        assert await eventually(lambda: counters.samples_written > 20 and health_path(small_disk / "pretreat.sqlite")
                                .exists(), PATIENCE)
        await asyncio.to_thread(fill, filler)
        assert await eventually(lambda: counters.write_errors > 0, PATIENCE), "writes never failed"

        def status_says_failing() -> bool:
            try:
                return any("historian write failures" in p for p in collect(config).problems)
            except ValueError:
                return False

        assert await eventually(status_says_failing, PATIENCE)
        written = [r for r in caplog.records if "health snapshot" in r.getMessage()]
        before = len(written)
        errors_before = sum(r.levelname == "ERROR" for r in caplog.records)
        snapshot_time = collect(config).snapshot["time"]  # type: ignore[index]
        assert await eventually(lambda: collect(config).snapshot["time"] > snapshot_time + 2, PATIENCE)  # not frozen
        assert len([r for r in caplog.records if "health snapshot" in r.getMessage()]) == before == 1
        assert sum(r.levelname == "ERROR" for r in caplog.records) == errors_before  # nothing every second
        filler.unlink()
        assert await eventually(lambda: counters.queue_depth == 0, PATIENCE), counters.as_dict()
        assert await eventually(lambda: not collect(config).problems, PATIENCE), collect(config).problems
    assert [r.getMessage().split(" (")[0] for r in caplog.records if "health snapshot" in r.getMessage()] == [
        f"health snapshot: cannot write {health_path(small_disk / 'pretreat.sqlite')}",
        f"health snapshot: writing {health_path(small_disk / 'pretreat.sqlite')} again"]
