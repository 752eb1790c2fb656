"""`monitor.polling.Polls.round`: a round of many instruments starts them in chunks, letting the event loop run
what else is due between chunks (spread over part of the interval where the interval is long enough), and still
polls each instrument once; a stop during a round starts no more. A poll a round skipped (the device's previous
one still in flight) is made up by that poll's task as soon as it ends, never two at once; a stop ends that."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from monitor.polling import ROUND_CHUNK, SPREAD, SPREAD_CHUNK, SPREAD_GAP, Polls, chunking
from monitor.sample import Sample
from tests.support import eventually


class Meter:
    """A polled instrument whose poll notes that it started (in ``log``) and calls ``on_start`` once."""

    def __init__(self, n: int, log: list[str], on_start: Callable[[], object] | None = None, *,
                 interval: float = 0.002) -> None:
        self.instrument = SimpleNamespace(site="acme", id=f"m{n}", poll_interval=interval)
        self.instrument_id = f"m{n}"
        self.log = log
        self.on_start = on_start
        self.started = 0.0  # loop time its last poll began

    async def poll(self) -> list[Sample]:
        self.log.append(self.instrument_id)
        self.started = asyncio.get_running_loop().time()
        if self.on_start is not None:
            self.on_start()
        await asyncio.sleep(0)  # a reply arrives in a later turn of the loop
        return [Sample(time=1.0, site="acme", channel=f"{self.instrument_id}-flow", value=1.0, unit="L/s")]

    async def close(self) -> None:
        pass


def polls_of(meters: Sequence[Meter], ingested: list[Sample]) -> Polls:
    return Polls(drivers=meters, ingest=ingested.extend, progress=lambda: None)  # type: ignore[arg-type]


async def test_a_large_round_lets_the_loop_run_between_chunks_and_polls_each_instrument_once() -> None:
    log: list[str] = []
    count = 2 * ROUND_CHUNK + ROUND_CHUNK // 2
    loop = asyncio.get_running_loop()
    meters = [Meter(0, log, on_start=lambda: loop.call_soon(log.append, "other work"))]
    meters += [Meter(n, log) for n in range(1, count)]
    ingested: list[Sample] = []
    polls = polls_of(meters, ingested)
    (drivers,) = polls.rounds().values()
    await polls.round(drivers)
    await polls.drain()
    # what the first poll scheduled ran before the round's last instruments were started, not after all of them
    assert log.index("other work") == ROUND_CHUNK, log[ROUND_CHUNK - 2:ROUND_CHUNK + 2]  # after the first chunk
    assert sorted(x for x in log if x != "other work") == sorted(f"m{n}" for n in range(count))
    assert all(s.polls == 1 and s.skipped == 0 for s in polls.stats.values())
    assert len(ingested) == count


async def test_a_stop_during_a_round_starts_no_further_chunk() -> None:
    log: list[str] = []
    holder: list[Polls] = []
    meters = [Meter(0, log, on_start=lambda: setattr(holder[0], "stopping", True))]
    meters += [Meter(n, log) for n in range(1, 3 * ROUND_CHUNK)]
    ingested: list[Sample] = []
    polls = polls_of(meters, ingested)
    holder.append(polls)
    (drivers,) = polls.rounds().values()
    await polls.round(drivers)
    await polls.drain()
    assert log == [f"m{n}" for n in range(ROUND_CHUNK)]
    assert sum(s.polls for s in polls.stats.values()) == len(ingested) == ROUND_CHUNK


def test_chunking_spreads_long_intervals_only() -> None:
    assert chunking(1000, 1.0) == (SPREAD_CHUNK, SPREAD / 40)  # 40 chunks of 25 over half a second
    assert chunking(100, 1.0) == (SPREAD_CHUNK, SPREAD / 4)
    assert chunking(1000, 60.0) == (SPREAD_CHUNK, SPREAD / 40)  # the spread is capped, not a share of 60 s
    assert chunking(SPREAD_CHUNK, 1.0) == (SPREAD_CHUNK, 0.0)  # one chunk: all at once
    assert chunking(100, 0.002) == (100, 0.0)  # flat out: no room between chunks (Polls.round: a turn apart)
    assert chunking(10_000, 1.0) == (200, SPREAD_GAP)  # at most one chunk a SPREAD_GAP


async def test_a_round_at_a_long_interval_starts_its_chunks_apart_within_the_spread() -> None:
    log: list[str] = []
    count = 4 * SPREAD_CHUNK
    meters = [Meter(n, log, interval=1.0) for n in range(count)]
    ingested: list[Sample] = []
    polls = polls_of(meters, ingested)
    (drivers,) = polls.rounds().values()
    size, gap = chunking(count, 1.0)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await polls.round(drivers)
    await polls.drain()
    starts = [m.started - began for m in meters]
    for k in range(count // size):  # each chunk starts no earlier than its place in the spread
        chunk = starts[k * size:(k + 1) * size]
        assert min(chunk) >= k * gap - 0.002, (k, chunk)
        if k:
            assert min(chunk) - max(starts[(k - 1) * size:k * size]) >= gap / 2  # apart from the one before
    assert max(starts) < SPREAD + 0.5  # the last chunk starts within the spread (a loaded machine: some slack)
    assert sorted(log) == sorted(f"m{n}" for n in range(count))
    assert all(s.polls == 1 and s.skipped == 0 for s in polls.stats.values())
    assert len(ingested) == count


class GatedMeter(Meter):
    """A meter whose polls each wait for ``gate`` to be set (and clear it for the next one)."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(0, log, interval=0.1)
        self.gate = asyncio.Event()
        self.in_flight = self.most_in_flight = 0

    async def poll(self) -> list[Sample]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.log.append(self.instrument_id)
            await self.gate.wait()
            self.gate.clear()
            return [Sample(time=1.0, site="acme", channel="m0-flow", value=1.0, unit="L/s")]
        finally:
            self.in_flight -= 1


async def _first_poll_in_flight() -> tuple[list[str], GatedMeter, list[Sample], Polls, list[tuple[str, Any]]]:
    """One gated meter, polled by a first round and waiting for its gate."""
    log: list[str] = []
    meter = GatedMeter(log)
    ingested: list[Sample] = []
    polls = polls_of([meter], ingested)
    (drivers,) = polls.rounds().values()
    await polls.round(drivers)
    assert await eventually(lambda: len(log) == 1, interval=0.001), "the first poll started"
    return log, meter, ingested, polls, drivers


async def test_a_poll_a_round_skipped_is_made_up_as_soon_as_the_one_in_flight_ends() -> None:
    """Rounds due while a poll is in flight skip the device and count it; when that poll ends, the same task
    polls it once more at once (not at the next round), and a poll no round skipped ends the task."""
    log, meter, ingested, polls, drivers = await _first_poll_in_flight()
    await polls.round(drivers)  # due while the first poll waits: skipped, twice
    await polls.round(drivers)
    stats = polls.stats["acme/m0"]
    assert (stats.skipped, stats.polls) == (2, 0)
    meter.gate.set()  # the first poll ends: the one the rounds skipped starts at once, with no round
    assert await eventually(lambda: len(log) == 2, interval=0.001), "the make-up poll started without a round"
    assert stats.polls == 1 and polls._running.busy == {"acme/m0"}
    meter.gate.set()  # the make-up poll ends; no round skipped it: the task ends
    assert await eventually(lambda: not polls._running.tasks, interval=0.001), "the task ended"
    assert (stats.polls, stats.skipped, len(log), meter.most_in_flight) == (2, 2, 2, 1)
    assert not polls._running.busy and not polls._running.overdue
    await polls.drain()
    assert len(ingested) == 2


async def test_a_stop_ends_the_make_up_polls() -> None:
    log, meter, ingested, polls, drivers = await _first_poll_in_flight()
    await polls.round(drivers)  # skipped: a make-up poll is owed
    polls.stopping = True
    meter.gate.set()
    await polls.drain()
    assert (polls.stats["acme/m0"].polls, len(log), len(ingested)) == (1, 1, 1)
    assert not polls._running.busy and not polls._running.overdue
