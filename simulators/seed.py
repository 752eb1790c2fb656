"""`pretreat seed`: days of simulated normal operation, recorded through the daemon's own ingest path.

Why: the slug rule compares the flow with the average of earlier days of normal operation, so a brand-new
historian can judge no slug until it has such days. A demonstration (``make demo``) or a trial of the rules
needs that history in a minute, not after a day of waiting. This command evaluates the simulators' process
models (`simulators.process.SiteProcess`, the same models ``pretreat sim`` serves) at each instrument's poll
interval over the period, quantises every value exactly as its register would carry it on the wire
(`simulators.encoding`), judges it against the channel's valid range as the drivers do (`judge_value`), and hands
the samples to `monitor.app.Daemon.record_history`: the historian, the per-day aggregates, the check engine and
the episode store see them as they would have seen the live readings. Nothing is written into tables by hand.

The period ends at ``--until`` (default now) and starts at local midnight ``--days`` days earlier in the first
site's time zone, so it holds ``--days`` whole local days plus the current one. Readings are stamped at whole
multiples of each instrument's poll interval. The historian must hold no reading of the period yet: seeding is
for an empty (or older) record, never a way to rewrite one.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import Channel, DriverKind, SiteConfig
from monitor import clock
from monitor.sample import Sample, judge_value
from simulators.encoding import to_raw
from simulators.process import SiteProcess
from simulators.scenario import NORMAL, Scenario, load_scenario

BATCH = 20_000  # samples per ingest call: large enough to amortise, small enough to bound memory


@dataclass(frozen=True, slots=True)
class _Feed:
    """One channel's compiled path from model value to sample."""

    channel: Channel
    interval: float  # its instrument's poll (or publishing) interval, s
    point: object  # the register point (None for MQTT), for the wire's quantisation


def seed_start(config: SiteConfig, *, days: int, until: float) -> float:
    """Local midnight ``days`` days before ``until``, in the first site's time zone."""
    tz = ZoneInfo(config.sites[0].timezone)
    local = datetime.fromtimestamp(until, tz=tz)
    midnight = (local - timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.timestamp()


def simulated_samples(config: SiteConfig, *, start: float, end: float, scenario: Scenario | None = None,
                      interval: float | None = None) -> Iterator[list[Sample]]:
    """Batches of the samples the site's instruments would have reported in [start, end), in time order,
    with the models (and the ``[[model]]`` settings of ``scenario``, not its steps) that ``pretreat sim`` serves.
    ``interval``: one reading per instrument every this many seconds at most (default: each one's poll interval)."""
    from simulators.playback import point_of, resolve  # pymodbus (drivers.modbus): not for `--help`

    resolved = resolve(scenario or NORMAL, config)  # raises ConfigErrors
    tick = max(min(i.poll_interval for i in config.instruments), interval or 0.0)
    processes = {s.id: SiteProcess(site=s, seed=resolved.scenario.seed, params=resolved.params.get(s.id),
                                   day_offset=_seconds_after_midnight(s.timezone, start))
                 for s in config.sites}
    feeds: dict[str, list[_Feed]] = {s.id: [] for s in config.sites}
    for c in config.channels:
        inst = config.instruments_by_id[(c.site, c.instrument)]
        every = tick * max(1, math.ceil(inst.poll_interval / tick - 1e-9))  # whole ticks, never more often
        feeds[c.site].append(_Feed(channel=c, interval=every,
                                   point=None if inst.driver is DriverKind.MQTT else point_of(config, c)))
    batch: list[Sample] = []
    steps = int((end - start) / tick)
    for k in range(steps):
        t = start + k * tick
        for site_id, process in processes.items():
            values = process.step(t - start)
            for f in feeds[site_id]:
                if (k * tick + tick / 2) % f.interval >= tick:  # not this instrument's poll
                    continue
                batch.append(_sample(f, values[f.channel.id], t))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _sample(f: _Feed, value: float, t: float) -> Sample:
    c = f.channel
    raw, _ = to_raw(c, f.point, value)  # type: ignore[arg-type]
    # the driver's own path: the raw register number x scale + offset, judged against the valid range
    return judge_value(float(raw), time=t, site=c.site, channel=c.id, unit=c.unit,
                       scale=c.scale, offset=c.offset, valid_min=c.valid_min, valid_max=c.valid_max)


def _seconds_after_midnight(tz: str, t: float) -> float:
    local = datetime.fromtimestamp(t, tz=ZoneInfo(tz))
    return local.hour * 3600.0 + local.minute * 60.0 + local.second


# -- CLI -------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="site file (TOML) whose historian to fill")
    p.add_argument("--days", type=int, default=2, metavar="N",
                   help="whole local days before the current one to simulate (default 2, at most 60)")
    p.add_argument("--until", type=float, default=None, metavar="EPOCH",
                   help="end of the period, epoch seconds (default: now)")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="one reading per instrument every S seconds at most (default: each instrument's poll "
                        "interval); keep it within the channels' max_gap, or the history has gaps")
    p.add_argument("--scenario", metavar="NAME",
                   help="take the model settings ([[model]]) of this scenario, as `pretreat sim` would; its steps "
                        "are not played: the history is normal operation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulators.playback import resolve

    if not 1 <= args.days <= 60:
        print("pretreat seed: --days must be 1 to 60", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
        scenario = load_scenario(args.scenario) if args.scenario else None
        resolve(scenario or NORMAL, config)
    except ConfigErrors as exc:
        for e in exc.errors:
            print(e, file=sys.stderr)
        return 2
    until = clock.wall() if args.until is None else args.until
    start = seed_start(config, days=args.days, until=until)
    if args.interval is not None and args.interval <= 0:
        print("pretreat seed: --interval must be positive", file=sys.stderr)
        return 2
    return asyncio.run(_seed(config, start=start, end=until, scenario=scenario, interval=args.interval))


async def _seed(config: SiteConfig, *, start: float, end: float, scenario: Scenario | None,
                interval: float | None) -> int:
    from monitor.app import Daemon, HistoryOverlap  # the daemon's ingest path (imports its stores)

    tz = ZoneInfo(config.sites[0].timezone)
    span = " to ".join(f"{datetime.fromtimestamp(t, tz):%Y-%m-%d %H:%M %Z}" for t in (start, end))
    print(f"pretreat seed: simulating normal operation {span} ({(end - start) / 86400:.1f} days) "
          f"into {config.daemon.historian}", flush=True)
    began = time.monotonic()
    try:
        result = await Daemon(config=config).record_history(
            simulated_samples(config, start=start, end=end, scenario=scenario, interval=interval), start=start)
    except HistoryOverlap as exc:
        print(f"pretreat seed: {exc}", file=sys.stderr)
        return 1
    print(f"pretreat seed: {result.samples:,} readings recorded through the daemon's ingest path in "
          f"{time.monotonic() - began:.1f} s ({result.episode_events} episode events)", flush=True)
    return 0
