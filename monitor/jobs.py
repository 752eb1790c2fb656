"""The scheduler's jobs in flight, so that the daemon's stop lets them end instead of cancelling them.

Why: APScheduler 3's `AsyncIOExecutor.shutdown` cancels the asyncio future of every job still running. For a
plain function (run in the loop's thread pool) and for a coroutine awaiting `asyncio.to_thread`, that cancel
stops nothing: the thread goes on (a report catch-up writing files, a sealing pass committing to the journal)
while the daemon closes the stores under it, and the executor's done-callback logs the `CancelledError` as the
job's failure, with a traceback, on every stop that happens to fall during one. So the daemon counts the runs
the scheduler submits (`EVENT_JOB_SUBMITTED`, one per scheduled run time) and the runs that end (executed, error
or missed, one event each, dispatched on the loop by the executor's callback), and waits for the count to reach
zero after pausing the scheduler. Long jobs see `stopping` and end early: what they leave is done at the next
start (reports' catch-up) or the next pass (seals).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobExecutionEvent,
    JobSubmissionEvent,
)

log = logging.getLogger(__name__)


class JobsInFlight:
    """Counts the runs of ``scheduler``'s jobs that have started and not ended; ``idle()`` waits for none."""

    def __init__(self, scheduler: Any) -> None:
        self.stopping = threading.Event()  # set at the daemon's stop: long jobs end early (see module doc)
        self.running: dict[str, int] = {}  # job id -> runs in flight
        self._changed = asyncio.Event()
        scheduler.add_listener(self._submitted, EVENT_JOB_SUBMITTED)
        scheduler.add_listener(self._ended, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)

    def _submitted(self, event: JobSubmissionEvent) -> None:
        self.running[event.job_id] = self.running.get(event.job_id, 0) + len(event.scheduled_run_times)
        self._changed.set()

    def _ended(self, event: JobExecutionEvent) -> None:
        left = self.running.get(event.job_id, 0) - 1
        if left > 0:
            self.running[event.job_id] = left
        else:
            self.running.pop(event.job_id, None)
        self._changed.set()

    async def idle(self) -> None:
        """Return once no run is in flight (the scheduler paused first, so none starts meanwhile)."""
        if self.running:
            log.info("stopping: waiting for %s to end", ", ".join(sorted(self.running)))
        while self.running:
            self._changed.clear()
            await self._changed.wait()
