"""What a regulator reads first and what follows from the episodes: the compliance verdict (violations per
rule, days out of compliance, 40 CFR 401.17 permitted excursions apart, invalidated episodes apart), the
obligations timeline and the invalidated episodes with their justification.

A *day out of compliance* is a local calendar day of the period that any violation episode overlaps (an open
episode runs to the period's end). Invalidated episodes (marked by enforcement with a justification,
`monitor.reports.enforcement`) and permitted excursions are never counted; both are listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from config.rule_catalogue import label
from monitor.reports.compliance import ComplianceReport, EpisodeLine
from monitor.reports.days import zone
from monitor.reports.enforcement import NONE_RECORDED


@dataclass(frozen=True, slots=True)
class RuleVerdict:
    rule: str
    citation: str
    violations: int
    days: int  # local days out of compliance by this rule


def days_overlapped(e: EpisodeLine, r: ComplianceReport) -> set[date]:
    tz = zone(r.site.timezone)
    lo, hi = r.bounds()
    a, b = max(e.start, lo), min(e.end if e.end is not None else hi, hi)
    first = datetime.fromtimestamp(a, tz).date()
    last = datetime.fromtimestamp(max(a, b - 1e-3), tz).date()
    return {first + timedelta(days=i) for i in range((last - first).days + 1)}


def verdict(r: ComplianceReport) -> tuple[list[RuleVerdict], int]:
    """Per rule (in the order first violated), and the number of days out of compliance by any rule."""
    by_rule: dict[str, list[EpisodeLine]] = {}
    for e in r.exceedances:
        by_rule.setdefault(e.rule, []).append(e)
    out, every = [], set()
    for rule, eps in by_rule.items():
        days = set().union(*(days_overlapped(e, r) for e in eps))
        every |= days
        cites = "; ".join(dict.fromkeys(e.citation for e in eps))
        out.append(RuleVerdict(rule, cites, len(eps), len(days)))
    return out, len(every)


def coverage(r: ComplianceReport) -> float | None:
    """Percent of the expected readings of the period's channels that were good (measured time), or None when
    nothing was expected (no channel to measure)."""
    expected = sum(c.expected for c in r.completeness)
    return None if not expected else min(100.0, 100.0 * sum(c.good for c in r.completeness) / expected)


def measured_note(r: ComplianceReport) -> str:
    """Why a period without violations is not said to be "in compliance": the time measured, and whether the
    period is over. Empty when the period is complete and fully measured."""
    notes = []
    end = r.bounds()[1]
    if r.generated < end:
        notes.append(f"PERIOD NOT COMPLETE: it runs to {r.period.last.isoformat()}; this covers only the days "
                     "up to generation")
    cov = coverage(r)
    if cov is None or not any(c.good for c in r.completeness):
        notes.append("NO DATA: no good reading was recorded in this period, so nothing was measured and no "
                     "compliance verdict can be given")
    elif cov < 100.0:
        notes.append(f"measured coverage {cov:.1f} % of the expected readings; the time not measured is not "
                     "known to be in compliance")
    return "; ".join(notes)


def headline(r: ComplianceReport) -> str:
    """The cover's first line. Without violations it never says "in compliance": it says what was measured
    (`measured_note`): no data, a period not yet complete, the coverage."""
    rules, days = verdict(r)
    n = sum(v.violations for v in rules)
    note = measured_note(r)
    if not n:
        text = "No violations recorded in the measured time." + (f" {note}." if note else "")
        if note.startswith(("NO DATA", "PERIOD NOT COMPLETE")):
            text = f"{note}. No violations recorded."
    else:
        text = (f"NOT IN COMPLIANCE: {n} violation{'s' if n != 1 else ''} of {len(rules)} "
                f"rule{'s' if len(rules) != 1 else ''}, {days} day{'s' if days != 1 else ''} out of compliance."
                + (f" ({note}.)" if note else ""))
    apart = []
    if r.permitted_excursions:
        apart.append(f"{len(r.permitted_excursions)} permitted pH excursion(s) under 40 CFR 401.17, not violations")
    if r.monitoring_deviations:
        apart.append(f"{len(r.monitoring_deviations)} monitoring-requirement deviation(s) of the sampler, "
                     "not discharge violations")
    if r.invalidated:
        apart.append(f"{len(r.invalidated)} episode(s) invalidated by the control authority, not counted")
    return text + (f" ({'; '.join(apart)}.)" if apart else "")


def verdict_rows(r: ComplianceReport) -> tuple[tuple[str, ...], ...]:
    rules, days = verdict(r)
    rows = [(label(v.rule), v.citation, str(v.violations), str(v.days)) for v in rules]
    if rules:
        rows.append(("All rules", "", str(sum(v.violations for v in rules)), str(days)))
    if r.permitted_excursions:
        rows.append(("Permitted pH excursions (40 CFR 401.17, not violations)", "40 CFR 401.17",
                     str(len(r.permitted_excursions)), "—"))
    if r.monitoring_deviations:
        rows.append(("Monitoring-requirement deviations (sampler; not discharge violations)",
                     "; ".join(dict.fromkeys(e.citation for e in r.monitoring_deviations)),
                     str(len(r.monitoring_deviations)), "—"))
    if r.invalidated:
        rows.append(("Invalidated by the control authority (not counted)", "", str(len(r.invalidated)), "—"))
    return tuple(rows)


def obligations_empty(r: ComplianceReport) -> str:
    return NONE_RECORDED + ("" if r.record_available else " (no obligations record in this monitoring database)")
