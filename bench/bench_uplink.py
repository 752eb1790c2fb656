"""Benchmark of the Sparkplug B uplink against a real mosquitto on loopback (not a test).

    .venv/bin/python bench/bench_uplink.py [--readings 200000] [--backlog 500000] [--runs 3]

Measures, median of ``--runs`` runs each, and prints a markdown table with the machine and the load average:

1. sustained: readings/s end to end through `UplinkPublisher` — ``submit`` (1,000 samples per call, 10
   channels of one site, each call with its historian seq) until the broker PUBACKed the last DDATA (durable
   queue, historian-seq marks, protobuf encoding and QoS 1 included; the historian is stood in for by
   `Committed`, which commits at once).
2. backlog drain: ``--backlog`` readings queued on disk while the broker was unreachable, then a restarted
   publisher with the broker up, ``backlog_rate`` unbounded: readings/s from its start to an empty queue
   (every metric flagged historical). The shipped ``backlog_rate`` (5,000/s) is what a daemon uses; this is
   the ceiling of that setting on this machine.

mosquitto runs on the same machine with no subscriber (a hub would add its own fan-out), and competes for the
same two cores, so the figures are a lower bound for an edge publishing to a remote broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import machine
from config.schema import Channel, ChannelKind
from config.uplink import UplinkSettings
from monitor.sample import Sample
from monitor.uplink.publisher import UplinkPublisher
from tests.support import Mosquitto, eventually, free_port

CHUNK = 1000
CHANNELS = [Channel(id=f"ch{i}", site="acme", instrument="meter", kind=ChannelKind.FLOW, unit="gpm",
                    valid_min=0.0, valid_max=2000.0) for i in range(10)]


class Committed:
    """Stands in for the historian: every sample is committed as soon as it is submitted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.committed_seq = 1

    def take(self, n: int) -> int:
        first = self.committed_seq
        self.committed_seq += n
        return first


def samples(start: int, n: int, t0: float) -> list[Sample]:
    return [Sample(time=t0 + (start + i) * 0.1, site="acme", channel=f"ch{(start + i) % 10}",
                   value=100.0 + ((start + i) % 97), unit="gpm") for i in range(n)]


async def submit_all(pub: UplinkPublisher, hist: Committed, n: int) -> None:
    t0 = time.time() - n
    for start in range(0, n, CHUNK):
        batch = samples(start, min(CHUNK, n - start), t0)
        pub.submit(batch, hist.take(len(batch)))
        await asyncio.sleep(0)


async def wait(check: Callable[[], bool]) -> None:
    if not await eventually(check, 600, 0.01):
        raise TimeoutError("the uplink did not finish within 600 s")


async def sustained(workdir: Path, settings: UplinkSettings, n: int) -> float:
    hist = Committed(workdir / "h.sqlite")
    pub = UplinkPublisher(settings=settings, channels=CHANNELS)
    await pub.start(hist)
    await wait(lambda: pub.counters.connected)
    t = time.perf_counter()
    await submit_all(pub, hist, n)
    await wait(lambda: pub.counters.readings_sent >= n)
    elapsed = time.perf_counter() - t
    await pub.close()
    return n / elapsed


async def drain(workdir: Path, settings: UplinkSettings, broker: Mosquitto, n: int) -> float:
    hist = Committed(workdir / "h.sqlite")
    offline = replace(settings, port=free_port())  # nobody listens: the link is down
    pub = UplinkPublisher(settings=offline, channels=CHANNELS)
    await pub.start(hist)
    await submit_all(pub, hist, n)
    await wait(lambda: pub.counters.queue_depth >= n and pub.counters.pending_in_memory == 0)
    await pub.close()
    pub = UplinkPublisher(settings=settings, channels=CHANNELS)
    t = time.perf_counter()
    await pub.start(hist)
    await wait(lambda: pub.counters.queue_depth == 0 and pub.counters.readings_sent >= n)
    elapsed = time.perf_counter() - t
    sent, historical = pub.counters.readings_sent, pub.counters.historical_sent
    await pub.close()
    assert historical == sent == n, (historical, sent, n)
    return n / elapsed


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--readings", type=int, default=200_000)
    ap.add_argument("--backlog", type=int, default=500_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    rates, drains, loads = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-uplink-") as tmp:
        broker = Mosquitto(Path(tmp))
        broker.start()
        try:
            for run in range(args.runs):
                loads.append(os.getloadavg()[0])
                work = Path(tmp) / f"run{run}"
                work.mkdir()
                settings = UplinkSettings(host="127.0.0.1", port=broker.port, node="bench", batch_size=500,
                                          flush_interval=0.05, backlog_rate=10_000_000, max_backoff=0.2,
                                          queue_path=work / "s.uplink-queue.sqlite", client_id=f"bench-{run}")
                rates.append(await sustained(work, settings, args.readings))
                settings = replace(settings, queue_path=work / "d.uplink-queue.sqlite")
                drains.append(await drain(work, settings, broker, args.backlog))
                print(f"run {run + 1}: load average {loads[-1]:.2f}, sustained {rates[-1]:,.0f} readings/s, "
                      f"drain {drains[-1]:,.0f} readings/s", flush=True)
        finally:
            broker.stop()
    print()
    print("| what | median | runs | load average (1 min) at each start |")
    print("|---|---|---|---|")
    runs = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)  # noqa: E731
    ld = ", ".join(f"{x:.1f}" for x in loads)
    print(f"| sustained, {args.readings:,} readings, submit → PUBACK | **{statistics.median(rates):,.0f} readings/s** "
          f"| {runs(rates)} | {ld} |")
    print(f"| backlog drain, {args.backlog:,} readings queued on disk | **{statistics.median(drains):,.0f} "
          f"readings/s** | {runs(drains)} | {ld} |")


if __name__ == "__main__":
    asyncio.run(main())
