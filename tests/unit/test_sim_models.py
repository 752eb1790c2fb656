"""Process models: deterministic, physically sensible, and the integrators follow the served flow."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import Channel, ChannelKind, DataType, RegisterPoint, Site, SiteConfig, Table
from simulators.encoding import served_value, to_raw, unencodable
from simulators.models import (
    DEFAULT_FLOW_PROFILE,
    CompositeSampler,
    DiurnalFlow,
    Totaliser,
    ValueNoise,
)
from simulators.playback import Hold
from simulators.process import SiteProcess

DEMO = Path(__file__).resolve().parents[2] / "config" / "sites" / "demo.toml"


@pytest.fixture(scope="module")
def demo() -> SiteConfig:
    return load_config(DEMO)


def _run(site: Site, *, seed: int, times: list[float]) -> list[dict[str, float]]:
    proc = SiteProcess(site=site, seed=seed, day_offset=9 * 3600.0)
    return [proc.step(t) for t in times]


def test_same_seed_same_values_different_seed_different(demo: SiteConfig) -> None:
    times = [float(t) for t in range(0, 7200, 7)]
    a = _run(demo.sites[0], seed=3, times=times)
    b = _run(demo.sites[0], seed=3, times=times)
    c = _run(demo.sites[0], seed=4, times=times)
    assert a == b
    assert [v["ph"] for v in a] != [v["ph"] for v in c]


def test_pure_models_do_not_depend_on_the_tick(demo: SiteConfig) -> None:
    fine = _run(demo.sites[0], seed=1, times=[float(t) for t in range(0, 3601)])
    coarse = _run(demo.sites[0], seed=1, times=[float(t) for t in range(0, 3601, 60)])
    for i, row in enumerate(coarse):
        for ch in ("flow", "ph", "temperature", "lel", "sampler_temperature"):
            assert row[ch] == fine[i * 60][ch]


def test_noise_is_smooth_and_bounded() -> None:
    noise = ValueNoise(seed="x", amplitude=0.5, period=60.0)
    values = [noise.at(float(t)) for t in range(0, 6000)]
    assert max(abs(v) for v in values) <= 0.5
    assert max(abs(a - b) for a, b in itertools.pairwise(values)) < 0.05  # no jumps between polls
    assert max(values) - min(values) > 0.4  # it does move


def test_healthy_levels_stay_in_their_bands(demo: SiteConfig) -> None:
    rows = _run(demo.sites[0], seed=7, times=[float(t) for t in range(0, 86400, 30)])
    assert all(7.0 <= r["ph"] <= 7.4 for r in rows)
    assert all(18.0 <= r["temperature"] <= 25.0 for r in rows)
    assert all(0.0 <= r["lel"] <= 2.0 for r in rows)
    assert all(2.0 <= r["sampler_temperature"] <= 6.0 for r in rows)  # 4 +/- 2 degC
    fridge = [r["sampler_temperature"] for r in rows]
    assert max(fridge) - min(fridge) > 1.0  # the compressor cycles


def test_flow_is_low_at_night_and_peaks_during_shifts() -> None:
    flow = DiurnalFlow(peak_gpm=100.0, day_offset=0.0, noise=ValueNoise(seed="f", amplitude=0.0))
    night = [flow.value_at(h * 3600.0) for h in (1, 2, 3, 4)]
    shift = [flow.value_at(h * 3600.0) for h in (8, 10, 16, 18)]
    assert max(night) < 0.25 * min(shift)
    assert max(shift) == pytest.approx(100.0)


def test_totaliser_integrates_gpm_over_minutes() -> None:
    tot = Totaliser()
    for t in range(0, 601):
        tot.advance(float(t), 60.0)  # 60 gpm for 10 minutes
    assert tot.gallons == pytest.approx(600.0)
    ramp = Totaliser()
    for t in range(0, 121, 10):
        ramp.advance(float(t), float(t))  # rate = t gpm: integral of t dt / 60 over 0..120 = 120
    assert ramp.gallons == pytest.approx(120.0)
    bad = Totaliser()
    for when, rate in ((0.0, 10.0), (60.0, math.nan), (120.0, -5.0)):
        bad.advance(when, rate)
    assert bad.gallons == pytest.approx(5.0)  # NaN and negative rates add nothing, never poison the sum


def test_totaliser_equals_the_integral_of_a_day_of_diurnal_flow() -> None:
    peak = 120.0
    flow = DiurnalFlow(peak_gpm=peak, day_offset=0.0, noise=ValueNoise(seed="f", amplitude=0.0))
    tot = Totaliser()
    for t in range(0, 86401, 10):
        tot.advance(float(t), flow.value_at(float(t)))
    p = DEFAULT_FLOW_PROFILE
    exact = sum(peak * (p[h] + p[(h + 1) % 24]) / 2 * 60 for h in range(24))  # gpm x minutes per hour
    assert tot.gallons == pytest.approx(exact, rel=1e-6)


def test_served_totaliser_follows_the_served_flow(demo: SiteConfig) -> None:
    proc = SiteProcess(site=demo.sites[0], seed=1, day_offset=10 * 3600.0)
    slug = {"flow": Hold(900.0)}
    proc.step(0.0, slug)
    row = proc.step(600.0, slug)
    assert row["flow"] == 900.0
    assert row["flow_total"] == pytest.approx(9000.0)  # 900 gpm for 10 min, whatever the model said


def test_time_paced_sampler_takes_one_sample_every_15_minutes() -> None:
    s = CompositeSampler()
    counts = {}
    for t in range(0, 3601, 10):
        counts[t] = s.advance(float(t), 50.0).count
    assert counts[890] == 0 and counts[900] == 1 and counts[1790] == 1 and counts[1800] == 2
    assert counts[3600] == 4


def test_time_pacing_survives_coarse_ticks_and_bottle_fills() -> None:
    s = CompositeSampler(interval=900.0, capacity=3)
    state = s.advance(2000.0, 10.0)  # one tick crossing two pace instants takes both samples
    assert state.count == 2 and not state.bottle_full
    state = s.advance(10_000.0, 10.0)
    assert state.count == 3 and state.bottle_full


def test_flow_paced_sampler_follows_volume() -> None:
    s = CompositeSampler(pace="flow", gallons_per_sample=1000.0)
    for t in range(0, 3601, 5):
        s.advance(float(t), 100.0)  # 100 gpm -> 1000 gal every 10 minutes
    assert s.count == 6
    both = CompositeSampler(pace="both", interval=900.0, gallons_per_sample=1000.0)
    for t in range(0, 3601, 5):
        both.advance(float(t), 100.0)
    assert both.count == 6 + 4


def test_sampler_counts_through_site_process(demo: SiteConfig) -> None:
    proc = SiteProcess(site=demo.sites[0], seed=1)
    rows = {t: proc.step(float(t)) for t in range(0, 1801, 30)}
    assert rows[870]["sampler_count"] == 0.0 and rows[900]["sampler_count"] == 1.0
    assert rows[1800]["sampler_count"] == 2.0
    assert rows[1800]["sampler_bottle_full"] == 0.0 and rows[1800]["sampler_fault"] == 0.0


def _channel(scale: float = 1.0, offset: float = 0.0) -> Channel:
    return Channel(id="c", site="s", instrument="i", kind=ChannelKind.OTHER, unit="u", scale=scale,
                   offset=offset)


def _point(dtype: DataType) -> RegisterPoint:
    table = Table.DISCRETE if dtype is DataType.BOOL else Table.HOLDING
    return RegisterPoint(name="p", table=table, address=0, dtype=dtype)


def test_encoding_quantises_like_the_register() -> None:
    ph = _channel(scale=0.01)
    raw, clamped = to_raw(ph, _point(DataType.INT16), 7.234)
    assert (raw, clamped) == (723, False)
    assert served_value(ph, raw) == pytest.approx(7.23)
    raw32, _ = to_raw(_channel(), _point(DataType.FLOAT32), 0.1)
    assert raw32 != 0.1 and raw32 == pytest.approx(0.1, rel=1e-7)  # float32 precision, as on the wire
    assert to_raw(_channel(), _point(DataType.BOOL), 1.0) == (True, False)
    assert to_raw(_channel(), _point(DataType.UINT16), 70000.0) == (65535, True)
    nan, _ = to_raw(_channel(), _point(DataType.FLOAT32), math.nan)
    assert math.isnan(float(nan))


def test_unencodable_values_are_named() -> None:
    ph = _channel(scale=0.01)
    assert unencodable(ph, _point(DataType.INT16), 15.5) is None
    assert "int16" in (unencodable(ph, _point(DataType.INT16), math.nan) or "")
    assert "-327.68 to 327.67" in (unencodable(ph, _point(DataType.INT16), 400.0) or "")
    assert unencodable(ph, _point(DataType.FLOAT32), math.inf) is None
    assert unencodable(ph, None, math.nan) is None  # MQTT carries anything
    assert unencodable(ph, _point(DataType.BOOL), 0.5) is not None
