"""The daemon's stop waits for the scheduler's jobs in flight instead of cancelling them (monitor.jobs): a
cancelled thread-pool job goes on writing while the stores close, and APScheduler logs the cancel as the job's
failure with a traceback."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from apscheduler.events import EVENT_JOB_ERROR
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from monitor.jobs import JobsInFlight
from tests.support import PATIENCE


def test_idle_waits_for_a_running_job_which_ends_without_an_error(caplog: pytest.LogCaptureFixture) -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow_job() -> None:  # a sync job: APScheduler runs it in the loop's thread pool
        started.set()
        assert release.wait(PATIENCE)
        finished.append("slow")

    async def scenario() -> None:
        scheduler = AsyncIOScheduler()
        jobs = JobsInFlight(scheduler)
        scheduler.add_job(slow_job, id="slow")
        scheduler.start()
        assert await asyncio.to_thread(started.wait, PATIENCE)
        scheduler.pause()
        waiting = asyncio.create_task(jobs.idle())
        await asyncio.sleep(0)
        assert not waiting.done() and jobs.running == {"slow": 1}
        release.set()
        await asyncio.wait_for(waiting, PATIENCE)
        assert jobs.running == {}
        scheduler.shutdown(wait=False)

    with caplog.at_level(logging.INFO):
        asyncio.run(scenario())
    assert finished == ["slow"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "waiting for slow to end" in caplog.text


def test_idle_returns_at_once_with_nothing_in_flight() -> None:
    async def scenario() -> None:
        scheduler = AsyncIOScheduler()
        jobs = JobsInFlight(scheduler)
        scheduler.start(paused=True)
        await asyncio.wait_for(jobs.idle(), PATIENCE)
        scheduler.shutdown(wait=False)

    asyncio.run(scenario())


def test_a_failing_job_is_counted_as_ended() -> None:
    def failing() -> None:
        raise ValueError("a report could not be written")

    async def scenario() -> None:
        scheduler = AsyncIOScheduler()
        jobs = JobsInFlight(scheduler)
        ended = asyncio.Event()
        scheduler.add_listener(lambda _e: ended.set(), EVENT_JOB_ERROR)
        scheduler.add_job(failing, id="failing")
        scheduler.start()
        await asyncio.wait_for(ended.wait(), PATIENCE)
        await asyncio.wait_for(jobs.idle(), PATIENCE)
        assert jobs.running == {}
        scheduler.shutdown(wait=False)

    asyncio.run(scenario())
