"""Reporting periods and due dates per jurisdiction.

Town of Pawling: "each major contributing industry shall submit a report ... on the fifteenth day of the months
of March, September and December or as otherwise prescribed by the Sewer Inspector" (seed
002_0b1abb2f77a6e9ea.txt lines 195–198; only three months are printed, no June). Each report covers the
whole months since the previous one: due 15 March → December–February, due 15 September → March–August,
due 15 December → September–November.

Everywhere else the federal words stand, and no day is made up: 40 CFR 403.12(e)(1) has a categorical user
report "during the months of June and December, unless required more frequently in the Pretreatment Standard
or by the Control Authority or the Approval Authority", and 403.12(h) has a significant non-categorical user
report "at least once every six months (on dates specified by the Control Authority)". The report states its
due time in those words ("during June 2027", with the quotes), not as a day of the month. Each report covers
the six whole months before its submission month (due during June: December–May; during December:
June–November) and is written on the 1st of the submission month, so it can be submitted during that month.
A Control Authority's own dates belong in the permit (not configurable yet); until then the report says that
the dates the Control Authority specifies prevail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from config.schema import Site
from monitor.reports.days import add_months

PAWLING_CITATION = ("Town of Pawling sewer use chapter, part E: "
                    "\"on the fifteenth day of the months of March, September and December\"")
FEDERAL_CITATION = ('40 CFR 403.12(e)(1): "during the months of June and December, unless required more frequently '
                    'in the Pretreatment Standard or by the Control Authority or the Approval Authority"; '
                    '40 CFR 403.12(h), significant non-categorical users: "at least once every six months (on '
                    'dates specified by the Control Authority)"; dates the Control Authority specifies prevail')
FEDERAL_MONTHS = (6, 12)  # 403.12(e)(1): "during the months of June and December"


@dataclass(frozen=True, slots=True)
class Period:
    first: date  # both days included
    last: date
    due: date  # the schedule's date: Pawling's day; federally the 1st of the submission month (written then)
    basis: str  # the citation of the schedule
    due_text: str = ""  # the due time in the law's words where it names a month, not a day ("during June 2027")

    @property
    def label(self) -> str:
        return f"{self.first.isoformat()} to {self.last.isoformat()}"

    @property
    def due_label(self) -> str:
        """How the report states when it is due: the law's words where it names no day, else the date."""
        return self.due_text or self.due.isoformat()


def _pawling(due: date) -> Period:
    start_month = {3: -3, 9: -6, 12: -3}[due.month]
    first = add_months(date(due.year, due.month, 1), start_month)
    return Period(first, date(due.year, due.month, 1) - timedelta(days=1), due, PAWLING_CITATION)


def due_dates(site: Site, year: int) -> list[date]:
    if site.jurisdiction == "pawling":
        return [date(year, m, 15) for m in (3, 9, 12)]
    return [date(year, m, 1) for m in FEDERAL_MONTHS]


def period_for_due(site: Site, due: date) -> Period:
    if site.jurisdiction == "pawling":
        return _pawling(due)
    month = date(due.year, due.month, 1)
    return Period(add_months(month, -6), month - timedelta(days=1), month, FEDERAL_CITATION,
                  f"during {month.strftime('%B %Y')}")


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
    scheduled = period_for_due(site, after)
    return Period(first, last, after, scheduled.basis, scheduled.due_text)
