"""`pretreat rules --config FILE`: every rule in force, per site and channel, as a court would read it.

For each channel: each rule that runs on it with its limit, unit, the strictness word the ordinance uses ("less
than 5.0": 5.0 complies), the reading chosen where the words are ambiguous, a looser permit figure set aside,
the legal citation and the quoted words; for a slug the baseline in force today (rebuilt from the historian the
way the daemon rebuilds it at start). Then every channel that no discharge rule judges, and why, and the clauses
of the ordinance that are no streaming rule (lab limits, reserved rights, narrative requirements), so nothing
the law states is silently ignored. `pretreat check-config` prints the count of channels left unchecked from the
same computation (`unchecked`).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from config.limits import load_profile
from config.loader import load_config_or_report
from config.rule_model import ThresholdParams
from config.rules import DATA_QUALITY_RULES, TAMPER_RULES, RuleBinding, Skipped
from config.schema import Site, SiteConfig

STRICTNESS = {
    "<": "violated below it (the limit itself complies)",
    "<=": "violated at or below it",
    ">": "violated above it (the limit itself complies)",
    ">=": "violated at or above it",
}


@dataclass(frozen=True, slots=True)
class Unchecked:
    site: str
    channel: str
    why: str


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    p.add_argument("--site", help="only this site")
    p.set_defaults(func=_run)


def skipped_rules(config: SiteConfig) -> dict[str, list[Skipped]]:
    """Per site, the rules that do not run on a channel and why (noted by the loader's rule selection)."""
    return {site.id: list(site.skipped) for site in config.sites}


def _judged(site: Site) -> set[str]:
    return {c for b in site.checks if b.rule not in DATA_QUALITY_RULES for c in b.inputs}


def unchecked(config: SiteConfig) -> list[Unchecked]:
    """Channels no discharge rule judges (data-quality rules aside), each with why."""
    skipped = skipped_rules(config)
    out = []
    for site in config.sites:
        judged = _judged(site)
        for ch in site.channels:
            if ch.id in judged:
                continue
            reasons = [f"{s.rule}: {s.why}" for s in skipped.get(site.id, []) if s.channel == ch.id]
            why = "; ".join(dict.fromkeys(reasons)) or f"no discharge rule judges a {ch.kind.value} channel"
            out.append(Unchecked(site.id, ch.id, why))
    return out


def _run(args: argparse.Namespace) -> int:
    config = load_config_or_report(args.config, outcome="no rules to show")
    if config is None:
        return 2
    sites = [s for s in config.sites if args.site in (None, s.id)]
    if not sites:
        print(f"no site {args.site!r} in {args.config}", file=sys.stderr)
        return 2
    baselines = slug_baselines(config, time.time())
    skipped = skipped_rules(config)
    missing = {(u.site, u.channel): u.why for u in unchecked(config)}
    for site in sites:
        sys.stdout.write("\n".join(site_lines(site, baselines, skipped.get(site.id, []), missing)) + "\n")
    return 0


def site_lines(site: Site, baselines: dict[tuple[str, str], str], skipped: list[Skipped],
               missing: dict[tuple[str, str], str]) -> list[str]:
    profile, _ = load_profile(site.jurisdiction) if site.jurisdiction else (None, [])
    who = f"{profile.name} ({site.jurisdiction})" if profile is not None else "no jurisdiction"
    permit = f", permit {site.permit.id}" if site.permit is not None else ""
    lines = [f"site {site.id}: {who}{permit}; {site.kind}; time zone {site.timezone}"]
    for ch in site.channels:
        lines.append(f"  {ch.id} ({ch.kind.value}, {ch.unit or 'no unit'})")
        for b in (b for b in site.checks if b.rule not in DATA_QUALITY_RULES and ch.id == b.inputs[0]):
            lines.extend("    " + x for x in binding_lines(b, ch.unit, baselines.get((site.id, b.channel)), site))
        if (site.id, ch.id) in missing:
            lines.append(f"    NO RULE: {missing[(site.id, ch.id)]}")
        else:
            for s in skipped:
                if s.channel == ch.id:
                    lines.append(f"    not run: {s.rule}: {s.why}")
        dq = sorted(b.rule for b in site.checks if b.rule in DATA_QUALITY_RULES and b.channel == ch.id)
        dq += ["slug_no_baseline"] * any(b.rule == "slug" and b.channel == ch.id and b.params.get("baseline") is None
                                         for b in site.checks)
        if dq:
            lines.append(f"    data quality (not discharge exceedances): {', '.join(dq)}")
        for b in (b for b in site.checks if b.rule in TAMPER_RULES and b.channel == ch.id):
            from monitor.reports.compliance import describe  # the report's wording of the same rule

            lines.append(f"      tamper sign {b.rule}: {describe(b, ch.unit)}")
        lines.append(f"    calibration: {_calibration_words(site, ch.id)}")
    from monitor.checks.slug_labs import lab_slug_limits  # the lab reports' code: not for `check-config`

    lab = lab_slug_limits(site)
    if lab:
        lines.append("  slug screened on composite-sample lab results (pretreat labs import):")
        for lim in lab.values():
            lines.append(f"    {lim.parameter}: a result > {lim.limit_words} is a slug finding ({lim.citation}: "
                         f"\"{lim.quote}\"); reading in force: {lim.reading}")
    if profile is not None and profile.clauses:
        lines.append("  clauses of the ordinance that are no streaming rule:")
        for c in profile.clauses.values():
            lines.append(f"    {c.key} [{c.treatment}]: {c.note} ({c.citation}: \"{c.quote}\")")
    lines += obligation_lines(site)
    unchecked_n = sum(1 for (s, _c) in missing if s == site.id)
    lines.append(f"  {unchecked_n} channel(s) left unchecked")
    return lines


def obligation_lines(site: Site) -> list[str]:
    """What a violation episode at the site obliges the industry to do (`config.obligations`), or that the
    ordinance states nothing."""
    from config.obligations import obligations_of, silence_note

    rules = obligations_of(site)
    if not rules:
        return ["  obligations of an episode: none (a plant's own monitoring obliges no industry notice)"]
    out = ["  obligations of a violation episode:"]
    note = silence_note(site.jurisdiction)
    if note:
        out.append(f"    {note}")
    out += [f"    {r.action}, to {r.to}: {r.due_text} ({r.citation}: \"{r.quote}\")" for r in rules]
    return out


def _calibration_words(site: Site, channel: str) -> str:
    """The calibration interval in force (`config.calibration`), or that none is stated."""
    from config.calibration import NO_INTERVAL

    interval = site.calibration.interval(channel) if site.calibration is not None else None
    if interval is None:
        return NO_INTERVAL
    return (f"every {interval.days:g} days ({interval.source}); overdue raises calibration_overdue "
            f"(data quality) to the site's routes")


def whole_words(quote: str, clause: str) -> str:
    """The ordinance's words as printed beside a rule: the whole sentence where the profile keeps it, else the
    quote, marked "…" where it stops mid-sentence (a quote is the part of a clause the limit rests on, so a
    reader must not take it for the whole)."""
    if clause:
        return clause
    return quote if quote.rstrip("\"')”’").endswith((".", "!", "?")) else f"{quote} …"


def binding_lines(b: RuleBinding, unit: str, baseline: str | None, site: Site) -> list[str]:
    """One rule in force: what violates it, in words, then its citation, quote, reading and set-aside note."""
    from monitor.reports.compliance import describe  # the report's wording of the same rule

    p = b.params
    head = f"{b.rule}: {describe(b, unit)}"
    if isinstance(p, ThresholdParams):
        head += f"; {STRICTNESS.get(p.operator, '')}"
    out = [head, f"  citation: {b.citation}"]
    if p.get("quote") or p.get("clause"):
        out.append(f"  words: {whole_words(str(p.get('quote', '')), str(p.get('clause', '')))}")
    if p.get("reading"):
        out.append(f"  reading in force: {p['reading']}")
        if p.get("literal") and "literal" in str(p["reading"]):  # "(see literal)": the words it refers to
            out.append(f"  literal: {p['literal']}")
    for key, label in (("looser", "set aside"), ("permitted", "permitted excursions under")):
        if p.get(key):
            out.append(f"  {label}: {p[key]}")
    if baseline is not None:
        out.append(f"  baseline today: {baseline}")
    if b.rule == "slug" and p.get("baseline") is None:  # a trailing baseline: what it means for batch operation
        from monitor.slug_history import batch_words

        out.append(f"  batch operation: {batch_words(b, site)}")
    return out


def slug_baselines(config: SiteConfig, now: float) -> dict[tuple[str, str], str]:
    """The slug baseline in force today per (site, channel), rebuilt from the historian as the daemon's start
    does (`monitor.warmup`), in the words the console shows of the daemon's own (`monitor.slug_history.words`)."""
    from monitor.checks.engine import CheckEngine
    from monitor.slug_history import in_force, recorded_since, unit_of, words
    from monitor.warmup import channel_starts

    slugs = [b for s in config.sites for b in s.checks if b.rule == "slug"]
    if not slugs:
        return {}
    engine = CheckEngine(channels=config.channels, bindings=slugs)
    for s in recorded_since(config, channel_starts(config, now), now):
        engine.process(s)
    states = in_force(engine)
    return {(b.site, b.channel): words(b, unit_of(b, config.site(b.site)), states[f"{b.site}/{b.channel}"])
            for b in slugs}
