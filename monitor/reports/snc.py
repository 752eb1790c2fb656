"""Significant noncompliance screen, 40 CFR 403.8(f)(2)(viii)(A) and (B), over lab results.

For each industry and pollutant parameter with a concentration limit (the stricter of the site's permit's and the
jurisdiction's where both state one, else whichever does: `pollutants.limits_for`), over a six-month period:
- *chronic* (A): 66 % or more of all measurements "exceed (by any magnitude)" the limit: ``value > limit``;
- *TRC* (B): 33 % or more of all measurements "equal or exceed the product of" the limit and the Technical
  Review Criterion (1.4 for BOD, TSS, fats, oil and grease; 1.2 for all others; none for pH):
  ``value >= limit × TRC``.

Shares are compared exactly, as fractions: 33 of 50 results is 66 % and is chronic; 1 of 3 (33.3 %) is over
33 %. Values and limits are compared as exact decimals (`Fraction` of the printed text), because in binary
floating point 300 × 1.4 is 419.99999999999994, and a result of exactly 420 mg/L must count as "equal". A
non-detect never exceeds. pH is screened by the continuous monitoring (401.17 accounting), not here. The
third SNC criterion about reports more than 45 days late is not screened (the product does not track report
submissions yet).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from fractions import Fraction

from config.pollutants import PARAMETERS, PollutantLimit, limits_for
from config.schema import SiteConfig
from monitor.reports.days import add_months
from monitor.reports.labs import LabResult

CHRONIC_SHARE = Fraction(66, 100)
TRC_SHARE = Fraction(33, 100)
CITATION = "40 CFR 403.8(f)(2)(viii)"


@dataclass(frozen=True, slots=True)
class ParameterScreen:
    site: str
    parameter: str
    limit: PollutantLimit
    trc: Fraction | None
    results: tuple[LabResult, ...]
    exceeding: int  # value > limit
    at_trc: int  # value >= limit × TRC

    @property
    def count(self) -> int:
        return len(self.results)

    @property
    def exceed_share(self) -> Fraction:
        return Fraction(self.exceeding, self.count) if self.count else Fraction(0)

    @property
    def trc_share(self) -> Fraction:
        return Fraction(self.at_trc, self.count) if self.count else Fraction(0)

    @property
    def chronic(self) -> bool:
        return self.count > 0 and self.exceed_share >= CHRONIC_SHARE

    @property
    def trc_violation(self) -> bool:
        return self.trc is not None and self.count > 0 and self.trc_share >= TRC_SHARE

    @property
    def snc(self) -> bool:
        return self.chronic or self.trc_violation


@dataclass(frozen=True, slots=True)
class SncScreen:
    first: date  # window, both days included
    last: date
    screens: tuple[ParameterScreen, ...]
    unscreened: tuple[LabResult, ...] = field(default=())  # results with no limit at their site (listed, not judged)

    def industries_in_snc(self) -> list[str]:
        return sorted({s.site for s in self.screens if s.snc})


def window_ending(last: date) -> tuple[date, date]:
    """The six-month period ending with ``last`` (both included): 1 Jan–30 Jun for 30 June."""
    return add_months(last + timedelta(days=1), -6), last


def _exact(x: float) -> Fraction:
    return Fraction(repr(x))  # the shortest decimal that reads back as x: the number as the lab wrote it


def screen(results: Sequence[LabResult], config: SiteConfig, first: date, last: date) -> SncScreen:
    """Screen every site and parameter with results in ``first``..``last``."""
    grouped: dict[tuple[str, str], list[LabResult]] = defaultdict(list)
    for r in results:
        if first <= r.sample_date <= last:
            grouped[(r.site, r.parameter)].append(r)
    limits = {s.id: limits_for(s) for s in config.sites}
    out: list[ParameterScreen] = []
    unscreened: list[LabResult] = []
    for (site, param), rs in sorted(grouped.items()):
        limit = limits.get(site, {}).get(param)
        if limit is None:
            unscreened.extend(rs)
            continue
        trc = PARAMETERS[param].trc
        cap = limit.max_std  # results are compared in mg/L (`LabResult.value_std`)
        exceeding = sum(1 for r in rs if not r.nondetect and _exact(r.value_std) > cap)
        at_trc = 0 if trc is None else sum(1 for r in rs if not r.nondetect and _exact(r.value_std) >= cap * trc)
        out.append(ParameterScreen(site=site, parameter=param, limit=limit, trc=trc, results=tuple(rs),
                                   exceeding=exceeding, at_trc=at_trc))
    return SncScreen(first=first, last=last, screens=tuple(out), unscreened=tuple(unscreened))


def percent(share: Fraction) -> str:
    """A share as a percentage with one decimal, rounded down so 65.99 % never prints as 66.0 %."""
    tenths = (share * 1000).numerator // (share * 1000).denominator
    return f"{tenths // 10}.{tenths % 10} %"
