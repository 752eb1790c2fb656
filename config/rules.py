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

What each rule is (channel kinds, options, binder, parameters, alarm, label) is the rule catalogue's
(`config.rule_catalogue`); how each finds its limit is its binder's (`config.rule_binders`). This module walks
the catalogue for one site and checks the ``[site.rules]`` tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from config.limits import FEDERAL, Permit, known_jurisdictions, load_profile
from config.reader import Reader
from config.rule_binders import (
    DATA_QUALITY_CITATION,
    Context,
    Missing,
    NotApplicable,
    Result,
    Settings,
    adopts_401_17,
)
from config.rule_catalogue import (
    CATALOGUE,
    DATA_QUALITY_RULES,
    RULE_NAMES,
    TAMPER_RULES,
    RuleName,
    is_data_quality,
    spec,
)
from config.rule_model import RuleBinding, Skipped
from config.schema import Channel, ChannelKind
from config.slug_binder import loading_pairs

__all__ = ["DATA_QUALITY_CITATION", "DATA_QUALITY_RULES", "RULE_NAMES", "TAMPER_RULES", "RuleBinding", "Skipped",
           "adopts_401_17", "is_data_quality", "select_rules"]


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
    ctx = Context(site, timezone, profile, permit, channels, p, reader, kind, skipped)
    settings = _parse_settings(raw_rules, ctx)
    _check_401_17(ctx)
    bindings: list[RuleBinding] = []
    for name, row in CATALOGUE.items():
        rule = name.value
        s = settings.get(rule, Settings())
        if not s.enabled:
            for c in channels:
                if skipped is not None and c.kind in row.kinds:
                    skipped.append(Skipped(c.id, rule, f"switched off by [site.rules.{rule}] enabled = false"))
            continue
        if s.channels:
            targets = [c for c in channels if c.id in s.channels]
        elif name is RuleName.FLATLINE or (row.opt_in and not s.explicit):
            targets = []  # opt-in: zero flow at night or 0 % LEL repeat legitimately; tamper signs by site
        else:
            targets = [c for c in channels if c.kind in row.kinds]
        for ch in targets:
            _keep(row.binder(ctx, ch, s), rule, ch.id, s, ctx, bindings)
        if name is RuleName.SLUG:
            bindings.extend(loading_pairs(ctx, s))
    return tuple(bindings)



def _check_401_17(ctx: Context) -> None:
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
    result: Result, rule: str, channel: str, s: Settings, ctx: Context, out: list[RuleBinding]
) -> None:
    if isinstance(result, RuleBinding):
        out.append(result)
        return
    if ctx.skipped is not None:
        ctx.skipped.append(Skipped(channel, rule, _why(result, ctx)))
    if isinstance(result, NotApplicable) and channel in s.channels:
        ctx.reader.error(f"{ctx.p}.rules.{rule}", f"{rule} on channel {channel}", result.reason)
    elif isinstance(result, Missing):
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


def _why(result: Missing | NotApplicable, ctx: Context) -> str:
    if isinstance(result, NotApplicable):
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


def _parse_settings(raw_rules: dict[str, Any], ctx: Context) -> dict[str, Settings]:
    out: dict[str, Settings] = {}
    by_id = {c.id: c for c in ctx.channels}
    for rule, raw in raw_rules.items():
        p = f"{ctx.p}.rules.{rule}"
        row = spec(rule)
        if row is None:
            ctx.reader.error(p, rule, f"a rule name, one of {list(RULE_NAMES)}")
            continue
        if not isinstance(raw, dict):
            ctx.reader.error(p, raw, "a table")
            continue
        ctx.reader.unknown_keys(raw, p, {"enabled", "channels", "reason"} | row.options)
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            ctx.reader.error(f"{p}.enabled", enabled, "true or false")
        channels = raw.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            ctx.reader.error(f"{p}.channels", channels, "a list of channel ids")
            channels = []
        for cid in channels:
            ch = by_id.get(cid)
            if ch is None or ch.kind not in row.kinds:
                kinds = sorted(k.value for k in row.kinds)
                ctx.reader.error(f"{p}.channels", cid, f"a channel of this site of kind {kinds}")
        options = {k: v for k, v in raw.items() if k in row.options}
        _check_options(rule, options, p, ctx, by_id)
        out[rule] = Settings(
            explicit=True, enabled=enabled is not False, channels=tuple(channels), options=options
        )
    return out


def _check_options(
    rule: str, options: dict[str, Any], p: str, ctx: Context, by_id: dict[str, Channel]
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
    flow = by_id.get(str(options.get("flow")))
    if "flow" in options and (flow is None or flow.kind is not ChannelKind.FLOW):
        r.error(f"{p}.flow", options["flow"], "the id of a flow channel of this site")
    sampler = by_id.get(str(options.get("sampler")))
    if "sampler" in options and (sampler is None or sampler.kind is not ChannelKind.SAMPLER_COUNT):
        r.error(f"{p}.sampler", options["sampler"], "the id of a sampler_count channel of this site")
    if "samples" in options:
        r.integer(options, "samples", p, minimum=1)
    if "step" in options:
        r.number(options, "step", p, minimum=0.0, exclusive_min=True)
    for key in ("zero", "tolerance"):
        if key in options:
            r.number(options, key, p, minimum=0.0)
    if "at" in options and options["at"] not in ("high", "low", "both"):
        r.error(f"{p}.at", options["at"], "'high', 'low' or 'both' (which end of the span pins)")


