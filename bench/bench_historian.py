"""Benchmark of the SQLite historian and `pretreat readings` (not a test: run it by hand).

    .venv/bin/python bench/bench_historian.py [--runs 3] [--ingest 1000000] [--days 30] [--keep DIR]

Measures, median of ``--runs`` runs, and prints a markdown table with the machine it ran on:

- ingest: samples/s through `Historian.submit` (chunks of 1,000, as a busy daemon would submit) + `flush`,
  into a fresh file, 1 M samples of 10 channels;
- export: one channel-month of 1-second readings (2.6 M rows) to CSV and JSON Lines through the real CLI
  path (`monitor.export.export_readings`), into a temporary file. Two channels: a pH meter (int16 × 0.01,
  so values repeat) and a flow meter (float32, so nearly every value is distinct: the hard case for
  formatting). Times are poll-reply arrival times (fractional seconds), with a comm failure now and then;
- peak RSS of the process (``resource.getrusage``), after everything.

The export data set is generated once (through the historian too) and kept out of the timings.

Results, 2026-11-30, AMD EPYC VM, 2 cores (shared: other test suites kept the 1-minute load at 1.2-1.6),
Python 3.11.7, SQLite 3.40.1 (``--keep``; medians of 3):

| measurement | median |
|---|---|
| ingest 1,000,000 samples (10 channels), 1,000-sample submits + flush | 556,387 samples/s |
| `pretreat readings` ph month to CSV as a command (new process, serial) / its peak RSS | 3.17 s / 83 MiB |
| export ph month (2,592,000 rows) to CSV, serial | 2.30 s |
| export ph month to CSV, 2 worker processes | 2.51 s (runs 1.69-2.93 s) |
| export flow month (float32 values) to CSV, serial | 3.29 s |
| export flow month to CSV, 2 worker processes | 2.10 s |
| export ph month to JSON Lines, serial | 2.66 s |
| export flow month to JSON Lines, 2 worker processes | 3.03 s |

Of the command's 3.17 s, ~0.65 s is start-up (`monitor.cli` imports every subcommand's module to build its
parser; 71 MiB of the 83 MiB RSS). Serial rendering costs ~0.9 µs per row here, half of it in the `sqlite3`
module creating row objects. Workers cost ~30 % more CPU in total, so they only help on idle cores (the
variance above is the other load); `pretreat readings` picks them by load average (`export.auto_jobs`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine
from monitor.export import export_readings
from monitor.sample import Quality, Sample
from monitor.stores.historian import Historian

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SITE = "acme-plating"




def month_samples(days: int, seed: int = 1) -> Iterator[list[Sample]]:
    """Chunks of one hour of 1-second polls of a pH meter and a flow meter, interleaved as polled."""
    rng = random.Random(seed)
    ph_raw, flow = 720, 150.0
    for hour in range(days * 24):
        chunk: list[Sample] = []
        for s in range(3600):
            t = T0 + hour * 3600 + s + 0.040 + rng.random() * 0.030  # reply arrival, 40-70 ms after the tick
            if rng.random() < 1e-4:
                for ch, unit in (("ph", "pH"), ("flow", "gpm")):
                    chunk.append(Sample.bad(time=t, site=SITE, channel=ch, unit=unit,
                                            quality=Quality.COMM_FAILURE,
                                            reason="ph-meter: no reply within 0.5 s (timeout)"))
                continue
            ph_raw = min(900, max(500, ph_raw + rng.choice((-1, 0, 0, 1))))
            flow = max(0.0, flow + rng.gauss(0, 2.0))
            flow32 = struct.unpack("<f", struct.pack("<f", flow))[0]  # what a float32 register carries
            chunk.append(Sample(time=t, site=SITE, channel="ph", value=ph_raw * 0.01, unit="pH"))
            chunk.append(Sample(time=t + 0.001, site=SITE, channel="flow", value=flow32, unit="gpm"))
        yield chunk


def ingest_samples(n: int) -> list[list[Sample]]:
    chans = [f"ch{i}" for i in range(10)]
    samples = [Sample(time=T0 + i // 10 + 0.25, site=SITE, channel=chans[i % 10], value=(i % 5000) * 0.01,
                      unit="u") for i in range(n)]
    return [samples[i:i + 1000] for i in range(0, n, 1000)]


async def _ingest(path: Path, chunks: list[list[Sample]]) -> float:
    h = Historian(path=path)
    await h.start()
    t = time.perf_counter()
    for chunk in chunks:
        h.submit(chunk)
    await h.flush()
    elapsed = time.perf_counter() - t
    await h.close()
    assert h.counters.samples_written == sum(map(len, chunks))
    return elapsed


async def _build(path: Path, days: int) -> int:
    h = Historian(path=path)
    await h.start()
    for chunk in month_samples(days):
        h.submit(chunk)
        if h.counters.queue_depth > 200_000:
            await h.flush()
    await h.close()
    return h.counters.samples_written


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def export_once(db: Path, channel: str, fmt: str, jobs: int, out_dir: Path) -> int:
    target = out_dir / f"out.{fmt}"
    with target.open("w", encoding="utf-8", newline="") as fh:
        rows = export_readings(db, site=SITE, channel=channel, start=None, end=None, fmt=fmt, out=fh,
                               jobs=jobs)
    target.unlink()
    return rows


def cli_once(db: Path, out_dir: Path) -> tuple[str, str, str]:
    """`pretreat readings` as a user runs it (a new process, serial), with that process's peak RSS."""
    target = out_dir / "cli.csv"
    argv = [sys.executable, "-m", "monitor.cli", "readings", "--db", str(db), "--site", SITE,
            "--channel", "ph", "--jobs", "1", "--output", str(target)]
    t = time.perf_counter()
    subprocess.run(argv, check=True, cwd=Path(__file__).resolve().parents[1])
    elapsed = time.perf_counter() - t
    target.unlink()
    return ("`pretreat readings` ph month to CSV as a command (new process, serial): time / its peak RSS",
            f"{elapsed:.2f} s / {rss_mib()[1]:.0f} MiB", "1 run")


def rss_mib() -> tuple[float, float]:
    """Peak RSS of this process and of its largest finished child (the export's workers), MiB."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ingest", type=int, default=1_000_000, help="samples in the ingest run")
    ap.add_argument("--days", type=int, default=30, help="days of 1-second readings in the export data set")
    ap.add_argument("--keep", type=Path, help="folder for the export data set (reused if present)")
    args = ap.parse_args()
    jobs = min(4, os.cpu_count() or 1)  # what `pretreat readings` uses on an idle machine (see auto_jobs)
    print(f"machine: {machine()}\n")
    results: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-historian-") as tmp:
        work = Path(tmp)
        db = (args.keep or work) / "month.sqlite"
        if not db.exists():
            db.parent.mkdir(parents=True, exist_ok=True)
            t = time.perf_counter()
            n = asyncio.run(_build(db, args.days))
            print(f"(export data set: {n:,} samples written in {time.perf_counter() - t:.1f} s, "
                  f"{db.stat().st_size / 2**20:.0f} MiB)\n")
        if threading.active_count() > 1:
            print("warning: other threads are running, so exports render serially whatever --jobs says")
        results.append(cli_once(db, work))  # first: no forked worker has raised RUSAGE_CHILDREN yet
        rows = export_once(db, "ph", "csv", 1, work)
        cases = (("ph", "csv", 1), ("ph", "csv", jobs), ("flow", "csv", 1), ("flow", "csv", jobs),
                 ("ph", "json", 1), ("flow", "json", jobs))
        for channel, fmt, j in cases:
            times = timed(partial(export_once, db, channel, fmt, j, work), args.runs)
            how = "serial" if j == 1 else f"{j} worker processes"
            results.append((f"export {channel} month ({rows:,} rows) to {fmt.upper()}, {how}",
                            f"{statistics.median(times):.2f} s", _spread(times)))
        own, child = rss_mib()
        results.append(("peak RSS of this process after the exports / of its largest child",
                         f"{own:.0f} / {child:.0f} MiB", ""))
        chunks = ingest_samples(args.ingest)
        ingest = [asyncio.run(_ingest(work / f"ingest{i}.sqlite", chunks)) for i in range(args.runs)]
        rate = args.ingest / statistics.median(ingest)
        results.insert(0, (f"ingest {args.ingest:,} samples (10 channels), 1,000-sample submits + flush",
                           f"{rate:,.0f} samples/s", _spread(ingest)))
    own, _child = rss_mib()
    results.append(("peak RSS after ingest (holds the 1 M Sample objects it submits)", f"{own:.0f} MiB", ""))
    print("| measurement | median | runs |\n|---|---|---|")
    for name, value, spread in results:
        print(f"| {name} | {value} | {spread} |")
    return 0


def _spread(times: list[float]) -> str:
    return ", ".join(f"{t:.2f} s" for t in times)


if __name__ == "__main__":
    sys.exit(main())
