"""Deterministic scenario data for the report tests, recorded the way the daemon records it.

`scenario_day` makes one local day of once-a-minute readings for the golden site
(tests/cases/report_daily_known_totals/site.toml) with hand-countable totals; `record` pushes samples through
the real Historian, the check engine, the episode store and the DailyAggregator, as `Daemon.ingest` does.

A normal day, in local time (America/New_York), with readings at every whole minute of real time:
- flow 100 gpm, 300 gpm from 08:00 to 10:00; the flow meter is out (comm_failure) from 14:00 to 16:00 (the
  totaliser keeps counting inside the meter, so its next reading includes the outage's 12,000 gal);
- flow_total: the meter's totaliser (held-value integral of the true rate);
- pH 7.0; 9.6 from 10:00 to 10:45 (45 min), 5.5 from 20:00 to 21:10 (70 min, over 401.17's 60);
- temperature 20.0 °C, 31.5 at 12:00; LEL 0 %, 12 % at 03:00;
- fridge 4.0 °C, 7.0 from 05:00 to 05:20, 1.5 from 23:00 to 23:10 (30 min out of the 2–6 °C band);
- sampler count +1 at every quarter hour of real time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime
from pathlib import Path

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.reports.aggregates import DailyAggregator
from monitor.reports.days import day_bounds, zone
from monitor.sample import Quality, Sample
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian

CASE = Path(__file__).resolve().parents[1] / "cases" / "report_daily_known_totals"
SITE = "acme"
TZ = zone("America/New_York")


def site_config(tmp_path: Path) -> SiteConfig:
    """The golden site with its historian inside ``tmp_path``."""
    text = (CASE / "site.toml").read_text().replace('historian = "var/pretreat.sqlite"',
                                                     f'historian = "{tmp_path / "pretreat.sqlite"}"')
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "site.toml"
    path.write_text(text)
    return load_config(path)


def _local(day: date, hh: int, mm: int) -> float:
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=TZ).timestamp()


class Totals:
    """Running device state carried across days (totaliser, sample counter)."""

    def __init__(self) -> None:
        self.gallons = 0.0
        self.samples = 0
        self.rate = 100.0  # the rate held since the previous minute


def scenario_day(day: date, totals: Totals) -> Iterator[Sample]:
    lo, hi = day_bounds(day, TZ)
    t = lo
    win = {name: (_local(day, *a), _local(day, *b)) for name, a, b in (
        ("high_flow", (8, 0), (10, 0)), ("outage", (14, 0), (16, 0)), ("ph_high", (10, 0), (10, 45)),
        ("ph_low", (20, 0), (21, 10)), ("fridge_warm", (5, 0), (5, 20)), ("fridge_cold", (23, 0), (23, 10)))}

    def inside(name: str) -> bool:
        a, b = win[name]
        return a <= t < b

    while t < hi:
        totals.gallons += totals.rate  # one minute at the rate held since the previous reading
        rate = 300.0 if inside("high_flow") else 100.0
        totals.rate = rate
        if round(t - lo) % 900 == 0:
            totals.samples += 1
        if inside("outage"):
            for ch, unit in (("flow", "gpm"), ("flow_total", "gal")):
                yield Sample.bad(time=t, site=SITE, channel=ch, unit=unit, quality=Quality.COMM_FAILURE,
                                 reason="flow meter: no reply")
        else:
            yield Sample(t, SITE, "flow", rate, "gpm")
            yield Sample(t, SITE, "flow_total", totals.gallons, "gal")
        ph = 9.6 if inside("ph_high") else 5.5 if inside("ph_low") else 7.0
        yield Sample(t, SITE, "ph", ph, "pH")
        yield Sample(t, SITE, "temperature", 31.5 if t == _local(day, 12, 0) else 20.0, "degC")
        yield Sample(t, SITE, "lel", 12.0 if t == _local(day, 3, 0) else 0.0, "%LEL")
        fridge = 7.0 if inside("fridge_warm") else 1.5 if inside("fridge_cold") else 4.0
        yield Sample(t, SITE, "fridge", fridge, "degC")
        yield Sample(t, SITE, "samples", float(totals.samples), "count")
        t += 60.0


def scenario(first: date, count: int) -> list[Sample]:
    totals = Totals()
    out: list[Sample] = []
    d = first
    for _ in range(count):
        out.extend(scenario_day(d, totals))
        d = date.fromordinal(d.toordinal() + 1)
    return out


def aggregate(config: SiteConfig, samples: Sequence[Sample], *, restart_at: float | None = None) -> None:
    """Aggregate ``samples`` alone (no historian); with ``restart_at``, closing the aggregator before the first
    sample at or after it and opening a new one on the same file, as a daemon restart does."""
    path = config.daemon.historian
    agg = DailyAggregator(path=path, config=config)
    if restart_at is not None:
        agg.observe([s for s in samples if s.time < restart_at])
        agg.close()
        agg = DailyAggregator(path=path, config=config)
        samples = [s for s in samples if s.time >= restart_at]
    agg.observe(samples)
    agg.close()


async def record(config: SiteConfig, samples: Sequence[Sample], *, batch: int = 500,
                 aggregate: bool = True) -> None:
    """What `Daemon.ingest` does with each batch, through the real stores; the aggregator flushes at the end."""
    path = config.daemon.historian
    historian = Historian(path=path, commit_interval=0.05)
    episodes = EpisodeStore(path=path)
    engine = CheckEngine.for_config(config)
    agg = DailyAggregator(path=path, config=config) if aggregate else None
    await historian.start()
    try:
        for i in range(0, len(samples), batch):
            chunk = samples[i:i + batch]
            historian.submit(chunk)
            events = [e for s in chunk for e in engine.process(s)]
            episodes.record(events)
            if agg is not None:
                agg.observe(chunk)
        await historian.flush()
    finally:
        await historian.close()
        episodes.close()
        if agg is not None:
            agg.close()
