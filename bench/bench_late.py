"""Benchmark: late readings (issue 13): the in-order cost of the live engine, re-judging a late reading, a flood
of late readings on the event loop, and `pretreat audit`.

    .venv/bin/python bench/bench_late.py [--runs 3] [--readings 2000000] [--trials 2000] [--flood-seconds 10]
                                         [--audit-days 8] [--pending-channels 1000] [--pending-seconds 300]
                                         [--parts in-order,pending,late,flood,audit]

Parts (each the median of ``--runs`` runs unless said):

1. **In-order cost** (the flat-out poll ratio must not fall): ``--readings`` good readings of four channels
   (pH, temperature, LEL, flow; 1 s apart; noise, no episode) as `Sample`s through `CheckEngine.process_many` in
   batches of 100 (the daemon's path), replay engine (``live=False``: the engine as it was before late
   readings were handled, its `Processor` unchanged) against the live engine (``live=True``: window appends,
   checkpoints). ns per reading.
1b. **Pending** (``pending``): a steady quiet site of ``--pending-channels`` channels at 1 s for
   ``--pending-seconds`` s through the live engine: the Python heap it then holds, and the readings waiting as
   `Sample`s in the channels' ``pend`` lists (bounded by `PEND_MAX`) beside the window arrays. Run once.
2. **A late reading 10 min old on a 1 s channel**: a pH channel with 20 min of 1-s readings; each trial adds
   the next in-order reading, then one reading 600 s old (in band; every 10th trial pH 3.0, which finds an
   episode in the past and emits revisions); the time of the `process_many` call for the late reading.
   Distribution over ``--trials`` trials.
3. **10,000 late readings/s on one channel, event-loop lag**: on an asyncio loop, every 10 ms a batch of 100
   readings goes through the engine while a ticker measures how late a 5 ms sleep wakes (the health
   snapshot's loop-lag method). Two shapes: (a) a device clock 4 min fast: one reading stamped now+240 s, then
   real readings 100 µs apart (every one late); (b) readings of random age, 1 s to 10 min, on a 1-s channel.
   ``--flood-seconds`` each.
4. **`pretreat audit`**: a historian file with ``--audit-days`` of 1-s readings of four channels (made once,
   cached in bench/out/), its episodes recorded by a live engine; `monitor.audit.audit` timed (readings/s).

Prints the machine, the load average and markdown tables. Goals (issue 13): in-order cost not higher; a late
reading < 5 ms; loop-lag p99 < 50 ms; audit >= 2 M readings/s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402
from config.loader import load_config  # noqa: E402
from config.schema import SiteConfig  # noqa: E402
from monitor.checks import engine as engine_mod  # noqa: E402
from monitor.checks.engine import PEND_MAX, CheckEngine, LiveProcessor  # noqa: E402
from monitor.sample import Sample  # noqa: E402

OUT = ROOT / "bench" / "out"
T0 = 1_772_323_200.0  # 2026-03-01T00:00:00Z
SMOKE_ARGS = ["--runs", "1", "--readings", "100000", "--trials", "200", "--flood-seconds", "2", "--audit-days", "1"]
SITE = """[daemon]
historian = "{db}"

[[site]]
id = "acme"
jurisdiction = "southeast"
timezone = "America/New_York"

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"

[[site.channel]]
id = "ph"
instrument = "m"
topic = "m/ph"
payload = "number"
kind = "ph"
unit = "pH"

[[site.channel]]
id = "temp"
instrument = "m"
topic = "m/temp"
payload = "number"
kind = "temperature"
unit = "degC"
location = "discharge"

[[site.channel]]
id = "lel"
instrument = "m"
topic = "m/lel"
payload = "number"
kind = "lel"
unit = "%LEL"

[[site.channel]]
id = "flow"
instrument = "m"
topic = "m/flow"
payload = "number"
kind = "flow"
unit = "L/s"

[site.permit]
id = "SE-IU-BENCH"
adopt = ["ph_excursion_single", "ph_excursion_monthly"]

[site.rules.slug]
loading = false
"""


def config(db: Path) -> SiteConfig:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"late-{db.stem}.toml"
    path.write_text(SITE.format(db=db), encoding="utf-8")
    return load_config(path)


def value(ch: str, rng: random.Random) -> float:
    return {"ph": 7.2, "temp": 25.0, "lel": 1.0, "flow": 20.0}[ch] + rng.uniform(-0.2, 0.2)


def readings(n: int, *, channels: tuple[str, ...] = ("ph", "temp", "lel", "flow"), seed: int = 1) -> list[Sample]:
    rng = random.Random(seed)
    return [Sample(time=T0 + i // len(channels), site="acme", channel=channels[i % len(channels)],
                   value=value(channels[i % len(channels)], rng), unit="") for i in range(n)]


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


# ---- 1. in-order cost -----------------------------------------------------------------------------------------
def in_order(cfg: SiteConfig, n: int, runs: int) -> list[str]:
    data = readings(n)
    batches = [data[i:i + 100] for i in range(0, n, 100)]
    res: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):
        for live in (False, True):
            engine = CheckEngine.for_config(cfg, live=live)
            t = time.perf_counter()
            for b in batches:
                engine.process_many(b)
            res[live].append((time.perf_counter() - t) / n * 1e9)
    before, after = statistics.median(res[False]), statistics.median(res[True])
    return [f"| in-order reading through `process_many` (batches of 100), replay engine = before | "
            f"{before:.0f} ns ({', '.join(f'{x:.0f}' for x in res[False])}) | |",
            f"| same, live engine (window, checkpoints) = after | {after:.0f} ns "
            f"({', '.join(f'{x:.0f}' for x in res[True])}); **+{after - before:.0f} ns** a reading | |"]


# ---- 1b. what a steady quiet site holds in memory -----------------------------------------------------------
PENDING_SITE = """
[daemon]
historian = "{db}"

[[site]]
id = "acme"
timezone = "UTC"
jurisdiction = "southeast"

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"
port = 1883
poll_interval = 1.0
{channels}
"""


def pending(channels: int, seconds: int) -> list[str]:
    """``channels`` pH channels read every second for ``seconds`` s, quiet and in order, through the live engine in
    batches of one reading each (a round of polls): the Python heap it holds then (tracemalloc, after a full
    collection), and how many readings wait as `Sample`s in ``pend`` beside the window arrays (16 bytes each)."""
    chans = "".join(f'[[site.channel]]\nid = "ph{i}"\ninstrument = "m"\nkind = "ph"\nunit = "pH"\n'
                    f'topic = "acme/ph{i}"\npayload = "number"\n' for i in range(channels))
    path = OUT / "late-pending.toml"
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(PENDING_SITE.format(db=OUT / "late-pending.sqlite", channels=chans), encoding="utf-8")
    cfg = load_config(path)
    engine = CheckEngine.for_config(cfg, live=True)
    rng = random.Random(3)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for k in range(seconds):
        engine.process_many([Sample(time=T0 + k, site="acme", channel=f"ph{i}", value=value("ph", rng), unit="pH")
                             for i in range(channels)])
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    procs = engine.inputs("acme").values()
    waiting = sum(len(p.pend) for p in procs if isinstance(p, LiveProcessor))
    window = sum(len(p.wt) for p in procs if isinstance(p, LiveProcessor))
    return [f"| a steady quiet site in memory: {channels:,} channels × {seconds} s at 1 s, live engine "
            f"(PEND_MAX {PEND_MAX}, C path {'built' if engine_mod._native is not None else 'not built'}) | "
            f"{held / 1e6:.1f} MB of Python heap; {waiting:,} readings pending as `Sample`s, {window:,} in the "
            f"window arrays | bounded |"]


# ---- 2. one late reading --------------------------------------------------------------------------------------
def late_latency(cfg: SiteConfig, trials: int) -> list[str]:
    rng = random.Random(2)
    engine = CheckEngine.for_config(cfg, live=True)
    t = T0
    for _ in range(1200):
        engine.process_many([Sample(time=t, site="acme", channel="ph", value=value("ph", rng), unit="")])
        t += 1.0
    times, bad_times, revs = [], [], 0
    for i in range(trials):
        engine.process_many([Sample(time=t, site="acme", channel="ph", value=value("ph", rng), unit="")])
        t += 1.0
        v = 3.0 if i % 10 == 9 else value("ph", rng)
        late = Sample(time=t - 600.5, site="acme", channel="ph", value=v, unit="")
        s = time.perf_counter_ns()
        engine.process_many([late])
        d = (time.perf_counter_ns() - s) / 1e6
        (bad_times if v == 3.0 else times).append(d)
        revs += len(engine.drain_revisions())
    row = ("| late reading 600 s old on a 1-s channel{} | p50 {:.2f} ms, p90 {:.2f}, p99 {:.2f}, max {:.2f} "
           "({} trials) | < 5 ms |")
    return [row.format(", in band", pct(times, 50), pct(times, 90), pct(times, 99), max(times), len(times)),
            row.format(f", pH 3.0 (an episode found in the past: {revs} revisions in all)", pct(bad_times, 50),
                       pct(bad_times, 90), pct(bad_times, 99), max(bad_times), len(bad_times))]


# ---- 3. flood on the event loop -------------------------------------------------------------------------------
async def _flood(cfg: SiteConfig, seconds: float, shape: str) -> tuple[list[float], int, float, int]:
    rng = random.Random(3)
    engine = CheckEngine.for_config(cfg, live=True)
    t = T0
    for _ in range(1200):  # 20 minutes of 1-s history
        engine.process_many([Sample(time=t, site="acme", channel="ph", value=value("ph", rng), unit="")])
        t += 1.0
    if shape == "fast clock":
        engine.process_many([Sample(time=t + 240.0, site="acme", channel="ph", value=7.0, unit="")])
    lags: list[float] = []
    stop = False

    async def ticker() -> None:
        while not stop:
            s = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append((time.perf_counter() - s - 0.005) * 1000)

    tick = asyncio.create_task(ticker())
    sent, cpu0, end = 0, time.process_time(), time.perf_counter() + seconds
    now = t
    next_at = time.perf_counter()
    while time.perf_counter() < end:
        batch = []
        for _ in range(100):
            if shape == "fast clock":
                now += 1e-4
                ts = now
            else:
                ts = now - rng.uniform(1.0, 600.0)
            batch.append(Sample(time=ts, site="acme", channel="ph", value=value("ph", rng), unit=""))
        if shape != "fast clock":  # the channel's own in-order reading, once a second
            now += 0.01
            batch.append(Sample(time=now, site="acme", channel="ph", value=value("ph", rng), unit=""))
        engine.process_many(batch)
        engine.drain_revisions()
        sent += 100
        next_at += 0.01
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    cpu = time.process_time() - cpu0
    stop = True
    await tick
    return lags, sent, cpu / seconds, engine.counters()["rewinds"]


def flood(cfg: SiteConfig, seconds: float) -> list[str]:
    out = []
    for shape in ("fast clock", "random age"):
        lags, sent, cpu, rewinds = asyncio.run(_flood(cfg, seconds, shape))
        out.append(f"| 10,000 late readings/s on one channel, {shape} ({sent / seconds:,.0f}/s for {seconds:.0f} s, "
                   f"{rewinds} rewinds) | loop lag p50 {pct(lags, 50):.1f} ms, **p99 {pct(lags, 99):.1f} ms**, "
                   f"max {max(lags):.1f}; CPU {cpu * 100:.0f} % of a core | p99 < 50 ms |")
    return out


# ---- 4. audit -------------------------------------------------------------------------------------------------
async def _make_db(cfg: SiteConfig, days: int) -> None:
    from monitor.stores.episodes import EpisodeStore
    from monitor.stores.historian import Historian

    hist = Historian(path=cfg.daemon.historian, commit_interval=0.5, channels=4)
    await hist.start()
    store = EpisodeStore(path=cfg.daemon.historian)
    engine = CheckEngine.for_config(cfg, live=True)
    rng = random.Random(4)
    chans = ("ph", "temp", "lel", "flow")
    for sec0 in range(0, days * 86400, 600):
        batch = []
        for sec in range(sec0, sec0 + 600):
            for ch in chans:
                v = value(ch, rng)
                if ch == "ph" and sec % 86400 < 300:  # a 5-minute low-pH excursion a day
                    v = 4.0
                batch.append(Sample(time=T0 + sec, site="acme", channel=ch, value=v, unit=""))
        hist.submit(batch)
        store.record(engine.process_many(batch))
        await hist.flush()
    await hist.close()
    store.close()


def audit_speed(days: int, runs: int) -> list[str]:
    from monitor.audit import audit

    db = OUT / f"late-audit-{days}d.sqlite"
    cfg = config(db)
    if not db.exists():
        asyncio.run(_make_db(cfg, days))
    import sqlite3

    rates, floors, result = [], [], None
    for _ in range(runs):
        result = audit(cfg)
        rates.append(result.readings / result.seconds)
        conn = sqlite3.connect(db)
        t = time.perf_counter()
        n = conn.execute("SELECT count(*), total(value) FROM readings").fetchone()[0]
        floors.append(n / (time.perf_counter() - t))
        conn.close()
    assert result is not None
    return [f"| `pretreat audit` over {days} days × 4 channels of 1-s readings ({result.readings:,} readings, "
            f"{result.recorded} episodes, {len(result.mismatches)} mismatches) | "
            f"**{statistics.median(rates) / 1e6:.2f} M readings/s** "
            f"({', '.join(f'{r / 1e6:.2f}' for r in rates)}); SQLite's own `count(*), total(value)` scan of "
            f"the same rows at the same time: {statistics.median(floors) / 1e6:.2f} M rows/s | ≥ 2 M/s |"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--readings", type=int, default=2_000_000)
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--flood-seconds", type=float, default=10.0)
    p.add_argument("--audit-days", type=int, default=8)
    p.add_argument("--pending-channels", type=int, default=1000)
    p.add_argument("--pending-seconds", type=int, default=300)
    p.add_argument("--parts", default="in-order,pending,late,flood,audit",
                   help="comma-separated parts to run (default: all five)")
    a = p.parse_args()
    parts = set(a.parts.split(","))
    cfg = config(OUT / "late-engine.sqlite")
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}")
    print("| what | measured | goal |\n|---|---|---|")
    runs = {"in-order": lambda: in_order(cfg, a.readings, a.runs),
            "pending": lambda: pending(a.pending_channels, a.pending_seconds),
            "late": lambda: late_latency(cfg, a.trials),
            "flood": lambda: flood(cfg, a.flood_seconds), "audit": lambda: audit_speed(a.audit_days, a.runs)}
    unknown = parts - runs.keys()
    if unknown:
        p.error(f"--parts: unknown {sorted(unknown)}; known: {list(runs)}")
    for name, part in runs.items():
        if name in parts:
            for r in part():
                print(r, flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
