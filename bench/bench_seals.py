"""Benchmark of sealing and verifying the readings (not a test; run it by hand or from `make bench`).

    .venv/bin/python bench/bench_seals.py [--runs 3] [--seal-channels 100] [--seal-workers 1,2]
                                          [--verify-days 30] [--verify-channels 10] [--workdir DIR]

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
- encoding in SQLite: the CPU a reading costs when SQLite builds the day's canonical text itself
  (``group_concat`` over the readings in (time, seq) order, so Python receives one string a channel-day and
  hashes it), beside what reading rows into Python and hashing them costs (the seals' own path), over the
  verify file's first day. Two SQL encodings are timed: ``printf('%!.17g')`` lines, and exact integer columns
  (a REAL as its integer part and its fraction times 2^52). See the README (Seals) for what this showed.

Every figure is given as wall time and CPU time (the sealing thread's own CPU plus its worker processes'), with
the load average before and after: the machine these figures come from is shared, and wall time on a loaded
machine says more about the others than about this code.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine
from monitor.stores.historian_db import open_for_writing
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_verify import verify_seals
from monitor.stores.seals import DAY, Sealer, minute_index, read_day

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


def children_cpu() -> float:
    """CPU s used by reaped child processes (the worker processes of a pool, once it is shut down)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def seal_in_thread(path: Path, workers: int = 1) -> tuple[float, float, int]:
    """(wall s, CPU s, readings) of one sealing pass in a worker thread; CPU is the thread's own plus that of
    the worker processes it started."""
    sealer = Sealer(path=path, pass_budget=3600.0, workers=workers)
    done: list[tuple[float, float]] = []

    def run() -> None:
        t, c = time.perf_counter(), time.thread_time()
        sealer.run_once(now=DAY0 + 40 * DAY)
        done.append((time.perf_counter() - t, time.thread_time() - c))

    kids = children_cpu()
    worker = threading.Thread(target=run, name="sealer")
    worker.start()
    worker.join()
    wall, cpu = done[0]
    return wall, cpu + children_cpu() - kids, sealer.stats.readings


_P52 = "4503599627370496.0"  # 2^52: the fraction of a REAL with |x| >= 1 times this is an exact integer
SQL_ENCODINGS = {
    "printf('%!.17g') lines": "printf('%!.17g,%d,%!.17g,%d,%s', time, seq, value, quality, hex(reason))",
    "exact integer columns": None,  # built below: one group_concat a column
}


def _int_columns_sql() -> str:
    def whole(x: str) -> str:
        return f"CAST({x} AS INTEGER)"

    def frac(x: str) -> str:
        return f"CAST(({x} - CAST({x} AS INTEGER)) * {_P52} AS INTEGER)"

    inner = (f"SELECT {whole('time')} AS ti, {frac('time')} AS tf, seq, coalesce({whole('value')}, 'n') AS vi, "
             f"{frac('value')} AS vf, quality, CASE WHEN reason <> '' THEN seq || ':' || length(reason) || ':' "
             f"|| reason END AS r FROM readings WHERE channel_id = ? AND time >= ? AND time < ? ORDER BY time, seq")
    return ("SELECT count(*), group_concat(ti), group_concat(tf), group_concat(seq), group_concat(vi), "
            f"group_concat(vf), group_concat(quality), group_concat(r, '') FROM ({inner})")


def encoding_costs(path: Path, channels: int, runs: int) -> dict[str, float]:
    """CPU µs a reading of each way of turning a channel-day into a digest (median of ``runs``): rows into
    Python (the seals' path) and SQLite building the text (`SQL_ENCODINGS`). Only the cost is compared: the
    SQL texts are not the seal's format."""
    lines = ("SELECT count(*), group_concat(l, char(10)) FROM (SELECT {} AS l FROM readings WHERE channel_id = ? "
             "AND time >= ? AND time < ? ORDER BY time, seq)")
    queries = {name: lines.format(expr) if expr else _int_columns_sql() for name, expr in SQL_ENCODINGS.items()}
    conn = connect_readonly(path)
    try:
        def python_path(cid: int) -> int:
            rows = read_day(conn, cid, DAY0, 2**62)
            hashlib.sha256(minute_index(rows, DAY0)).digest()
            return len(rows)

        def sql_path(query: str) -> Any:
            def run(cid: int) -> int:
                n, *texts = conn.execute(query, (cid, DAY0, DAY0 + DAY)).fetchone()
                h = hashlib.sha256()
                for text in texts:
                    h.update((text or "").encode())
                return int(n)
            return run

        ways = {"rows into Python, minute index (the seals' path)": python_path,
                **{f"SQLite builds the text: {name}": sql_path(q) for name, q in queries.items()}}
        out = {}
        for name, way in ways.items():
            per = []
            for _ in range(runs):
                c = time.process_time()
                n = sum(way(cid) for cid in range(1, channels + 1))
                per.append((time.process_time() - c) / n * 1e6)
            out[name] = statistics.median(per)
        return out
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seal-channels", type=int, default=100)
    ap.add_argument("--seal-workers", default="1,2", help="reader processes for sealing, one run each (1: the "
                                                          "worker thread alone)")
    ap.add_argument("--verify-days", type=int, default=30)
    ap.add_argument("--verify-channels", type=int, default=10)
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the files (default: a temp dir)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-seals-", dir=args.workdir))
    try:
        print(f"Machine: {machine()}\nload average at the start: {load()}\n")
        rows = seal_rows(work, args)
        rows += verify_rows(work, args)
        print(f"\nmedian of {args.runs} runs (CPU: the thread's own and its worker processes')\n")
        print("| what | measured | goal |\n|---|---|---|")
        print("\n".join(rows))
        print(f"\nload average at the end: {load()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fig(n: int, walls: list[float], cpus: list[float]) -> str:
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return (f"wall **{wall:.2f} s** ({n / wall:,.0f} readings/s; runs {', '.join(f'{s:.2f}' for s in walls)}), "
            f"CPU {cpu:.2f} s ({n / cpu:,.0f} readings per CPU-second, {cpu / n * 1e6:.2f} µs a reading)")


def seal_rows(work: Path, args: argparse.Namespace) -> list[str]:
    base = work / "day.sqlite"
    t = time.perf_counter()
    n = build(base, channels=args.seal_channels, days=1)
    print(f"built one day x {args.seal_channels} channels ({n:,} readings) in {time.perf_counter() - t:.1f} s")
    rows = []
    for workers in (int(w) for w in args.seal_workers.split(",")):
        walls, cpus = [], []
        for i in range(args.runs):
            copy = work / f"seal-{i}-{workers}.sqlite"
            shutil.copy(base, copy)
            wall, cpu, readings = seal_in_thread(copy, workers)
            assert readings == n, (readings, n)
            walls.append(wall)
            cpus.append(cpu)
            copy.unlink()
        how = "the worker thread alone" if workers == 1 else f"the worker thread and {workers} processes"
        rows.append(f"| seal one UTC day, {args.seal_channels} channels at 1 s ({n:,} readings), {how} | "
                    f"{_fig(n, walls, cpus)} | < 5 s |")
    return rows


def verify_rows(work: Path, args: argparse.Namespace) -> list[str]:
    vpath = work / "month.sqlite"
    t = time.perf_counter()
    vn = build(vpath, channels=args.verify_channels, days=args.verify_days)
    print(f"built {args.verify_days} days x {args.verify_channels} channels ({vn:,} readings) "
          f"in {time.perf_counter() - t:.1f} s")
    seal_in_thread(vpath, 2)
    walls, cpus = [], []
    for _ in range(args.runs):
        kids, c = children_cpu(), time.process_time()
        conn = connect_readonly(vpath)
        report = verify_seals(conn, path=vpath, jobs=2)
        conn.close()
        assert report.ok and report.readings == vn, (report.findings[:3], report.readings)
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
    rows = [f"| verify seals, {args.verify_days} days x {args.verify_channels} channels ({vn:,} readings), "
            f"2 processes | {_fig(vn, walls, cpus)} | >= 2,000,000 readings/s |",
            f"| `pretreat journal verify` as a command, same file | {_fig(vn, cli_walls, cli_cpus)} | |"]
    channels = min(args.verify_channels, 10)
    for name, us in encoding_costs(vpath, channels, args.runs).items():
        rows.append(f"| {name}: one day x {channels} channels | {us:.2f} µs CPU a reading "
                    f"({1e6 / us:,.0f} readings per CPU-second) | |")
    return rows


if __name__ == "__main__":
    main()
