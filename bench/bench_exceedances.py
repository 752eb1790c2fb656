"""Benchmark: `pretreat exceedances` over 100,000 episodes (not a test; run it by hand or from `make bench`).

    .venv/bin/python bench/bench_exceedances.py [--episodes 100000] [--runs 3]

Generates once (cached in bench/out/, outside the timing) a daemon database as the daemon writes it: the
episode store's ``episode_events`` (through `EpisodeStore.record`, the real API) and the historian's
``readings`` for four channels (pH, influent temperature, LEL, flow; instruments polled at 1 s). Episodes
of ph_high, ph_low, temperature_high and lel_single, 10–120 s long, a few minutes apart; each end carries
its peak, as the check engine writes it; the last four are still open. Readings are written for each episode
and a minute either side, 1 per second, with ~3 % missing and ~2 % bad (comm_failure), so completeness is
below 100 % and varies. Readings are inserted straight into the historian's table (the async writer would
only slow the generation down; the layout is the same).

Timed, median of ``--runs`` runs each, in this process (`monitor.exceedances.report`, the code the command
runs, output to a file), from opening the file to the last byte written:

- ``table``: the default command, no filter: all 100,000 episodes found and paired, the latest 500 shown
  with completeness;
- ``table, one rule, one month``: ``--site --rule ph_high --from --to``;
- ``csv, all``: ``--format csv --limit 0``: every episode with its completeness (one range count per episode
  over ~6.5 M readings);
- ``json, all, --db only``: no site file, so no completeness: the cost of finding, pairing and writing;

and the whole command as a subprocess (Python start-up, site-file load, query, output), the default table.
Prints the machine, the load average and a markdown table. Target (issue 4): under 1 s over 100,000
episodes.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402
from config.loader import load_config  # noqa: E402
from monitor.checks.events import EpisodeEvent  # noqa: E402
from monitor.exceedances import report  # noqa: E402
from monitor.stores.episodes import EpisodeStore  # noqa: E402
from monitor.stores.historian_db import open_for_writing  # noqa: E402
from monitor.stores.readonly import connect_readonly  # noqa: E402

OUT = ROOT / "bench" / "out"
T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z
SITE = "acme-plating"
SITE_FILE = """[daemon]
historian = "{db}"

[[site]]
id = "acme-plating"
jurisdiction = "southeast"
timezone = "America/New_York"
kind = "plant"  # the influent temperature limit (Southeast § 112-5A(1)(i)) applies at the plant only

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"
poll_interval = 1.0
{channels}
"""
CHANNELS = [("ph", "ph", "pH", 0, 14, ""), ("temperature", "temperature", "degC", -10, 100, "influent"),
            ("lel", "lel", "%LEL", 0, 100, ""), ("flow", "flow", "gpm", 0, 5000, "")]
RULES = [("ph", "ph_high", 9.0, 1.0, "Town of Southeast § 112-5A(1)(c)"),
         ("ph", "ph_low", 5.0, -1.0, "Town of Southeast § 112-5A(1)(c)"),
         ("temperature", "temperature_high", 40.0, 1.0, "Town of Southeast § 112-5A(1)(i)"),
         ("lel", "lel_single", 10.0, 1.0, "Town of Southeast § 112-5A(1)(a)")]




def site_file(folder: Path, db: Path) -> Path:
    chans = "".join(
        f'\n[[site.channel]]\nid = "{cid}"\ninstrument = "m"\ntopic = "mh1/{cid}"\npayload = "number"\n'
        f'kind = "{kind}"\nunit = "{unit}"\nvalid_min = {lo}\nvalid_max = {hi}\n'
        + (f'location = "{loc}"\n' if loc else "")
        for cid, kind, unit, lo, hi, loc in CHANNELS)
    path = folder / "bench_exceedances.toml"
    path.write_text(SITE_FILE.format(db=db, channels=chans), encoding="utf-8")
    return path


def generate(db: Path, episodes: int) -> tuple[int, int]:
    """Write the database; returns (episode events, readings)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    rnd = random.Random(4)
    conn = open_for_writing(db, busy_timeout=5.0)
    store = EpisodeStore(path=db)
    ids = {}
    for cid, _kind, unit, *_ in CHANNELS:
        conn.execute("INSERT INTO channels (site, channel, unit) VALUES (?, ?, ?)", (SITE, cid, unit))
        ids[cid] = conn.execute("SELECT id FROM channels WHERE channel = ?", (cid,)).fetchone()[0]
    clock = {ch: T0 for ch, *_ in RULES}  # one clock per channel: pH's high and low episodes never overlap
    events: list[EpisodeEvent] = []
    readings: list[tuple[int, float, int, float | None, int, str]] = []
    seq = 0
    n_readings = 0
    for n in range(episodes):
        ch, rule, limit, sign, citation = RULES[n % len(RULES)]
        start = clock[ch] + rnd.randint(180, 900)
        length = rnd.randint(10, 120)
        clock[ch] = start + length
        peak = limit + sign * rnd.uniform(0.1, 3.0)
        events.append(EpisodeEvent(start, SITE, ch, rule, "start", limit + sign * 0.05, limit, citation))
        if n < episodes - len(RULES):
            events.append(EpisodeEvent(start + length, SITE, ch, rule, "end", limit - sign * 0.3, limit, citation,
                                       peak))
        for k in range(-60, length + 61):
            if rnd.random() < 0.03:
                continue
            seq += 1
            bad = rnd.random() < 0.02
            inside = 0 <= k < length
            value = None if bad else (limit + sign * rnd.uniform(0.05, peak * sign - limit * sign)
                                      if inside else limit - sign * rnd.uniform(0.1, 1.0))
            readings.append((ids[ch], start + k, seq, value, 1 if bad else 0, "timeout" if bad else ""))
        if len(readings) > 200_000:
            n_readings += _flush(conn, readings, seq)
        if len(events) >= 20_000:
            store.record(events)
            events.clear()
    n_readings += _flush(conn, readings, seq)
    store.record(events)
    total = conn.execute("SELECT COUNT(*) FROM episode_events").fetchone()[0]
    store.close()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return int(total), n_readings


def _flush(conn: sqlite3.Connection, rows: list[tuple[int, float, int, float | None, int, str]], seq: int) -> int:
    conn.execute("BEGIN")
    conn.executemany("INSERT OR IGNORE INTO readings VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (seq + 1,))
    conn.execute("COMMIT")
    n = len(rows)
    rows.clear()
    return n


def timed(fn: Callable[[], object], runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def scenario(db: Path, config_path: Path | None, **opts: object) -> Callable[[], int]:
    defaults: dict[str, object] = dict(site=None, rule=None, channel=None, format="table", evidence=False,
                                       data_quality=False, limit=None)
    args = argparse.Namespace(**{**defaults, **opts})
    config = load_config(config_path) if config_path else None
    start, end = opts.get("start"), opts.get("end")

    def run() -> int:
        conn = connect_readonly(db)
        sink = io.StringIO()
        try:
            report(conn, sink, config=config, args=args, start=start, end=end,  # type: ignore[arg-type]
                   now=T0 + 10 * 365 * 86400)
        finally:
            conn.close()
        return len(sink.getvalue().splitlines())

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    db = OUT / f"exceedances-{args.episodes}.sqlite"
    config_path = site_file(OUT, db)
    if not db.exists():
        t = time.perf_counter()
        n_events, n_readings = generate(db, args.episodes)
        print(f"generated {n_events} episode events, {n_readings} readings in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
    month = (T0 + 30 * 86400, T0 + 61 * 86400)
    cases = [
        ("table (default: all found, latest 500 shown)", scenario(db, config_path)),
        ("table, --rule ph_high, one month", scenario(db, config_path, site=SITE, rule="ph_high",
                                                      start=month[0], end=month[1])),
        ("csv, all, with completeness", scenario(db, config_path, format="csv", limit=0)),
        ("json, all, --db only (no completeness)", scenario(db, None, format="json", limit=0)),
    ]
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    print(f"{args.episodes} episodes; median of {args.runs} runs\n")
    print("| case | seconds | lines out |\n|---|---:|---:|")
    for name, fn in cases:
        fn()  # warm the page cache
        seconds, lines = timed(fn, args.runs)
        print(f"| {name} | {seconds:.3f} | {lines} |", flush=True)
    cmd = [sys.executable, "-c", "import argparse, sys; from monitor.exceedances import add_arguments; "
           "p = argparse.ArgumentParser(); add_arguments(p); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))",
           "--config", str(config_path)]
    seconds, _ = timed(lambda: subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL), args.runs)
    print(f"| whole command as a subprocess (`pretreat exceedances --config FILE`) | {seconds:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
