"""Notice a step of the wall clock and re-plan the scheduler's interval jobs after a step back.

Why: APScheduler 3 plans its jobs on the wall clock (``datetime.now()``). When NTP steps the clock back by an
hour (a control-manhole PC whose clock ran fast, corrected after the daemon started), every interval job's
next run time is an hour away on the new clock: polls, the staleness tick and the health snapshot would
stop for an hour, leaving a gap in the record that enforcement would see. The monotonic clock never steps, so
the difference ``time.time() - time.monotonic()`` changes only when the wall clock is stepped (slewing by
NTP changes it by milliseconds a minute).

What is done about it:
- a step *back* of at least ``threshold`` seconds: every interval job (polls, tick, health, watchdog) is made
  due now; from there each runs every interval again. Date and cron jobs (daily summaries at local midnight,
  periodic reports on their due date) keep their wall-clock time, which is what they mean.
- a step *forward*: nothing; APScheduler already runs what fell due in the skipped span once (coalesced), and
  re-planning date jobs here would skip a report that fell due in it.
Every step is logged once, with its size, and counted (``steps``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.interval import IntervalTrigger

from monitor.logtext import duration

log = logging.getLogger(__name__)


class ClockWatch:
    """Runs beside the scheduler on the event loop. ``wall`` is the daemon's clock (injectable for tests)."""

    def __init__(self, *, scheduler: BaseScheduler, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic, threshold: float = 1.0,
                 interval: float = 1.0) -> None:
        """``monotonic``: the clock ``wall`` is compared with (under the demonstration clock, its own)."""
        self.scheduler = scheduler
        self.wall = wall
        self.monotonic = monotonic
        self.threshold = threshold  # s: smaller changes of the offset are slewing or sleep jitter, not a step
        self.interval = interval
        self.steps = 0

    def offset(self) -> float:
        return self.wall() - self.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        last = self.offset()
        while not stop.is_set():
            await asyncio.sleep(self.interval)  # asyncio sleeps on the monotonic clock: a step cannot stall this
            now = self.offset()
            step, last = now - last, now
            if abs(step) >= self.threshold:
                self.steps += 1
                if step < 0:
                    moved = replan_interval_jobs(self.scheduler)
                    log.warning("wall clock stepped back %s: %d interval job(s) (polls, tick) made due now "
                                "instead of waiting out the step", duration(-step), moved, extra={"step_s": step})
                else:
                    log.warning("wall clock stepped forward %s: jobs that fell due meanwhile run once",
                                duration(step), extra={"step_s": step})


def replan_interval_jobs(scheduler: BaseScheduler) -> int:
    """Make every interval job due now (on the scheduler's own clock); returns how many."""
    now = datetime.now(scheduler.timezone)
    jobs = [j for j in scheduler.get_jobs() if isinstance(j.trigger, IntervalTrigger) and j.next_run_time]
    for job in jobs:
        job.modify(next_run_time=now)  # wakes the scheduler: the jobs run on this loop turn
    return len(jobs)
