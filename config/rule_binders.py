"""How each rule finds the limit in force on a channel: the binders the rule catalogue names.

A binder takes the site's context (its jurisdiction's profile, its permit, its channels), a channel and the
site's ``[site.rules.<rule>]`` settings, and returns the `RuleBinding` with its typed parameters
(`config.rule_model`), or why the rule does not run there: `Missing` (nobody states the limit) or
`NotApplicable` (the channel cannot carry it). Where the ordinance and the permit both state a limit, the
stricter binds (40 CFR 403.5(d)) and a looser permit figure is kept as a note beside it. Legal numbers are never
set here: they come from the profile or the permit, with their citation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from config.limits import FEDERAL, Limit, Permit, Profile, in_unit, load_profile, printed_pair_note
from config.reader import Reader
from config.rule_model import (
    BandParams,
    ExcursionParams,
    FlatlineParams,
    IntervalParams,
    RuleBinding,
    RuleParams,
    Skipped,
    ThresholdParams,
)
from config.schema import Channel, ChannelKind

DATA_QUALITY_CITATION = "data quality (instrument or data fault, not a discharge exceedance)"
FLATLINE_READINGS = (
    300  # default run of identical readings; a stuck analogue sensor, at 1 s polling 5 minutes
)
BASELINE_DAYS = 7  # slug: days of normal operation averaged into the baseline (1-30)


@dataclass(frozen=True, slots=True)
class Settings:
    explicit: bool = False
    enabled: bool = True
    channels: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Missing:
    key: str  # the limit nobody states


@dataclass(frozen=True, slots=True)
class NotApplicable:
    reason: str


Result = RuleBinding | Missing | NotApplicable


@dataclass(slots=True)
class Context:
    site: str
    timezone: str
    profile: Profile | None
    permit: Permit | None
    channels: Sequence[Channel]
    p: str
    reader: Reader
    kind: str = "industry"
    skipped: list[Skipped] | None = None

    def law(self, key: str) -> Limit | None:
        """The ordinance's stated limit (the jurisdiction profile's), or None."""
        found = self.profile.limits.get(key) if self.profile is not None else None
        return found if found is not None and found.stated else None

    def permitted(self, key: str) -> Limit | None:
        """The permit's own limit, or a federal one the permit adopts, or None."""
        if self.permit is not None and key in self.permit.limits:
            return self.permit.limits[key]
        if self.permit is not None and key in self.permit.adopt:
            federal, _ = load_profile(FEDERAL)
            if federal is not None and key in federal.limits:
                fed = federal.limits[key]
                return replace(fed, citation=f"{fed.citation}, adopted by permit {self.permit.id}")
        return None

    def limit(self, key: str) -> Limit | None:
        """The permit's limit where the ordinance states none of its own (durations, sampler interval), else
        the ordinance's; rules the ordinance also limits use `stricter` instead."""
        return self.permitted(key) or self.law(key)

    def looser(self, key: str, permit_words: str, law_words: str, law: Limit) -> str:
        """The note kept beside a limit in force when the permit's figure is looser than the ordinance's."""
        permit = self.permitted(key)
        cite = permit.citation if permit is not None else "the permit"
        return (f"the permit's {permit_words} ({cite}) is looser than the ordinance's {law_words} "
                f"({law.citation}): a permit may tighten the ordinance, never relax it (40 CFR 403.5(d)), so "
                f"the ordinance's is in force")

    def binding(self, rule: str, ch: Channel, citation: str, params: RuleParams) -> RuleBinding:
        return RuleBinding(
            rule=rule, site=self.site, channel=ch.id, citation=citation, inputs=(ch.id,), params=params
        )


def _severity(operator: str, value: float) -> tuple[float, int]:
    """Orders limits on one side by how much they forbid: a larger violating set is stricter. For a minimum
    ("reading < v") a higher v forbids more, and "<=" forbids v itself; for a maximum the reverse."""
    if operator in ("<", "<="):
        return value, int(operator == "<=")
    return -value, int(operator == ">=")


def _pick(ctx: Context, key: str, law: tuple[float, str, Limit] | None, permit: tuple[float, str, Limit] | None,
          unit: str = "") -> tuple[float, str, Limit, str] | None:
    """The stricter of the ordinance's and the permit's (value, operator, limit), and the note on a looser
    permit figure ("" if none). Equal figures: the permit's, the more specific text."""
    if law is None or permit is None:
        one = permit or law
        return None if one is None else (*one, "")
    if _severity(law[1], law[0]) > _severity(permit[1], permit[0]):
        note = ctx.looser(key, f"{permit[1]} {permit[0]:g} {unit}".rstrip(), f"{law[1]} {law[0]:g} {unit}".rstrip(),
                          law[2])
        return (*law, note)
    return (*permit, "")


FEDERAL_EXCURSIONS = ("ph_excursion_single", "ph_excursion_monthly")
PERMITTED_EXCURSION = "40 CFR 401.17"


def adopts_401_17(permit: Permit | None) -> bool:
    """The permit adopts 40 CFR 401.17: pH excursions within its allowances "are permitted", so ``ph_low`` /
    ``ph_high`` episodes are permitted excursions, listed apart from violations."""
    return permit is not None and any(k in permit.adopt for k in FEDERAL_EXCURSIONS)


def bound(ctx: Context, key: str, unit: str = "") -> tuple[float, str, Limit, str] | None:
    """A pH bound in force: the stricter of ordinance and permit (40 CFR 403.5(d))."""
    law, permit = ctx.law(key), ctx.permitted(key)
    return _pick(ctx, key, None if law is None else (law.numbers["value"], law.operator, law),
                 None if permit is None else (permit.numbers["value"], permit.operator, permit), unit)


class Words(TypedDict, total=False):
    """`RuleParams`' words, as keyword arguments of a parameter class."""

    quote: str
    clause: str
    reading: str
    looser: str
    wording: str
    permitted: str


def _extra(lim: Limit, looser: str, reading: str = "") -> Words:
    """The words kept beside the numbers for `pretreat rules` and the report: the reading of ambiguous law in
    force and a looser permit figure set aside (engines ignore them)."""
    out: Words = {"quote": lim.quote} if lim.quote else {}
    if lim.clause:
        out["clause"] = lim.clause
    if reading or lim.reading:
        out["reading"] = reading or lim.reading
    if looser:
        out["looser"] = looser
    if lim.wording:
        out["wording"] = lim.wording
    return out


def bind_threshold(rule: str, key: str) -> Callable[[Context, Channel, Settings], Result]:
    def bind(ctx: Context, ch: Channel, s: Settings) -> Result:
        found = bound(ctx, key, ch.unit)
        if found is None:
            return Missing(key)
        value, op, lim, looser = found
        extra = _extra(lim, looser)
        if adopts_401_17(ctx.permit):
            extra["permitted"] = PERMITTED_EXCURSION
        return ctx.binding(rule, ch, lim.citation, ThresholdParams(limit=value, operator=op, **extra))

    return bind


def bind_excursion(rule: str, key: str) -> Callable[[Context, Channel, Settings], Result]:
    """401.17 rules: duration limits from the permit (adopted or stated), the pH range in force (the stricter
    of ordinance and permit)."""

    def bind(ctx: Context, ch: Channel, s: Settings) -> Result:
        dur, low, high = ctx.limit(key), bound(ctx, "ph_min"), bound(ctx, "ph_max")
        if dur is None:
            return Missing(key)
        if low is None and high is None:
            return Missing("ph_min")
        ranges = list(dict.fromkeys(x[2].citation for x in (low, high) if x is not None))
        return ctx.binding(
            rule,
            ch,
            f"{dur.citation}; pH range: {'; '.join(ranges)}",
            ExcursionParams(
                limit=dur.numbers["minutes"] * 60.0,
                min=low[0] if low else -math.inf,
                min_operator=low[1] if low else "<",
                max=high[0] if high else math.inf,
                max_operator=high[1] if high else ">",
                timezone=ctx.timezone,
            ),
        )

    return bind


def bind_temperature(ctx: Context, ch: Channel, s: Settings) -> Result:
    location = ch.location
    if location is None:
        return NotApplicable(
            "a temperature channel with location = 'influent', 'discharge' or 'grease_interceptor'"
        )
    point = location.value
    if point == "influent" and ctx.kind != "plant":
        _influent_at_industry(ctx, ch)
        return NotApplicable("an influent channel at a treatment plant site")
    key = f"temperature_{point}"
    law, permit = ctx.law(key), ctx.permitted(key)
    if law is None and permit is None:
        return Missing(key)
    resolved = [None if x is None else in_unit(x, "max", ch.unit) for x in (law, permit)]
    if any(x is not None and r is None for x, r in zip((law, permit), resolved, strict=True)):
        ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
        return NotApplicable("a temperature unit")
    suffix = {id(x): r[1] for x, r in zip((law, permit), resolved, strict=True) if x is not None and r is not None}
    found = _pick(ctx, key, None if law is None or resolved[0] is None else (resolved[0][0], law.operator, law),
                  None if permit is None or resolved[1] is None else (resolved[1][0], permit.operator, permit),
                  ch.unit)
    assert found is not None
    value, op, lim, looser = found
    return ctx.binding("temperature_high", ch, lim.citation + suffix[id(lim)],
                       ThresholdParams(limit=value, operator=op, **_extra(lim, looser, printed_pair_note(lim))))


def _influent_at_industry(ctx: Context, ch: Channel) -> None:
    """"The influent to the POTW" is the plant's inflow, which no industry's manhole measures: refuse, naming the
    limit that does apply at the industry's point of discharge."""
    law = ctx.law("temperature_discharge")
    if law is not None:
        hint = f"location = 'discharge' ({law.wording or 'the discharge limit'}, {law.citation})"
    else:
        unstated = ctx.profile.limits.get("temperature_discharge") if ctx.profile is not None else None
        why = f": {unstated.note} [{unstated.citation}]" if unstated is not None and unstated.note else ""
        hint = (f"location = 'discharge', whose limit the ordinance does not state{why}; a permit may state it in "
                f"[site.permit.limits.temperature_discharge]")
    ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].location", "influent",
                     f"at an industry's site, {hint}; influent limits apply only at the treatment plant "
                     f"([[site]] kind = 'plant')")


def bind_lel(rule: str) -> Callable[[Context, Channel, Settings], Result]:
    def bind(ctx: Context, ch: Channel, s: Settings) -> Result:
        law, permit = ctx.law(rule), ctx.permitted(rule)
        found = _pick(ctx, rule, None if law is None else (law.numbers["percent"], law.operator, law),
                      None if permit is None else (permit.numbers["percent"], permit.operator, permit), "% LEL")
        if found is None:
            return Missing(rule)
        value, op, lim, looser = found
        readings = lim.numbers.get("readings", 1.0)
        if law is not None and permit is not None and permit.numbers.get("readings", 1.0) > law.numbers.get(
            "readings", 1.0
        ):  # more successive readings forbid less: the ordinance's count binds
            readings = law.numbers.get("readings", 1.0)
            looser = looser or ctx.looser(rule, f"{permit.numbers['readings']:g} successive readings",
                                          f"{readings:g}", law)
        return ctx.binding(rule, ch, lim.citation,
                           ThresholdParams(limit=value, operator=op, readings=int(readings), **_extra(lim, looser)))

    return bind


def bind_sampler_temperature(ctx: Context, ch: Channel, s: Settings) -> Result:
    """The fridge band: the ordinance's and the permit's both bind, so the band in force is their overlap."""
    bands = []
    for lim in (ctx.law("sampler_temperature"), ctx.permitted("sampler_temperature")):
        if lim is None:
            continue
        setpoint, tolerance = in_unit(lim, "setpoint", ch.unit), in_unit(lim, "tolerance", ch.unit)
        if setpoint is None or tolerance is None:
            ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
            return NotApplicable("a temperature unit")
        bands.append((setpoint[0] - tolerance[0], setpoint[0] + tolerance[0], lim.citation + setpoint[1], lim))
    if not bands:
        return Missing("sampler_temperature")
    low, high = max(b[0] for b in bands), min(b[1] for b in bands)
    cites = list(dict.fromkeys(b[2] for b in bands if b[0] == low or b[1] == high))
    looser = ""
    if len(bands) == 2 and (bands[1][0] < low or bands[1][1] > high):
        looser = ctx.looser("sampler_temperature", f"{bands[1][0]:g}–{bands[1][1]:g} {ch.unit}",
                            f"{bands[0][0]:g}–{bands[0][1]:g} {ch.unit}", bands[0][3])
    return ctx.binding(
        "sampler_temperature", ch, "; ".join(cites), BandParams(
            low=low, high=high, looser=looser,
            quote="; ".join(dict.fromkeys(b[3].quote for b in bands if (b[0] == low or b[1] == high) and b[3].quote)),
            clause=" ".join(dict.fromkeys(b[3].clause for b in bands if (b[0] == low or b[1] == high) and b[3].clause)),
            reading="the sampler's refrigerator temperature: it measures the fridge, not the composited sample"),
    )


def bind_sampler(rule: str) -> Callable[[Context, Channel, Settings], Result]:
    """``sampler_interval``, and its data-quality twin ``sampler_interval_unverified`` (the interval that cannot
    be verified while the flow reading is bad), on the same stated interval and flow channel."""
    return lambda ctx, ch, s: _sampler_interval(rule, ctx, ch, s)


def _sampler_interval(rule: str, ctx: Context, ch: Channel, s: Settings) -> Result:
    law, permit = ctx.law("sampler_interval"), ctx.permitted("sampler_interval")
    found = _pick(ctx, "sampler_interval", None if law is None else (law.numbers["minutes"], ">", law),
                  None if permit is None else (permit.numbers["minutes"], ">", permit), "min")
    if found is None:
        return Missing("sampler_interval")
    minutes, _, lim, looser = found
    flows = [c.id for c in ctx.channels if c.kind is ChannelKind.FLOW]
    flow = str(s.options.get("flow", flows[0] if len(flows) == 1 else ""))
    if not flow:
        ctx.reader.error(
            f"{ctx.p}.rules.sampler_interval.flow",
            flows or "(no flow channel)",
            "the flow channel whose rate > 0 makes the sampling interval count"
            + (": the site has several, name one" if flows else ""),
        )
        return NotApplicable("a flow channel")
    return RuleBinding(
        rule=rule,
        site=ctx.site,
        channel=ch.id,
        citation=lim.citation if rule == "sampler_interval" else
        f"{DATA_QUALITY_CITATION}: flow unknown, so the sampling interval ({lim.citation}) cannot be verified",
        inputs=(ch.id, flow),
        params=IntervalParams(limit=minutes * 60.0, operator=lim.operator, **_extra(
            lim, looser, "; ".join(r for r in (lim.reading, _SAMPLER_READING) if r))),
    )


# How `monitor.checks.threshold.SamplerInterval` reads "intervals of N minutes or less" against two instruments
_SAMPLER_READING = (
    "the interval counts time with the flow read above zero since the sampler's count last rose (a gap in the "
    "flow readings is not counted); it is late once more than the limit is counted and a count reading showed "
    "it: the count read unchanged with more than the limit behind it, or exactly the limit while the flow ran "
    "(a sample after that reading comes after the limit), on flow time measured through that reading (the "
    "flow read at or after it with no gap before, or a failed read of a meter that was reading: its last "
    "value taken to hold until then), so flow time while the count could not be read counts "
    "only once a later reading shows the count unchanged, and no interval is shown late by flow time after the "
    "count's last reading; exactly the limit complies")


def bind_quality(rule: str) -> Callable[[Context, Channel, Settings], Result]:
    """``stale`` and ``sensor_fault``: no limit, no numbers."""
    return lambda ctx, ch, s: ctx.binding(rule, ch, DATA_QUALITY_CITATION, RuleParams())


def bind_flatline(ctx: Context, ch: Channel, s: Settings) -> Result:
    return ctx.binding("flatline", ch, DATA_QUALITY_CITATION,
                       FlatlineParams(readings=int(s.options.get("readings", FLATLINE_READINGS))))


Binder = Callable[[Context, Channel, Settings], Result]
