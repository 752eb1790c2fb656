"""Which compliance rules run on which channels of a site: selected, validated and compiled once, at load.

Rules are chosen per channel by its kind (a pH channel gets ``ph_low``/``ph_high`` ..., a temperature channel
with a ``location`` gets ``temperature_high`` for that measuring point), each with the limit the site's
permit states, or else its jurisdiction's profile (`config.limits`). ``[site.rules.<rule>]`` tables adjust the
selection: ``enabled = false``, ``channels = [...]``, and a few operational settings (``flatline.readings``,
``slug.loading`` / ``slug.constituents``, ``sampler_interval.flow``). Legal numbers are never set here: they
come from the profile or the permit, with their citation.

A rule whose limit neither the jurisdiction nor the permit states is skipped when nobody asked for it, and
refused with a `ConfigError` when the site asks for it explicitly or when the ordinance requires that alarm
without printing its number (Pawling's pH alarm). Data-quality rules (stale, sensor_fault, flatline) need no
legal limit and are kept apart from discharge exceedances: their events cite `DATA_QUALITY_CITATION`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from config.limits import (
    FEDERAL,
    Limit,
    Permit,
    Profile,
    in_unit,
    known_jurisdictions,
    load_profile,
    printed_pair_note,
)
from config.reader import Reader
from config.schema import Channel, ChannelKind

DATA_QUALITY_RULES = ("stale", "sensor_fault", "flatline", "sampler_interval_unverified")
DATA_QUALITY_CITATION = "data quality (instrument or data fault, not a discharge exceedance)"
FLATLINE_READINGS = (
    300  # default run of identical readings; a stuck analogue sensor, at 1 s polling 5 minutes
)
CHANNEL_KINDS: dict[str, tuple[ChannelKind, ...]] = {
    "ph_low": (ChannelKind.PH,),
    "ph_high": (ChannelKind.PH,),
    "ph_excursion_duration": (ChannelKind.PH,),
    "ph_monthly_excursion": (ChannelKind.PH,),
    "temperature_high": (ChannelKind.TEMPERATURE,),
    "lel_successive": (ChannelKind.LEL,),
    "lel_single": (ChannelKind.LEL,),
    "slug": (ChannelKind.FLOW, ChannelKind.CONCENTRATION),
    "sampler_temperature": (ChannelKind.SAMPLER_TEMPERATURE,),
    "sampler_interval": (ChannelKind.SAMPLER_COUNT,),
    "sampler_interval_unverified": (ChannelKind.SAMPLER_COUNT,),
    "stale": tuple(ChannelKind),
    "sensor_fault": tuple(ChannelKind),
    "flatline": tuple(ChannelKind),
}
RULE_NAMES = tuple(CHANNEL_KINDS)
_OPTIONS = {
    "flatline": {"readings"},
    "slug": {"loading", "constituents", "baseline_days"},
    "sampler_interval": {"flow"},
    "sampler_interval_unverified": {"flow"},
}
BASELINE_DAYS = 7  # slug: days of normal operation averaged into the baseline (1-30)
SLUG_READINGS = ("multiple_alone",)


def is_data_quality(rule: str) -> bool:
    return rule in DATA_QUALITY_RULES


@dataclass(frozen=True, slots=True)
class RuleBinding:
    """One compiled rule on one channel (or a derived pair): what the check engine runs.

    ``params`` holds resolved numbers in the channel's unit, durations in seconds (``limit``, ``operator``,
    ``duration`` ...); ``inputs`` are the channels the rule reads, primary first; ``channel`` is the name its
    events carry (a mass-loading slug on flow × concentration is named ``flow*concentration``).
    """

    rule: str
    site: str
    channel: str
    citation: str
    inputs: tuple[str, ...]
    params: Mapping[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A rule that does not run on a channel, and why (for `pretreat rules` and check-config's count)."""

    channel: str
    rule: str
    why: str


@dataclass(frozen=True, slots=True)
class _Settings:
    explicit: bool = False
    enabled: bool = True
    channels: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Missing:
    key: str  # the limit nobody states


@dataclass(frozen=True, slots=True)
class _NotApplicable:
    reason: str


_Result = RuleBinding | _Missing | _NotApplicable


@dataclass(slots=True)
class _Context:
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

    def binding(self, rule: str, ch: Channel, citation: str, **params: float | str) -> RuleBinding:
        return RuleBinding(
            rule=rule, site=self.site, channel=ch.id, citation=citation, inputs=(ch.id,), params=params
        )


def _severity(operator: str, value: float) -> tuple[float, int]:
    """Orders limits on one side by how much they forbid: a larger violating set is stricter. For a minimum
    ("reading < v") a higher v forbids more, and "<=" forbids v itself; for a maximum the reverse."""
    if operator in ("<", "<="):
        return value, int(operator == "<=")
    return -value, int(operator == ">=")


def _pick(ctx: _Context, key: str, law: tuple[float, str, Limit] | None, permit: tuple[float, str, Limit] | None,
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


def select_rules(
    *,
    site: str,
    jurisdiction: str,
    timezone: str,
    channels: Sequence[Channel],
    permit: Permit | None,
    kind: str = "industry",
    raw_rules: dict[str, Any],
    skipped: list[Skipped] | None = None,
    p: str,
    reader: Reader,
) -> tuple[RuleBinding, ...]:
    """Every rule binding of one site, in rule order then channel order; mistakes go to ``reader``."""
    profile = None
    if jurisdiction:
        if jurisdiction not in known_jurisdictions():
            reader.error(
                f"{p}.jurisdiction", jurisdiction, f"one of the shipped profiles {known_jurisdictions()}"
            )
        else:
            profile, errors = load_profile(jurisdiction)
            reader.errors.extend(errors)
    ctx = _Context(site, timezone, profile, permit, channels, p, reader, kind, skipped)
    settings = _parse_settings(raw_rules, ctx)
    _check_401_17(ctx)
    bindings: list[RuleBinding] = []
    for rule in RULE_NAMES:
        s = settings.get(rule, _Settings())
        if not s.enabled:
            for c in channels:
                if skipped is not None and c.kind in CHANNEL_KINDS[rule]:
                    skipped.append(Skipped(c.id, rule, f"switched off by [site.rules.{rule}] enabled = false"))
            continue
        if s.channels:
            targets = [c for c in channels if c.id in s.channels]
        elif rule == "flatline":
            targets = []  # opt-in: zero flow at night or 0 % LEL repeat legitimately
        else:
            targets = [c for c in channels if c.kind in CHANNEL_KINDS[rule]]
        for ch in targets:
            _keep(_BINDERS[rule](ctx, ch, s), rule, ch.id, s, ctx, bindings)
        if rule == "slug":
            bindings.extend(_loading_pairs(ctx, s))
    return tuple(bindings)


FEDERAL_EXCURSIONS = ("ph_excursion_single", "ph_excursion_monthly")
PERMITTED_EXCURSION = "40 CFR 401.17"


def adopts_401_17(permit: Permit | None) -> bool:
    """The permit adopts 40 CFR 401.17: pH excursions within its allowances "are permitted", so ``ph_low`` /
    ``ph_high`` episodes are permitted excursions, listed apart from violations."""
    return permit is not None and any(k in permit.adopt for k in FEDERAL_EXCURSIONS)


def _check_401_17(ctx: _Context) -> None:
    """Adopting 401.17 where the ordinance wants the range "at all times" (Vestal-Endicott § 18-76(a)(7)) is a
    conflict only the control authority can resolve: refused unless the permit says it confirmed it."""
    permit = ctx.permit
    if permit is None or not adopts_401_17(permit) or permit.confirm_conflict:
        return
    strict = [x for x in (ctx.law("ph_min"), ctx.law("ph_max")) if x is not None and x.at_all_times]
    if strict:
        ctx.reader.error(
            f"{ctx.p}.permit.adopt", list(permit.adopt),
            f"confirm_conflict = true in [site.permit]: {strict[0].citation} requires the pH range \"at all "
            f"times\" ({strict[0].quote!r}), while 40 CFR 401.17 permits excursions within its allowances; the "
            f"control authority must confirm that the permit grants them",
        )


def _keep(
    result: _Result, rule: str, channel: str, s: _Settings, ctx: _Context, out: list[RuleBinding]
) -> None:
    if isinstance(result, RuleBinding):
        out.append(result)
        return
    if ctx.skipped is not None:
        ctx.skipped.append(Skipped(channel, rule, _why(result, ctx)))
    if isinstance(result, _NotApplicable) and channel in s.channels:
        ctx.reader.error(f"{ctx.p}.rules.{rule}", f"{rule} on channel {channel}", result.reason)
    elif isinstance(result, _Missing):
        unstated = ctx.profile.limits.get(result.key) if ctx.profile is not None else None
        required = unstated is not None and unstated.required
        if not (s.explicit or required):
            return
        where = f"{ctx.p}.rules.{rule}" if s.explicit else f"{ctx.p}.permit.limits.{result.key}"
        who = f"jurisdiction {ctx.profile.key!r}" if ctx.profile is not None else "the site (no jurisdiction)"
        why = f" ({unstated.note} [{unstated.citation}])" if unstated is not None and unstated.note else ""
        ctx.reader.error(
            where,
            f"{rule} on channel {channel}",
            f"a stated {result.key} limit, but neither {who} nor the permit states it{why}; add "
            f"[site.permit.limits.{result.key}] with the permit's citation (never another "
            f"jurisdiction's number)",
        )


def _why(result: _Missing | _NotApplicable, ctx: _Context) -> str:
    if isinstance(result, _NotApplicable):
        return f"needs {result.reason}"
    unstated = ctx.profile.limits.get(result.key) if ctx.profile is not None else None
    who = ctx.profile.name if ctx.profile is not None else "no jurisdiction"
    why = f" ({unstated.note} [{unstated.citation}])" if unstated is not None and unstated.note else ""
    federal, _ = load_profile(FEDERAL)
    if federal is not None and result.key in federal.limits:
        return (f"{who} states no {result.key} limit; a permit adopts {federal.limits[result.key].citation} by name "
                f"([site.permit] adopt = [\"{result.key}\"]) or states it in [site.permit.limits.{result.key}]")
    return (f"{who} states no {result.key} limit{why}; the permit may state one in "
            f"[site.permit.limits.{result.key}]")


def _parse_settings(raw_rules: dict[str, Any], ctx: _Context) -> dict[str, _Settings]:
    out: dict[str, _Settings] = {}
    by_id = {c.id: c for c in ctx.channels}
    for rule, raw in raw_rules.items():
        p = f"{ctx.p}.rules.{rule}"
        if rule not in CHANNEL_KINDS:
            ctx.reader.error(p, rule, f"a rule name, one of {list(RULE_NAMES)}")
            continue
        if not isinstance(raw, dict):
            ctx.reader.error(p, raw, "a table")
            continue
        ctx.reader.unknown_keys(raw, p, {"enabled", "channels", "reason"} | _OPTIONS.get(rule, set()))
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            ctx.reader.error(f"{p}.enabled", enabled, "true or false")
        channels = raw.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            ctx.reader.error(f"{p}.channels", channels, "a list of channel ids")
            channels = []
        for cid in channels:
            ch = by_id.get(cid)
            if ch is None or ch.kind not in CHANNEL_KINDS[rule]:
                kinds = sorted(k.value for k in CHANNEL_KINDS[rule])
                ctx.reader.error(f"{p}.channels", cid, f"a channel of this site of kind {kinds}")
        options = {k: v for k, v in raw.items() if k in _OPTIONS.get(rule, set())}
        _check_options(rule, options, p, ctx, by_id)
        out[rule] = _Settings(
            explicit=True, enabled=enabled is not False, channels=tuple(channels), options=options
        )
    return out


def _check_options(
    rule: str, options: dict[str, Any], p: str, ctx: _Context, by_id: dict[str, Channel]
) -> None:
    r = ctx.reader
    if "readings" in options:
        r.integer(options, "readings", p, minimum=2)
    if "baseline_days" in options:
        r.integer(options, "baseline_days", p, minimum=1, maximum=30)
    if "loading" in options and not isinstance(options["loading"], bool):
        r.error(f"{p}.loading", options["loading"], "true or false")
    if "constituents" in options and not isinstance(options["constituents"], dict):
        r.error(f"{p}.constituents", options["constituents"], "a table: channel id = constituent")
    if "flow" in options and getattr(by_id.get(str(options["flow"])), "kind", None) is not ChannelKind.FLOW:
        r.error(f"{p}.flow", options["flow"], "the id of a flow channel of this site")


def _bound(ctx: _Context, key: str, unit: str = "") -> tuple[float, str, Limit, str] | None:
    """A pH bound in force: the stricter of ordinance and permit (40 CFR 403.5(d))."""
    law, permit = ctx.law(key), ctx.permitted(key)
    return _pick(ctx, key, None if law is None else (law.numbers["value"], law.operator, law),
                 None if permit is None else (permit.numbers["value"], permit.operator, permit), unit)


def _extra(lim: Limit, looser: str, reading: str = "") -> dict[str, str]:
    """The words kept beside the numbers for `pretreat rules` and the report: the reading of ambiguous law in
    force and a looser permit figure set aside (engines ignore them)."""
    out = {"quote": lim.quote} if lim.quote else {}
    if reading or lim.reading:
        out["reading"] = reading or lim.reading
    if looser:
        out["looser"] = looser
    if lim.wording:
        out["wording"] = lim.wording
    return out


def _threshold(rule: str, key: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        found = _bound(ctx, key, ch.unit)
        if found is None:
            return _Missing(key)
        value, op, lim, looser = found
        extra = _extra(lim, looser)
        if adopts_401_17(ctx.permit):
            extra["permitted"] = PERMITTED_EXCURSION
        return ctx.binding(rule, ch, lim.citation, limit=value, operator=op, **extra)

    return bind


def _excursion(rule: str, key: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    """401.17 rules: duration limits from the permit (adopted or stated), the pH range in force (the stricter
    of ordinance and permit)."""

    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        dur, low, high = ctx.limit(key), _bound(ctx, "ph_min"), _bound(ctx, "ph_max")
        if dur is None:
            return _Missing(key)
        if low is None and high is None:
            return _Missing("ph_min")
        ranges = list(dict.fromkeys(x[2].citation for x in (low, high) if x is not None))
        return ctx.binding(
            rule,
            ch,
            f"{dur.citation}; pH range: {'; '.join(ranges)}",
            limit=dur.numbers["minutes"] * 60.0,
            min=low[0] if low else -math.inf,
            min_operator=low[1] if low else "<",
            max=high[0] if high else math.inf,
            max_operator=high[1] if high else ">",
            timezone=ctx.timezone,
        )

    return bind


def _temperature(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    location = getattr(ch, "location", None)
    if location is None:
        return _NotApplicable(
            "a temperature channel with location = 'influent', 'discharge' or 'grease_interceptor'"
        )
    point = str(getattr(location, "value", location))
    if point == "influent" and ctx.kind != "plant":
        _influent_at_industry(ctx, ch)
        return _NotApplicable("an influent channel at a treatment plant site")
    key = f"temperature_{point}"
    law, permit = ctx.law(key), ctx.permitted(key)
    if law is None and permit is None:
        return _Missing(key)
    resolved = [None if x is None else in_unit(x, "max", ch.unit) for x in (law, permit)]
    if any(x is not None and r is None for x, r in zip((law, permit), resolved, strict=True)):
        ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
        return _NotApplicable("a temperature unit")
    suffix = {id(x): r[1] for x, r in zip((law, permit), resolved, strict=True) if x is not None and r is not None}
    found = _pick(ctx, key, None if law is None or resolved[0] is None else (resolved[0][0], law.operator, law),
                  None if permit is None or resolved[1] is None else (resolved[1][0], permit.operator, permit),
                  ch.unit)
    assert found is not None
    value, op, lim, looser = found
    return ctx.binding("temperature_high", ch, lim.citation + suffix[id(lim)], limit=value, operator=op,
                       **_extra(lim, looser, printed_pair_note(lim)))


def _influent_at_industry(ctx: _Context, ch: Channel) -> None:
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


def _lel(rule: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        law, permit = ctx.law(rule), ctx.permitted(rule)
        found = _pick(ctx, rule, None if law is None else (law.numbers["percent"], law.operator, law),
                      None if permit is None else (permit.numbers["percent"], permit.operator, permit), "% LEL")
        if found is None:
            return _Missing(rule)
        value, op, lim, looser = found
        readings = lim.numbers.get("readings", 1.0)
        if law is not None and permit is not None and permit.numbers.get("readings", 1.0) > law.numbers.get(
            "readings", 1.0
        ):  # more successive readings forbid less: the ordinance's count binds
            readings = law.numbers.get("readings", 1.0)
            looser = looser or ctx.looser(rule, f"{permit.numbers['readings']:g} successive readings",
                                          f"{readings:g}", law)
        return ctx.binding(rule, ch, lim.citation, limit=value, operator=op, readings=readings,
                           **_extra(lim, looser))

    return bind


def _slug_params(lim: Limit, s: _Settings, ctx: _Context) -> dict[str, float | str]:
    permit = ctx.permit
    out: dict[str, float | str] = {
        "timezone": ctx.timezone,
        "multiplier": lim.numbers["multiplier"],
        "operator": lim.operator,
        "duration": lim.numbers["minutes"] * 60.0,
        "duration_operator": lim.duration_operator,
        "baseline_days": float(s.options.get("baseline_days", BASELINE_DAYS)),
    }
    if permit is not None and permit.slug_reading == "multiple_alone":
        out["duration"], out["duration_operator"] = 0.0, ">="
        out["reading"] = (f"the literal reading, selected by {permit.slug_cite}: more than "
                          f"{lim.numbers['multiplier']:g} times the baseline at any reading is a slug, whatever "
                          f"its duration (\"{lim.literal or lim.quote}\")")
    elif lim.reading:
        out["reading"] = lim.reading
    if lim.wording:
        out["wording"] = lim.wording
    return out


def _slug_limit(ctx: _Context) -> tuple[Limit | None, str]:
    """The slug limit in force and a note on a permit's looser figures. A permit may tighten the multiplier or the
    duration (40 CFR 403.5(d)) of the same form of baseline; a looser figure is set aside with a note."""
    law, permit = ctx.law("slug"), ctx.permitted("slug")
    if law is None or permit is None:
        return permit or law, ""
    if permit.baseline != law.baseline:
        return law, ctx.looser("slug", f"{permit.baseline} baseline", f"{law.baseline} baseline", law)
    looser = [k for k in ("multiplier", "minutes") if permit.numbers[k] > law.numbers[k]]
    if permit.duration_operator == ">" and law.duration_operator == ">=" and permit.numbers["minutes"] >= \
            law.numbers["minutes"]:
        looser.append("duration wording")
    if not looser:
        return permit, ""
    words = ", ".join(f"{k} {permit.numbers.get(k, 0):g}" if k in permit.numbers else k for k in looser)
    return law, ctx.looser("slug", words, ", ".join(f"{k} {law.numbers.get(k, 0):g}" if k in law.numbers else k
                                                    for k in looser), law)


def _slug(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    lim, looser = _slug_limit(ctx)
    if lim is None:
        return _Missing("slug")
    extra = {"looser": looser} if looser else {}
    if lim.measured_by == "lab" and lim is ctx.law("slug"):
        surrogate = _surrogate(ctx, ch, s)
        if isinstance(surrogate, _NotApplicable):
            return surrogate
        lim = replace(lim, citation=f"{lim.citation}; surrogate channel: {surrogate}")
    if lim.baseline == "trailing":
        return ctx.binding("slug", ch, lim.citation, **_slug_params(lim, s, ctx), **extra)
    # A fixed "normal sewage" strength (Vestal): concentration channels mapped to a constituent only.
    constituent = dict(s.options.get("constituents") or {}).get(ch.id)
    known = sorted(lim.normal_sewage)
    if ch.kind is not ChannelKind.CONCENTRATION or constituent is None:
        return _NotApplicable(
            f"a concentration channel mapped in [site.rules.slug] constituents to one of {known}"
        )
    if constituent not in lim.normal_sewage:
        ctx.reader.error(f"{ctx.p}.rules.slug.constituents.{ch.id}", constituent, f"one of {known}")
        return _NotApplicable("a known constituent")
    if ch.unit.strip().lower() not in ("ppm", "mg/l"):
        ctx.reader.error(
            f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "'ppm' or 'mg/l' (normal sewage is in ppm)"
        )
        return _NotApplicable("a concentration unit")
    return ctx.binding("slug", ch, lim.citation, baseline=lim.normal_sewage[constituent], **_slug_params(lim, s, ctx),
                       **extra)


def _surrogate(ctx: _Context, ch: Channel, s: _Settings) -> str | _NotApplicable:
    """Vestal-Endicott measures a slug "by suspended solids and BOD", laboratory tests of composite samples: an
    online channel stands in only where the permit names it, with its citation (``[site.rules.slug]
    surrogates`` with its ``cite``); otherwise the slug is screened on lab results (`pretreat labs import`)."""
    permit = ctx.permit
    if permit is None or ch.id not in permit.slug_surrogates:
        return _NotApplicable(
            "an online surrogate the permit names: the ordinance measures a slug by suspended solids and BOD "
            "(laboratory tests); list the channel in [site.permit.slug] surrogates with the permit's cite, or "
            "screen the lab results (pretreat labs import)"
        )
    return permit.slug_cite


def _loading_pairs(ctx: _Context, s: _Settings) -> list[RuleBinding]:
    """Mass loading (flow × concentration) where both are measured and the baseline is the trailing
    average."""
    lim, _ = _slug_limit(ctx)
    if lim is None or lim.baseline != "trailing" or s.options.get("loading") is False or not s.enabled:
        return []
    chosen = [c for c in ctx.channels if not s.channels or c.id in s.channels]
    flows = [c for c in chosen if c.kind is ChannelKind.FLOW]
    concs = [c for c in chosen if c.kind is ChannelKind.CONCENTRATION]
    return [
        RuleBinding(
            rule="slug",
            site=ctx.site,
            channel=f"{f.id}*{c.id}",
            citation=lim.citation,
            inputs=(f.id, c.id),
            params=_slug_params(lim, s, ctx),
        )
        for f in flows
        for c in concs
    ]


def _sampler_temperature(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    """The fridge band: the ordinance's and the permit's both bind, so the band in force is their overlap."""
    bands = []
    for lim in (ctx.law("sampler_temperature"), ctx.permitted("sampler_temperature")):
        if lim is None:
            continue
        setpoint, tolerance = in_unit(lim, "setpoint", ch.unit), in_unit(lim, "tolerance", ch.unit)
        if setpoint is None or tolerance is None:
            ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
            return _NotApplicable("a temperature unit")
        bands.append((setpoint[0] - tolerance[0], setpoint[0] + tolerance[0], lim.citation + setpoint[1], lim))
    if not bands:
        return _Missing("sampler_temperature")
    low, high = max(b[0] for b in bands), min(b[1] for b in bands)
    cites = list(dict.fromkeys(b[2] for b in bands if b[0] == low or b[1] == high))
    looser = ""
    if len(bands) == 2 and (bands[1][0] < low or bands[1][1] > high):
        looser = ctx.looser("sampler_temperature", f"{bands[1][0]:g}–{bands[1][1]:g} {ch.unit}",
                            f"{bands[0][0]:g}–{bands[0][1]:g} {ch.unit}", bands[0][3])
    return ctx.binding(
        "sampler_temperature", ch, "; ".join(cites), low=low, high=high,
        reading="the sampler's refrigerator temperature: it measures the fridge, not the composited sample",
        **({"looser": looser} if looser else {}),
    )


def _sampler(rule: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    """``sampler_interval``, and its data-quality twin ``sampler_interval_unverified`` (the interval that cannot
    be verified while the flow reading is bad), on the same stated interval and flow channel."""
    return lambda ctx, ch, s: _sampler_interval(rule, ctx, ch, s)


def _sampler_interval(rule: str, ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    law, permit = ctx.law("sampler_interval"), ctx.permitted("sampler_interval")
    found = _pick(ctx, "sampler_interval", None if law is None else (law.numbers["minutes"], ">", law),
                  None if permit is None else (permit.numbers["minutes"], ">", permit), "min")
    if found is None:
        return _Missing("sampler_interval")
    minutes, _, lim, looser = found
    flows = [c.id for c in ctx.channels if c.kind is ChannelKind.FLOW]
    flow = str(s.options.get("flow", flows[0] if len(flows) == 1 else ""))
    if not flow:
        ctx.reader.error(
            f"{ctx.p}.rules.sampler_interval.flow",
            flows or "(no flow channel)",
            "the flow channel whose rate > 0 makes the sampling interval count",
        )
        return _NotApplicable("a flow channel")
    return RuleBinding(
        rule=rule,
        site=ctx.site,
        channel=ch.id,
        citation=lim.citation if rule == "sampler_interval" else
        f"{DATA_QUALITY_CITATION}: flow unknown, so the sampling interval ({lim.citation}) cannot be verified",
        inputs=(ch.id, flow),
        params={"limit": minutes * 60.0, "operator": lim.operator, **_extra(lim, looser)},
    )


def _quality(rule: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        if rule == "flatline":
            return ctx.binding(
                rule, ch, DATA_QUALITY_CITATION, readings=float(s.options.get("readings", FLATLINE_READINGS))
            )
        return ctx.binding(rule, ch, DATA_QUALITY_CITATION)

    return bind


_BINDERS: dict[str, Callable[[_Context, Channel, _Settings], _Result]] = {
    "ph_low": _threshold("ph_low", "ph_min"),
    "ph_high": _threshold("ph_high", "ph_max"),
    "ph_excursion_duration": _excursion("ph_excursion_duration", "ph_excursion_single"),
    "ph_monthly_excursion": _excursion("ph_monthly_excursion", "ph_excursion_monthly"),
    "temperature_high": _temperature,
    "lel_successive": _lel("lel_successive"),
    "lel_single": _lel("lel_single"),
    "slug": _slug,
    "sampler_temperature": _sampler_temperature,
    "sampler_interval": _sampler("sampler_interval"),
    "sampler_interval_unverified": _sampler("sampler_interval_unverified"),
    "stale": _quality("stale"),
    "sensor_fault": _quality("sensor_fault"),
    "flatline": _quality("flatline"),
}
