"""The shared data-coverage vocabulary (`monitor.checks.coverage`) that every rule, the reports and the slug rule
use: what a gap is, the default max_gap, measured/unmeasured accounting, time-weighted means."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.instruments import default_max_gap
from monitor.alarming import alarm_inputs
from monitor.checks.coverage import Coverage, TimeWeightedMean, is_gap, weight
from monitor.checks.engine import CheckEngine
from tests.unit.checks_helpers import T0, channel, load, samples, site_toml


def test_default_max_gap_is_three_intervals_never_under_five_seconds() -> None:
    assert [default_max_gap(p) for p in (0.1, 1.0, 1.7, 2.0, 60.0)] == [5.0, 5.0, 5.1, 6.0, 180.0]


def test_an_interval_of_exactly_max_gap_is_measured_one_more_is_a_gap() -> None:
    assert not is_gap(180.0, 180.0) and is_gap(180.001, 180.0)
    c = Coverage(max_gap=180.0)
    for dt in (60.0, 180.0, 181.0, 30.0):
        c.add(dt)
    c.hole(10.0)
    assert (c.measured, c.unmeasured) == (270.0, 191.0)
    c.reset()
    assert (c.measured, c.unmeasured) == (0.0, 0.0)


def test_time_weighted_mean_weighs_each_reading_by_the_time_to_the_next_capped_at_max_gap() -> None:
    """A burst of ten readings of 100 in ten seconds does not outweigh an hour of 10; the reading before a
    two-hour hole stands for max_gap (60 s) of it, not for the hole."""
    m = TimeWeightedMean(max_gap=60.0)
    assert m.mean is None
    t = 0.0
    for _ in range(60):  # an hour of 10, a reading a minute
        m.add(t, 10.0)
        t += 60.0
    for _ in range(10):  # a burst of 100, a reading a second
        m.add(t, 100.0)
        t += 1.0
    m.add(t + 7200.0, 10.0)  # after a two-hour hole: the last 100 weighs 60 s, not 7,200
    assert weight(7200.0, 60.0) == 60.0 and weight(1.0, 60.0) == 1.0
    assert m.weight == pytest.approx(3600.0 + 9.0 + 60.0)
    assert m.mean == pytest.approx((3600.0 * 10.0 + 69.0 * 100.0) / 3669.0)


def test_an_alarm_is_not_cleared_by_missing_data_alone(tmp_path: Path) -> None:
    """The check engine splits the episode at a gap; the alarm inputs leave out an end at a gap followed, from
    the same reading, by a start (still violating after the gap), and keep an end at a gap with no start
    after it (back within limits after the gap)."""
    config = load(tmp_path, site_toml(channel("ph")))
    engine = CheckEngine.for_config(config)
    before = samples([(T0, "ph", 7.0, "good"), (T0 + 60, "ph", 4.0, "good")])
    assert [i.active for i in alarm_inputs(engine.process_many(before))] == [True]
    still_low = engine.process_many(samples([(T0 + 1000, "ph", 4.2, "good")]))
    assert [(e.event, e.end_reason) for e in still_low] == [("end", "gap"), ("start", None)]
    assert alarm_inputs(still_low) == []  # the alarm stays active: no clear, no second raise
    back = engine.process_many(samples([(T0 + 2000, "ph", 7.0, "good")]))
    assert [(e.event, e.end_reason) for e in back] == [("end", "gap")]
    assert [(i.active, i.time) for i in alarm_inputs(back)] == [(False, T0 + 1000)]
