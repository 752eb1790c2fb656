"""40 CFR 401.17 permits pH excursions only within its allowances (no single excursion over 60 minutes, at most
7 h 26 min a month): an excursion that is part of a ph_excursion_duration or ph_monthly_excursion violation is
listed with the violations, saying why, in the report as in `pretreat exceedances` (test_exceedances.py)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

from monitor.checks.events import EpisodeEvent
from monitor.permitted_excursions import Span, beyond_allowance
from monitor.reports.compliance import build_report
from monitor.reports.periods import period_of_days
from monitor.stores.episodes import EpisodeStore
from tests.unit.report_scenarios import SITE, TZ, site_config

CITE = "Permit P-1"


def test_within_and_beyond_the_allowances() -> None:
    duration = Span("ph", "ph_excursion_duration", 100.0, 4300.0)
    monthly = Span("ph", "ph_monthly_excursion", 10_000.0, None)  # open to the month's end
    assert "no single excursion longer than 60 minutes" in beyond_allowance("ph", "ph_high", 100.0, 4300.0,
                                                                            [duration])
    assert beyond_allowance("ph", "ph_high", 5000.0, 5600.0, [duration, monthly]) == ""  # apart from both
    assert "at most 7 hours 26 minutes" in beyond_allowance("ph", "ph_low", 20_000.0, 20_600.0, [monthly])
    assert beyond_allowance("ph2", "ph_low", 20_000.0, 20_600.0, [monthly]) == ""  # another channel
    assert beyond_allowance("ph", "ph_excursion_duration", 100.0, 4300.0, [duration]) == ""  # not an excursion


def test_the_report_lists_an_excursion_beyond_the_allowance_with_the_violations(tmp_path: Path) -> None:
    config = site_config(tmp_path)  # Pawling; the permit adopts 40 CFR 401.17
    site = config.site(SITE)
    t0 = datetime(2026, 3, 2, 8, 0, tzinfo=TZ).timestamp()
    store = EpisodeStore(path=config.daemon.historian)
    try:
        store.record([
            EpisodeEvent(t0, SITE, "ph", "ph_high", "start", 9.4, 9.0, CITE),
            EpisodeEvent(t0, SITE, "ph", "ph_excursion_duration", "start", 9.4, 3600.0, CITE,
                         confirmed=t0 + 3601),
            EpisodeEvent(t0 + 4200, SITE, "ph", "ph_high", "end", 8.9, 9.0, CITE, 9.4),
            EpisodeEvent(t0 + 4200, SITE, "ph", "ph_excursion_duration", "end", 8.9, 3600.0, CITE, 4200.0),
            EpisodeEvent(t0 + 9000, SITE, "ph", "ph_high", "start", 9.3, 9.0, CITE),
            EpisodeEvent(t0 + 9600, SITE, "ph", "ph_high", "end", 8.9, 9.0, CITE, 9.3),
        ])
    finally:
        store.close()
    r = build_report(config, SITE, period_of_days(site, date(2026, 3, 1), date(2026, 3, 10)),
                     now=datetime(2026, 4, 1, tzinfo=TZ).timestamp())
    assert [(e.rule, e.start) for e in r.permitted_excursions] == [("ph_high", t0 + 9000)]
    violations = {(e.rule, e.start): e for e in r.exceedances}
    assert set(violations) == {("ph_high", t0), ("ph_excursion_duration", t0)}
    assert "part of the ph_excursion_duration violation" in violations[("ph_high", t0)].citation
