"""The polled instruments' rounds: one APScheduler job per distinct poll interval, one task per poll.

Why one job per interval and not one per instrument: with hundreds of instruments on short intervals,
APScheduler's own bookkeeping per job run (trigger arithmetic, executor submission, events) cost a third of
the event loop (bench/bench_polling.py); instruments with the same interval were due at the same instant
anyway. Each poll is its own task, so a slow or dead device delays nobody; a device whose previous poll is
still running is skipped and counted (`PollStats.skipped`), never polled twice at once, and polled again as soon
as that poll ends, by the same task (`Polls._poll`): an instrument slower than its interval (one answering at its
timeout, or every instrument of a flat-out benchmark) is polled as often as it answers, not only at the first
round after each reply. Flat out, that also spares a task and a round's walk per poll: ~12 % of the daemon's CPU
a poll (bench/bench_side_by_side.py, bench/RESULTS.md).

The daemon (`monitor.app.Daemon`) owns the scheduler and gives each job `Polls.round`; at shutdown it sets
`Polls.stopping` (no new poll starts), then awaits `Polls.drain` (the polls in flight finish and their
samples are ingested) before it disconnects the links.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from drivers.base import PolledDriver, StreamingDriver
from monitor.sample import GOOD, Sample

log = logging.getLogger(__name__)

DRAIN_LIMIT = 5.0  # s the polls in flight get to finish at shutdown: longer than any reply timeout
ROUND_CHUNK = 100  # polls a round starts before it lets the event loop run what else is due (see `round`)
SPREAD = 0.5  # s at most (and half the interval at most) over which a round's chunks of polls start
SPREAD_CHUNK = 25  # polls a chunk of a spread round starts at once
SPREAD_GAP = 0.01  # s between chunks at least: a round's chunks are never closer than the loop's timers can tell


def chunking(count: int, interval: float) -> tuple[int, float]:
    """How a round of ``count`` instruments polled every ``interval`` s is spread: (polls a chunk, s from one
    chunk's start to the next). Chunks of `SPREAD_CHUNK` (more where needed: at most one chunk each
    `SPREAD_GAP`), evenly over min(`SPREAD`, interval / 2) s: 1,000 instruments at 1 s start 25 every 12.5 ms,
    100 at 1 s 25 every 125 ms, 10,000 at 1 s 200 every 10 ms. Where the interval leaves no room for two
    chunks (flat out, every few ms) or there are too few instruments for two, one chunk: (count, 0).

    Why the spread is capped: a round sleeps between its chunks, and the daemon's stop waits for it to see
    `Polls.stopping` (one gap at most); a longer interval gains nothing from a longer spread."""
    window = min(SPREAD, interval / 2)
    chunks = min(-(-count // SPREAD_CHUNK), int(window / SPREAD_GAP))
    if chunks > 1:
        return -(-count // chunks), window / chunks
    return max(count, 1), 0.0


@dataclass(slots=True)
class PollStats:
    """Per-instrument poll counters (published in the health snapshot)."""

    polls: int = 0
    skipped: int = 0  # a poll was due while the previous one of the same device was still running
    bad_samples: int = 0
    last_duration: float = 0.0


@dataclass(slots=True)
class _Running:
    """The polls in flight: by instrument (to skip an overlapping one) and by task (to drain at shutdown)."""

    busy: set[str] = field(default_factory=set)
    tasks: dict[asyncio.Task[None], str] = field(default_factory=dict)  # task -> instrument key
    overdue: set[str] = field(default_factory=set)  # skipped by a round while busy: polled again once free

    def finished(self, task: asyncio.Task[None]) -> None:
        key = self.tasks.pop(task, "?")
        if not task.cancelled() and (exc := task.exception()) is not None:  # a defect: loud, and polling goes on
            log.error("poll of %s failed: %r", key, exc, exc_info=exc)


def key_of(driver: PolledDriver | StreamingDriver) -> str:
    """``site/instrument``: how counters and tasks name an instrument."""
    return f"{driver.instrument.site}/{driver.instrument.id}"


class Polls:
    """The polls of ``drivers``; what they read goes to ``ingest``, and each finished poll calls ``progress``
    (the systemd watchdog's heartbeat)."""

    def __init__(self, *, drivers: Sequence[PolledDriver], ingest: Callable[[Sequence[Sample]], None],
                 progress: Callable[[], None]) -> None:
        self.drivers = list(drivers)
        self.stats: dict[str, PollStats] = {key_of(d): PollStats() for d in self.drivers}
        self.stopping = False  # the daemon is shutting down: no new poll starts
        self._ingest = ingest
        self._progress = progress
        self._running = _Running()
        self._inbox: list[Sample] = []  # samples of finished polls, for `_ingest_inbox`

    def rounds(self) -> dict[float, list[tuple[str, PolledDriver]]]:
        """The poll rounds: instruments (with their keys) by poll interval."""
        rounds: dict[float, list[tuple[str, PolledDriver]]] = {}
        for d in self.drivers:
            rounds.setdefault(d.instrument.poll_interval, []).append((key_of(d), d))
        return rounds

    async def round(self, drivers: Sequence[tuple[str, PolledDriver]]) -> None:
        """One round of one interval (an APScheduler job): start a poll of each instrument not still busy, in
        the chunks `chunking` gives, each at its place in the spread, and within a chunk a turn of the event
        loop after every `ROUND_CHUNK` polls.

        Why chunks: the polls started in one turn of the loop all send their requests in the next one, and
        their replies come back together, so 1,000 instruments on one interval held the loop for ~100-250 ms
        every second, and every timer (the tick, MQTT keep-alives, other rounds) and every reply's timestamp
        waited that long (event-loop lag p99 261 ms, bench/bench_peers.py). Why spread over time and not only
        yield between chunks: yielding let other timers in between the starts, but the replies of the whole
        round still came back within a few ms of each other and were handled in one or two turns of the loop
        (tens of ms each, longer when the shared cores were busy); started `SPREAD_GAP`-ish apart, each
        chunk's replies are handled before the next chunk starts. Each instrument keeps its place in the
        round, so it is still polled once every interval, up to `SPREAD` s after the round began."""
        if self.stopping:  # APScheduler runs a round as its own task: one may start after the stop began
            return
        running = self._running
        busy, create = running.busy, asyncio.create_task  # (unnamed tasks: naming each cost 1 % of the loop)
        size, gap = chunking(len(drivers), drivers[0][1].instrument.poll_interval if drivers else 0.0)
        loop = asyncio.get_running_loop()
        began = loop.time()
        for n, (key, d) in enumerate(drivers):
            if n and not n % size:  # the next chunk of a spread round, at its place in the spread
                await asyncio.sleep(max(0.0, began + n // size * gap - loop.time()))
                if self.stopping:
                    return
            elif n and not n % ROUND_CHUNK:  # within a chunk: the next turn of the loop
                await asyncio.sleep(0)
                if self.stopping:
                    return
            if key in busy:
                self.stats[key].skipped += 1
                running.overdue.add(key)  # its poll in flight polls it again when it ends (`_poll`)
                continue
            busy.add(key)  # before the task starts: the next round must see it busy
            task = create(self._poll(d, key))
            running.tasks[task] = key
            task.add_done_callback(running.finished)

    async def drain(self) -> None:
        """Wait (at most `DRAIN_LIMIT`) for the polls in flight, then ingest what every finished poll read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_LIMIT
        while self._running.tasks and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self._running.tasks), timeout=left)
        self._ingest_inbox()

    async def _poll(self, driver: PolledDriver, key: str) -> None:
        """Poll ``driver``, and again at once each time a round skipped it meanwhile (``overdue``) until the
        daemon stops: the poll it missed, made up as soon as it can be, never two at once."""
        stats, overdue = self.stats[key], self._running.overdue
        try:
            while True:
                started = time.monotonic()
                samples = await driver.poll()
                stats.polls += 1
                self._progress()
                stats.last_duration = time.monotonic() - started
                stats.bad_samples += len(samples) - [s.quality for s in samples].count(GOOD)  # (count: in C)
                if samples:
                    if not self._inbox:
                        asyncio.get_running_loop().call_soon(self._ingest_inbox)
                    self._inbox.extend(samples)
                if self.stopping or key not in overdue:
                    return
                overdue.discard(key)
        finally:
            self._running.busy.discard(key)
            overdue.discard(key)

    def _ingest_inbox(self) -> None:
        """Ingest what the polls that finished in one turn of the event loop returned, as one batch.

        Why batch: flat out, a turn of the loop finishes dozens of polls, and each `ingest` call has a fixed
        cost in every consumer (the historian's queue, the day aggregates' lock, staleness' clock read, the
        check engine's drain); per poll of 10 registers that was several % of the loop. The samples keep the
        order in which their polls finished, and are ingested before the loop waits for anything else."""
        samples, self._inbox = self._inbox, []
        self._ingest(samples)
