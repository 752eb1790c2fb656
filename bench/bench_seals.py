"""Benchmark of sealing and verifying the readings, both paths (not a test; run it by hand or from `make bench`).

    .venv/bin/python bench/bench_seals.py [--runs 3] [--seal-channels 100] [--python-seal-channels 20]
                                          [--verify-days 2] [--verify-channels 10] [--paths c,python]
                                          [--workdir DIR]

Issue 15 asks: sealing a day of 1-s data for 100 channels takes under 5 s in a background thread, and
`pretreat journal verify` over a year of 10 channels at 1 s runs at 2 M readings/s or more. A year is 315 M
readings (~11 GB): too large to build here quickly, so the verify figure is measured over ``--verify-days`` and
reported as readings/s, which does not depend on the length.

Two paths compute the same minute indexes (`monitor.stores.seal_scan.DayReader`): the C scanner
(`monitor.stores._sealscan`: one call per channel-day on a connection each thread keeps, the GIL released) and
the Python one (rows into Python, `minute_index`), chosen here with ``PRETREAT_SEALS_PYTHON``. The Python path
seals ``--python-seal-channels`` channels (fewer: it costs ~4 µs of CPU a reading).

- seal: a historian holding one UTC day of 1-s readings per channel (one reading in 1,000 bad, with a reason),
  built directly in SQL; `Sealer.run_once` runs in a worker thread (as the daemon runs it) while the main thread
  waits; each run seals a fresh copy of the file. C: with its two scanning threads (the default) and with one;
  Python: the thread alone (the daemon's setting).
- verify: ``--verify-days`` x ``--verify-channels``, sealed once; then `verify_seals` (what `pretreat journal
  verify` runs for the seals) with 2 jobs (C: threads; Python: worker processes); and the command itself, end to
  end (chain, tail and seals; ``--jobs`` defaults to the cores).

Every figure is wall time and CPU time (the whole process's, all its threads, plus its worker processes'), with
the load average before and after and a calibration of the machine's speed at that moment (the CPU seconds a
10 M-iteration empty Python loop takes): the machine these figures come from is shared, and wall time on a
loaded machine says more about the others than about this code.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine
from monitor.stores.historian_db import open_for_writing
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_scan import DAY, FORCE_PYTHON_ENV, native_available, scan_engine
from monitor.stores.seal_verify import verify_seals
from monitor.stores.seals import Sealer

DAY0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SMOKE_ARGS = ["--runs", "1", "--seal-channels", "5", "--python-seal-channels", "2", "--verify-days", "1",
              "--verify-channels", "2"]


def build(path: Path, *, channels: int, days: int) -> int:
    """A historian with ``days`` UTC days of 1-s readings on each of ``channels`` channels."""
    conn = open_for_writing(path, busy_timeout=5.0)
    n = int(days * DAY)
    try:
        conn.execute("BEGIN")
        for c in range(1, channels + 1):
            conn.execute("INSERT INTO channels (id, site, channel, unit) VALUES (?, 'bench', ?, 'pH')",
                         (c, f"ch{c:03d}"))
            conn.execute(
                "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
                "INSERT INTO readings (channel_id, time, seq, value, quality, reason) "
                "SELECT ?, ? + i, i * ? + ?, CASE WHEN i % 1000 = 7 THEN NULL ELSE 7.0 + (i % 97) / 100.0 END, "
                "CASE WHEN i % 1000 = 7 THEN 1 ELSE 0 END, "
                "CASE WHEN i % 1000 = 7 THEN 'COMM_FAILURE: no reply within 0.5 s' ELSE '' END FROM s",
                (n - 1, c, DAY0, channels, c))
        conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (n * channels + channels + 1,))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return n * channels


def children_cpu() -> float:
    """CPU s used by reaped child processes (the worker processes of a pool, once it is shut down)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def calibration() -> float:
    """CPU s of a 10 M-iteration empty Python loop: how fast this machine is right now."""
    c = time.process_time()
    for _ in range(10_000_000):
        pass
    return time.process_time() - c


def state() -> str:
    return f"load {load()}, 10 M-loop {calibration():.2f} s CPU"


@contextmanager
def on_path(name: str) -> Iterator[str]:
    """Run the block on the C scanner ("c") or the Python path ("python"); worker processes inherit it.
    Yields the path's name as `scan_engine` gives it."""
    before = os.environ.get(FORCE_PYTHON_ENV)
    os.environ[FORCE_PYTHON_ENV] = "1" if name == "python" else ""
    try:
        if name == "c" and not native_available():
            raise SystemExit(f"the C scanner is not available: {scan_engine()}")
        yield scan_engine()
    finally:
        if before is None:
            os.environ.pop(FORCE_PYTHON_ENV, None)
        else:
            os.environ[FORCE_PYTHON_ENV] = before


def seal_in_thread(path: Path, *, threads: int = 1, workers: int = 1) -> tuple[float, float, int]:
    """(wall s, CPU s, readings) of one sealing pass in a worker thread; CPU is the whole process's (the sealing
    thread and its scanning threads: the main thread only waits) plus that of worker processes."""
    sealer = Sealer(path=path, pass_budget=3600.0, workers=workers, threads=threads)
    done: list[float] = []

    def run() -> None:
        t = time.perf_counter()
        sealer.run_once(now=DAY0 + 40 * DAY)
        done.append(time.perf_counter() - t)

    kids, cpu = children_cpu(), time.process_time()
    worker = threading.Thread(target=run, name="sealer")
    worker.start()
    worker.join()
    return done[0], time.process_time() - cpu + children_cpu() - kids, sealer.stats.readings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seal-channels", type=int, default=100)
    ap.add_argument("--python-seal-channels", type=int, default=20, help="channels the Python path seals")
    ap.add_argument("--verify-days", type=int, default=2)
    ap.add_argument("--verify-channels", type=int, default=10)
    ap.add_argument("--paths", default="c,python", help="which paths to measure: c, python or both")
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the files (default: a temp dir)")
    args = ap.parse_args()
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-seals-", dir=args.workdir))
    try:
        print(f"Machine: {machine()}\nat the start: {state()}\n")
        rows = seal_rows(work, args, paths)
        rows += verify_rows(work, args, paths)
        print(f"\nmedian of {args.runs} runs (CPU: the process's, all threads, and its worker processes')\n")
        print("| path | what | measured | goal |\n|---|---|---|---|")
        print("\n".join(rows))
        print(f"\nat the end: {state()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fig(n: int, walls: list[float], cpus: list[float]) -> str:
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return (f"wall **{wall:.2f} s** ({n / wall:,.0f} readings/s; runs {', '.join(f'{s:.2f}' for s in walls)}), "
            f"CPU {cpu:.2f} s ({n / cpu:,.0f} readings per CPU-second, {cpu / n * 1e6:.2f} µs a reading)")


def seal_rows(work: Path, args: argparse.Namespace, paths: list[str]) -> list[str]:
    rows = []
    plans = [("c", args.seal_channels, 2), ("c", args.seal_channels, 1), ("python", args.python_seal_channels, 1)]
    built: dict[int, tuple[Path, int]] = {}
    for name, channels, threads in plans:
        if name not in paths:
            continue
        if channels not in built:
            base = work / f"day-{channels}.sqlite"
            t = time.perf_counter()
            built[channels] = (base, build(base, channels=channels, days=1))
            print(f"built one day x {channels} channels ({built[channels][1]:,} readings) "
                  f"in {time.perf_counter() - t:.1f} s")
        base, n = built[channels]
        walls, cpus = [], []
        with on_path(name) as engine:
            before = state()
            for i in range(args.runs):
                copy = work / f"seal-{i}.sqlite"
                shutil.copy(base, copy)
                wall, cpu, readings = seal_in_thread(copy, threads=threads)
                assert readings == n, (readings, n)
                walls.append(wall)
                cpus.append(cpu)
                copy.unlink()
        how = (f"the sealing thread, {threads} scanning thread{'s' if threads > 1 else ''}" if name == "c"
               else "the sealing thread alone")
        rows.append(f"| {engine} | seal one UTC day, {channels} channels at 1 s ({n:,} readings), {how} "
                    f"(before: {before}) | {_fig(n, walls, cpus)} | < 5 s for 8,640,000 |")
    return rows


def verify_rows(work: Path, args: argparse.Namespace, paths: list[str]) -> list[str]:
    vpath = work / "verify.sqlite"
    t = time.perf_counter()
    vn = build(vpath, channels=args.verify_channels, days=args.verify_days)
    print(f"built {args.verify_days} days x {args.verify_channels} channels ({vn:,} readings) "
          f"in {time.perf_counter() - t:.1f} s")
    with on_path("c" if "c" in paths else "python"):
        seal_in_thread(vpath, threads=2)
    rows = []
    for name in paths:
        with on_path(name) as engine:
            before = state()
            walls, cpus = [], []
            for _ in range(args.runs):
                kids, c = children_cpu(), time.process_time()
                conn = connect_readonly(vpath)
                report = verify_seals(conn, path=vpath, jobs=2)
                conn.close()
                assert report.ok and report.readings == vn, (report.findings[:3], report.readings)
                assert report.engine == engine, (report.engine, engine)
                walls.append(report.seconds)
                cpus.append(time.process_time() - c + children_cpu() - kids)
            cli_walls, cli_cpus = [], []
            for _ in range(args.runs):
                kids, t = children_cpu(), time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "monitor.cli", "journal", "verify", "--db", str(vpath)],
                                      capture_output=True, text=True, check=False)
                cli_walls.append(time.perf_counter() - t)
                cli_cpus.append(children_cpu() - kids)
                assert done.returncode == 0, done.stdout + done.stderr
                assert f"minute indexes by {engine}" in done.stdout, done.stdout
        how = "2 threads" if name == "c" else "2 worker processes"
        rows += [f"| {engine} | verify seals, {args.verify_days} days x {args.verify_channels} channels ({vn:,} "
                 f"readings), {how} (before: {before}) | {_fig(vn, walls, cpus)} | >= 2,000,000 readings/s |",
                 f"| {engine} | `pretreat journal verify` as a command, same file (`--jobs` = cores) | "
                 f"{_fig(vn, cli_walls, cli_cpus)} | |"]
    return rows


if __name__ == "__main__":
    main()
