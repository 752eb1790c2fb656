"""Benchmark: two checkouts' daemons flat out side by side, at the same time, on the same simulators: which
spends less CPU a poll.

Why side by side: on this shared 2-core machine the speed of a core changes by up to 2× from one minute to the
next (other machines' work on the same host: the bare pymodbus loop of `bench_peers` measured 6,500 and 14,200
reads/s ten minutes apart). Runs one after the other then compare the machine's moments as much as the code;
two daemons running together meet the same moments. Each run starts both (``--a`` and ``--b``, each a checkout
with its own ``.venv``, e.g. a `git worktree` of the commit before a change) on half of the simulated devices
each, flat out (`bench_peers.FLAT`), lets them settle for ``--warm`` s, then reads each daemon's polls (its
health snapshot) and CPU time (user + system, all threads) over ``--seconds``. The order of the two is swapped
every run. What it reports, per run and as the median of the runs: polls/s and CPU µs a poll of each, and B's CPU a
poll over A's (below 1: B is cheaper). The two compete for the same two cores with the simulators, so the
absolute figures are higher than a daemon alone would show; the ratio is the comparison.

Usage: `python bench/bench_side_by_side.py --a /path/to/before --b /path/to/after [--runs 4] [--seconds 15]
[--devices 100] [--interval 1]`. Paced (``--interval``), each daemon polls its half every interval: the
comparison is then the CPU a poll at that load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_peers import FLAT, cpu_seconds, free_ports, start_sims  # noqa: E402
from bench.bench_polling import stop, write_site  # noqa: E402
from bench.machine import machine  # noqa: E402

SMOKE_ARGS = ["--a", str(ROOT), "--b", str(ROOT), "--runs", "1", "--seconds", "2", "--warm", "3", "--devices", "4"]


def polls(workdir: Path) -> int:
    snap = json.loads((workdir / "bench.sqlite.health.json").read_text())
    return sum(i["polls"] for i in snap["instruments"].values())


def one_run(roots: list[Path], ports: list[int], base: Path, warm: float, seconds: float,
            interval: float = FLAT, judged: bool = False) -> list[tuple[float, float]]:
    """(polls/s, CPU µs a poll) of each root's daemon, run at the same time on its share of ``ports``."""
    share = len(ports) // len(roots)
    procs: list[tuple[Path, subprocess.Popen[bytes]]] = []
    try:
        for k, root in enumerate(roots):
            wd = base / f"daemon{k}"
            wd.mkdir(exist_ok=True)
            for f in wd.glob("bench.sqlite*"):
                f.unlink()
            site = write_site(wd, ports[k * share:(k + 1) * share], interval, judged=judged)
            procs.append((wd, subprocess.Popen([str(root / ".venv" / "bin" / "python"), "-m", "monitor.cli",
                                                "--log-level", "ERROR", "run", "--config", str(site)], cwd=root)))
        deadline = time.monotonic() + 60
        while not all((wd / "bench.sqlite.health.json").exists() and polls(wd) for wd, _ in procs):
            if time.monotonic() > deadline or any(p.poll() is not None for _, p in procs):
                raise RuntimeError("a daemon did not start polling within 60 s (see its output above)")
            time.sleep(0.2)
        time.sleep(warm)
        before = [(polls(wd), cpu_seconds(p.pid)) for wd, p in procs]
        t0 = time.monotonic()
        time.sleep(seconds)
        after = [(polls(wd), cpu_seconds(p.pid)) for wd, p in procs]
        dt = time.monotonic() - t0
    finally:
        for _, p in procs:
            stop(p)
    out = []
    for (p0, c0), (p1, c1) in zip(before, after, strict=True):
        n = max(p1 - p0, 1)
        out.append((n / dt, (c1 - c0) / n * 1e6))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (the reference), with its .venv")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (the change), with its .venv")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15.0, help="measuring window")
    ap.add_argument("--warm", type=float, default=8.0, help="s after both poll before measuring")
    ap.add_argument("--devices", type=int, default=100, help="simulated devices, split between the two")
    ap.add_argument("--judged", action="store_true",
                    help="each device a control manhole judged under an ordinance and a permit, as in bench_peers "
                         "(`bench_polling.JUDGED_CHANNELS`); default: channels only the data-quality rules judge")
    ap.add_argument("--interval", type=float, default=FLAT,
                    help="poll interval, s (default: flat out; 1 with --devices 2000: each daemon 1,000 × 1 s)")
    args = ap.parse_args()
    roots = [args.a.resolve(), args.b.resolve()]
    print(f"machine: {machine()}")
    pace = "flat out" if args.interval == FLAT else f"every {args.interval:g} s"
    print(f"A = {roots[0]}\nB = {roots[1]}\n{args.devices // 2} devices each, {pace}, {args.seconds:g} s windows "
          f"after {args.warm:g} s\n")
    print("| run | A polls/s | A CPU µs a poll | B polls/s | B CPU µs a poll | B / A CPU a poll |")
    print("|---:|---:|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        base = Path(tmp)
        ports = free_ports(args.devices)
        sims = start_sims(base, ports, 250)
        try:
            for run in range(args.runs):
                order = [0, 1] if run % 2 == 0 else [1, 0]  # who gets the first half of the devices, and starts first
                got = one_run([roots[k] for k in order], ports, base, args.warm, args.seconds, args.interval,
                              args.judged)
                a, b = (got[order.index(0)], got[order.index(1)])
                rows.append((a, b))
                print(f"| {run + 1} | {a[0]:,.0f} | {a[1]:.1f} | {b[0]:,.0f} | {b[1]:.1f} | {b[1] / a[1]:.3f} |",
                      flush=True)
        finally:
            for s in sims:
                stop(s)
    ratio = statistics.median(b[1] / a[1] for a, b in rows)
    speed = statistics.median(b[0] / a[0] for a, b in rows)
    print(f"\nmedian of {len(rows)}: B's CPU a poll / A's **{ratio:.3f}**; B's polls/s / A's {speed:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
