"""40 CFR 401.17 pH excursion rules: single excursion over 60 minutes, 7 h 26 min per calendar month
(local)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.schema import SiteConfig
from monitor.checks.events import EpisodeEvent
from tests.unit.checks_helpers import Row, channel, live, load, site_toml

NY = ZoneInfo("America/New_York")
ADOPT = '[site.permit]\nid = "SE-IU-3"\nadopt = ["ph_excursion_single", "ph_excursion_monthly"]\n'
LIMIT = 7 * 3600 + 26 * 60  # 26,760 s


def local(*args: int) -> float:
    return datetime(*args, tzinfo=NY).timestamp()  # type: ignore[misc]


@pytest.fixture
def southeast(tmp_path: Path) -> SiteConfig:
    """Readings here are sparse to put each boundary exactly where it is wanted; a max_gap of a day makes them
    measured time (gaps are tested below with the default max_gap)."""
    return load(tmp_path, site_toml(channel("ph", max_gap=86400), timezone="America/New_York", extra=ADOPT))


@pytest.fixture
def minutely(tmp_path: Path) -> SiteConfig:
    """The meter publishes every minute: max_gap 180 s."""
    return load(tmp_path, site_toml(channel("ph"), timezone="America/New_York", extra=ADOPT))


def ph(*points: tuple[float, float | None]) -> list[Row]:
    return [(t, "ph", v, "good" if v is not None else "stale") for t, v in points]


def rule(events: list[EpisodeEvent], name: str) -> list[tuple[float, str, float | None, float | None]]:
    return [(e.time, e.event, e.value, e.peak) for e in events if e.rule == name]


def confirmed(events: list[EpisodeEvent], name: str) -> list[float | None]:
    return [e.confirmed for e in events if e.rule == name and e.event == "start"]


def test_single_excursion_of_exactly_sixty_minutes_complies(southeast: SiteConfig) -> None:
    t = local(2025, 3, 3, 8)
    rows = ph((t, 7.0), (t + 60, 4.0), (t + 1800, 4.0), (t + 3660, 7.0))  # first out to first in: 3600 s
    assert rule(live(southeast, rows), "ph_excursion_duration") == []


def test_single_excursion_starts_at_its_onset_confirmed_at_the_first_reading_past_sixty_minutes(
    southeast: SiteConfig,
) -> None:
    t = local(2025, 3, 3, 8)
    rows = ph((t, 4.0), (t + 1800, 3.0), (t + 3600, 4.0), (t + 3601, 11.0), (t + 4000, 4.5), (t + 5000, 7.0))
    events = live(southeast, rows)
    assert rule(events, "ph_excursion_duration") == [
        (t, "start", 4.0, None),  # the onset: the first out-of-range reading
        (t + 5000, "end", 7.0, 5000.0),
    ]
    assert confirmed(events, "ph_excursion_duration") == [t + 3601]  # when the alarm fires
    assert events[-1].citation.startswith("40 CFR 401.17(a)(2), adopted by permit SE-IU-3; pH range: Town of")


def test_bad_samples_do_not_interrupt_an_excursion(southeast: SiteConfig) -> None:
    t = local(2025, 3, 3, 8)
    rows = ph((t, 4.0), (t + 600, None), (t + 4000, 4.0), (t + 9000, 7.0))  # a stale row inside max_gap
    events = live(southeast, rows)
    assert rule(events, "ph_excursion_duration") == [
        (t, "start", 4.0, None),
        (t + 9000, "end", 7.0, 9000.0),
    ]
    assert confirmed(events, "ph_excursion_duration") == [t + 4000]


def test_a_gap_ends_the_excursion_so_only_measured_time_counts(minutely: SiteConfig) -> None:
    """08:00-08:40 and 09:10-09:50 below 5.0 with nothing from 08:40 to 09:10: two excursions of 40 minutes,
    not one of 110; a stale row inside the hole does not bridge it."""
    t = local(2025, 3, 3, 8)
    rows = ph(*[(t + 60 * i, 4.0) for i in range(41)], (t + 3000, None),
              *[(t + 4200 + 60 * i, 4.0) for i in range(41)], (t + 6660, 7.0))
    events = live(minutely, rows)
    assert rule(events, "ph_excursion_duration") == []
    low = [(e.time - t, e.event, e.end_reason, e.measured, e.unmeasured) for e in events if e.rule == "ph_low"]
    assert low == [(0, "start", None, None, None), (2400, "end", "gap", 2400.0, 0.0),
                   (4200, "start", None, None, None), (6660, "end", "cleared", 2460.0, 0.0)]


def test_an_episode_past_sixty_measured_minutes_ends_at_the_gap(minutely: SiteConfig) -> None:
    t = local(2025, 3, 3, 8)
    rows = ph(*[(t + 60 * i, 4.0) for i in range(71)], (t + 9000, 4.0), (t + 9060, 7.0))
    assert [(e.time - t, e.event, e.peak, e.end_reason, e.measured) for e in live(minutely, rows)
            if e.rule == "ph_excursion_duration"] == [(0, "start", None, None, None),  # onset; confirmed at 3660
                                                      (4200, "end", 4200.0, "gap", 4200.0)]


def test_monthly_total_counts_measured_time_and_keeps_the_unmeasured_beside_it(tmp_path: Path) -> None:
    """max_gap 1 h; 9 h out of range measured in three stretches around two 2-hour holes: 9 h > 7 h 26 min. The
    episode's end carries the month's measured excursion time and the month's unmeasured time (the holes and
    the silence until the reading after the month's end)."""
    c = load(tmp_path, site_toml(channel("ph", max_gap=3600), timezone="UTC", extra=ADOPT))
    d = datetime(2025, 6, 10, tzinfo=ZoneInfo("UTC")).timestamp()
    rows = ph(*[(d + 1800 * i, 4.0) for i in range(7)],  # 00:00-03:00
              *[(d + 5 * 3600 + 1800 * i, 4.0) for i in range(7)],  # 05:00-08:00 (hole 03:00-05:00)
              *[(d + 10 * 3600 + 1800 * i, 4.0) for i in range(7)],  # 10:00-13:00 (hole 08:00-10:00)
              (d + 13.5 * 3600, 7.0), (d + 14 * 3600, 7.0))
    month_end = datetime(2025, 7, 1, tzinfo=ZoneInfo("UTC")).timestamp()
    rows += ph((month_end + 60, 7.0))
    monthly = [e for e in live(c, rows) if e.rule == "ph_monthly_excursion"]
    measured = 3 * 3 * 3600.0 + 1800.0  # three 3-hour stretches, the last ended by the 13:30 reading
    assert [(e.event, e.end_reason) for e in monthly] == [("start", None), ("end", "month_end")]
    end = monthly[1]
    assert end.peak == end.measured == measured
    assert end.unmeasured == 2 * 7200.0 + (month_end - (d + 14 * 3600))


def test_excursion_time_is_real_seconds_across_the_dst_fall_back(southeast: SiteConfig) -> None:
    t0 = local(2025, 11, 2, 0, 50)  # EDT; clocks go back at 02:00 EDT to 01:00 EST
    t1 = datetime(2025, 11, 2, 1, 40, tzinfo=NY, fold=1).timestamp()  # 01:40 EST: 50 wall minutes, 110 real
    assert t1 - t0 == 110 * 60
    events = live(southeast, ph((t0, 4.0), (t1, 4.0), (t1 + 60, 7.0)))
    assert rule(events, "ph_excursion_duration") == [(t0, "start", 4.0, None), (t1 + 60, "end", 7.0, 6660.0)]
    assert confirmed(events, "ph_excursion_duration") == [t1]


def test_monthly_total_of_exactly_the_limit_complies_and_one_second_more_starts(
    southeast: SiteConfig,
) -> None:
    a = local(2025, 10, 31, 10)
    b = local(2025, 10, 31, 20)
    month_end = local(2025, 11, 1)
    rows = ph(
        (a, 4.0),
        (a + LIMIT, 7.0),  # exactly 7 h 26 min
        (b, 4.0),
        (b + 1, 4.0),  # one more second: over the limit, at this reading
        (month_end - 1, 4.0),
        (month_end, 4.0),  # the first reading at the month's end ends it
        (month_end + 1800, 7.0),
    )
    events = live(southeast, rows)
    assert rule(events, "ph_monthly_excursion") == [
        (b + 1, "start", 4.0, None),
        (month_end, "end", 4.0, float(LIMIT + month_end - b)),
    ]


def test_month_end_is_local_midnight_after_the_dst_change(southeast: SiteConfig) -> None:
    """November 2025 in New York ends at 05:00Z (EST), not 04:00Z (EDT, as on 1 November)."""
    start = local(2025, 11, 30, 12)
    month_end = local(2025, 12, 1)
    assert datetime.fromtimestamp(month_end, ZoneInfo("UTC")).hour == 5
    rows = ph((start, 4.0), (start + LIMIT + 1, 4.0), (month_end - 1800, 4.0), (month_end, 7.0))
    events = live(southeast, rows)
    assert rule(events, "ph_monthly_excursion") == [
        (start + LIMIT + 1, "start", 4.0, None),
        (month_end, "end", 7.0, month_end - start),
    ]


def test_excursion_spanning_the_month_end_is_split_at_local_midnight(southeast: SiteConfig) -> None:
    month_end = local(2025, 4, 1)
    rows = ph(
        (month_end - 3600, 4.0),
        (month_end + LIMIT, 4.0),
        (month_end + LIMIT + 1, 4.0),
        (month_end + LIMIT + 2, 7.0),
    )
    events = live(southeast, rows)
    # March gets one hour; April counts from midnight: over 7 h 26 min one second later.
    assert rule(events, "ph_monthly_excursion") == [(month_end + LIMIT + 1, "start", 4.0, None)]


def test_total_known_only_after_the_month_end_is_still_recorded(southeast: SiteConfig) -> None:
    month_end = local(2025, 5, 1)
    rows = ph((month_end - 8 * 3600, 4.0), (month_end + 3600, 7.0))  # sparse: 8 h of May... of April
    assert rule(live(southeast, rows), "ph_monthly_excursion") == [
        (month_end + 3600, "start", 7.0, None),
        (month_end + 3600, "end", 7.0, 8 * 3600.0),
    ]


def test_without_an_adopting_permit_there_is_no_401_17_rule(tmp_path: Path) -> None:
    c = load(tmp_path, site_toml(channel("ph")))
    assert {b.rule for b in c.sites[0].checks} == {"ph_low", "ph_high", "stale", "sensor_fault"}


def test_too_long_an_excursion_known_only_at_its_end_is_still_recorded(southeast: SiteConfig) -> None:
    t = local(2025, 3, 3, 8)
    rows = ph((t, 4.0), (t + 5400, 7.0))  # sparse: the first reading past 60 minutes is the in-range one
    events = live(southeast, rows)
    assert rule(events, "ph_excursion_duration") == [
        (t, "start", 4.0, None),
        (t + 5400, "end", 7.0, 5400.0),
    ]
    assert confirmed(events, "ph_excursion_duration") == [t + 5400]


def test_the_alarm_of_a_duration_rule_fires_at_confirmation_not_at_the_onset(southeast: SiteConfig) -> None:
    from monitor.alarming import alarm_input

    t = local(2025, 3, 3, 8)
    events = live(southeast, ph((t, 4.0), (t + 3601, 4.0), (t + 4000, 7.0)))
    start = next(e for e in events if e.rule == "ph_excursion_duration" and e.event == "start")
    end = next(e for e in events if e.rule == "ph_excursion_duration" and e.event == "end")
    assert (start.time, alarm_input(start).time) == (t, t + 3601)
    assert alarm_input(end).time == t + 4000
