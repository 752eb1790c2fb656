"""The report's cover verdict never says a period is clean without measured time: no data, a period not yet
complete and partial coverage are said as such (the trial saw an empty period reported without violations)."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime
from pathlib import Path

from monitor.reports.compliance import ChannelTotal, build_report
from monitor.reports.days import zone
from monitor.reports.periods import period_of_days
from monitor.reports.verdict import coverage, headline
from tests.unit.report_scenarios import site_config

TZ = zone("America/New_York")


def _at(d: date) -> float:
    return datetime(d.year, d.month, d.day, 12, 0, tzinfo=TZ).timestamp()


def test_an_empty_period_says_no_data_not_compliance(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    site = config.sites[0]
    r = build_report(config, site.id, period_of_days(site, date(2026, 3, 1), date(2026, 3, 10)),
                     now=_at(date(2026, 4, 1)))
    text = headline(r)
    assert text.startswith("NO DATA: no good reading was recorded in this period") and "no compliance verdict" in text
    assert "compliance." not in text.lower().replace("no compliance verdict", "")
    assert coverage(r) == 0.0


def test_a_future_period_says_it_is_not_complete(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    site = config.sites[0]
    r = build_report(config, site.id, period_of_days(site, date(2026, 3, 1), date(2026, 3, 31)),
                     now=_at(date(2026, 3, 5)))
    assert headline(r).startswith("PERIOD NOT COMPLETE: it runs to 2026-03-31")


def test_no_violations_in_part_of_the_period_states_the_measured_coverage(tmp_path: Path) -> None:
    config = site_config(tmp_path)
    site = config.sites[0]
    empty = build_report(config, site.id, period_of_days(site, date(2026, 3, 1), date(2026, 3, 10)),
                         now=_at(date(2026, 4, 1)))
    half = dataclasses.replace(empty, completeness=(ChannelTotal("ph", "ph", "pH", 720, 720, 1440, 43200.0, 5),))
    assert headline(half) == ("No violations recorded in the measured time. measured coverage 50.0 % of the "
                              "expected readings; the time not measured is not known to be in compliance.")
    full = dataclasses.replace(empty, completeness=(ChannelTotal("ph", "ph", "pH", 1440, 1440, 1440, 0.0, 0),))
    assert headline(full) == "No violations recorded in the measured time."
