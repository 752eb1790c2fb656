"""Benchmark: `pretreat replay` over a month of 1-second data from four channels, against reading the CSV
alone.

    .venv/bin/python bench/bench_replay.py [--rows 10000000] [--runs 3]

Generates (once, cached in bench/out/, outside the timing) a CSV of ``--rows`` rows in each documented layout
(``SHAPES``: plain ``time,channel,value``; with ``site`` and ``quality``; the ``pretreat readings`` export):
pH, influent temperature, LEL and flow every second, with realistic noise and a few episodes (a daily low-pH
excursion, an LEL burst, a slug on day 3). Then for each layout, median of ``--runs`` runs each, in this
process:

- ``csv.reader`` alone over the file (the I/O floor the issue measures against);
- the replay, through `monitor.checks.replay_run.replay` (the exact code `pretreat replay` runs), output to a file;

and one more replay of the plain file as a subprocess (``python -m monitor.cli replay``) for its peak RSS.
Prints the machine, the load average (other work on the machine skews wall time: CPU time is printed too),
rows/s and the ratios, as a markdown table. Targets (issues 3, 13): every layout >= 1,000,000 rows/s and
<= 2.5x csv.reader; peak RSS < 200 MB.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from config.loader import load_config  # noqa: E402
from monitor.checks.replay_run import replay  # noqa: E402

OUT = ROOT / "bench" / "out"
START = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
SITE = """[daemon]
historian = "bench.sqlite"

[[site]]
id = "acme-plating"
jurisdiction = "southeast"
timezone = "America/New_York"
kind = "plant"  # the influent temperature limit (Southeast § 112-5A(1)(i)) applies at the plant only

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"
{channels}
[site.permit]
id = "SE-IU-BENCH"
adopt = ["ph_excursion_single", "ph_excursion_monthly"]

[site.rules.slug]
loading = false
"""
CHANNELS = [
    ("ph", "ph", "pH", 0, 14, ""),
    ("temperature", "temperature", "degC", -10, 100, "influent"),
    ("lel", "lel", "%LEL", 0, 100, ""),
    ("flow", "flow", "gpm", 0, 5000, ""),
]


def site_file(path: Path) -> Path:
    chans = "".join(
        f'\n[[site.channel]]\nid = "{cid}"\ninstrument = "m"\ntopic = "mh1/{cid}"\npayload = "number"\n'
        f'kind = "{kind}"\nunit = "{unit}"\nvalid_min = {lo}\nvalid_max = {hi}\n'
        + (f'location = "{loc}"\n' if loc else "")
        for cid, kind, unit, lo, hi, loc in CHANNELS
    )
    path.write_text(SITE.format(channels=chans), encoding="utf-8")
    return path


SHAPES = {
    # name: (header, row template from time text, channel, value, unit)
    "plain": ("time,channel,value", "{t},{c},{v}\n"),
    "site+quality": ("time,channel,value,site,quality", "{t},{c},{v},acme-plating,good\n"),
    "export": ("time,site,channel,value,unit,quality,reason", "{t},acme-plating,{c},{v},{u},good,\n"),
}
"""The documented layouts: `pretreat replay`'s own ``time,channel,value``, the same with ``site`` and
``quality``, and what `pretreat readings` writes (the export, with ``unit`` and an empty ``reason``)."""


def generate(path: Path, rows: int, shape: str = "plain") -> None:
    """Four rows per second; formatting is cached per second, values come from small per-channel tables."""
    header, row = SHAPES[shape]
    units = {cid: unit for cid, _kind, unit, *_ in CHANNELS}
    rnd = random.Random(20251130)
    ph = [f"{7.0 + i / 100:.2f}" for i in range(-20, 21)]
    temp = [f"{t / 10:.1f}" for t in range(180, 251)]
    lel = [f"{x / 10:.1f}" for x in range(0, 21)]
    flow = [f"{f / 10:.1f}" for f in range(800, 1600)]
    seconds = rows // 4
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(header + "\n")
        buf: list[str] = []
        for s in range(seconds):
            ts = datetime.fromtimestamp(START + s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            day, sec = divmod(s, 86400)
            p = "4.50" if 36000 <= sec < 36600 else ph[rnd.randrange(41)]  # 10 low-pH minutes a day
            f = "900.0" if day == 2 and 43200 <= sec < 45000 else flow[rnd.randrange(800)]  # a 30-min slug
            g = "12.0" if day % 7 == 3 and 3600 <= sec < 3605 else lel[rnd.randrange(21)]
            for c, v in (("ph", p), ("temperature", temp[rnd.randrange(71)]), ("lel", g), ("flow", f)):
                buf.append(row.format(t=ts, c=c, v=v, u=units[c]))
            if len(buf) >= 40000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))


def csv_floor(path: Path) -> int:
    n = 0
    with path.open(newline="", encoding="utf-8") as fh:
        for _ in csv.reader(fh):
            n += 1
    return n


def timed(fn, runs: int) -> tuple[float, float, object]:  # type: ignore[no-untyped-def]
    walls, cpus, result = [], [], None
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), result


def subprocess_run(site: Path, data: Path) -> tuple[float, float]:
    """Wall time and peak RSS (MB) of one `pretreat replay` in its own process (interpreter start counts)."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "monitor.cli", "replay", "--config", str(site), str(data),
           "--output", os.devnull]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"CPU {model}, {os.cpu_count()} cores; Python {platform.python_version()} on {platform.system()} "
        f"{platform.release()}; load average {load}"
    )


def bench_shape(shape: str, rows: int, runs: int, site: Path) -> tuple[int, float, float, float, float, object]:
    """(rows, csv.reader wall, CPU, replay wall, CPU, stats) for one layout's file."""
    data = OUT / (f"replay_{rows}.csv" if shape == "plain" else f"replay_{rows}_{shape.replace('+', '_')}.csv")
    if not data.exists():
        t0 = time.perf_counter()
        generate(data, rows, shape)
        print(f"generated {data} ({data.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    config = load_config(site)

    def run_replay() -> object:
        with (
            data.open(newline="", encoding="utf-8") as src,
            tempfile.TemporaryFile("w+", encoding="utf-8") as out,
        ):
            return replay(config, src, out, source=str(data), err=sys.stderr)

    floor_wall, floor_cpu, n = timed(lambda: csv_floor(data), runs)
    rep_wall, rep_cpu, stats = timed(run_replay, runs)
    return int(n) - 1, floor_wall, floor_cpu, rep_wall, rep_cpu, stats  # type: ignore[call-overload]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    site = site_file(OUT / "replay_site.toml")
    print(f"\n{machine()}\n")
    print(f"Each file: {args.rows:,} rows, 4 channels, 1-second data; median of {args.runs} runs in this process.\n")
    print("| layout | csv.reader alone s (CPU) | replay s (CPU) | replay rows/s (wall) | ratio wall / CPU |")
    print("|---|---:|---:|---:|---:|")
    summaries = {}
    for shape in args.shapes.split(","):
        rows, fw, fc, rw, rc, stats = bench_shape(shape, args.rows, args.runs, site)
        summaries[shape] = stats
        print(f"| `{SHAPES[shape][0]}` | {fw:.2f} ({fc:.2f}) | {rw:.2f} ({rc:.2f}) | {rows / rw:,.0f} | "
              f"{rw / fw:.2f} / {rc / fc:.2f} |", flush=True)
    plain = OUT / f"replay_{args.rows}.csv"
    if plain.exists():
        sub_wall, peak_mb = subprocess_run(site, plain)
        print(f"\n`pretreat replay` as a command on the plain file (1 run, interpreter start included): "
              f"{sub_wall:.2f} s, {args.rows / sub_wall:,.0f} rows/s; peak RSS {peak_mb:.0f} MB")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for shape, stats in summaries.items():
        print(f"\nSummary of the replay ({shape}):\n" + stats.summary())  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
