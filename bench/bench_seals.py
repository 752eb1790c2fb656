"""Benchmark of sealing and verifying the readings (not a test; run it by hand or from `make bench`).

    .venv/bin/python bench/bench_seals.py [--runs 3] [--seal-channels 100] [--verify-days 30]
                                          [--verify-channels 10] [--workdir DIR]

Issue 15 asks: sealing a day of 1-s data for 100 channels takes under 5 s in a background thread, and
`pretreat journal verify` over a year of 10 channels at 1 s runs at 2 M readings/s or more. A year is 315 M
readings (~11 GB): too large to build here quickly, so the verify figure is measured over ``--verify-days``
(default a month, 25.9 M readings) and reported as readings/s, which does not depend on the length.

- seal: a historian holding one UTC day of 1-s readings for ``--seal-channels`` channels (one reading in 1,000
  bad, with a reason), built directly in SQL; `Sealer.run_once` runs in a worker thread (as the daemon runs
  it) while the main thread waits; time of the pass, readings/s. Each run seals a fresh copy of the file.
  Measured with the thread alone (``workers=1``) and with two worker processes reading (the daemon's setting).
- verify: the same for ``--verify-days`` × ``--verify-channels``, sealed once; then `verify_seals` (what
  `pretreat journal verify` runs for the seals) with 2 worker processes over all of them, readings/s; and the
  command itself, end to end (chain, tail and seals; ``--jobs`` defaults to the cores).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine
from monitor.stores.historian_db import open_for_writing
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_verify import verify_seals
from monitor.stores.seals import DAY, Sealer

DAY0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SMOKE_ARGS = ["--runs", "1", "--seal-channels", "5", "--verify-days", "1", "--verify-channels", "2"]


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


def seal_in_thread(path: Path, workers: int = 1) -> tuple[float, int]:
    sealer = Sealer(path=path, pass_budget=3600.0, workers=workers)
    done: list[float] = []

    def run() -> None:
        t = time.perf_counter()
        sealer.run_once(now=DAY0 + 40 * DAY)
        done.append(time.perf_counter() - t)

    worker = threading.Thread(target=run, name="sealer")
    worker.start()
    worker.join()
    return done[0], sealer.stats.readings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seal-channels", type=int, default=100)
    ap.add_argument("--verify-days", type=int, default=30)
    ap.add_argument("--verify-channels", type=int, default=10)
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the files (default: a temp dir)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-seals-", dir=args.workdir))
    try:
        print(f"Machine: {machine()}\n")
        base = work / "day.sqlite"
        t = time.perf_counter()
        n = build(base, channels=args.seal_channels, days=1)
        print(f"built one day x {args.seal_channels} channels ({n:,} readings) in {time.perf_counter() - t:.1f} s")
        seal_times: dict[int, list[float]] = {1: [], 2: []}
        for i in range(args.runs):
            for workers, times in seal_times.items():
                copy = work / f"seal-{i}-{workers}.sqlite"
                shutil.copy(base, copy)
                seconds, readings = seal_in_thread(copy, workers)
                assert readings == n, (readings, n)
                times.append(seconds)
                copy.unlink()
        vpath = work / "month.sqlite"
        t = time.perf_counter()
        vn = build(vpath, channels=args.verify_channels, days=args.verify_days)
        print(f"built {args.verify_days} days x {args.verify_channels} channels ({vn:,} readings) "
              f"in {time.perf_counter() - t:.1f} s")
        seal_in_thread(vpath, 2)
        verify_times = []
        for _ in range(args.runs):
            conn = connect_readonly(vpath)
            report = verify_seals(conn, path=vpath, jobs=2)
            conn.close()
            assert report.ok and report.readings == vn, (report.findings[:3], report.readings)
            verify_times.append(report.seconds)
        cli_times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "monitor.cli", "journal", "verify", "--db", str(vpath)],
                                  capture_output=True, text=True, check=False)
            cli_times.append(time.perf_counter() - t)
            assert done.returncode == 0, done.stdout + done.stderr
        ver_s, cli_s = statistics.median(verify_times), statistics.median(cli_times)
        print(f"\nmedian of {args.runs} runs\n")
        print("| what | measured | goal |\n|---|---|---|")
        for workers, times in seal_times.items():
            seal_s = statistics.median(times)
            how = "the worker thread alone" if workers == 1 else f"the worker thread and {workers} processes"
            print(f"| seal one UTC day, {args.seal_channels} channels at 1 s ({n:,} readings), {how} | "
                  f"**{seal_s:.2f} s** ({n / seal_s:,.0f} readings/s; runs {', '.join(f'{s:.2f}' for s in times)}) "
                  "| < 5 s |")
        print(f"| verify seals, {args.verify_days} days x {args.verify_channels} channels ({vn:,} readings) | "
              f"**{vn / ver_s:,.0f} readings/s** ({ver_s:.2f} s) | >= 2,000,000 readings/s |")
        print(f"| `pretreat journal verify` as a command, same file | {cli_s:.2f} s "
              f"({vn / cli_s:,.0f} readings/s end to end) | |")
        print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
