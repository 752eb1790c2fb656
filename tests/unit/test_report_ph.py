"""Monthly 40 CFR 401.17 accounting: 446 minutes per calendar month whatever its length (28–31 days), 60 minutes
per excursion, strict "shall not exceed" (446 and 60 comply), months in the site's time zone (DST months)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from monitor.reports.aggregates import DailyAggregator
from monitor.reports.aggregates_db import connect
from monitor.reports.days import next_month
from monitor.reports.ph_accounting import MonthAccount, monthly_accounts
from monitor.reports.plan import compile_plans
from monitor.sample import Sample
from tests.unit.report_scenarios import SITE, TZ, site_config


def _at(d: date, hh: int, mm: int = 0) -> float:
    return datetime(d.year, d.month, d.day, hh, mm, tzinfo=TZ).timestamp()


def _excursions(tmp_path: Path, spans: list[tuple[float, float]], first: date, last: date) -> list[MonthAccount]:
    """Feed pH 7 before each span, 9.5 every minute from its start, 7 at its end (the meter reports every
    minute: only measured time is excursion time); return the months first..last."""
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    for a, b in spans:
        agg.observe([Sample(a - 60, SITE, "ph", 7.0, "pH"),
                     *(Sample(t, SITE, "ph", 9.5, "pH") for t in range(int(a), int(b), 60)),
                     Sample(b, SITE, "ph", 7.0, "pH")])
    agg.close()
    conn = connect(config.daemon.historian)
    try:
        return monthly_accounts(conn, config.site(SITE), compile_plans(config), first, last)
    finally:
        conn.close()


@pytest.mark.parametrize(("month", "days", "hours"), [
    (date(2026, 2, 1), 28, 672.0),
    (date(2028, 2, 1), 29, 696.0),  # leap year
    (date(2026, 4, 1), 30, 720.0),
    (date(2026, 3, 1), 31, 743.0),  # DST starts on 8 March: one hour short
    (date(2026, 11, 1), 30, 721.0),  # DST ends on 1 November
    (date(2026, 12, 1), 31, 744.0),
])
def test_excursion_across_the_month_end_is_split_at_local_midnight(tmp_path: Path, month: date, days: int,
                                                                   hours: float) -> None:
    last_day = next_month(month) - timedelta(days=1)
    start, end = _at(last_day, 23, 30), _at(next_month(month), 0, 45)  # 30 min this month, 45 the next
    this, following = _excursions(tmp_path, [(start, end)], month, next_month(month))
    assert (this.month, this.days, this.hours) == (month.strftime("%Y-%m"), days, hours)
    assert this.excursion_minutes == pytest.approx(30.0)
    assert following.excursion_minutes == pytest.approx(45.0)
    # the 75-minute excursion is one excursion: over 60 in both months it touches
    assert this.longest_minutes == following.longest_minutes == pytest.approx(75.0)
    assert this.single_exceeded and following.single_exceeded
    assert this.allowance_minutes == following.allowance_minutes == 446.0
    assert this.adopted and "401.17(a)(1)" in this.total_citation


@pytest.mark.parametrize(("extra", "exceeded"), [(26, False), (27, True)])
def test_446_minutes_comply_447_do_not(tmp_path: Path, extra: int, exceeded: bool) -> None:
    d0 = date(2026, 2, 2)
    spans = [(_at(d0 + timedelta(days=k), 10), _at(d0 + timedelta(days=k), 11)) for k in range(7)]  # 7 × 60
    spans.append((_at(date(2026, 2, 20), 10), _at(date(2026, 2, 20), 10, extra)))
    [feb] = _excursions(tmp_path, spans, date(2026, 2, 1), date(2026, 2, 28))
    assert feb.excursion_minutes == pytest.approx(420.0 + extra)
    assert feb.total_exceeded is exceeded
    assert feb.longest_minutes == pytest.approx(60.0)
    assert not feb.single_exceeded  # exactly 60 minutes complies ("shall exceed 60 minutes")
    assert feb.remaining_minutes == pytest.approx(max(0.0, 446.0 - 420.0 - extra))


def test_61_minute_excursion_exceeds_and_an_open_one_counts(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    d = date(2026, 4, 10)
    minutes = [(_at(d, 9, 59), 7.0), *((_at(d, 10) + 60 * m, 5.0) for m in range(61)), (_at(d, 11, 1), 7.0),
               *((_at(d, 15) + 60 * m, 9.8) for m in range(91))]  # still outside at the last reading (15:00 → 16:30)
    agg.observe([Sample(t, SITE, "ph", v, "pH") for t, v in minutes])
    agg.close()
    conn = connect(config.daemon.historian)
    [apr] = monthly_accounts(conn, config.site(SITE), compile_plans(config), d, d)
    conn.close()
    assert apr.longest_minutes == pytest.approx(90.0) and apr.longest_open
    assert apr.excursion_minutes == pytest.approx(61.0 + 90.0)
    assert apr.single_exceeded and not apr.total_exceeded


def test_a_gap_ends_an_excursion_and_its_time_is_unmeasured_not_excursion(tmp_path: Path) -> None:
    """pH 9.5 every minute 10:00-10:30, nothing until 12:00, 9.5 again to 12:30, then 7.0: two measured
    30-minute excursions (60 minutes of excursion, longest 30), not one of 150; the 90-minute hole is
    unmeasured, shown beside the total as the worst case."""
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    d = date(2026, 4, 10)
    first = _at(d, 0)
    readings = [(t, 7.0) for t in range(int(first), int(_at(d, 10)), 60)]
    readings += [(_at(d, 10, m), 9.5) for m in range(31)] + [(_at(d, 12, m), 9.5) for m in range(31)]
    readings += [(t, 7.0) for t in range(int(_at(d, 12, 31)), int(_at(d, 13)) + 1, 60)]
    agg.observe([Sample(t, SITE, "ph", v, "pH") for t, v in readings])
    agg.close()
    conn = connect(config.daemon.historian)
    [apr] = monthly_accounts(conn, config.site(SITE), compile_plans(config), d, d)
    conn.close()
    assert apr.excursion_minutes == pytest.approx(61.0)  # 10:00-10:30 and 12:00-12:31 (first reading back in)
    assert apr.longest_minutes == pytest.approx(31.0)
    before = (first - _at(date(2026, 4, 1), 0)) / 60.0  # the month before its first reading: unmeasured too
    assert apr.unmeasured_minutes == pytest.approx(before + 90.0)
    assert apr.worst_case_minutes == pytest.approx(61.0 + before + 90.0)
