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


def test_a_sampler_fridge_episode_is_a_monitoring_deviation_not_a_discharge_violation(tmp_path: Path) -> None:
    """The fridge band (permit Part III.B.2) is a condition on the monitoring equipment: obligations do not treat
    it as a violation, and neither does the verdict; it is counted in its own category."""
    from monitor.reports.compliance import EpisodeLine
    from monitor.reports.verdict import verdict, verdict_rows

    config = site_config(tmp_path)
    site = config.sites[0]
    empty = build_report(config, site.id, period_of_days(site, date(2026, 3, 1), date(2026, 3, 10)),
                         now=_at(date(2026, 4, 1)))
    t = _at(date(2026, 3, 3))
    fridge = EpisodeLine(id="s/fridge/sampler_temperature@x", channel="fridge", rule="sampler_temperature", start=t,
                         end=t + 3600, peak=9.0, limit=6.0, citation="Permit P-1, Part III.B.2", data_quality=False,
                         annotation=None)
    ph = dataclasses.replace(fridge, id="s/ph/ph_low@x", channel="ph", rule="ph_low", peak=4.0, limit=5.0,
                             citation="Town of Southeast § 112-5A(1)(c)")
    r = dataclasses.replace(empty, episodes=(fridge, ph),
                            completeness=(ChannelTotal("ph", "ph", "pH", 1440, 1440, 1440, 0.0, 0),))
    assert r.exceedances == (ph,) and r.monitoring_deviations == (fridge,)
    assert [v.rule for v in verdict(r)[0]] == ["ph_low"]
    text = headline(r)
    assert text.startswith("NOT IN COMPLIANCE: 1 violation of 1 rule")
    assert "1 monitoring-requirement deviation(s) of the sampler, not discharge violations" in text
    assert ("Monitoring-requirement deviations (sampler; not discharge violations)", "Permit P-1, Part III.B.2",
            "1", "—") in verdict_rows(r)


def test_the_obligations_timeline_is_in_due_order(tmp_path: Path) -> None:
    from monitor.reports.enforcement import ObligationLine
    from monitor.reports.sections import build_sections

    config = site_config(tmp_path)
    site = config.sites[0]
    empty = build_report(config, site.id, period_of_days(site, date(2026, 3, 1), date(2026, 3, 10)),
                         now=_at(date(2026, 4, 1)))
    t = _at(date(2026, 3, 3))
    lines = (ObligationLine("e2", "written report", "§ 2", t + 86400 * 5, None),
             ObligationLine("e1", "telephone notice", "§ 1", t, None),
             ObligationLine("e3", "no time", "§ 3", None, None),
             ObligationLine("e1", "24-hour notice", "§ 4", t + 86400, None))
    r = dataclasses.replace(empty, obligations=lines)
    [section] = [s for s in build_sections(r) if s.key == "obligations"]
    assert [row[1] for row in section.rows] == ["telephone notice", "24-hour notice", "written report", "no time"]
