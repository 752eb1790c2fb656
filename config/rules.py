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

from config.limits import FEDERAL, Limit, Permit, Profile, in_unit, known_jurisdictions, load_profile
from config.reader import Reader
from config.schema import Channel, ChannelKind

DATA_QUALITY_RULES = ("stale", "sensor_fault", "flatline")
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
    "stale": tuple(ChannelKind),
    "sensor_fault": tuple(ChannelKind),
    "flatline": tuple(ChannelKind),
}
RULE_NAMES = tuple(CHANNEL_KINDS)
_OPTIONS = {"flatline": {"readings"}, "slug": {"loading", "constituents"}, "sampler_interval": {"flow"}}


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

    def limit(self, key: str) -> Limit | None:
        """The stated limit in force: the permit's own, a federal one the permit adopts, else the
        profile's."""
        if self.permit is not None and key in self.permit.limits:
            return self.permit.limits[key]
        if self.permit is not None and key in self.permit.adopt:
            federal, _ = load_profile(FEDERAL)
            if federal is not None and key in federal.limits:
                fed = federal.limits[key]
                return replace(fed, citation=f"{fed.citation}, adopted by permit {self.permit.id}")
        found = self.profile.limits.get(key) if self.profile is not None else None
        return found if found is not None and found.stated else None

    def binding(self, rule: str, ch: Channel, citation: str, **params: float | str) -> RuleBinding:
        return RuleBinding(
            rule=rule, site=self.site, channel=ch.id, citation=citation, inputs=(ch.id,), params=params
        )


def select_rules(
    *,
    site: str,
    jurisdiction: str,
    timezone: str,
    channels: Sequence[Channel],
    permit: Permit | None,
    raw_rules: dict[str, Any],
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
    ctx = _Context(site, timezone, profile, permit, channels, p, reader)
    settings = _parse_settings(raw_rules, ctx)
    bindings: list[RuleBinding] = []
    for rule in RULE_NAMES:
        s = settings.get(rule, _Settings())
        if not s.enabled:
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


def _keep(
    result: _Result, rule: str, channel: str, s: _Settings, ctx: _Context, out: list[RuleBinding]
) -> None:
    if isinstance(result, RuleBinding):
        out.append(result)
    elif isinstance(result, _NotApplicable) and channel in s.channels:
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
    if "loading" in options and not isinstance(options["loading"], bool):
        r.error(f"{p}.loading", options["loading"], "true or false")
    if "constituents" in options and not isinstance(options["constituents"], dict):
        r.error(f"{p}.constituents", options["constituents"], "a table: channel id = constituent")
    if "flow" in options and getattr(by_id.get(str(options["flow"])), "kind", None) is not ChannelKind.FLOW:
        r.error(f"{p}.flow", options["flow"], "the id of a flow channel of this site")


def _threshold(rule: str, key: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        lim = ctx.limit(key)
        if lim is None:
            return _Missing(key)
        return ctx.binding(rule, ch, lim.citation, limit=lim.numbers["value"], operator=lim.operator)

    return bind


def _excursion(rule: str, key: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    """401.17 rules: duration limits from the permit (adopted or stated), the pH range from wherever it is
    stated."""

    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        dur, low, high = ctx.limit(key), ctx.limit("ph_min"), ctx.limit("ph_max")
        if dur is None:
            return _Missing(key)
        if low is None and high is None:
            return _Missing("ph_min")
        ranges = list(dict.fromkeys(x.citation for x in (low, high) if x is not None))
        return ctx.binding(
            rule,
            ch,
            f"{dur.citation}; pH range: {'; '.join(ranges)}",
            limit=dur.numbers["minutes"] * 60.0,
            min=low.numbers["value"] if low else -math.inf,
            min_operator=low.operator if low else "<",
            max=high.numbers["value"] if high else math.inf,
            max_operator=high.operator if high else ">",
            timezone=ctx.timezone,
        )

    return bind


def _temperature(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    location = getattr(ch, "location", None)
    if location is None:
        return _NotApplicable(
            "a temperature channel with location = 'influent', 'discharge' or 'grease_interceptor'"
        )
    key = f"temperature_{getattr(location, 'value', location)}"
    lim = ctx.limit(key)
    if lim is None:
        return _Missing(key)
    value = in_unit(lim, "max", ch.unit)
    if value is None:
        ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
        return _NotApplicable("a temperature unit")
    return ctx.binding("temperature_high", ch, lim.citation + value[1], limit=value[0], operator=lim.operator)


def _lel(rule: str) -> Callable[[_Context, Channel, _Settings], _Result]:
    def bind(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
        lim = ctx.limit(rule)
        if lim is None:
            return _Missing(rule)
        return ctx.binding(
            rule,
            ch,
            lim.citation,
            limit=lim.numbers["percent"],
            operator=lim.operator,
            readings=lim.numbers.get("readings", 1.0),
        )

    return bind


def _slug_params(lim: Limit) -> dict[str, float | str]:
    return {
        "multiplier": lim.numbers["multiplier"],
        "operator": lim.operator,
        "duration": lim.numbers["minutes"] * 60.0,
        "duration_operator": lim.duration_operator,
        "window": lim.numbers.get("baseline_hours", 24.0) * 3600.0,
    }


def _slug(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    lim = ctx.limit("slug")
    if lim is None:
        return _Missing("slug")
    if lim.baseline == "trailing":
        return ctx.binding("slug", ch, lim.citation, **_slug_params(lim))
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
    return ctx.binding("slug", ch, lim.citation, baseline=lim.normal_sewage[constituent], **_slug_params(lim))


def _loading_pairs(ctx: _Context, s: _Settings) -> list[RuleBinding]:
    """Mass loading (flow × concentration) where both are measured and the baseline is the trailing
    average."""
    lim = ctx.limit("slug")
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
            params=_slug_params(lim),
        )
        for f in flows
        for c in concs
    ]


def _sampler_temperature(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    lim = ctx.limit("sampler_temperature")
    if lim is None:
        return _Missing("sampler_temperature")
    setpoint, tolerance = in_unit(lim, "setpoint", ch.unit), in_unit(lim, "tolerance", ch.unit)
    if setpoint is None or tolerance is None:
        ctx.reader.error(f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "a temperature unit: 'degC' or 'degF'")
        return _NotApplicable("a temperature unit")
    return ctx.binding(
        "sampler_temperature",
        ch,
        lim.citation + setpoint[1],
        low=setpoint[0] - tolerance[0],
        high=setpoint[0] + tolerance[0],
    )


def _sampler_interval(ctx: _Context, ch: Channel, s: _Settings) -> _Result:
    lim = ctx.limit("sampler_interval")
    if lim is None:
        return _Missing("sampler_interval")
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
        rule="sampler_interval",
        site=ctx.site,
        channel=ch.id,
        citation=lim.citation,
        inputs=(ch.id, flow),
        params={"limit": lim.numbers["minutes"] * 60.0, "operator": lim.operator},
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
    "sampler_interval": _sampler_interval,
    "stale": _quality("stale"),
    "sensor_fault": _quality("sensor_fault"),
    "flatline": _quality("flatline"),
}
