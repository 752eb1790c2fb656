"""Properties of the check engine on generated traces (hypothesis):

- live (samples one at a time through `CheckEngine.process`) and replay (the same rows as CSV through
  `pretreat replay`'s code, plain and general layouts) give identical events;
- the quiet-band fast path never changes a result: every trace gives the same events with the band disabled.

Short windows come from permit limits (every number is configurable), so slug baselines, the monthly pH rule
and month boundaries are all reached within a few hundred generated readings.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from tests.unit.checks_helpers import Row, channel, csv_text, live, load, replayed, samples, site_toml

SOUTHEAST = site_toml(
    channel("ph"),
    channel("lel"),
    channel("flow"),
    channel("cod"),
    channel("temperature", location="influent"),
    timezone="America/New_York",
    site_kind="plant",  # the influent limit applies at the treatment plant only
    extra="""
[site.permit]
id = "P-1"
[site.permit.limits.slug]
multiplier = 5.0
minutes = 3.0
cite = "Permit P-1 test slug"
[site.permit.limits.ph_excursion_single]
minutes = 20.0
[site.permit.limits.ph_excursion_monthly]
minutes = 45.0
[site.rules.flatline]
channels = ["temperature"]
readings = 3
[site.rules.slug]
baseline_days = 1
""",
)
# Without the mass-loading pair, so the flow channel's own fast path (baseline accumulation) is exercised.
SOUTHEAST_NO_LOADING = SOUTHEAST + "loading = false\n"

PAWLING = site_toml(
    channel("ph"),
    channel("flow"),
    channel("sampler_count"),
    channel("sampler_temperature"),
    jurisdiction="pawling",
    extra="""
[site.permit]
id = "PJSC-7"
[site.permit.limits.ph_min]
value = 6.0
[site.permit.limits.ph_max]
value = 10.0
operator = ">="
""",
)

VALUES = {
    "ph": [4.0, 4.99, 5.0, 6.0, 7.0, 9.0, 9.01, 10.0, 12.0, -1.0, math.nan],
    "lel": [0.0, 5.0, 5.1, 10.0, 10.1, 50.0, 120.0, 250.0],  # 120: over range, judged as 100; 250: a fault
    "flow": [0.0, 10.0, 50.0, 50.5, 200.0, 6000.0],
    "cod": [1.0, 5.0, 100.0],
    "temperature": [20.0, 40.0, 40.1, math.inf],
    "sampler_count": [0.0, 1.0, 2.0, 3.0, 5.0],
    "sampler_temperature": [1.9, 2.0, 4.0, 6.0, 6.1],
}
BAD = ["comm_failure", "stale", "out_of_range", "decode_error", "device_fault"]
START = 1_761_955_200.0 - 5 * 3600  # 2025-10-31 20:00 New York: a month end, then the November DST change


def traces(channels: list[str], *, bad: bool) -> st.SearchStrategy[list[Row]]:
    """Time-ordered rows built from *segments*: one channel repeating one value (a steady baseline, an
    excursion held across a deadline) every ``dt`` seconds, sometimes interleaved with a second channel, with
    occasional bad samples. Values sit at and around every limit; steps range from 0 s to a day (deadlines,
    month ends). A segment may also be a whole day of one value every minute (``roll`` 11 with a 60 s step),
    so that slug baselines (whole local days of normal operation) form and slugs are judged."""
    segment = st.tuples(
        st.sampled_from(channels),
        st.integers(0, 99),
        st.integers(1, 40),
        st.sampled_from([0, 1, 1, 20, 30, 30, 30, 60, 61, 120, 300, 3600, 24 * 3600]),
        st.sampled_from(channels),
        st.sampled_from(BAD) if bad else st.just("good"),
        st.integers(0, 11),
    )

    def build(segments: list[tuple[str, int, int, int, str, str, int]]) -> list[Row]:
        t, rows = START, []
        for ch, pick, repeat, dt, other, quality, roll in segments:
            value = VALUES[ch][pick % len(VALUES[ch])]
            if roll == 11 and dt == 60:
                repeat = 1440  # a day of operation at one value: a day of normal operation for a slug baseline
            for i in range(repeat):
                t += dt
                rows.append((t, ch, value, "good"))
                if roll == 1 and i % 3 == 0:  # interleave a second channel
                    rows.append((t, other, VALUES[other][(pick + i) % len(VALUES[other])], "good"))
                if roll == 2 and i == repeat // 2 and quality != "good":  # a bad sample inside the run
                    rows.append((t, ch, None, quality))
        return rows

    return st.lists(segment, min_size=1, max_size=25).map(build)


def _json(events: list) -> list[dict[str, object]]:  # type: ignore[type-arg]
    return [e.to_dict() for e in events]


def _sorted(objs: list[dict[str, object]]) -> list[dict[str, object]]:
    return sorted(objs, key=lambda o: str(o["time"]))  # stable: ties keep emission order


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SiteConfig]:
    d = tmp_path_factory.mktemp("sites")
    return {
        "southeast": load(d, SOUTHEAST, "se.toml"),
        "pawling": load(d, PAWLING, "pw.toml"),
        "no_loading": load(d, SOUTHEAST_NO_LOADING, "se2.toml"),
    }


PROPERTY = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


SINGLE = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize(
    ("site", "ch"),
    [
        ("southeast", "ph"),
        ("southeast", "lel"),
        ("no_loading", "flow"),
        ("southeast", "temperature"),
        ("pawling", "sampler_temperature"),
    ],
)
def test_fast_path_never_changes_results_one_channel(
    configs: dict[str, SiteConfig], site: str, ch: str
) -> None:
    @SINGLE
    @given(rows=traces([ch], bad=True))
    def check(rows: list[Row]) -> None:
        assert live(configs[site], rows) == live(configs[site], rows, fast=False)

    check()


@PROPERTY
@given(rows=traces(["ph", "lel", "flow", "cod", "temperature"], bad=True))
def test_fast_path_never_changes_results_southeast(configs: dict[str, SiteConfig], rows: list[Row]) -> None:
    assert live(configs["southeast"], rows) == live(configs["southeast"], rows, fast=False)


@PROPERTY
@given(rows=traces(["ph", "flow", "sampler_count", "sampler_temperature"], bad=True))
def test_fast_path_never_changes_results_pawling(configs: dict[str, SiteConfig], rows: list[Row]) -> None:
    assert live(configs["pawling"], rows) == live(configs["pawling"], rows, fast=False)


@PROPERTY
@given(rows=traces(["ph", "lel", "flow", "cod", "temperature"], bad=True))
def test_live_and_replay_agree_with_quality_column(configs: dict[str, SiteConfig], rows: list[Row]) -> None:
    config = configs["southeast"]
    replay_events, _ = replayed(config, csv_text(rows, with_quality=True))
    assert replay_events == _sorted(_json(live(config, rows)))


@PROPERTY
@given(rows=traces(["ph", "flow", "sampler_count", "sampler_temperature"], bad=False))
def test_live_and_replay_agree_plain_layout(configs: dict[str, SiteConfig], rows: list[Row]) -> None:
    config = configs["pawling"]
    rows = [r for r in rows if r[2] is None or math.isfinite(r[2])]  # not expressible without a quality column
    replay_events, err = replayed(config, csv_text(rows, with_quality=False))
    assert replay_events == _sorted(_json(live(config, rows)))
    assert "rows rejected: 0" in err


def test_generated_traces_reach_every_rule(configs: dict[str, SiteConfig]) -> None:
    """Guards the properties above against vacuity: the value sets do drive every rule through start and
    end."""
    rules_seen: set[tuple[str, str]] = set()
    steps = [
        (0, "ph", 7.0),
        (1, "ph", 4.0),
        *[(120, "ph", 4.0)] * 25,  # 50 measured minutes: past 20 (single) and 45 (monthly)
        (120, "ph", 12.0),
        (120, "ph", 7.0),
        (1, "ph", 7.0),
        (1, "ph", 7.0),
        (3600 * 30, "ph", 7.5),
        (0, "lel", 6.0),
        (1, "lel", 11.0),
        (1, "lel", 0.0),
        (0, "temperature", 41.0),
        (1, "temperature", 20.0),
        (1, "temperature", 20.0),
        (1, "temperature", 20.0),
        (1, "temperature", 21.0),
    ]
    t, rows = START, []
    for dt, ch, v in steps:
        t += dt
        rows.append((t, ch, v, "good"))
    n = 2 * 1440 + 60  # two local days of operation (a day of normal operation: the baseline), then a slug
    for i in range(n + 10):  # lasting more than 3 minutes
        rows.append((t + 60 * i, "flow", 10.0 if i < n else 100.0, "good"))
    t += 60 * (n + 10)
    rows.append((t, "flow", 10.0, "good"))
    rows += [
        (t + 60 * 1, "ph", None, "stale"),
        (t + 60 * 2, "ph", None, "out_of_range"),
        (t + 60 * 3, "ph", 7.0, "good"),
    ]
    events = live(configs["southeast"], rows)
    for e in events:
        rules_seen.add((e.rule, e.event))
    assert {e.end_reason for e in events if e.event == "end"} >= {"cleared", "month_end"}
    expected = {
        "ph_low",
        "ph_high",
        "ph_excursion_duration",
        "ph_monthly_excursion",
        "lel_successive",
        "lel_single",
        "temperature_high",
        "slug",
        "stale",
        "sensor_fault",
        "flatline",
        "slug_no_baseline",  # the trace's first day: no day of normal operation yet, so no slug judged
    }
    assert {r for r, ev in rules_seen if ev == "end"} == expected


def test_out_of_order_and_unknown_samples_are_counted_not_judged(configs: dict[str, SiteConfig]) -> None:
    engine = CheckEngine.for_config(configs["southeast"])
    rows: list[Row] = [
        (START + 10, "ph", 7.0, "good"),
        (START + 5, "ph", 3.0, "good"),
        (START + 11, "ph", 7.0, "good"),
    ]
    assert engine.process_many(samples(rows)) == []
    assert engine.rejected == 1
    assert engine.process_many(samples([(START, "nope", 1.0, "good")])) == []
    assert engine.unknown == 1


def test_nan_and_out_of_valid_range_are_sensor_faults_never_numbers(configs: dict[str, SiteConfig]) -> None:
    rows: list[Row] = [
        (START, "ph", 7.0, "good"),
        (START + 1, "ph", math.nan, "good"),
        (START + 2, "ph", -1.0, "good"),
        (START + 3, "ph", 7.0, "good"),
    ]
    events = live(configs["southeast"], rows)
    assert [(e.rule, e.event, e.value) for e in events] == [
        ("sensor_fault", "start", None),
        ("sensor_fault", "end", 7.0),
    ]


def test_open_episodes_lists_what_is_open(configs: dict[str, SiteConfig]) -> None:
    engine = CheckEngine.for_config(configs["southeast"])
    engine.process_many(samples([(START, "ph", 4.0, "good"), (START, "lel", 12.0, "good")]))
    assert set(engine.open_episodes()) == {("acme", "ph", "ph_low"), ("acme", "lel", "lel_single")}


def test_site_files_in_tests_load(tmp_path: Path) -> None:
    assert load(tmp_path, SOUTHEAST).sites[0].checks
