"""The slug baseline as the record holds it: readings read back from the historian in time order, and the
baseline in force on each local day rebuilt from them exactly as a replay computes it. Used by the daemon's
start (`monitor.warmup`), `pretreat rules` and the periodic report, so all three show the same baseline.

The baseline in force *now* is what a check engine holds (`in_force`): the daemon publishes its live engine's in
its health snapshot (``slug_baselines``, `BaselineSection`), the console's site page shows that one, and
`pretreat rules` rebuilds an engine from the record and shows its own; both in the same words (`words`)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from config.rules import RuleBinding
from config.schema import Site, SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.slug import LOOKBACK_DAYS, NO_BASELINE, LoadingSlug, SlugDetector, detector_of
from monitor.sample import Sample
from monitor.stores.historian import Historian

SLUG_LOOKBACK = (LOOKBACK_DAYS + 2) * 86400.0  # a slug baseline's days of normal operation: up to 60 days back


def recorded_since(config: SiteConfig, start: float | Mapping[tuple[str, str], float], end: float) -> Iterator[Sample]:
    """Every recorded sample of every configured channel from ``start`` (one time, or one per (site, channel))
    to ``end`` (exclusive), merged in time order."""
    if not config.daemon.historian.exists():
        return
    starts = start if isinstance(start, Mapping) else {(c.site, c.id): start for c in config.channels}
    # One read-only connection for every channel: a connection a channel (each parsing the schema and
    # checking the version on open) took 40 s before the first poll at 10,000 channels (bench/bench_peers.py).
    with Historian.open_readonly(config.daemon.historian) as reader:
        streams = [reader.query(site=c.site, channel=c.id, start=starts.get((c.site, c.id), end), end=end)
                   for c in config.channels]
        yield from heapq.merge(*streams, key=lambda s: s.time)


@dataclass(frozen=True, slots=True)
class BaselineDay:
    """The slug baseline in force on one local day of one slug rule (`SlugDetector.log`): None when the day had
    none (no day of normal operation within the look-back, so no slug was judged), else the mean of the 24-hour
    averages of the days of normal operation ``rests_on`` (their local starts, epoch s)."""

    channel: str  # the channel, or "flow*concentration" for a mass loading
    day: float  # local start of the day, epoch s
    baseline: float | None
    threshold: float | None  # multiplier × baseline: a slug is above it
    unit: str  # the channel's unit (mass loading: flow unit × concentration unit)
    rests_on: tuple[float, ...]


def baseline_days(config: SiteConfig, site: str, lo: float, hi: float) -> list[BaselineDay]:
    """The slug baseline in force on each local day starting in [lo, hi) for ``site``'s trailing-baseline slug
    rules, rebuilt from the historian's readings since ``lo`` minus the look-back, as a replay computes it."""
    slugs = [b for s in config.sites if s.id == site for b in s.checks
             if b.rule == "slug" and "baseline" not in b.params]
    if not slugs:
        return []
    engine = CheckEngine(channels=config.channels, bindings=slugs)
    logs = []
    for b, rule in engine.rules:
        det = rule.detector if isinstance(rule, LoadingSlug) else rule
        if isinstance(det, SlugDetector):
            det.log = []
            logs.append((b, det))
    mine = {(site, c) for b in slugs for c in b.inputs}
    starts = {(c.site, c.id): lo - SLUG_LOOKBACK if (c.site, c.id) in mine else hi for c in config.channels}
    for s in recorded_since(config, starts, hi):
        engine.process(s)
    units = {c.id: c.unit for c in config.channels if c.site == site}
    out = []
    for b, det in logs:
        unit = " × ".join(units.get(i) or "no unit" for i in b.inputs)
        for day, base, rests in det.log or ():
            if lo <= day < hi:
                out.append(BaselineDay(b.channel, day, base, None if base is None else det.multiplier * base,
                                       unit, rests))
    return sorted(out, key=lambda x: (x.channel, x.day))


def in_force(engine: CheckEngine) -> dict[str, dict[str, Any]]:
    """The slug baseline each slug rule of ``engine`` judges by now (`SlugDetector.in_force`), by
    ``site/channel`` (a mass loading: ``site/flow*concentration``)."""
    return {f"{b.site}/{b.channel}": det.in_force() for b, det in _detectors(engine)}


def _detectors(engine: CheckEngine) -> list[tuple[RuleBinding, SlugDetector]]:
    return [(b, d) for b, r in engine.rules if b.rule == "slug" and (d := detector_of(r)) is not None]


class BaselineSection:
    """The health snapshot's ``slug_baselines``: `in_force` of the daemon's live engine, rebuilt only when a
    detector's day or threshold changed (the snapshot is written every second; a baseline changes at most once
    a local day, or when a late reading rewinds the engine, which restores the same rule objects' state)."""

    def __init__(self, engine: CheckEngine) -> None:
        self.detectors = _detectors(engine)  # the engine's rule objects live as long as it does
        self._key: list[tuple[float, float, int]] = []
        self._last: dict[str, dict[str, Any]] = {}

    def __call__(self) -> dict[str, dict[str, Any]]:
        key = [(d.day_start, d.threshold, len(d.days)) for _, d in self.detectors]
        if key != self._key:
            self._key = key
            self._last = {f"{b.site}/{b.channel}": d.in_force() for b, d in self.detectors}
        return self._last


def unit_of(b: RuleBinding, site: Site) -> str:
    """The unit of a slug rule's values: its channel's, or a mass loading's flow unit × concentration unit."""
    units = {c.id: c.unit for c in site.channels}
    return " × ".join(units.get(i) or "no unit" for i in b.inputs)


def batch_words(b: RuleBinding, site: Site) -> str:
    """What a trailing baseline means for a batch discharger, and whether at this site the permit can replace
    the average with fixed normal values, stated wherever the rule is shown (`pretreat rules`, the report's slug
    baseline section, the console's site page). Where the ordinance words the slug against its own average
    (Southeast: "the average ... during normal operation") a permit's fixed values are set aside
    (`config.slug_binder`); where the ordinance states no slug baseline (the permit states the limit), the permit
    may state them. Under the literal reading (a permit's ``multiple_alone``) there is no duration to speak of."""
    from config.limits import load_profile

    how = _duration(b)
    batch = "any reading of a batch above the limit" if how == "at any reading" else \
        f"a batch above the limit {how}"
    text = (f"a batch discharger is measured against its own 24-hour average, zero-flow hours included, so "
            f"{batch} is a slug every day (60 gpm for 4 h a day, the same every day, averages 10 gpm: each batch is "
            f"6 × it); ")
    profile, _ = load_profile(site.jurisdiction) if site.jurisdiction else (None, [])
    law = profile.limits.get("slug") if profile is not None else None
    if law is not None and law.stated and law.baseline == "trailing":
        words = law.wording or law.quote
        at = words.find("the average")
        said = f' "{words[at:]}"' if at >= 0 else " its own average"
        return text + (f"at this site the permit cannot replace the ordinance's average with fixed values "
                       f"({law.citation} measures against{said}; check-config warns of a permit that states them)")
    return text + ("at this site the permit may state fixed normal values in place of the average "
                   "([site.permit.limits.slug] baseline = \"normal_sewage\", on concentration channels mapped to a "
                   "constituent)")


def _duration(b: RuleBinding) -> str:
    duration = float(b.params["duration"])
    if duration == 0:
        return "at any reading"
    return f"for {'longer than' if b.params['duration_operator'] == '>' else 'at least'} {duration / 60:g} min"


def words(b: RuleBinding, unit: str, state: Mapping[str, Any]) -> str:
    """The baseline in force and the slug limit it gives, in the words `pretreat rules` prints and the console
    shows: ``state`` is a `SlugDetector.in_force` (from the daemon's snapshot or a rebuilt engine); ``unit`` is
    the channel's (a mass loading's: flow unit × concentration unit)."""
    mult, how = float(b.params["multiplier"]), _duration(b)
    base: Any = state.get("baseline")
    thr: Any = state.get("threshold")
    if state.get("fixed"):
        ppm = " (ppm read as mg/L)" if unit.strip().lower() == "mg/l" else ""
        return (f"fixed normal-sewage strength {float(base):g} {unit}{ppm}, stated, not measured; a slug is above "
                f"{float(thr):.6g} {unit} ({mult:g} × it) {how}")
    day = state.get("day")
    if base is None:
        return f"none on {day}: {NO_BASELINE}" if day else f"none (no reading yet): {NO_BASELINE}"
    rests = list(state.get("rests_on") or ())
    return (f"{float(base):.6g} {unit} on {day} (fixed at local midnight), the mean of the 24-hour averages of "
            f"{len(rests)} day(s) of normal operation ({', '.join(rests)}); a slug is above {float(thr):.6g} {unit} "
            f"({mult:g} × the baseline) {how}")
