"""The slug screened on composite-sample lab results, where the ordinance measures a slug in the laboratory.

Town of Vestal, Endicott service area (§ 18-76(a)(13) [section number inferred]): a slug is a discharge that
"for a duration of fifteen (15) minutes [has] a concentration greater than five (5) times that of normal
sewage, as measured by suspended solids and BOD"; normal sewage (§ 18-71) is "not more than four hundred (400)
parts per million of suspended solids, nor more than two hundred forty (240) parts per million of BOD". Suspended
solids and BOD are laboratory tests: unless the permit names an online surrogate channel (`config.slug_binder`),
no instrument measures them, so the slug is screened here on the lab results imported with `pretreat labs
import` (`monitor.reports.labs`).

The screen: a result strictly greater than multiplier × the normal-sewage figure of its constituent (5 × 400 =
2,000 ppm suspended solids, 5 × 240 = 1,200 ppm BOD; ppm is mg/L for wastewater, as the lab limits read it) is a
*slug finding*, cited. A composite result is the average over its collection period (a day, far longer than 15
minutes): an average above the threshold means the concentration was above it during that period, but a
composite cannot show for how long, so the finding is a screen result on the composite, stated as such, not an
episode with a start and an end. A non-detect is never a finding. Where the permit states its own slug multiple
on the same normal-sewage basis and it is stricter, it is in force (40 CFR 403.5(d): a permit may tighten the
ordinance, never relax it); a looser one is set aside. The screen runs wherever the slug in force is measured in
the laboratory, whether or not a surrogate channel also screens online: the lab result is the ordinance's own
measure.

Shown by `pretreat exceedances` (apart from the episodes) and in the report's lab sections.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config.limits import Limit, load_profile
from config.pollutants import canonical_parameter
from config.schema import Site
from monitor.reports.labs import LabResult

LAB_CHANNEL = "lab:"  # prefix of the channel name a finding is listed under: ``lab:tss``, ``lab:bod``


@dataclass(frozen=True, slots=True)
class LabSlugLimit:
    """Multiplier × the normal-sewage strength of one constituent, in mg/L (= ppm); strictly greater violates."""

    parameter: str  # canonical key of config.pollutants (tss, bod)
    normal: float  # the normal-sewage figure, ppm
    multiplier: float
    citation: str
    quote: str
    reading: str

    @property
    def threshold(self) -> float:
        return self.multiplier * self.normal

    @property
    def limit_words(self) -> str:
        """The threshold in mg/L, the unit results are compared in, with how it follows from the ordinance's ppm:
        one unit on both sides of every comparison shown."""
        return (f"{self.threshold:g} mg/L ({self.multiplier:g} × {self.normal:g} mg/L normal sewage, the "
                f"ordinance's {self.normal:g} ppm read as mg/L)")


@dataclass(frozen=True, slots=True)
class LabSlug:
    """A lab result above its slug threshold: a slug finding on a composite sample."""

    result: LabResult
    limit: LabSlugLimit

    @property
    def channel(self) -> str:
        return LAB_CHANNEL + self.result.parameter

    @property
    def comparison(self) -> str:
        """The result against the threshold, both in mg/L (the result's own unit beside it when the lab wrote
        another: ``1250 mg/L (reported as 1250 ppm) > 1200 mg/L (…)``)."""
        r = self.result
        own = "" if r.unit.strip().lower() == "mg/l" else f" (reported as {r.value:g} {r.unit})"
        return f"{r.value_std:g} mg/L{own} > {self.limit.limit_words}"

    @property
    def note(self) -> str:
        return (f"composite sample {self.result.sample_id or '(no id)'} of {self.result.sample_date.isoformat()}: "
                f"{self.comparison}; a composite shows the average over its collection period, not how long the "
                "concentration was above the threshold")


def _in_force(site: Site) -> tuple[Limit, Limit] | None:
    """(the limit whose multiplier is in force, the law's limit with its normal-sewage figures) where the law
    measures the slug in the laboratory; None elsewhere. The permit's multiplier counts only if stricter."""
    profile, _ = load_profile(site.jurisdiction) if site.jurisdiction else (None, [])
    law = profile.limits.get("slug") if profile is not None else None
    if law is None or law.measured_by != "lab" or law.baseline != "normal_sewage":
        return None
    own = site.permit.limits.get("slug") if site.permit is not None else None
    if own is not None and own.baseline == law.baseline and own.numbers["multiplier"] < law.numbers["multiplier"]:
        return own, law
    return law, law


def lab_slug_limits(site: Site) -> dict[str, LabSlugLimit]:
    """The slug thresholds for lab results at ``site``, by parameter key; empty where the slug is not measured in
    the laboratory (every jurisdiction but Vestal-Endicott)."""
    found = _in_force(site)
    if found is None:
        return {}
    lim, law = found
    multiplier = lim.numbers["multiplier"]
    out: dict[str, LabSlugLimit] = {}
    for constituent, normal in law.normal_sewage.items():
        key = canonical_parameter(constituent.replace("_", " "))
        if key is not None:
            out[key] = LabSlugLimit(key, normal, multiplier, lim.citation, lim.quote,
                                    f"a composite-sample lab result strictly greater than {multiplier:g} × normal "
                                    f"sewage ({normal:g} ppm, read as {normal:g} mg/L) is a slug finding (the "
                                    "composite is an average: how long cannot be shown)")
    return out


def screen(results: Iterable[LabResult], site: Site) -> list[LabSlug]:
    """Every result of ``site`` above its slug threshold, in the order given (non-detects never are)."""
    limits = lab_slug_limits(site)
    if not limits:
        return []
    return [LabSlug(r, limits[r.parameter]) for r in results
            if r.site == site.id and not r.nondetect and r.parameter in limits
            and r.value_std > limits[r.parameter].threshold]
