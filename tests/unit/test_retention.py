"""Retention of raw telemetry: off by default, refused below three years (40 CFR 403.12(o)), and never deleting
the readings behind an exceedance episode. Against a real historian file."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from config.loader import load_config
from monitor.app import Daemon
from monitor.sample import Sample
from monitor.stores.historian import Historian
from monitor.stores.retention import HOLD_MARGIN, eligible, hold_windows, purge
from tests.support import PATIENCE, free_port
from tests.unit.config_helpers import errors_of, site, write

DAY = 86_400.0
T0 = 1_600_000_000.0  # 2020-09-13: the oldest reading


def with_daemon(text: str, daemon: str) -> str:
    return f"[daemon]\nhistorian = \"h.sqlite\"\n{daemon}\n" + text


@pytest.mark.parametrize("value", ["1095", "30", "\"1096\"", "true", "1096.5"])
def test_a_retention_shorter_than_three_years_or_not_a_whole_number_is_refused(tmp_path: Path, value: str) -> None:
    [err] = errors_of(tmp_path, with_daemon(site(), f"retention_days = {value}"))
    assert err.startswith("daemon.retention_days: a whole number of days >= 1096") and "40 CFR 403.12(o)" in err


def test_retention_is_off_unless_set(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, with_daemon(site(), ""))).daemon.retention_days is None
    assert load_config(write(tmp_path, with_daemon(site(), "retention_days = 1096"))).daemon.retention_days == 1096


def test_hold_windows_merge_and_eligible_spans_avoid_them() -> None:
    holds = hold_windows([("a", 10 * DAY, 11 * DAY), ("a", 11.5 * DAY, 12 * DAY), ("b", 20 * DAY, None)])
    assert holds == {"a": [(9 * DAY, 13 * DAY)], "b": [(19 * DAY, float("inf"))]}
    assert eligible(30 * DAY, holds["a"], 0.0) == [(0.0, 9 * DAY), (13 * DAY, 30 * DAY)]
    assert eligible(30 * DAY, holds["b"], 0.0) == [(0.0, 19 * DAY)]
    assert eligible(5 * DAY, holds["a"], 0.0) == [(0.0, 5 * DAY)]


async def record(path: Path, rows: list[Sample]) -> None:
    h = Historian(path=path, commit_interval=0.05)
    await h.start()
    h.submit(rows)
    await h.close()


def times(path: Path, site: str, channel: str) -> list[float]:
    with sqlite3.connect(path) as db:
        return [t for (t,) in db.execute(
            "SELECT r.time FROM readings r JOIN channels c ON c.id = r.channel_id WHERE c.site = ? AND c.channel = ? "
            "ORDER BY r.time", (site, channel))]


async def test_a_purge_deletes_old_readings_but_keeps_every_episodes_evidence(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    hourly = [T0 + i * 3600.0 for i in range(40 * 24)]  # 40 days of hourly readings, two sites, two channels each
    await record(path, [Sample(t, s, c, 1.0, "u") for t in hourly for s in ("a", "b") for c in ("flow", "ph")])
    cutoff = T0 + 30 * DAY
    episodes = [("a", T0 + 10 * DAY, T0 + 10 * DAY + 900.0),  # a 15-minute episode on day 10 at site a
                ("b", T0 + 25 * DAY, None)]  # still open at site b
    result = purge(path, cutoff=cutoff, episodes=episodes)
    a_kept = [t for t in hourly if t >= cutoff or T0 + 10 * DAY - HOLD_MARGIN <= t < T0 + 10 * DAY + 900 + HOLD_MARGIN]
    b_kept = [t for t in hourly if t >= T0 + 25 * DAY - HOLD_MARGIN]
    for channel in ("flow", "ph"):  # every channel of the site is evidence, not only the episode's
        assert times(path, "a", channel) == a_kept
        assert times(path, "b", channel) == b_kept
    assert result.deleted == 2 * (len(hourly) - len(a_kept)) + 2 * (len(hourly) - len(b_kept))
    assert result.holds == 2


async def test_the_daemon_purges_only_when_set(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.sqlite"
    old = [T0 + i * 3600.0 for i in range(48)]
    await record(path, [Sample(t, "s1", "flow", 1.0, "gpm") for t in old])
    now = T0 + 1100 * DAY  # past three years (1,096 days) for the first day's readings only
    off = Daemon(config=load_config(write(tmp_path, with_daemon(site(), ""))), clock=lambda: now)
    assert off.config.daemon.retention_days is None  # and run() schedules no purge: see app.py
    on = Daemon(config=load_config(write(tmp_path, with_daemon(site(), "retention_days = 1096"))), clock=lambda: now)
    caplog.set_level(logging.INFO, logger="monitor.app")
    await on._purge()
    on.episodes.close()
    on.aggregates.close()
    await asyncio.sleep(0)
    assert times(path, "s1", "flow") == [t for t in old if t >= now - 1096 * DAY]
    assert on.retention[0].deleted == sum(1 for t in old if t < now - 1096 * DAY) > 0
    assert any("retention: " in r.getMessage() and "(1096 days) deleted" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("setting", "scheduled"), [("", False), ("retention_days = 1096", True)])
async def test_a_purge_is_scheduled_only_when_retention_is_set(tmp_path: Path, setting: str, scheduled: bool) -> None:
    text = site().replace("port = 5020", f"port = {free_port()}")  # nobody answers there: polls fail, harmlessly
    daemon = Daemon(config=load_config(write(tmp_path, with_daemon(text, setting))))
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
        assert daemon.scheduler is not None
        assert (daemon.scheduler.get_job("retention") is not None) is scheduled
    finally:
        stop.set()
        await asyncio.wait_for(task, PATIENCE)
