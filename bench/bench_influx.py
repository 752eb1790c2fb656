"""Benchmark of the InfluxDB sink against a real VictoriaMetrics on loopback (not a test).

    .venv/bin/python bench/bench_influx.py [--points 1000000] [--runs 3]

Measures, median of ``--runs`` runs each, and prints a markdown table with the machine it ran on:

1. sustained: points/s end to end — `InfluxSink.submit` (1,000 samples per call, as a large site's polls
   would arrive, each with its historian seq) until the server acknowledged the last point (durable queue
   and its historian-seq mark included; the historian itself is stood in for by `Committed`). Goal ≥ 50,000/s.
2. backlog drain: a backlog of ``--points`` points queued on disk during an outage, drained after the
   server is back (timed from the restarted sink's start to an empty queue). Goal ≥ 100,000/s.
3. CPU of the durable queue: process CPU time (user + sys, all threads; the server's CPU excluded) to send
   the same points through the sink vs. formatting them and writing them directly, synchronously, with the
   same `LineWriter` and batch size (the cheapest possible path). Goal: < 20 % more. Both runs get the
   points the same way — ``CHUNK`` samples per event-loop turn, as polls arrive — so the producer's loop
   turns are on both sides of the ratio and only the sink differs. At least 7 pairs (after one pair not
   counted, which warms the allocator, the page cache and the server's series), each pair in alternating
   order; median of the per-pair ratios. The queue's own operations (append, read back, acknowledge) are
   also timed alone, without the network, because on a small machine shared with the server the end-to-end
   ratio is noisy.

VictoriaMetrics runs on the same machine and competes for the same cores, so the numbers are a lower
bound for a daemon writing to a remote server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from config.influx import InfluxSettings  # noqa: E402
from monitor.sample import Sample  # noqa: E402
from monitor.stores.influx import APPEND_GROUP_BYTES, MARK, InfluxSink  # noqa: E402
from monitor.stores.influx_lines import SampleFormatter  # noqa: E402
from monitor.stores.influx_writer import LineWriter  # noqa: E402
from monitor.stores.outbox import Outbox  # noqa: E402
from tests.support import VictoriaMetrics  # noqa: E402

CHANNELS = 100  # ~25 instruments x 4 channels
INSTRUMENTS = {("plant", f"ch{i:03d}"): (f"inst{i // 4:02d}", "flow") for i in range(CHANNELS)}
CHUNK = 1000
BATCH = 5000


def make_samples(n: int, base: float) -> list[Sample]:
    """n readings spread round-robin over CHANNELS channels, 10 ms apart per channel."""
    return [Sample(time=base + (i // CHANNELS) * 0.01, site="plant", channel=f"ch{i % CHANNELS:03d}",
                   value=float(i % 1000) / 10, unit="gpm") for i in range(n)]


class Committed:
    """Stands in for the historian the daemon passes to the sink: every sample is committed as soon as it
    is submitted, so what is timed is the sink's own work (historian seq marks included), not a historian's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.committed_seq = 1

    def take(self, n: int) -> int:
        """The seq of the first of ``n`` samples submitted now."""
        first = self.committed_seq
        self.committed_seq += n
        return first


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def settings(vm: VictoriaMetrics, queue: Path) -> InfluxSettings:
    return InfluxSettings(url=vm.url, bucket="bench", queue_path=queue, batch_size=BATCH, flush_interval=0.2,
                          max_backoff=0.5, timeout=30.0, disk_budget_mb=4096)


async def sustained(vm: VictoriaMetrics, work: Path, samples: list[Sample]) -> tuple[float, float]:
    """(points/s, CPU seconds) from the first submit to the last acknowledgement."""
    queue = work / f"q-{time.monotonic_ns()}.sqlite"
    sink = InfluxSink(settings=settings(vm, queue), instruments=INSTRUMENTS, health_interval=None)
    historian = Committed(work / "historian.sqlite")
    await sink.start(historian)
    c0, t0 = cpu(), time.perf_counter()
    for i in range(0, len(samples), CHUNK):
        sink.submit(samples[i:i + CHUNK], historian.take(len(samples[i:i + CHUNK])))
        await asyncio.sleep(0)
    if not await sink.wait_drained(600):
        raise RuntimeError("sink did not drain")
    elapsed, used = time.perf_counter() - t0, cpu() - c0
    sent = sink.counters.points_sent
    await sink.close()
    _remove_queue(queue)
    if sent != len(samples):  # the sink must have done all the work the direct run does
        raise RuntimeError(f"sink acknowledged {sent} points, expected {len(samples)}")
    return len(samples) / elapsed, used


async def direct(vm: VictoriaMetrics, samples: list[Sample]) -> tuple[float, float]:
    """The same points, arriving as they do for the sink (``CHUNK`` per event-loop turn), formatted and
    written straight to the server every ``BATCH`` points, on the event loop: no queue, no threads."""
    writer = LineWriter(settings=settings(vm, Path("/nonexistent")), token="")
    fmt = SampleFormatter(instruments=INSTRUMENTS)
    c0, t0 = cpu(), time.perf_counter()
    start = 0
    for end in range(CHUNK, len(samples) + CHUNK, CHUNK):
        if end - start >= BATCH or end >= len(samples):
            result = writer.write("\n".join(fmt.lines(samples[start:end])).encode())
            if not result.ok:
                raise RuntimeError(f"direct write failed: {result}")
            start = end
        await asyncio.sleep(0)
    elapsed, used = time.perf_counter() - t0, cpu() - c0
    writer.close()
    return len(samples) / elapsed, used


def _remove_queue(queue: Path) -> None:
    """The queue file and everything beside it (WAL, lock, segments), so runs do not pile up page cache."""
    for extra in ("", "-wal", "-shm", ".lock"):
        queue.with_name(queue.name + extra).unlink(missing_ok=True)
    shutil.rmtree(queue.with_name(queue.name + ".segments"), ignore_errors=True)


async def drain(vm: VictoriaMetrics, work: Path, samples: list[Sample]) -> float:
    """Queue ``samples`` while the server is down, restart it, time the drain. Returns points/s."""
    queue = work / f"backlog-{time.monotonic_ns()}.sqlite"
    await asyncio.to_thread(vm.stop)
    sink = InfluxSink(settings=settings(vm, queue), instruments=INSTRUMENTS, health_interval=None)
    historian = Committed(work / "historian.sqlite")
    await sink.start(historian)
    for i in range(0, len(samples), 10 * CHUNK):
        sink.submit(samples[i:i + 10 * CHUNK], historian.take(len(samples[i:i + 10 * CHUNK])))
        await sink.flush()
    await sink.close()
    await asyncio.to_thread(vm.start)
    again = InfluxSink(settings=settings(vm, queue), instruments=INSTRUMENTS, health_interval=None)
    await again.start(historian)
    depth = again.counters.queue_depth
    if depth != len(samples):
        raise RuntimeError(f"backlog holds {depth} points, expected {len(samples)}")
    t0 = time.perf_counter()
    if not await again.wait_drained(600):
        raise RuntimeError("backlog did not drain")
    elapsed = time.perf_counter() - t0
    await again.close()
    _remove_queue(queue)
    return depth / elapsed


def machine() -> str:
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    vm_version = "victoria-metrics (Debian package)"
    return (f"{model}, {os.cpu_count()} cores; Python {platform.python_version()}; SQLite "
            f"{sqlite3.sqlite_version}; influxdb-client {version('influxdb-client')}; {vm_version}; "
            f"{platform.system()} {platform.release()}")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def queue_only(work: Path, samples: list[Sample]) -> float:
    """CPU seconds of the durable queue's own work for these points, without network: append the records
    the sink would append (``APPEND_GROUP_BYTES`` per transaction), read them back, acknowledge them (the
    low-noise part of the comparison)."""
    fmt = SampleFormatter(instruments=INSTRUMENTS)
    records = [("\n".join(fmt.lines(samples[i:i + BATCH])).encode(), BATCH)
               for i in range(0, len(samples), BATCH)]
    per_group = max(1, -(-APPEND_GROUP_BYTES // len(records[0][0])))
    path = work / f"iso-{time.monotonic_ns()}.sqlite"
    box = Outbox(path=path, budget_bytes=4 << 30)
    c0 = cpu()
    for i in range(0, len(records), per_group):
        box.append_many(records[i:i + per_group], marks={MARK: i})  # as the sink: with its historian seq
        while batch := box.peek(max_items=BATCH):
            box.ack(r.id for r in batch)
    used = cpu() - c0
    box.close()
    _remove_queue(path)
    return used


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--points", type=int, default=1_000_000, help="points per sustained run and backlog")
    ap.add_argument("--cpu-points", type=int, default=500_000, help="points per CPU-comparison run")
    ap.add_argument("--runs", type=int, default=3, help="runs of each measure (CPU: at least 7 pairs)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-influx-"))
    vm = VictoriaMetrics(work)
    vm.start()
    base = time.time() - 86400
    try:
        print(f"machine: {machine()}; load average before: {os.getloadavg()[0]:.2f}", flush=True)
        samples = make_samples(args.points, base)
        rates, drains = [], []
        for run in range(args.runs):
            rates.append((await sustained(vm, work, _shift(samples, run * 1000.0)))[0])
            drains.append(await drain(vm, work, _shift(samples, run * 1000.0 + 500.0)))
            print(f"run {run + 1}: sustained {rates[-1]:,.0f}/s, drain {drains[-1]:,.0f}/s", flush=True)
        del samples
        direct_cpu, sink_cpu, iso = await cpu_pairs(vm, work, make_samples(args.cpu_points, base - 86400),
                                                    max(7, args.runs))
        _table(args, rates, drains, direct_cpu, sink_cpu, iso)
    finally:
        vm.stop()
        shutil.rmtree(work, ignore_errors=True)


async def cpu_pairs(vm: VictoriaMetrics, work: Path, part: list[Sample],
                    pairs: int) -> tuple[list[float], list[float], list[float]]:
    """CPU seconds of ``pairs`` direct/sink pairs (and of the queue alone), after one pair not counted.
    Each pair runs back to back, in alternating order, so load from elsewhere and any drift hit both
    sides alike; every run writes new timestamps of the same series."""
    direct_cpu, sink_cpu, iso = [], [], []
    for run in range(-1, pairs):
        now_direct, now_sink = _shift(part, run * 1000.0), _shift(part, run * 1000.0 + 500.0)
        if run % 2:
            d = (await direct(vm, now_direct))[1]
            s = (await sustained(vm, work, now_sink))[1]
        else:
            s = (await sustained(vm, work, now_sink))[1]
            d = (await direct(vm, now_direct))[1]
        q = queue_only(work, part)
        if run < 0:
            print(f"CPU warm-up pair (not counted): direct {d:.3f} s, sink {s:.3f} s", flush=True)
            continue
        direct_cpu.append(d)
        sink_cpu.append(s)
        iso.append(q)
        print(f"CPU pair {run + 1}: direct {d:.3f} s, sink {s:.3f} s ({100 * (s / d - 1):+.1f} %), queue "
              f"alone {q:.3f} s", flush=True)
    return direct_cpu, sink_cpu, iso


def _shift(samples: list[Sample], dt: float) -> list[Sample]:
    """The same readings at other times, so each run writes new points."""
    return [Sample(time=s.time + dt, site=s.site, channel=s.channel, value=s.value, unit=s.unit)
            for s in samples]


def _table(args: argparse.Namespace, rates: list[float], drains: list[float], direct_cpu: list[float],
           sink_cpu: list[float], iso: list[float]) -> None:
    def runs(xs: list[float], f: str = ",.0f", unit: str = "") -> str:
        return ", ".join(f"{x:{f}}{unit}" for x in xs)

    overhead = [100 * (s / d - 1) for s, d in zip(sink_cpu, direct_cpu, strict=True)]
    iso_pct = [100 * q / d for q, d in zip(iso, direct_cpu, strict=True)]
    n = len(direct_cpu)
    print()
    print("| measure | median | goal | runs |")
    print("|---|---|---|---|")
    print(f"| sustained: submit → acknowledged, {args.points:,} points | {median(rates):,.0f} points/s "
          f"| ≥ 50,000 | {runs(rates)} |")
    print(f"| backlog drain, {args.points:,} points | {median(drains):,.0f} points/s | ≥ 100,000 "
          f"| {runs(drains)} |")
    print(f"| CPU, direct synchronous write, {args.cpu_points:,} points | {median(direct_cpu):.3f} s | "
          f"| {runs(direct_cpu, '.3f')} |")
    print(f"| CPU, through the sink and its durable queue | {median(sink_cpu):.3f} s | "
          f"| {runs(sink_cpu, '.3f')} |")
    print(f"| CPU added by the sink (median of {n} paired runs) | {median(overhead):+.1f} % | < 20 % "
          f"| {runs(overhead, '+.1f', ' %')} |")
    print(f"| CPU of the queue operations alone (append, read, ack) | {median(iso_pct):.1f} % of direct | "
          f"< 20 % | {runs(iso_pct, '.1f', ' %')} |")


if __name__ == "__main__":
    asyncio.run(main())
