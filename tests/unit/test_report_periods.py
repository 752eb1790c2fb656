"""Report due dates as the law words them: Pawling's days from its seed, and elsewhere 40 CFR 403.12(e)(1)'s
"during the months of June and December" (403.12(h): "on dates specified by the Control Authority"), never
an invented day such as 1 January."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from monitor.reports.periods import FEDERAL_CITATION, due_dates, latest_period, period_for_due, period_of_days
from tests.unit.checks_helpers import channel, load, site_toml


def _site(tmp_path: Path, jurisdiction: str = "southeast", kind: str = "ph"):  # type: ignore[no-untyped-def]
    return load(tmp_path, site_toml(channel(kind), jurisdiction=jurisdiction,
                                    timezone="America/New_York")).sites[0]


def test_federal_reports_are_due_during_june_and_december_in_the_cfr_words(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert due_dates(site, 2027) == [date(2027, 6, 1), date(2027, 12, 1)]  # written on the 1st of the month
    june = period_for_due(site, date(2027, 6, 1))
    assert (june.first, june.last, june.due_label) == (date(2026, 12, 1), date(2027, 5, 31), "during June 2027")
    assert '40 CFR 403.12(e)(1): "during the months of June and December' in june.basis
    assert '403.12(h)' in FEDERAL_CITATION and '"at least once every six months (on dates specified by the ' \
        'Control Authority)"' in FEDERAL_CITATION
    dec = latest_period(site, date(2027, 1, 5))
    assert (dec.first, dec.last, dec.due_label) == (date(2026, 6, 1), date(2026, 11, 30), "during December 2026")
    assert all(d.month not in (1, 7) for y in (2026, 2027) for d in due_dates(site, y))


def test_a_chosen_period_is_due_in_the_next_submission_month(tmp_path: Path) -> None:
    site = _site(tmp_path)
    p = period_of_days(site, date(2026, 6, 1), date(2026, 6, 30))
    assert p.due_label == "during December 2026" and p.basis == FEDERAL_CITATION


def test_pawling_keeps_its_seed_days(tmp_path: Path) -> None:
    site = _site(tmp_path, "pawling", "temperature")
    p = period_of_days(site, date(2026, 3, 2), date(2026, 3, 4))
    assert p.due_label == "2026-03-15" and "fifteenth day" in p.basis
