"""The slug binder: the slug limit in force on a channel (trailing baseline or fixed normal-sewage strength),
its online surrogates, and the mass-loading pairs (flow × concentration). Kept apart from `config.rule_binders`,
whose `Context` it uses, for its length.
"""

from __future__ import annotations

from dataclasses import replace

from config.limits import Limit
from config.rule_binders import BASELINE_DAYS, Context, Missing, NotApplicable, Result, Settings
from config.rule_model import RuleBinding, SlugParams
from config.schema import Channel, ChannelKind


def _slug_params(lim: Limit, s: Settings, ctx: Context, *, baseline: float | None = None,
                 looser: str = "") -> SlugParams:
    permit = ctx.permit
    duration, duration_operator, reading = lim.numbers["minutes"] * 60.0, lim.duration_operator, lim.reading
    literal = lim.literal  # what the reading's "see literal" refers to
    if permit is not None and permit.slug_reading == "multiple_alone":
        duration, duration_operator = 0.0, ">="
        reading = (f"the literal reading, selected by {permit.slug_cite}: more than "
                   f"{lim.numbers['multiplier']:g} times the baseline at any reading is a slug, whatever "
                   f"its duration (\"{lim.literal or lim.quote}\")")
        literal = ""  # quoted in the reading itself
    return SlugParams(
        timezone=ctx.timezone, multiplier=lim.numbers["multiplier"], operator=lim.operator, duration=duration,
        duration_operator=duration_operator, baseline_days=int(s.options.get("baseline_days", BASELINE_DAYS)),
        baseline=baseline, reading=reading, literal=literal, wording=lim.wording, looser=looser, quote=lim.quote,
        clause=lim.clause,
    )


def _slug_limit(ctx: Context) -> tuple[Limit | None, str]:
    """The slug limit in force and a note on a permit's looser figures. A permit may tighten the multiplier or the
    duration (40 CFR 403.5(d)) of the same form of baseline; the stricter of the ordinance's and the permit's
    applies figure by figure, as LEL limits combine: a permit tighter in one figure and looser in the other
    binds with its tighter figure, the ordinance's other figure stays, and the looser one is set aside with a
    note. The citation then names both sources, each with its figure."""
    law, permit = ctx.law("slug"), ctx.permitted("slug")
    if law is None or permit is None:
        return permit or law, ""
    if permit.baseline != law.baseline:
        return law, _other_basis(permit, law)
    # ties go to the permit (the more specific text); for equal minutes ">=" forbids more than ">"
    mult = permit if permit.numbers["multiplier"] <= law.numbers["multiplier"] else law
    dur = permit if _duration_key(permit) <= _duration_key(law) else law
    if mult is permit and dur is permit:
        return permit, ""
    if mult is law and dur is law:
        looser = [k for k in ("multiplier", "minutes") if permit.numbers[k] > law.numbers[k]]
        if permit.duration_operator == ">" and law.duration_operator == ">=" and permit.numbers["minutes"] >= \
                law.numbers["minutes"]:
            looser.append("duration wording")
        words = ", ".join(f"{k} {permit.numbers.get(k, 0):g}" if k in permit.numbers else k for k in looser)
        return law, ctx.looser("slug", words, ", ".join(f"{k} {law.numbers.get(k, 0):g}" if k in law.numbers
                                                        else k for k in looser), law)
    m, minutes, op = mult.numbers["multiplier"], dur.numbers["minutes"], dur.duration_operator
    how = "longer than" if op == ">" else "for at least"
    for_how = "for longer than" if op == ">" else "for at least"
    if mult is permit:  # the permit's duration is the looser figure, else its multiplier
        note = ctx.looser("slug", f"duration {_duration_words(permit)}", _duration_words(law), law)
    else:
        note = ctx.looser("slug", f"multiplier {permit.numbers['multiplier']:g}",
                          f"{law.numbers['multiplier']:g}", law)
    combined = replace(
        law, numbers={**law.numbers, "multiplier": m, "minutes": minutes}, duration_operator=op,
        citation=f"{mult.citation} (multiplier {m:g}); {dur.citation} (duration {how} {minutes:g} minutes)",
        reading=(f"read as more than {m:g} times the baseline of normal operation {for_how} {minutes:g} minutes: "
                 f"the multiplier of {mult.citation} and the duration of {dur.citation}, each the stricter "
                 f"figure (40 CFR 403.5(d))"))
    return combined, note


def _other_basis(permit: Limit, law: Limit) -> str:
    """The note on a permit's baseline of another form than the ordinance's: not looser or stricter but a
    different basis, which the ordinance's words decide (Southeast measures against "the average ... during normal
    operation", so a permit's fixed normal-sewage values cannot stand in for it; Vestal's fixed strength cannot be
    replaced by a trailing average)."""
    words = law.wording or law.quote
    start = words.find("the average")
    said = f' ("{words[start:] if start >= 0 else words}")' if words else ""
    if law.baseline == "trailing":
        theirs, ours = "fixed normal_sewage baseline", "trailing average"
        why = f"the ordinance's words{said} measure against the average during normal operation and do not allow " \
              f"fixed values in its place"
    else:
        theirs, ours = "trailing-average baseline", "fixed normal-sewage strength"
        why = f"the ordinance's words{said} fix the strength of normal sewage and do not allow an average in its place"
    return (f"the permit's {theirs} ({permit.citation}) is a different basis from the ordinance's {ours} "
            f"({law.citation}): {why}, so the ordinance's baseline is in force")


def _duration_key(lim: Limit) -> tuple[float, int]:
    """Orders durations by strictness: fewer minutes forbid more; at equal minutes ">=" forbids more than ">"."""
    return lim.numbers["minutes"], int(lim.duration_operator == ">")


def _duration_words(lim: Limit) -> str:
    return f"{'longer than' if lim.duration_operator == '>' else 'for at least'} {lim.numbers['minutes']:g} minutes"


def bind_slug(ctx: Context, ch: Channel, s: Settings) -> Result:
    lim, looser = _slug_limit(ctx)
    if lim is None:
        return Missing("slug")
    if lim.measured_by == "lab" and lim is not ctx.permitted("slug"):  # the ordinance's figures, measured by lab
        surrogate = _surrogate(ctx, ch, s)
        if isinstance(surrogate, NotApplicable):
            return surrogate
        lim = replace(lim, citation=f"{lim.citation}; surrogate channel: {surrogate}")
    if lim.baseline == "trailing":
        return ctx.binding("slug", ch, lim.citation, _slug_params(lim, s, ctx, looser=looser))
    # A fixed "normal sewage" strength (Vestal): concentration channels mapped to a constituent only.
    constituent = dict(s.options.get("constituents") or {}).get(ch.id)
    known = sorted(lim.normal_sewage)
    if ch.kind is not ChannelKind.CONCENTRATION or constituent is None:
        return NotApplicable(
            f"a concentration channel mapped in [site.rules.slug] constituents to one of {known}"
        )
    if constituent not in lim.normal_sewage:
        ctx.reader.error(f"{ctx.p}.rules.slug.constituents.{ch.id}", constituent, f"one of {known}")
        return NotApplicable("a known constituent")
    if ch.unit.strip().lower() not in ("ppm", "mg/l"):
        ctx.reader.error(
            f"{ctx.p}.channel[id={ch.id}].unit", ch.unit, "'ppm' or 'mg/l' (normal sewage is in ppm)"
        )
        return NotApplicable("a concentration unit")
    return ctx.binding("slug", ch, lim.citation,
                       _slug_params(lim, s, ctx, baseline=lim.normal_sewage[constituent], looser=looser))


def _surrogate(ctx: Context, ch: Channel, s: Settings) -> str | NotApplicable:
    """Vestal-Endicott measures a slug "by suspended solids and BOD", laboratory tests of composite samples: an
    online channel stands in only where the permit names it, with its citation (``[site.rules.slug]
    surrogates`` with its ``cite``); otherwise the slug is screened on lab results (`pretreat labs import`)."""
    permit = ctx.permit
    if permit is None or ch.id not in permit.slug_surrogates:
        return NotApplicable(
            "an online surrogate the permit names: the ordinance measures a slug by suspended solids and BOD "
            "(laboratory tests); list the channel in [site.permit.slug] surrogates with the permit's cite, or "
            "screen the lab results (pretreat labs import)"
        )
    return permit.slug_cite


def loading_pairs(ctx: Context, s: Settings) -> list[RuleBinding]:
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
