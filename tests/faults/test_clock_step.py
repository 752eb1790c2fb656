"""The wall clock stepped forward and back (an NTP step, a PC whose clock was wrong at boot), injected through
the daemon's ``clock``: staleness is judged on elapsed (monotonic) time, so a forward step makes no channel
stale and a backward step does not hide a channel that really goes quiet; alarm timers, which are wall-clock
timestamps persisted across restarts, fire at most once per timer on a forward step (no flood of reminders).

What a real step does (the daemon's clock is ``time.time``):
- Readings keep the wall time of their reply (Modbus) or the device's own timestamp (MQTT), so the record
  shows the step as it happened: a jump forward, or times repeating after a step back (the historian keeps
  both: rows are told apart by arrival order, never dropped).
- Staleness windows measure elapsed time on the monotonic clock, which NTP never steps: unaffected.
- Alarm timers (on/off delays, re-alarm reminders, escalation, shelve expiry) are wall-clock times, because
  they must survive a restart. A forward step makes those that fell due in the skipped interval fire once
  (stamped when due; a reminder is sent once, not once per skipped period); a backward step postpones them
  by the size of the step. Both are logged as ordinary transitions in the journal.
- The scheduler plans its jobs on the wall clock too (APScheduler 3 uses ``datetime.now()``), so a step back
  would delay every poll and tick by the size of the step. `monitor.clockwatch` sees the step (the wall clock
  moved against the monotonic one) and makes every interval job due at once; a step forward needs nothing
  (APScheduler runs what fell due once, coalesced). These tests step only the daemon's own clock, not the
  machine's (that would disturb everything else running on it); the last one also moves the scheduler's
  plan the way a real step back does.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.interval import IntervalTrigger

from config.loader import load_config
from monitor.app import Daemon
from simulators.modbus_server import SimFault
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    by_channel,
    channel,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.support import eventually, free_port

HOUR = 3600.0


class SteppedClock:
    """The wall clock plus an offset the test changes: what an NTP step does to ``time.time()``."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def polled_both(daemon: Daemon, n: int) -> bool:
    return all(daemon.stats[f"{SITE}/{i}"].polls >= n for i in ("fm-a", "fm-b"))


def two_meters(tmp_path: Path, alarm: str = "") -> Path:
    instruments = [tcp_instrument(i, port=free_port(), poll=0.5, timeout=0.3) for i in ("fm-a", "fm-b")]
    channels = [channel(f"{i}_flow", instrument=i, kind="flow", unit="gpm", point="flow_rate", valid_min=0,
                        valid_max=2000) for i in ("fm-a", "fm-b")]
    return site_file(tmp_path, instruments=instruments, channels=channels, site_extra=alarm)


async def test_a_step_forward_floods_nothing_and_a_step_back_hides_nothing(tmp_path: Path) -> None:
    config = load_config(two_meters(tmp_path))
    clock = SteppedClock()
    async with SiteSimulator(config=config) as sim, InProcessDaemon(config, clock=clock) as daemon:
        assert await eventually(lambda: polled_both(daemon, 2))
        clock.offset += HOUR  # forward: a whole hour "passes" between two ticks
        await asyncio.sleep(1.2)
        stale_after_forward = [r for r in recorded(config.daemon.historian) if r.quality == "stale"]
        clock.offset -= 2 * HOUR  # back: an hour before the real time
        await asyncio.sleep(0.5)
        silenced = time.monotonic()
        sim.device(SITE, "fm-b").fault = SimFault.SILENT
        # within its window (not an hour later, as the clock would have it); patient for a loaded machine
        await eventually(lambda: daemon.staleness.stale_channels() != [])
        stale_seen = daemon.staleness.stale_channels()
        elapsed = time.monotonic() - silenced
    assert stale_after_forward == []  # no channel went stale because the wall clock jumped
    rows = by_channel(recorded(config.daemon.historian))
    # the quiet channel went stale within its window although the clock says it is an hour earlier
    assert stale_seen == [(SITE, "fm-b_flow")], (stale_seen, elapsed)
    assert [r.quality for r in rows["fm-b_flow"]].count("stale") == 1
    assert all(r.good for r in rows["fm-a_flow"])


async def test_alarm_reminders_fire_once_after_a_step_forward_and_nothing_fires_on_a_step_back(
        tmp_path: Path) -> None:
    alarm = "[site.alarm.stale]\npriority = \"low\"\nrealarm_interval = 60\n"
    config = load_config(two_meters(tmp_path, alarm))
    clock = SteppedClock()
    async with SiteSimulator(config=config) as sim:
        sim.device(SITE, "fm-b").fault = SimFault.SILENT  # stale from the start: its alarm is raised
        async with InProcessDaemon(config, clock=clock) as daemon:
            engine = daemon.alarming.engine
            raised = await eventually(lambda: engine.state(f"{SITE}/fm-b_flow/stale").active)
            assert raised
            before = daemon.alarming.transitions
            clock.offset += HOUR  # sixty reminder periods skipped
            assert await eventually(lambda: daemon.alarming.transitions > before), "no reminder"
            await asyncio.sleep(1.0)  # four more ticks, for the reminders that must not come
            after_forward = daemon.alarming.transitions - before
            clock.offset -= 2 * HOUR
            await asyncio.sleep(1.0)
            after_back = daemon.alarming.transitions - before - after_forward
    assert after_forward == 1  # one reminder, not sixty
    assert after_back == 0  # stepping back fires nothing and changes no alarm



async def test_polling_resumes_at_once_after_a_step_back_instead_of_waiting_it_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A real step back of an hour leaves every interval job planned an hour ahead on the new clock: no poll,
    no tick for an hour. Here the daemon's clock steps back and the scheduler's plan is moved an hour ahead,
    as the step would; the clock watch must notice and polling must go on within a couple of seconds."""
    config = load_config(two_meters(tmp_path))
    clock = SteppedClock()
    async with SiteSimulator(config=config), InProcessDaemon(config, clock=clock) as daemon:
        assert await eventually(lambda: polled_both(daemon, 2))
        assert daemon.scheduler is not None and daemon.clock_watch is not None
        for job in daemon.scheduler.get_jobs():
            if isinstance(job.trigger, IntervalTrigger):  # what the step does to APScheduler's plan
                job.modify(next_run_time=job.next_run_time + timedelta(hours=1))
        clock.offset -= HOUR
        polls = daemon.stats[f"{SITE}/fm-a"].polls
        # (waiting the step out would take an hour: the helper's patience tells the two apart)
        resumed = await eventually(lambda: daemon.stats[f"{SITE}/fm-a"].polls >= polls + 2)
    assert resumed, "polling waited out the step"
    assert daemon.clock_watch.steps == 1
    assert any("wall clock stepped back 1 h:" in r.getMessage() for r in caplog.records)
