"""Whether a pH excursion is one 40 CFR 401.17 permits, where the permit adopts it.

401.17 permits excursions from the pH range only within its allowances: no single excursion longer than 60
minutes and at most 7 hours 26 minutes a month. A ``ph_high`` / ``ph_low`` episode that is part of a
``ph_excursion_duration`` (one excursion over the single allowance) or ``ph_monthly_excursion`` (the month's
total over the monthly allowance) violation is beyond those allowances: it is a violation, listed with the
others and saying why, never "permitted". The exceedance listing, the console history and the report all ask
here, so they agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

PERMITTABLE = ("ph_high", "ph_low")
ALLOWANCE_VIOLATIONS = ("ph_excursion_duration", "ph_monthly_excursion")
_ALLOWANCE = {"ph_excursion_duration": "no single excursion longer than 60 minutes",
              "ph_monthly_excursion": "at most 7 hours 26 minutes of excursions in a calendar month"}


@dataclass(frozen=True, slots=True)
class Span:
    """An episode's time span, epoch seconds UTC; ``end`` None while open."""

    channel: str
    rule: str
    start: float
    end: float | None


def beyond_allowance(channel: str, rule: str, start: float, end: float | None, others: Iterable[Span]) -> str:
    """Why the ``rule`` episode on ``channel`` over [start, end) is beyond 401.17's allowances, or "" when it
    is within them. It is beyond them when a single-duration or monthly-total violation on the same channel
    overlaps it (open ends reach to the present)."""
    if rule not in PERMITTABLE:
        return ""
    stop = float("inf") if end is None else end
    for o in sorted(others, key=lambda o: (o.start, o.rule)):
        if o.channel != channel or o.rule not in ALLOWANCE_VIOLATIONS:
            continue
        if o.start < stop and (float("inf") if o.end is None else o.end) > start:
            when = datetime.fromtimestamp(o.start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return (f"beyond 40 CFR 401.17's allowances ({_ALLOWANCE[o.rule]}): part of the {o.rule} violation "
                    f"from {when}, so not a permitted excursion")
    return ""
