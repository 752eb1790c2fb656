"""Reporting periods and due dates per jurisdiction.

Town of Pawling: "each major contributing industry shall submit a report ... on the fifteenth day of the months
of March, September and December or as otherwise prescribed by the Sewer Inspector" (seed
002_0b1abb2f77a6e9ea.txt lines 195–198; only three months are printed, no June). Each report covers the
whole months since the previous one: due 15 March → December–February, due 15 September → March–August,
due 15 December → September–November.

Everywhere else: 40 CFR 403.12(e)(1) requires periodic compliance reports at least twice a year; the default
periods are the calendar half-years (January–June, July–December), generated on the 1st of the month after
the period, unless the permit prescribes otherwise (not configurable yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from config.schema import Site
from monitor.reports.days import add_months

PAWLING_CITATION = ("Town of Pawling sewer use chapter, part E (seed 002_0b1abb2f77a6e9ea.txt lines 195-198): "
                    "\"on the fifteenth day of the months of March, September and December\"")
FEDERAL_CITATION = "40 CFR 403.12(e)(1): periodic compliance reports at least every six months"


@dataclass(frozen=True, slots=True)
class Period:
    first: date  # both days included
    last: date
    due: date
    basis: str  # the citation of the schedule

    @property
    def label(self) -> str:
        return f"{self.first.isoformat()} to {self.last.isoformat()}"


def _pawling(due: date) -> Period:
    start_month = {3: -3, 9: -6, 12: -3}[due.month]
    first = add_months(date(due.year, due.month, 1), start_month)
    return Period(first, date(due.year, due.month, 1) - timedelta(days=1), due, PAWLING_CITATION)


def due_dates(site: Site, year: int) -> list[date]:
    if site.jurisdiction == "pawling":
        return [date(year, m, 15) for m in (3, 9, 12)]
    return [date(year, 1, 1), date(year, 7, 1)]


def period_for_due(site: Site, due: date) -> Period:
    if site.jurisdiction == "pawling":
        return _pawling(due)
    first = add_months(due, -6)
    return Period(first, due - timedelta(days=1), due, FEDERAL_CITATION)


def latest_period(site: Site, today: date) -> Period:
    """The most recent period whose last day is before ``today`` (the report being prepared or just due)."""
    candidates = [period_for_due(site, d) for y in (today.year - 1, today.year, today.year + 1)
                  for d in due_dates(site, y)]
    done = [p for p in candidates if p.last < today]
    return max(done, key=lambda p: p.last)


def period_of_days(site: Site, first: date, last: date) -> Period:
    """A period of the user's choosing, due on the jurisdiction's next report date after its last day (the
    schedule's citation as the basis), so a report for chosen days still states when it is due and why."""
    after = sorted(d for y in (last.year, last.year + 1) for d in due_dates(site, y) if d > last)[0]
    return Period(first, last, after, period_for_due(site, after).basis)
