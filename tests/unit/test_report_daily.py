"""Golden daily summaries: scenario data with known totals, written through the real Historian, the check engine
and the episode store, aggregated live by DailyAggregator, including the 23- and 25-hour DST days.

The hand-computed figures (see tests.unit.report_scenarios for the scenario) for a 24-hour day:
- totaliser: 1,320 min × 100 gpm + 120 min × 300 gpm = 168,000 gal;
- integrated rate: the 121 minutes from the last reading before the outage (13:59) to the first after (16:00)
  are a gap longer than the 180 s staleness window, so not integrated: 1,199 × 100 + 120 × 300 = 155,900 gal,
  7.2 % below the totaliser: flagged;
- peak 300 gpm, 30-minute peak 300 gpm; flow completeness 1,320 / 1,440 = 91.67 %; downtime 121 − 3 = 118 min;
- pH min 5.5, max 9.6, 45 + 70 = 115 minutes outside 6–9; fridge 20 + 10 = 30 minutes outside 2–6 °C;
- 96 samples (one per quarter hour of real time).
A 23-hour day has 1,380 readings, 162,000 gal, 92 samples; a 25-hour day 1,500 readings, 174,000 gal, 100.
"""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from config.schema import ChannelKind
from monitor.reports.aggregates import DailyAggregator
from monitor.reports.aggregates_db import connect, read_days
from monitor.reports.daily import DailySummary, summarize
from monitor.reports.days import day_bounds
from monitor.reports.plan import compile_plans
from monitor.sample import Sample
from monitor.stores.episodes import EpisodeStore
from tests.unit.report_scenarios import CASE, SITE, TZ, aggregate, record, scenario, site_config

GOLDEN = CASE / "expected.json"
FAR_FUTURE = 4_000_000_000.0  # "now" for the summaries: every day is complete


def _summaries(config, first: date, last: date) -> list[DailySummary]:  # type: ignore[no-untyped-def]
    conn = connect(config.daemon.historian)
    store = EpisodeStore(path=config.daemon.historian)
    try:
        return summarize(conn, config.site(SITE), compile_plans(config), first, last,
                         episodes=store.episodes(site=SITE), now=FAR_FUTURE)
    finally:
        store.close()
        conn.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Two stretches: 6–10 March 2026 (spring forward on the 8th) and 30 Oct–3 Nov 2026 (fall back on 1 Nov)."""
    import asyncio

    tmp = tmp_path_factory.mktemp("daily")
    config = site_config(tmp)
    samples = scenario(date(2026, 3, 6), 5) + scenario(date(2026, 10, 30), 5)
    asyncio.run(record(config, samples))
    return config


@pytest.mark.parametrize(("day", "hours", "gallons", "samples"), [
    (date(2026, 3, 7), 24.0, 168_000.0, 96.0),
    (date(2026, 3, 8), 23.0, 162_000.0, 92.0),
    (date(2026, 11, 1), 25.0, 174_000.0, 100.0),
])
def test_hand_computed_totals(recorded, day: date, hours: float, gallons: float, samples: float) -> None:  # type: ignore[no-untyped-def]
    [s] = _summaries(recorded, day, day)
    h = s.headline()
    assert s.hours == hours
    assert h["total_flow"] == pytest.approx(gallons)
    assert h["integrated_flow"] == pytest.approx(gallons - 12_100.0)  # the 121-minute gap is not integrated
    assert s.flow is not None and s.flow.flagged
    assert s.flow.difference == pytest.approx(12_100.0 / gallons)
    assert (h["peak_flow"], h["peak_30min_flow"]) == (300.0, 300.0)
    assert (h["ph_min"], h["ph_max"], h["ph_minutes_outside"]) == (5.5, 9.6, pytest.approx(115.0))
    assert (h["temperature_max"], h["lel_max"]) == (31.5, 12.0)
    assert h["samples_taken"] == samples
    assert (h["fridge_min"], h["fridge_max"], h["fridge_minutes_out_of_band"]) == (1.5, 7.0, pytest.approx(30.0))
    flow = s.channel(ChannelKind.FLOW)
    assert flow is not None
    minutes = int(hours * 60)
    assert (flow.received, flow.good, flow.expected) == (minutes, minutes - 120, minutes)
    assert flow.completeness == pytest.approx(100.0 * (minutes - 120) / minutes)
    assert flow.downtime == pytest.approx(118 * 60.0)
    ph = next(c for c in s.channels if c.channel == "ph")
    assert (ph.completeness, ph.downtime) == (100.0, 0.0)
    lo, hi = day_bounds(day, TZ)
    rules = sorted(e.rule for e in s.episodes if lo <= e.start < hi)
    assert rules.count("ph_high") == 1 and rules.count("ph_low") == 1
    assert rules.count("ph_excursion_duration") == 1  # the 70-minute low excursion only
    assert rules.count("sampler_temperature") == 2
    assert len(rules) == 5  # comm failures alone start no episode (STALE samples come from the daemon's tick)


def test_golden_file(recorded) -> None:  # type: ignore[no-untyped-def]
    """The whole summary of every day, as JSON, against the reviewed golden file (REGEN_GOLDEN=1 rewrites it)."""
    days = _summaries(recorded, date(2026, 3, 7), date(2026, 3, 9)) + \
        _summaries(recorded, date(2026, 10, 31), date(2026, 11, 2))
    got = json.loads(json.dumps([d.to_dict() for d in days], default=str))
    if os.environ.get("REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert got == json.loads(GOLDEN.read_text())


def test_rebuild_from_the_historian_equals_live_aggregation(recorded) -> None:  # type: ignore[no-untyped-def]
    conn = connect(recorded.daemon.historian)
    try:
        live = read_days(conn, site=SITE, first="2026-03-07", last="2026-11-02")
        agg = DailyAggregator(path=recorded.daemon.historian, config=recorded)
        try:
            result = agg.rebuild(day_bounds(date(2026, 3, 7), TZ)[0], day_bounds(date(2026, 3, 9), TZ)[1])
        finally:
            agg.close()
        assert result.days == 3 * 7 and result.readings > 3 * 7 * 1380
        rebuilt = read_days(conn, site=SITE, first="2026-03-07", last="2026-11-02")
    finally:
        conn.close()
    assert rebuilt == live


async def test_restart_mid_day_merges_instead_of_overwriting(tmp_path: Path) -> None:
    """Closing the aggregator at noon and opening a new one (a daemon restart) gives the same day rows as one
    uninterrupted run: flushed rows merge, and the carried state accrues the interval across the restart."""
    samples = scenario(date(2026, 3, 7), 2)
    cut = day_bounds(date(2026, 3, 7), TZ)[0] + 12 * 3600
    rows = []
    for restart in (False, True):
        config = site_config(tmp_path / str(restart))
        aggregate(config, samples, restart_at=cut if restart else None)
        conn = connect(config.daemon.historian)
        rows.append([r for r in read_days(conn, site=SITE, first="2026-03-07", last="2026-03-08")])
        conn.close()
    assert rows[0] == rows[1]


def test_late_readings_are_counted_not_accrued(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    t0 = day_bounds(date(2026, 3, 7), TZ)[0] + 3600
    agg.observe([Sample(t0, SITE, "ph", 7.0, "pH"), Sample(t0 + 60, SITE, "ph", 7.0, "pH")])
    agg.observe([Sample(t0 + 30, SITE, "ph", 11.0, "pH")])  # out of order: a redelivered message
    agg.observe([Sample(t0, SITE, "nope", 1.0, "x")])  # a channel not in the configuration
    agg.close()
    conn = connect(config.daemon.historian)
    [row] = [r for r in read_days(conn, site=SITE, first="2026-03-07", last="2026-03-07") if r.channel == "ph"]
    conn.close()
    assert (row.count, row.good, row.late, row.vmax, row.outside) == (2, 2, 1, 7.0, 0.0)
    assert agg.unknown == 1


def test_totaliser_reset_is_counted_and_not_negative_volume(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    t0 = day_bounds(date(2026, 3, 7), TZ)[0] + 3600
    values = [1000.0, 1100.0, 1200.0, 5.0, 105.0]  # rolled over between the 3rd and 4th reading
    agg.observe([Sample(t0 + 60 * i, SITE, "flow_total", v, "gal") for i, v in enumerate(values)])
    agg.close()
    conn = connect(config.daemon.historian)
    [row] = [r for r in read_days(conn, site=SITE, first="2026-03-07", last="2026-03-07")
             if r.channel == "flow_total"]
    conn.close()
    assert (row.volume, row.resets) == (300.0, 1)


def test_a_channel_that_never_reported_is_down_all_day(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    t0 = day_bounds(date(2026, 3, 7), TZ)[0]
    agg.observe([Sample(t0 + 60 * i, SITE, "ph", 7.0, "pH") for i in range(1440)])
    agg.close()
    [s] = _summaries(config, date(2026, 3, 7), date(2026, 3, 7))
    lel = next(c for c in s.channels if c.channel == "lel")
    assert (lel.good, lel.completeness, lel.downtime) == (0, 0.0, 86400.0)
    ph = next(c for c in s.channels if c.channel == "ph")
    assert ph.completeness == 100.0
    assert ph.downtime == 0.0  # the last reading (23:59) is within the window of the day's end


def test_open_gap_counts_as_downtime_up_to_now(tmp_path: Path) -> None:
    """The pH meter stops at 06:00 and has not come back when the report is made at 18:00: downtime is 18:00 −
    (06:00 + 3-minute window); completeness counts only the elapsed part of the day."""
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    t0 = day_bounds(date(2026, 3, 7), TZ)[0]
    agg.observe([Sample(t0 + 60 * i, SITE, "ph", 7.0, "pH") for i in range(361)])  # 00:00 .. 06:00
    agg.close()
    conn = connect(config.daemon.historian)
    try:
        [s] = summarize(conn, config.site(SITE), compile_plans(config), date(2026, 3, 7), date(2026, 3, 7),
                        episodes=[], now=t0 + 18 * 3600)
    finally:
        conn.close()
    ph = next(c for c in s.channels if c.channel == "ph")
    assert ph.downtime == pytest.approx(12 * 3600 - 180.0)
    assert ph.expected == 18 * 60 and ph.good == 361
