"""Monthly pH accounting under 40 CFR 401.17 (continuous pH monitoring): per calendar month of the site's time
zone, the total time outside the pH range against the 446-minute allowance (401.17(a)(1): "shall not exceed
7 hours and 26 minutes in any calendar month") and the longest single excursion against 60 minutes
(401.17(a)(2): "No individual excursion ... shall exceed 60 minutes").

The allowance is the same for every month, 28 to 31 days long: it is a fixed number of minutes, not a share of
the month. Excursion time comes from the per-day aggregates (timed from the first reading outside the range
to the first reading back inside, real seconds, split at local midnight; a gap in the data ends an excursion at
the last reading before it, so only measured time counts), so a month's total is the sum of its days. Beside it
stands the month's unmeasured time (up to its last reading, not covered by readings no further apart than the
channel's ``max_gap``, nor maintenance): the measured total is what the record proves, measured + unmeasured the
worst case. Maintenance time (the instrument said it was serviced or calibrated, quality ``maintenance``) stands
apart beside it: it is neither measured nor unmeasured, and nothing is alleged about it (as the check engine
treats it, `monitor.checks.coverage`). The
longest excursion is taken from the recorded excursions (full length, even when it spans a month
boundary: it is listed in each month it touches), plus one still open at the last reading.

Where the site's permit has not adopted 401.17 (no ``ph_monthly_excursion`` / ``ph_excursion_duration``
binding) the figures are still shown, against the federal numbers, marked "for reference".
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import date, timedelta

from config.limits import FEDERAL, load_profile
from config.rule_catalogue import RuleName
from config.rule_model import ExcursionParams
from config.schema import Site
from monitor.reports.aggregates_db import read_excursions, read_states
from monitor.reports.days import day_bounds, next_month
from monitor.reports.plan import ChannelPlan

_FEDERAL_TOTAL = 446.0
_FEDERAL_SINGLE = 60.0


@dataclass(frozen=True, slots=True)
class MonthAccount:
    site: str
    channel: str
    month: str  # YYYY-MM, local
    days: int  # 28–31
    hours: float  # real hours in the month (DST: 743 or 745 in the changeover months)
    excursion_minutes: float
    allowance_minutes: float
    longest_minutes: float
    longest_start: float | None
    longest_open: bool  # the longest excursion had not ended at the last reading
    single_limit_minutes: float
    covered_minutes: float  # time with good readings no further apart than the channel's max_gap
    adopted: bool  # False: the permit does not adopt 401.17; the figures are for reference
    total_citation: str
    single_citation: str
    unmeasured_minutes: float = 0.0  # the month up to its last reading not covered: the worst case adds it
    maintenance_minutes: float = 0.0  # in service/calibration: neither covered nor unmeasured

    @property
    def total_exceeded(self) -> bool:
        return self.excursion_minutes > self.allowance_minutes

    @property
    def single_exceeded(self) -> bool:
        return self.longest_minutes > self.single_limit_minutes

    @property
    def worst_case_minutes(self) -> float:
        """Excursion time if every unmeasured minute had been out of range: the proven figure's upper bound."""
        return self.excursion_minutes + self.unmeasured_minutes

    @property
    def remaining_minutes(self) -> float:
        return max(0.0, self.allowance_minutes - self.excursion_minutes)


def _limits(site: Site, channel: str) -> tuple[float, str, float, str, bool]:
    total = next((b for b in site.checks if b.channel == channel and b.rule == RuleName.PH_MONTHLY_EXCURSION), None)
    single = next((b for b in site.checks if b.channel == channel and b.rule == RuleName.PH_EXCURSION_DURATION),
                  None)
    fed, _ = load_profile(FEDERAL)
    fed_total = fed.limits["ph_excursion_monthly"].citation if fed else "40 CFR 401.17(a)(1)"
    fed_single = fed.limits["ph_excursion_single"].citation if fed else "40 CFR 401.17(a)(2)"
    return (
        total.typed(ExcursionParams).limit / 60.0 if total else _FEDERAL_TOTAL,
        total.citation.split("; pH range: ")[0] if total else f"{fed_total} (for reference: not adopted)",
        single.typed(ExcursionParams).limit / 60.0 if single else _FEDERAL_SINGLE,
        single.citation.split("; pH range: ")[0] if single else f"{fed_single} (for reference: not adopted)",
        total is not None or single is not None,
    )


def months_between(first: date, last: date) -> list[date]:
    """First days of every month touching ``first``..``last``."""
    out, m = [], date(first.year, first.month, 1)
    while m <= last:
        out.append(m)
        m = next_month(m)
    return out


def monthly_accounts(conn: sqlite3.Connection, site: Site, plans: dict[tuple[str, str], ChannelPlan],
                     first: date, last: date) -> list[MonthAccount]:
    """One account per pH channel with a stated range and calendar month touching ``first``..``last``."""
    out: list[MonthAccount] = []
    states = read_states(conn)
    for p in (p for (s, _c), p in plans.items() if s == site.id and p.ph_range is not None):
        total_lim, total_cite, single_lim, single_cite, adopted = _limits(site, p.channel)
        for m in months_between(first, last):
            end_day = next_month(m) - timedelta(days=1)
            lo, hi = day_bounds(m, p.tz)[0], day_bounds(end_day, p.tz)[1]
            outside, covered, serviced = conn.execute(
                "SELECT coalesce(sum(outside), 0), coalesce(sum(covered), 0), coalesce(sum(maintenance), 0) "
                "FROM report_daily "
                "WHERE site = ? AND channel = ? AND day >= ? AND day <= ?",
                (site.id, p.channel, m.isoformat(), end_day.isoformat())).fetchone()
            longest, start, is_open = 0.0, None, False
            for e in read_excursions(conn, site=site.id, start=lo, end=hi, kind="ph"):
                if e.channel == p.channel and e.duration is not None and e.duration > longest:
                    longest, start = e.duration, e.start
            st = states.get((site.id, p.channel))
            if st is not None and st.exc_start is not None and st.good_t is not None \
                    and st.exc_start < hi and st.good_t >= lo and st.good_t - st.exc_start > longest:
                longest, start, is_open = st.good_t - st.exc_start, st.exc_start, True
            until = hi if st is None or st.good_t is None else min(hi, max(lo, st.good_t))  # not the future
            unmeasured = max(0.0, (until - lo) - float(covered) - float(serviced)) / 60.0
            out.append(MonthAccount(
                site=site.id, channel=p.channel, month=m.strftime("%Y-%m"), days=end_day.day,
                hours=round((hi - lo) / 3600.0, 6), excursion_minutes=float(outside) / 60.0,
                allowance_minutes=total_lim, longest_minutes=longest / 60.0, longest_start=start,
                longest_open=is_open, single_limit_minutes=single_lim, covered_minutes=float(covered) / 60.0,
                unmeasured_minutes=unmeasured, maintenance_minutes=float(serviced) / 60.0,
                adopted=adopted, total_citation=total_cite, single_citation=single_cite))
    return out
