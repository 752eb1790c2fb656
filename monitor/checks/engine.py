"""The check engine: compiled rule bindings in, samples through, episode transitions out.

`CheckEngine.for_config` builds one `Processor` per configured channel and attaches to it the rules that read
that channel (`config.rules` selected and validated them at load). The daemon calls `CheckEngine.process` with
every sample, good or bad; `pretreat replay` calls the same processors through `CheckEngine.inputs` without
building `Sample` objects. Both paths run the same code, so live and replayed events are identical.

Per channel, samples must come in time order: a sample older than the channel's last one is rejected (counted,
not judged), as a replayed row out of order is. Samples of different channels may interleave freely; only the
rules that read two channels (``sampler_interval``, mass-loading ``slug``) see the order in which they arrive.

The hot path: a good reading inside the channel's *quiet band* (the intersection of its rules' bands, see
`monitor.checks.base`) and no further than ``max_gap`` from the previous one returns after four comparisons,
or five and `SlugDetector.add_quiet` when a slug baseline is accumulating. Everything else takes the slow path,
which runs every rule and recomputes the band.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from config.rule_catalogue import RULE_NAMES
from config.rules import RuleBinding
from config.schema import Channel, SiteConfig
from monitor.checks import excursion as _excursion
from monitor.checks import quality as _quality
from monitor.checks import threshold as _threshold
from monitor.checks.base import CHECKS, INF, Rule
from monitor.checks.events import EpisodeEvent
from monitor.checks.slug import SlugDetector
from monitor.sample import GOOD, Quality, Sample

_MAX = sys.float_info.max
OVER_RANGE = Quality.OVER_RANGE
CHECK_MODULES = (_excursion, _quality, _threshold)  # importing a check module registers its checks (`Rule.runs`)
_UNCHECKED = [r for r in RULE_NAMES if r not in CHECKS]
if _UNCHECKED:  # a catalogue rule without a check class (`Rule.runs`) would be bound and never judged
    raise ImportError(f"rules of the catalogue without a check in monitor.checks: {_UNCHECKED}")


class Processor:
    """One channel's input: the time-order check, the gap check, the quiet band, and the rules reading this
    channel.

    ``good(t, v)`` / ``bad(t, quality)`` return True when the sample was rejected (older than the last one).
    A good reading outside the channel's valid range, NaN or infinite, is judged as the bad sample a driver
    would have made of it (``out_of_range`` / ``bad_value``): never a number. Except over-range readings of a
    channel that judges them (`config.schema.Channel.judges_over_range`, LEL meters): above ``valid_max`` up to
    ``over`` the rules see ``valid_max`` and the events it causes say ``censored`` (a live ``over_range`` sample
    and a replayed row with that quality both come here with the instrument's number, so both agree).

    Gaps (`monitor.checks.coverage`): when a good reading comes more than ``gap`` seconds (the channel's
    ``max_gap``) after the previous good one, every rule hears ``gap(t0, v0, t, port)`` before the reading is
    judged. ``gt``/``gv`` are the last good reading's time and value (``gt`` only kept while ``held``: a bad
    sample came after it, so ``last`` is the bad one's time); while held, or after a censored reading, the
    fast path is closed (``until = -inf``) so the slow path sorts it out.

    The fast path of `good` is also inlined in `monitor.checks.replay_csv`'s loop (a function call is a
    measurable share of the per-row budget there); the two must stay identical, which the live-vs-replay
    property test checks.
    ``acc`` is the slug detector whose baseline minute an in-band reading adds to (`SlugDetector.add_quiet`;
    None unless it is accumulating).
    """

    __slots__ = ("acc", "cens", "fast", "gap", "gt", "gv", "held", "hi", "last", "linked", "lo", "out", "over",
                 "rules", "slug", "until", "vmax", "vmin")

    def __init__(self, *, channel: Channel, fast: bool = True, out: list[EpisodeEvent] | None = None) -> None:
        self.vmin = channel.valid_min if channel.valid_min is not None else -_MAX
        self.vmax = channel.valid_max if channel.valid_max is not None else _MAX
        over = channel.over_range_limit
        self.over = over if over is not None else self.vmax  # nothing above vmax is judged unless it censors
        self.gap = channel.max_gap if channel.max_gap > 0 else INF
        self.rules: list[tuple[Rule, int]] = []
        self.linked: list[Processor] = [self]  # processors whose bands a slow path here can change
        self.slug: SlugDetector | None = None  # a slug accumulating on this channel's own readings
        self.acc: SlugDetector | None = None
        self.out: list[EpisodeEvent] = out if out is not None else []
        self.fast = fast
        self.last = -INF
        self.gt, self.gv, self.held, self.cens = -INF, 0.0, False, False
        self.lo, self.hi, self.until = -INF, -INF, -INF

    def good(self, t: float, v: float) -> bool:
        if t < self.last:
            return True
        if t < self.until and t - self.last <= self.gap and self.lo <= v <= self.hi:
            self.last = t
            self.gv = v
            acc = self.acc
            if acc is not None:
                acc.add_quiet(v)
            return False
        self.slow_good(t, v)
        return False

    def bad(self, t: float, quality: str) -> bool:
        if t < self.last:
            return True
        self._bad(t, quality)
        return False

    def slow_good(self, t: float, v: float) -> None:
        """A good reading off the fast path (``t`` already checked against ``last``)."""
        cens = False
        if not self.vmin <= v <= self.vmax:
            if not self.vmax < v <= self.over:
                self._bad(t, "bad_value" if v != v or v in (INF, -INF) else "out_of_range")
                return
            v, cens = self.vmax, True
        out, prev = self.out, (self.gt if self.held else self.last)
        mark = len(out)
        if t - prev > self.gap and prev > -INF:
            for rule, port in self.rules:
                rule.gap(prev, self.gv, t, port)
            if self.cens:  # the gap's end events are at the censored reading before it
                self._censor(mark)
            mark = len(out)
        self.last, self.gv, self.held, self.cens = t, v, False, cens
        for rule, port in self.rules:
            rule.good(t, v, port)
        if cens:
            self._censor(mark)
        self.refresh()

    def _censor(self, mark: int) -> None:
        out = self.out
        for i in range(mark, len(out)):
            out[i] = replace(out[i], censored=True)

    def _bad(self, t: float, quality: str) -> None:
        if not self.held:
            self.gt, self.held = self.last, True
        self.last = t
        for rule, port in self.rules:
            rule.bad(t, quality, port)
        self.refresh()

    def refresh(self) -> None:
        for p in self.linked:
            p.rebuild()

    def rebuild(self) -> None:
        lo, hi, until = self.vmin, self.vmax, INF
        for rule, port in self.rules:
            a, b, u = rule.band(port)
            lo, hi, until = max(lo, a), min(hi, b), min(until, u)
        if not self.fast:
            lo, hi = INF, -INF
        if self.held or self.cens:
            until = -INF
        self.lo, self.hi, self.until = lo, hi, until
        self.acc = self.slug if self.slug is not None and self.slug.accumulating else None


class CheckEngine:
    """All sites' rules. Not thread-safe: one caller feeds it (the daemon's ingest path, or a replay).

    Rule state lives in memory. After a restart the daemon can rebuild it by feeding a fresh engine the
    recorded samples since the start of the current month (the longest memory: the monthly pH total; a slug
    baseline needs the last 24 h) and recording what it emits: `EpisodeStore.record` ignores transitions
    already stored.
    """

    def __init__(
        self, *, channels: Iterable[Channel], bindings: Iterable[RuleBinding], fast: bool = True
    ) -> None:
        self.events: list[EpisodeEvent] = []
        self.rejected = 0  # samples older than their channel's last sample
        self.unknown = 0  # samples of channels not in the configuration
        self._procs = {(ch.site, ch.id): Processor(channel=ch, fast=fast, out=self.events) for ch in channels}
        self.rules: list[tuple[RuleBinding, Rule]] = []
        for b in bindings:
            self._attach(b)
        for p in self._procs.values():
            p.rebuild()

    def _attach(self, b: RuleBinding) -> None:
        rule = CHECKS[b.rule](binding=b, out=self.events)
        self.rules.append((b, rule))
        procs = [self._procs[(b.site, ch)] for ch in b.inputs]
        for port, proc in enumerate(procs):
            proc.rules.append((rule, port))
            if isinstance(rule, SlugDetector) and len(b.inputs) == 1:
                proc.slug = rule
            for other in procs:
                if other not in proc.linked:
                    proc.linked.append(other)

    @classmethod
    def for_config(cls, config: SiteConfig, *, fast: bool = True) -> CheckEngine:
        """The engine for every site of a loaded configuration (rules as `config.rules` compiled them)."""
        return cls(channels=config.channels, bindings=[b for s in config.sites for b in s.checks], fast=fast)

    def inputs(self, site: str) -> Mapping[str, Processor]:
        """Channel id → processor for one site: the replay's direct path (same code as `process`)."""
        return {ch: p for (s, ch), p in self._procs.items() if s == site}

    def process(self, sample: Sample) -> list[EpisodeEvent]:
        """Judge one sample; returns the transitions it caused (usually none)."""
        return self.process_many((sample,))

    def process_many(self, samples: Iterable[Sample]) -> list[EpisodeEvent]:
        """Judge samples in order; returns the transitions they caused, in emission order (usually none).
        The daemon's path: one call per batch, not per sample."""
        procs = self._procs
        for s in samples:
            proc = procs.get((s.site, s.channel))
            if proc is None:
                self.unknown += 1
                continue
            if (s.quality is GOOD or s.quality is OVER_RANGE) and s.value is not None:
                rejected = proc.good(s.time, float(s.value))  # over range: judged (censored) or refused there
            else:  # a good sample without a value breaks the Sample contract: judge it as undecodable
                rejected = proc.bad(s.time, s.quality.value if s.quality is not GOOD else "decode_error")
            if rejected:
                self.rejected += 1
        return self.drain()

    def drain(self) -> list[EpisodeEvent]:
        """Events emitted since the last drain, in emission order."""
        if not self.events:
            return []
        out = self.events[:]
        self.events.clear()
        return out

    def open_episodes(self) -> Sequence[tuple[str, str, str]]:
        """(site, channel, rule) of every episode open now; for health pages and tests."""
        return [(b.site, b.channel, b.rule) for b, r in self.rules if r.active()]
