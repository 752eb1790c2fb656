"""The tamper signs' binders (`monitor.checks.tamper`): their parameters from ``[site.rules.<rule>]`` or the
defaults below (operational settings, never legal numbers), their second input channel, and for
``offset_step`` the pH range in force. Kept apart from `config.rule_binders`, whose `Context` they use, for its
length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from config.rule_binders import DATA_QUALITY_CITATION, Context, Missing, NotApplicable, Result, Settings, bound
from config.rule_model import FrozenParams, OffsetStepParams, PinnedParams, RuleBinding, ZeroFlowParams
from config.schema import Channel, ChannelKind

TAMPER_DEFAULTS: Mapping[str, Mapping[str, float]] = {
    "ph_frozen": {"readings": 60},
    "offset_step": {"readings": 10, "step": 0.5},
    "flow_zero_sampling": {"samples": 2, "zero": 0.0},
    "span_pinned": {"readings": 10, "tolerance": 0.0},
}
_HIGH_ONLY = (ChannelKind.FLOW, ChannelKind.FLOW_TOTAL, ChannelKind.LEL, ChannelKind.SAMPLER_COUNT,
              ChannelKind.CONCENTRATION)  # span_pinned: zero is normal there, so only the top pins by default


def _second_input(ctx: Context, s: Settings, key: str, kind: ChannelKind) -> str | NotApplicable:
    """The second input of a two-channel tamper sign: ``[site.rules.<rule>] <key>``, or the site's only channel
    of that kind."""
    found = [c.id for c in ctx.channels if c.kind is kind]
    chosen = str(s.options.get(key, found[0] if len(found) == 1 else ""))
    return chosen or NotApplicable(f"one {kind.value} channel, or [site.rules] {key} = '<channel id>' naming it")


def _option(rule: str, s: Settings, key: str) -> float:
    return float(s.options.get(key, TAMPER_DEFAULTS[rule][key]))


def bind_frozen(ctx: Context, ch: Channel, s: Settings) -> Result:
    flow = _second_input(ctx, s, "flow", ChannelKind.FLOW)
    if isinstance(flow, NotApplicable):
        return flow
    return RuleBinding(rule="ph_frozen", site=ctx.site, channel=ch.id, citation=DATA_QUALITY_CITATION,
                       inputs=(ch.id, flow),
                       params=FrozenParams(readings=int(_option("ph_frozen", s, "readings")), flow=flow))


def bind_offset_step(ctx: Context, ch: Channel, s: Settings) -> Result:
    low, high = bound(ctx, "ph_min"), bound(ctx, "ph_max")
    if low is None and high is None:
        return Missing("ph_min")
    return ctx.binding("offset_step", ch, DATA_QUALITY_CITATION, OffsetStepParams(
        readings=int(_option("offset_step", s, "readings")), step=_option("offset_step", s, "step"),
        min=low[0] if low else -math.inf, min_operator=low[1] if low else "<",
        max=high[0] if high else math.inf, max_operator=high[1] if high else ">"))


def bind_zero_flow(ctx: Context, ch: Channel, s: Settings) -> Result:
    sampler = _second_input(ctx, s, "sampler", ChannelKind.SAMPLER_COUNT)
    if isinstance(sampler, NotApplicable):
        return sampler
    return RuleBinding(rule="flow_zero_sampling", site=ctx.site, channel=ch.id, citation=DATA_QUALITY_CITATION,
                       inputs=(ch.id, sampler),
                       params=ZeroFlowParams(samples=int(_option("flow_zero_sampling", s, "samples")),
                                             zero=_option("flow_zero_sampling", s, "zero"), sampler=sampler))


def bind_pinned(ctx: Context, ch: Channel, s: Settings) -> Result:
    if ch.valid_min is None or ch.valid_max is None:
        return NotApplicable("valid_min and valid_max (the instrument's span) on the channel")
    at = str(s.options.get("at", "high" if ch.kind in _HIGH_ONLY else "both"))
    return ctx.binding("span_pinned", ch, DATA_QUALITY_CITATION, PinnedParams(
        readings=int(_option("span_pinned", s, "readings")), tolerance=_option("span_pinned", s, "tolerance"),
        at=at, low=ch.valid_min, high=ch.valid_max))
