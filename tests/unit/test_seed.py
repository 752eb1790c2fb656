"""`pretreat seed`: simulated history recorded through the daemon's own ingest path, once."""

from __future__ import annotations

import asyncio
import itertools
import math
import re
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.app import Daemon, HistoryOverlap
from monitor.cli import main
from monitor.sample import Quality
from monitor.stores.historian import Historian
from simulators.scenario import load_scenario
from simulators.seed import seed_start, simulated_samples
from tests.support import demo_site_file, free_port

T0 = 1_796_100_000.0  # 2026-11-30 21:20 UTC


def demo_site(tmp_path: Path) -> Path:
    return demo_site_file(tmp_path, broker_port=free_port())


def test_each_instrument_reports_at_its_own_interval_with_values_as_its_registers_carry_them(
        tmp_path: Path) -> None:
    config = load_config(demo_site(tmp_path))
    samples = [s for batch in simulated_samples(config, start=T0, end=T0 + 60) for s in batch]
    by_channel: dict[str, list[float]] = {}
    for s in samples:
        assert s.quality is Quality.GOOD and s.value is not None
        by_channel.setdefault(s.channel, []).append(s.time)
    assert len(by_channel["ph"]) == 60 and by_channel["ph"][:2] == [T0, T0 + 1]  # polled every 1 s
    assert len(by_channel["sampler_count"]) == 12  # polled every 5 s
    ph = [s.value for s in samples if s.channel == "ph"]
    assert all(v is not None and math.isclose(round(v * 100) / 100, v) for v in ph)  # int16 x 0.01 on the wire
    assert all(b.time >= a.time for a, b in itertools.pairwise(samples))  # time order


def test_the_interval_option_thins_the_history_to_whole_multiples_of_it(tmp_path: Path) -> None:
    config = load_config(demo_site(tmp_path))
    samples = [s for batch in simulated_samples(config, start=T0, end=T0 + 60, interval=4.0) for s in batch]
    flow = [s.time - T0 for s in samples if s.channel == "flow"]
    sampler = [s.time - T0 for s in samples if s.channel == "sampler_count"]
    assert flow == [4.0 * k for k in range(15)]
    assert sampler == [8.0 * k for k in range(8)]  # 5 s rounded to two ticks of 4 s


def record(config: SiteConfig, start: float, end: float) -> int:
    batches = simulated_samples(config, start=start, end=end, scenario=load_scenario("demo"), interval=10.0)
    return asyncio.run(Daemon(config=config).record_history(batches, start=start)).samples


def test_history_goes_through_the_daemons_stores_and_is_recorded_once(tmp_path: Path) -> None:
    config = load_config(demo_site(tmp_path))
    n = record(config, T0, T0 + 3600)
    stored = sum(len(list(Historian.read(path=config.daemon.historian, site=c.site, channel=c.id)))
                 for c in config.channels)
    assert n == stored > 0
    with pytest.raises(HistoryOverlap, match="already holds readings"):
        record(config, T0 + 1800, T0 + 7200)
    assert sum(len(list(Historian.read(path=config.daemon.historian, site=c.site, channel=c.id)))
               for c in config.channels) == stored  # nothing added by the refused call


def test_the_period_starts_at_local_midnight_days_before(tmp_path: Path) -> None:
    config = load_config(demo_site(tmp_path))
    # 2026-12-01 16:20 New York (EST) -> the period starts 2026-11-30 00:00 EST = 05:00 UTC
    assert seed_start(config, days=1, until=1_796_160_000.0) == 1_796_014_800.0


def test_the_command_reports_what_it_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = demo_site(tmp_path)
    assert main(["seed", "--config", str(site), "--days", "1", "--interval", "60",
                 "--until", str(1_796_014_800.0 + 3 * 3600), "--scenario", "demo"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"[\d,]+ readings recorded through the daemon's ingest path", out), out
    assert main(["seed", "--config", str(site), "--days", "1", "--until", str(1_796_014_800.0 + 3 * 3600)]) == 1
    assert "already holds readings" in capsys.readouterr().err
