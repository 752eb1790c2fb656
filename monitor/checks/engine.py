"""The check engine: compiled rule bindings in, samples through, episode transitions out.

`CheckEngine.for_config` builds one `Processor` per configured channel and attaches to it the rules that read
that channel (`config.rules` selected and validated them at load). The daemon calls `CheckEngine.process` with
every sample, good or bad; `pretreat replay` calls the same processors through `CheckEngine.inputs` without
building `Sample` objects. Both paths run the same code, so live and replayed events are identical.

Two modes. The replay engine (``live=False``, `pretreat replay` and `pretreat audit`) takes each channel's
samples in time order: a sample older than the channel's last one is rejected (counted, not judged), as a
replayed row out of order is. The daemon's engine (``live=True``) judges whatever the arrival order: a sample
older than its channel's newest judged one (or, for channels a rule reads together, the group's newest) is a
*late reading*; it is inserted at its time and, at the end of the batch, the group's rules are rewound to a
checkpoint before it and its readings judged again in time order (`monitor.checks.rewind`). What changes in
the record comes out as `Revision`s (`drain_revisions`), so the live episodes stay those of a replay of the
readings sorted by time.

The hot path: a good reading inside the channel's *quiet band* (the intersection of its rules' bands, see
`monitor.checks.base`) and no further than ``max_gap`` from the previous one returns after four comparisons,
or five and `SlugDetector.add_quiet` when a slug baseline is accumulating. Everything else takes the slow path,
which runs every rule and recomputes the band. The daemon's engine runs that test in C where the extension
`monitor.checks._quietpath` is built (setup.py), the same comparisons on the same doubles.
"""

from __future__ import annotations

import math
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

from config.rule_catalogue import RULE_NAMES, RuleName
from config.rules import RuleBinding
from config.schema import Channel, SiteConfig
from monitor.checks import excursion as _excursion
from monitor.checks import quality as _quality
from monitor.checks import tamper as _tamper
from monitor.checks import threshold as _threshold
from monitor.checks.base import CHECKS, INF, Rule
from monitor.checks.coverage import END_GAP, END_MAINTENANCE, close_maintenance
from monitor.checks.events import EpisodeEvent
from monitor.checks.revisions import Revision
from monitor.checks.rewind import (
    Group,
    History,
    HistoryRow,
    Key,
    ProcState,
    channel_rank,
    trim_window,
    window_tail,
)
from monitor.checks.slug import SlugDetector, detector_of
from monitor.sample import GOOD, Quality, Sample

try:  # the quiet in-order readings stepped over in C (setup.py); absent where it could not be built
    from monitor.checks import _quietpath as _native
except ImportError:  # the install had no C compiler or headers: `CheckEngine._process_live` loops in Python
    _native = None  # type: ignore[assignment]

_MAX = sys.float_info.max
# Quiet samples a channel's ``pend`` holds before they are moved into its window arrays (`LiveProcessor.sync`):
# a steady quiet channel is otherwise synced only at its next checkpoint, 5 minutes of readings later, and a
# pending `Sample` costs ~200 bytes and the garbage collector's attention where the arrays cost 16 (1,000 channels
# at 1 s held 60 MB of them); 64 bounds that to ~13 MB there, at one sync (a Python call) per 64 readings.
PEND_MAX = 64
_DEFAULT_HORIZON = 32 * 86_400.0  # s of rule memory before a late reading, unless the caller says (a month)
OVER_RANGE = Quality.OVER_RANGE
MAINTENANCE = Quality.MAINTENANCE.value
# importing a check module registers its checks (`Rule.runs`)
CHECK_MODULES = (_excursion, _quality, _tamper, _threshold)
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

    Maintenance (`monitor.checks.coverage`): ``ml`` is the time of the latest ``maintenance`` sample whose
    stretch is not closed yet (None: none), ``mseg`` the maintenance stretches [a, b) since the last good
    reading (merged when they touch). At the next good reading the gap test leaves their time out, the rules
    hear `Rule.gap` (with ``why``) and then `Rule.maint` for each stretch, before the reading is judged.

    The fast path of `good` is also inlined in `monitor.checks.replay_csv`'s loop (a function call is a
    measurable share of the per-row budget there); the two must stay identical, which the live-vs-replay
    property test checks.
    ``acc`` is the slug detector whose baseline minute an in-band reading adds to (`SlugDetector.add_quiet`;
    None unless it is accumulating).
    """

    __slots__ = ("acc", "cens", "fast", "gap", "gt", "gv", "held", "hi", "last", "linked", "lo", "ml", "mseg", "out",
                 "over", "rules", "slug", "until", "vmax", "vmin")

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
        self.ml: float | None = None
        self.mseg: list[tuple[float, float]] = []
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
        self._close_maintenance(t)
        counted = t - prev > self.gap and prev > -INF
        if counted:
            serviced = sum(b - a for a, b in self.mseg)
            why = END_GAP if t - prev - serviced > self.gap else END_MAINTENANCE
            for rule, port in self.rules:
                rule.why = why
                rule.gap(prev, self.gv, t, port)
            if self.cens:  # the gap's end events are at the censored reading before it
                self._censor(mark)
            mark = len(out)
        if self.mseg:
            for a, b in self.mseg:
                for rule, port in self.rules:
                    rule.maint(a, b, counted, port)
            self.mseg = []
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

    def _close_maintenance(self, t: float) -> None:
        """The pending maintenance sample's stretch ends at ``t`` (the next sample), at most ``max_gap`` long."""
        a = self.ml
        if a is not None:
            self.ml = None
            close_maintenance(self.mseg, a, t, self.gap)

    def _bad(self, t: float, quality: str) -> None:
        if not self.held:
            self.gt, self.held = self.last, True
        self.last = t
        self._close_maintenance(t)
        if quality == MAINTENANCE:
            self.ml = t
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


class LiveProcessor(Processor):
    """A channel of the daemon's engine: `Processor` plus the window of recent readings and late handling.

    The in-order fast path (stepped over in C, `monitor.checks._quietpath`, or inlined in
    `CheckEngine._process_live` without it) costs one ``list.append`` more than the replay's: the `Sample` goes
    to ``pend`` and reaches the window arrays (``wt``/``wv``) in bulk, `sync`, when
    the window is next needed (a reading off the fast path, a late one, a checkpoint, a rewind); a reading
    older than the newest judged one goes to `late`; everything else to `judge` (checkpoints, event log).
    Lateness is decided against ``glast``, the newest time judged in the channel's group (every member's
    ``glast`` moves with a reading of any of them), not against ``last``: ``last`` stays the channel's own
    newest reading, which the gap check (`Processor.slow_good`) measures from, so setting it ahead of the
    rules would hide gaps."""

    __slots__ = ("base", "channel", "cursor", "dirty", "g", "glast", "mhi", "mlo", "pa", "pend", "rank", "site",
                 "ta", "va", "wq", "wt", "wv")

    def __init__(self, *, channel: Channel, fast: bool, out: list[EpisodeEvent], rank: int,
                 dirty: set[Group]) -> None:
        super().__init__(channel=channel, fast=fast, out=out)
        self.site, self.channel, self.rank = channel.site, channel.id, rank
        self.glast = -INF
        self.wt, self.wv = array("d"), array("d")
        self.wq: dict[float, list[str]] = {}  # time -> qualities of the bad samples at that time
        self.ta, self.va = self.wt.append, self.wv.append
        self.pend: list[Sample] = []  # quiet in-order samples not yet in the window arrays (at most PEND_MAX)
        self.pa = self.pend.append
        self.base = 0  # readings trimmed from the front of the window so far
        self.cursor = 0  # window index during a rewind
        self.dirty = dirty  # the engine's groups with late readings to judge at the end of the batch
        self.g: Group
        self.mlo, self.mhi = INF, -INF  # `good`'s band for a member of a group of several channels (`rebuild`)

    def good(self, t: float, v: float) -> bool:
        if t < self.glast:
            self.late(t, v, None)
            return False
        if t < self.until and t - self.last <= self.gap:  # `Processor.good`'s fast path
            if self.lo <= v <= self.hi:
                self.glast = t
            elif self.mlo <= v <= self.mhi and (t > self.glast or self.rank >= self.g.rank):
                # a member of a group of several channels (a flow meter and the sampler count it paces): quiet
                # inside every rule's band, and in the group's order as `judge` has it (after the group's newest
                # reading, or at the same time and not before it in the site file: one poll's readings share
                # their time); the group's time moves for every member (`Group.advance`), so a later reading of
                # another member that is older is late, as on the slow path. The C path takes these too (their
                # ``lo``/``hi`` are empty, `rebuild`, so it tests ``mlo``/``mhi`` and the ranks as here).
                self.g.advance(t, self.rank)
            else:
                self.judge(t, v, None)
                return False
            self.last = t
            self.gv = v
            if self.pend:
                self.sync()
            self.ta(t)
            self.va(v)
            acc = self.acc
            if acc is not None:
                acc.add_quiet(v)
            return False
        self.judge(t, v, None)
        return False

    def bad(self, t: float, quality: str) -> bool:
        if t < self.glast:
            self.late(t, math.nan, quality)
        else:
            self.judge(t, math.nan, quality)
        return False

    def judge(self, t: float, v: float, q: str | None) -> None:
        """An in-order reading off the fast path: checkpoint if due, window, rules, event log."""
        g = self.g
        if g.multi and t == self.glast and self.rank < g.rank:
            self.late(t, v, q)  # same time as a reading of a channel after this one in the site file
            return
        if t >= g.due:
            g.checkpoint(self.glast, g.positions(), t, trim=g.dirty is None and g.too_old is None)
        if g.multi:
            g.advance(t, self.rank)
        else:
            self.glast = t
        if self.pend:
            self.sync()
        self.ta(t)
        self.va(v)
        if v != v:
            q = q or "bad_value"
            self.wq.setdefault(t, []).append(q)
        g.run(self, t, v, q)

    def state(self) -> ProcState:
        """`Processor`'s own judging state (gap check, held bad run, censoring, maintenance stretches), for the
        group's checkpoints."""
        return (self.last, self.gt, self.gv, self.held, self.cens, self.ml, tuple(self.mseg))

    def put_state(self, st: ProcState) -> None:
        self.last, self.gt, self.gv, self.held, self.cens, self.ml, mseg = st
        self.mseg = list(mseg)

    def judge_bad(self, t: float, quality: str) -> None:
        self._bad(t, quality)

    def late(self, t: float, v: float, q: str | None) -> None:
        g = self.g
        g.nlate += 1
        key = (t, self.rank)
        valid = bool(g.cks) and key >= g.cks[0].key
        if self.pend:
            self.sync()
        if valid or (len(self.wt) and t >= self.wt[0]):  # else the historian has it for the rebuild
            i = bisect_right(self.wt, t)
            self.wt.insert(i, t)
            self.wv.insert(i, v)
            if v != v:
                self.wq.setdefault(t, []).append(q or "bad_value")
        if not valid:  # older than every checkpoint: rebuilt from the historian
            if g.too_old is None or key < g.too_old:
                g.too_old = key
            self.dirty.add(g)  # (the engine's `_rewind` notes it as waiting for the historian)
            return
        g.late(key)
        self.dirty.add(g)

    def sync(self) -> None:
        """Move the quiet samples of ``pend`` into the window arrays (in order: they are newer than any reading
        there, and nothing is added to the arrays while ``pend`` holds samples)."""
        pend = self.pend
        if pend:
            # `fromlist`: `extend` takes a list item by item through the iterator protocol, ~4x slower
            self.wt.fromlist([s.time for s in pend])
            self.wv.fromlist([s.value for s in pend])  # type: ignore[misc]  # the fast path took only values
            pend.clear()

    def tail(self, i: int) -> Iterator[HistoryRow]:
        self.sync()
        return window_tail(self.wt, self.wv, self.wq, i)

    def trim(self, pos: int) -> None:
        self.sync()
        k = pos - self.base
        trim_window(self.wt, self.wv, self.wq, k)
        self.base = pos

    def rebuild(self) -> None:
        super().rebuild()
        g = self.g
        if g.multi:  # the band for `good`'s quiet path of a group member; none for the one-channel paths
            self.mlo, self.mhi = self.lo, self.hi
            self.lo, self.hi = INF, -INF
        else:
            self.mlo, self.mhi = INF, -INF
        if g.due < self.until:
            self.until = g.due


if _native is not None:  # where the two classes keep the fields the C path reads
    _native.bind(Sample, LiveProcessor, Group, PEND_MAX)


class CheckEngine:
    """All sites' rules. Not thread-safe: one caller feeds it (the daemon's ingest path, or a replay).

    Rule state lives in memory. After a restart the daemon can rebuild it by feeding a fresh engine the
    recorded samples since the start of the current month (the longest memory: the monthly pH total; a slug
    baseline needs the last 24 h) and recording what it emits: `EpisodeStore.record` ignores transitions
    already stored.
    """

    def __init__(
        self, *, channels: Iterable[Channel], bindings: Iterable[RuleBinding], fast: bool = True,
        live: bool = False, horizon: Callable[[float], float] | None = None,
    ) -> None:
        self.events: list[EpisodeEvent] = []
        self.revisions: list[Revision] = []
        self.rejected = 0  # replay: samples older than their channel's last sample
        self.unknown = 0  # samples of channels not in the configuration
        self.rewinds = 0  # live: rewinds (one per group and batch with late readings)
        self.revised = 0  # live: revisions emitted
        self.retractions = 0  # live: revisions withdrawing an announced episode
        self.rebuilt = 0  # live: rebuilds from the historian (a reading older than the window)
        self.live = live
        self.horizon = horizon or (lambda t: t - _DEFAULT_HORIZON)
        self._dirty: set[Group] = set()
        # the groups whose ``too_old`` is set (noted by `_rewind` at the end of each batch), so that the
        # daemon's look after every batch (`waiting_for_history`) is not a walk over every group: 540 us at
        # 10,000 channels, where judging a batch of 250 quiet readings takes 76 us
        self._too_old: set[Group] = set()
        channels = list(channels)
        self._live: dict[tuple[str, str], LiveProcessor] = {}
        if live:
            rank = channel_rank(channels)
            self._live = {(ch.site, ch.id): LiveProcessor(channel=ch, fast=fast, out=self.events,
                                                          rank=rank[(ch.site, ch.id)], dirty=self._dirty)
                          for ch in channels}
            self._procs: dict[tuple[str, str], Processor] = dict(self._live)
        else:
            self._procs = {(ch.site, ch.id): Processor(channel=ch, fast=fast, out=self.events) for ch in channels}
        self.rules: list[tuple[RuleBinding, Rule]] = []
        for b in bindings:
            self._attach(b)
        self.groups: list[Group] = self._groups() if live else []
        for p in self._procs.values():
            p.rebuild()

    def _groups(self) -> list[Group]:
        """Channels joined by rules reading several of them, each with the rules of its channels."""
        seen: set[int] = set()
        groups: list[Group] = []
        for p in self._procs.values():
            if id(p) in seen:
                continue
            members, todo = [], [p]
            while todo:
                q = todo.pop()
                if id(q) in seen:
                    continue
                seen.add(id(q))
                members.append(q)
                todo += [o for o in q.linked if id(o) not in seen]
            live = sorted((m for m in members if isinstance(m, LiveProcessor)), key=lambda m: m.rank)
            rules: dict[int, Rule] = {}
            for m in live:
                for r, _port in m.rules:
                    rules.setdefault(id(r), r)
            g = Group(live, list(rules.values()), self.events)
            for m in live:
                m.g = g
            groups.append(g)
        return groups

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
    def for_config(cls, config: SiteConfig, *, fast: bool = True, live: bool = False,
                   horizon: Callable[[float], float] | None = None) -> CheckEngine:
        """The engine for every site of a loaded configuration (rules as `config.rules` compiled them)."""
        return cls(channels=config.channels, bindings=[b for s in config.sites for b in s.checks], fast=fast,
                   live=live, horizon=horizon)

    def inputs(self, site: str) -> Mapping[str, Processor]:
        """Channel id → processor for one site: the replay's direct path (same code as `process`)."""
        return {ch: p for (s, ch), p in self._procs.items() if s == site}

    def process(self, sample: Sample) -> list[EpisodeEvent]:
        """Judge one sample; returns the transitions it caused (usually none)."""
        return self.process_many((sample,))

    def process_many(self, samples: Iterable[Sample]) -> list[EpisodeEvent]:
        """Judge samples in order; returns the transitions they caused, in emission order (usually none).
        The daemon's path: one call per batch, not per sample."""
        if self.live:
            return self._process_live(samples)
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
        if self._dirty:
            self._rewind()
        return self.drain()

    def _process_live(self, samples: Iterable[Sample]) -> list[EpisodeEvent]:
        """`process_many` of the daemon's engine. The quiet in-order readings are stepped over in C where the
        extension is built (`monitor.checks._quietpath`: `LiveProcessor.good`'s fast path, the same comparisons),
        which hands back each sample Python must judge; without it, `LiveProcessor.good`'s fast path is inlined
        here: an in-order quiet reading costs one list append (its window, `LiveProcessor.sync`) and no method
        call. bench/bench_late.py measures both against the replay engine."""
        procs = self._live
        native = _native
        if native is not None:
            seq = samples if isinstance(samples, list | tuple) else list(samples)
            n, run = len(seq), native.run
            i = run(seq, 0, procs, GOOD, OVER_RANGE)
            while i < n:
                self._judge_live(seq[i])
                i = run(seq, i + 1, procs, GOOD, OVER_RANGE)
        else:
            for s in samples:
                p = procs.get((s.site, s.channel))
                if p is None:
                    self.unknown += 1
                    continue
                q, v = s.quality, s.value
                if (q is GOOD or q is OVER_RANGE) and v is not None:
                    t = s.time
                    v = float(v)
                    if p.glast <= t < p.until and t - p.last <= p.gap and p.lo <= v <= p.hi and \
                            len(p.pend) < PEND_MAX:  # `LiveProcessor.good`'s fast path, `pend` not full
                        p.last = p.glast = t
                        p.gv = v
                        p.pa(s)
                        acc = p.acc
                        if acc is not None:
                            acc.add_quiet(v)
                        continue
                    p.good(t, v)
                else:  # a good sample without a value breaks the Sample contract: judge it as undecodable
                    p.bad(s.time, q.value if q is not GOOD else "decode_error")
        if self._dirty:
            self._rewind()
        return self.drain()

    def _judge_live(self, s: Sample) -> None:
        """One sample the C path left to Python (`_process_live`)."""
        p = self._live.get((s.site, s.channel))
        if p is None:
            self.unknown += 1
        elif (s.quality is GOOD or s.quality is OVER_RANGE) and s.value is not None:
            p.good(s.time, float(s.value))
        else:  # a good sample without a value breaks the Sample contract: judge it as undecodable
            p.bad(s.time, s.quality.value if s.quality is not GOOD else "decode_error")

    def _rewind(self) -> None:
        """Judge again the groups that received late readings in this batch."""
        for g in self._dirty:
            if g.too_old is not None:  # the rebuild from the historian judges it all again
                g.dirty = None
                self._too_old.add(g)
                continue
            self.rewinds += 1
            self._revised(g.rewind())
            if g.too_old is not None:  # the rewind found no checkpoint before it
                self._too_old.add(g)
        self._dirty.clear()

    def _revised(self, revs: list[Revision]) -> None:
        self.revised += len(revs)
        self.retractions += sum(r.retraction for r in revs)
        self.revisions.extend(revs)

    @property
    def waiting_for_history(self) -> bool:
        """Late readings older than the window wait for `rejudge_from_history`."""
        return bool(self._too_old)

    def take_waiting(self) -> list[tuple[Group, Key]]:
        """The groups waiting for the historian, each with its earliest late reading, taken now (in the groups'
        order, not the set's). The daemon takes them before it flushes the historian: late readings that arrive
        while the flush is awaited are not among the rows it commits, so they wait for the next rebuild
        instead of joining one that cannot read them (which would judge a gap where they are, and leave the
        gap's end in the record when the next rebuild starts after it)."""
        waiting = self._too_old
        out: list[tuple[Group, Key]] = []
        for g in self.groups:
            if g not in waiting:
                continue
            if g.too_old is not None:
                out.append((g, g.too_old))
            g.too_old = None
        waiting.clear()
        return out

    def put_back(self, taken: Sequence[tuple[Group, Key]]) -> None:
        """Groups `take_waiting` took and could not rebuild (the historian could not be flushed): waiting again."""
        for g, key in taken:
            g.too_old = key if g.too_old is None else min(key, g.too_old)
            self._too_old.add(g)

    def rejudge_from_history(self, history: History, taken: Sequence[tuple[Group, Key]] | None = None) -> None:
        """Judge again, from the historian, the groups that got a reading older than their window.

        ``history(site, channel, start, end)`` yields the committed readings of [start, end) in time order;
        the daemon calls this once the historian has committed the late readings (`Daemon._deliver_verdicts`),
        with the groups it took before that commit (`take_waiting`; None: those waiting now). Each group
        restarts from its rules' initial state at `horizon` before the late reading (as a restart's warm-up
        does) and is judged up to its newest reading."""
        for g, key in self.take_waiting() if taken is None else taken:
            self.rebuilt += 1
            self._revised(g.rebuild_from(key, history, self.horizon(key[0])))

    def drain_revisions(self) -> list[Revision]:
        """Revisions emitted since the last call, in order (each after the events of its batch)."""
        out, self.revisions = self.revisions, []
        return out

    def counters(self) -> dict[str, int]:
        """For the health snapshot and `pretreat status`."""
        return {"late": sum(g.nlate for g in self.groups), "rewinds": self.rewinds, "revisions": self.revised,
                "retractions": self.retractions, "rebuilt_from_history": self.rebuilt,
                "rejected": self.rejected, "unknown": self.unknown}

    def drain(self) -> list[EpisodeEvent]:
        """Events emitted since the last drain, in emission order."""
        if not self.events:
            return []
        out = self.events[:]
        self.events.clear()
        return out

    def open_episodes(self) -> Sequence[tuple[str, str, str]]:
        """(site, channel, rule) of every episode open now, the slug's ``slug_no_baseline`` notice included (the
        warm-up's reconciliation keeps an alarm active only while its episode is open here); for health pages,
        the restart and tests."""
        out = [(b.site, b.channel, b.rule) for b, r in self.rules if r.active()]
        for b, r in self.rules:
            det = detector_of(r)
            if det is not None and det.notice_open:
                out.append((b.site, b.channel, RuleName.SLUG_NO_BASELINE.value))
        return out
