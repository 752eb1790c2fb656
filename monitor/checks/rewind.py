"""Judging in time order whatever the arrival order: reading windows, rule-state checkpoints and rewinds.

The episodes recorded live must be the episodes a replay of the stored readings, sorted by time, finds
(README, "Rules"). Readings reach the daemon out of order: a device clock ahead of the daemon's, an instrument
re-sending its buffer after an outage, the wall clock stepped back. So the live engine (`CheckEngine(live=
True)`) keeps, per *group* of channels, what it needs to judge a channel again:

- a **window** of the recent readings of each channel (two ``array('d')``: time and value; a bad sample is a
  NaN value with its quality kept beside it), the last `WINDOW` seconds of sample time, at most `MAX_WINDOW`
  readings a channel (16 B each: a 1-s channel holds 14 KiB);
- **checkpoints** of every rule's state (`Rule.snapshot`) every `CHECKPOINT_EVERY` seconds of sample time,
  with the window positions and the event log position they correspond to;
- the **event log**: the transitions the group emitted since the oldest checkpoint.

A reading older than the group's newest judged reading is inserted into its window at its time; at the end of
the batch the group is restored to the newest checkpoint before the earliest such reading and its windows are
judged again from there, in time order. The cost is the re-judged span (in-band readings take the fast path
there too), never the history. What the second judgement emits is compared with the log: differences become
`Revision`s (`monitor.checks.revisions`). A reading older than the oldest checkpoint is judged by rebuilding
the group from the historian (`CheckEngine.rejudge_from_history`), as a restart's warm-up does.

A group is one channel with its rules, or several channels joined by a rule that reads them all (mass-loading
slug: flow × concentration; ``sampler_interval``: count and flow). Such a rule sees the channels' readings
interleaved, so lateness is judged against the group's newest reading, not the channel's, and the group's
channels are judged again together, merged by (time, channel order in the site file). Their readings take
the slow path always.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import reduce
from operator import add, sub
from typing import Any

from config.schema import Channel
from monitor.checks.base import INF, Rule
from monitor.checks.events import EpisodeEvent
from monitor.checks.revisions import Revision, diff

# `LiveProcessor.state`: last, gt, gv, held, cens, ml, mseg (the gap check, held bad run, censoring, maintenance)
ProcState = tuple[float, float, float, bool, bool, float | None, tuple[tuple[float, float], ...]]
INITIAL_STATE: ProcState = (-INF, -INF, 0.0, False, False, None, ())  # `Processor.__init__`'s

WINDOW = 900.0  # s of sample time kept in memory behind a group's newest reading
MAX_WINDOW = 65_536  # readings per channel at most
CHECKPOINT_EVERY = 300.0  # s of sample time between two checkpoints of a group
CHECKPOINT_READINGS = 2048  # ... or this many readings judged again (a dense flood of late readings)
CHUNK = 512  # window readings `Group._replay_one` tests at once for a quiet stretch
MIN_CHUNK = 16  # ... and no fewer (below that the reading-by-reading loop is as quick)
PAST_EVENTS = 10_000  # transitions kept beyond the log, for a rebuild from the historian
NAN = math.nan
Key = tuple[float, int]  # (time, rank of the channel in the site file)
# one historian reading for a rebuild: (time, value or NaN, quality name or None when good)
HistoryRow = tuple[float, float, str | None]
History = Callable[[str, str, float, float], Iterable[HistoryRow]]


class Checkpoint:
    __slots__ = ("due", "key", "log", "pos", "procs", "state")

    def __init__(self, key: Key, pos: list[int], log: int, state: list[tuple[Any, ...]], due: float,
                 procs: list[tuple[Any, ...]]) -> None:
        self.key = key  # the last reading judged before the checkpoint
        self.pos = pos  # per member: absolute window index of the next reading to judge
        self.log = log  # absolute index into the event log
        self.state = state  # per rule: Rule.snapshot()
        self.due = due  # when the next checkpoint is due
        self.procs = procs  # per member: its processor's judging state (`LiveProcessor.state`)


class Group:
    """The channels a late reading makes the engine judge again, their rules, checkpoints and event log.

    Slotted: `monitor.checks._quietpath` reads ``members`` and ``rank`` and sets ``rank`` (a group member's
    quiet reading, `Group.advance`) at fixed offsets."""

    __slots__ = ("cks", "dirty", "due", "genesis", "log", "log_base", "members", "multi", "nlate", "out", "past",
                 "rank", "rules", "since", "too_old")

    def __init__(self, members: list[Any], rules: list[Rule], out: list[EpisodeEvent]) -> None:
        self.members = members  # LiveProcessor, in rank order
        self.rules = rules
        self.multi = len(members) > 1
        self.out = out
        self.cks: list[Checkpoint] = []
        self.log: list[EpisodeEvent] = []
        self.log_base = 0
        self.past: deque[EpisodeEvent] = deque(maxlen=PAST_EVENTS)
        self.due = -INF  # the first reading takes the first checkpoint
        self.rank = -1  # rank of the newest judged reading (groups of several channels)
        self.dirty: Key | None = None  # earliest late reading since the last rewind
        self.too_old: Key | None = None  # earliest late reading older than every checkpoint
        self.genesis = [r.snapshot() for r in rules]
        self.nlate = 0  # late readings received
        self.since = 0  # readings judged again since the last checkpoint

    # -- checkpoints ---------------------------------------------------------------------------------------
    def checkpoint(self, last: float, pos: list[int], now: float, *, trim: bool) -> None:
        """Snapshot the rules before judging a reading at ``now``; ``last``: the newest reading judged."""
        self.sync()
        self.due = now + CHECKPOINT_EVERY
        self.since = 0
        self.cks.append(Checkpoint((last, self.rank), pos, self.log_base + len(self.log),
                                   [r.snapshot() for r in self.rules], self.due,
                                   [m.state() for m in self.members]))
        if trim:
            self._trim(now)

    def _trim(self, now: float) -> None:
        cks = self.cks
        horizon = now - WINDOW
        drop = 0
        while len(cks) - drop > 1 and cks[drop + 1].key[0] <= horizon:
            drop += 1
        while len(cks) - drop > 1 and any(len(m.wt) > MAX_WINDOW for m in self.members):
            drop += 1
            first = cks[drop].pos
            if all(len(m.wt) - (p - m.base) <= MAX_WINDOW for m, p in zip(self.members, first, strict=True)):
                break
        if not drop:
            return
        del cks[:drop]
        ck = cks[0]
        for m, p in zip(self.members, ck.pos, strict=True):
            m.trim(p)
        k = ck.log - self.log_base
        self.past.extend(self.log[:k])
        del self.log[:k]
        self.log_base = ck.log

    def positions(self) -> list[int]:
        self.sync()
        return [m.base + len(m.wt) for m in self.members]

    def sync(self) -> None:
        """Every member's quiet samples into its window arrays (`LiveProcessor.sync`)."""
        for m in self.members:
            if m.pend:
                m.sync()

    # -- judging ---------------------------------------------------------------------------------------------
    def advance(self, t: float, rank: int) -> None:
        for m in self.members:
            m.glast = t
        self.rank = rank

    def run(self, p: Any, t: float, v: float, q: str | None) -> None:
        """Judge one reading on the slow path and log what it emits."""
        out = self.out
        n = len(out)
        if q is None:
            p.slow_good(t, v)
        else:
            p.judge_bad(t, q)
        if len(out) > n:
            self.log.extend(out[n:])

    def late(self, key: Key) -> None:
        if self.dirty is None or key < self.dirty:
            self.dirty = key

    # -- rewinding -------------------------------------------------------------------------------------------
    def rewind(self) -> list[Revision]:
        """Judge the windows again from the newest checkpoint before the earliest late reading."""
        key, self.dirty = self.dirty, None
        assert key is not None
        self.sync()
        i = bisect_right([c.key for c in self.cks], key) - 1
        if i < 0:
            if self.too_old is None or key < self.too_old:
                self.too_old = key
            return []
        ck = self.cks[i]
        del self.cks[i + 1:]
        k = ck.log - self.log_base
        old = self.log[k:]
        del self.log[k:]
        for r, s in zip(self.rules, ck.state, strict=True):
            r.restore(s)
        for m, st in zip(self.members, ck.procs, strict=True):
            m.put_state(st)
        self.due = ck.due
        self.advance(ck.key[0], ck.key[1])
        n0 = len(self.out)
        for m, p in zip(self.members, ck.pos, strict=True):
            m.cursor = p - m.base
            m.rebuild()
        if self.multi:
            self._replay(self._merged(list(ck.pos)))
        else:
            self._replay_one(self.members[0])
        del self.out[n0:]
        revs = diff(old, self.log[k:], late=key[0], active=self.active())
        if self.too_old is None:
            self._trim(max(m.glast for m in self.members))
        return revs

    def _merged(self, start: list[int]) -> Iterator[tuple[float, int, float, str | None]]:
        """(time, member index, value, quality) from each member's window position on, in (time, rank)
        order; ``member.cursor`` is the window index of the reading yielded (for checkpoints)."""
        if not self.multi:
            m = self.members[0]
            yield from ((t, 0, v, q) for t, v, q in m.tail(start[0] - m.base))
            return
        streams = [_tagged(i, m.tail(p - m.base)) for i, (m, p) in enumerate(zip(self.members, start,
                                                                                  strict=True))]
        yield from heapq.merge(*streams, key=lambda r: (r[0], r[1]))

    def _replay(self, rows: Iterable[tuple[float, int, float, str | None]], *, checkpoints: bool = True) -> None:
        members = self.members
        for t, i, v, q in rows:
            p = members[i]
            self.since += 1
            if checkpoints and (t >= self.due or self.since >= CHECKPOINT_READINGS):
                self.checkpoint(p.glast, [m.base + m.cursor for m in members], t, trim=False)
                for m in members:
                    m.rebuild()
            if self.multi:
                self.advance(t, p.rank)
            else:
                p.glast = t
            if q is None and t < p.until and t - p.last <= p.gap and p.lo <= v <= p.hi:  # `Processor.good`
                p.last = t
                p.gv = v
                acc = p.acc
                if acc is not None:
                    acc.add_quiet(v)
            else:
                self.run(p, t, v, q)
            p.cursor += 1
        for m in members:
            m.rebuild()

    def _replay_one(self, p: Any) -> None:
        """`_replay` for a group of one channel, straight over its window arrays (the common case: a late
        reading 10 minutes old on a 1-s channel judges ~600 readings again, most on the fast path).

        A flood of late readings judges tens of thousands of window readings again a batch, nearly all quiet,
        so the quiet stretches run with the processor's fast-path fields in local variables and the slug
        baseline's minute sum added up locally, in the same order (`SlugDetector.quiet_run`: the same float);
        they are written back before a checkpoint or the slow path reads them."""
        wt, wv, wq, j, n = p.wt, p.wv, p.wq, p.cursor, len(p.wt)
        while j < n:
            # a stretch of quiet readings: `Processor.good`'s fast path, no checkpoint due
            since, due, left = self.since, self.due, CHECKPOINT_READINGS - self.since
            until, gap, lo, hi, last = p.until, p.gap, p.lo, p.hi, p.last
            acc = p.acc
            total = acc.minute_sum if acc is not None else 0.0  # `SlugDetector.add_quiet`, one by one
            j0 = j
            lim = min(n, j + 2 * MIN_CHUNK)  # a short stretch goes reading by reading, no chunk tested
            chunked = False
            while True:
                while j < lim:
                    t = wt[j]
                    if t >= due or j - j0 + 1 >= left:
                        break
                    v = wv[j]
                    if not (t < until and t - last <= gap and lo <= v <= hi):
                        break
                    last = t
                    total += v
                    j += 1
                if j < lim or j == n or chunked:
                    break
                # a long stretch: whole chunks at once while every reading in them is quiet, the same tests made
                # by C loops over the window arrays (times sorted: the first reading at `until` or `due` is
                # found by bisection), then reading by reading again from the first chunk that fails
                chunked, lim = True, n
                end = min(bisect_left(wt, min(until, due), j, n), j0 + left - 1)
                size = 2 * MIN_CHUNK
                while end - j >= MIN_CHUNK:
                    k = min(end, j + size)
                    # no step is longer than the span from `last`; a chunk that short when it can be
                    close = wt[k - 1] - last <= gap
                    if not close:
                        k2 = bisect_right(wt, last + gap, j, k)
                        close = k2 - j >= MIN_CHUNK and wt[k2 - 1] - last <= gap  # (`last + gap` may round up)
                        k = k2 if close else k
                    vs = wv[j:k]
                    total_vs = sum(vs)  # NaN when a bad sample (NaN) is among them
                    if not (lo <= min(vs) and max(vs) <= hi and total_vs == total_vs and wt[j] - last <= gap
                            and (close or max(map(sub, wt[j + 1:k], wt[j:k - 1]), default=-INF) <= gap)):
                        break
                    if acc is not None:
                        total = reduce(add, vs, total)  # one by one, in order: the same float
                    last = wt[k - 1]
                    j = k
                    size = min(2 * size, CHUNK)
            if j > j0:
                p.last = p.glast = last
                p.gv = wv[j - 1]
                self.since = since + (j - j0)
                if acc is not None:
                    acc.quiet_run(total, j - j0)
            if j == n:
                break
            # one reading off the stretch: a checkpoint is due, or it takes the slow path
            t, v = wt[j], wv[j]
            self.since += 1
            if t >= self.due or self.since >= CHECKPOINT_READINGS:
                self.checkpoint(p.glast, [p.base + j], t, trim=False)
                p.rebuild()
            p.glast = t
            if t < p.until and t - p.last <= p.gap and p.lo <= v <= p.hi:  # `Processor.good`'s fast path
                p.last = t
                p.gv = v
                acc = p.acc
                if acc is not None:
                    acc.add_quiet(v)
            else:
                self.run(p, t, v, None if v == v else quality_at(wt, wv, wq, j))
            j += 1
        p.cursor = j
        p.rebuild()

    def active(self) -> dict[tuple[str, str, str], bool]:
        return {(r.site, r.channel, r.rule): r.active() for r in self.rules}

    def rebuild_from(self, key: Key, history: History, start: float) -> list[Revision]:
        """Judge the group again from ``start`` (the rule memory's horizon before ``key``): the historian's
        committed readings before each channel's window, then the windows. Called with the historian
        flushed, so the late readings are among its rows."""
        events = (*self.past, *self.log)
        self.log = []
        self.sync()
        for r, s in zip(self.rules, self.genesis, strict=True):
            r.restore(s)
        self.cks.clear()
        self.due, self.rank = INF, -1
        for m in self.members:
            m.glast = -INF
            m.put_state(INITIAL_STATE)
            m.rebuild()
        n0 = len(self.out)
        streams = []
        for i, m in enumerate(self.members):
            # the historian up to and including the window's first time (a trim may have split the readings of
            # that time), then the window after it
            first = m.wt[0] if len(m.wt) else INF
            upto = math.nextafter(first, INF)
            rest = m.tail(bisect_right(m.wt, first)) if len(m.wt) else iter(())
            streams.append(_chain(_tagged(i, history(m.site, m.channel, start, upto)), _tagged(i, rest)))
        for m in self.members:
            m.cursor = 0
        before: list[float] = []
        self._replay(_last_good(heapq.merge(*streams, key=lambda r: (r[0], r[1])), key[0], before),
                     checkpoints=False)
        # what the late reading can change: the events at or after it, and a gap's end at the last good reading
        # before it (emitted when the reading after the gap was judged)
        # (a duration rule's start is stamped at its onset but decided at its confirmation: it is compared by
        # the latter, `_decided`)
        cut = min(before, default=key[0])
        old = [e for e in events if _decided(e) >= cut]
        kept = [e for e in events if _decided(e) < cut]  # not revised: the record keeps them
        new = self.out[n0:]
        del self.out[n0:]
        self.past.clear()
        self.past.extend(kept)
        self.log = [e for e in new if _decided(e) >= cut]
        self.log_base = 0
        last = max(m.glast for m in self.members)
        self.checkpoint(last, self.positions(), last, trim=False)
        for m in self.members:
            m.rebuild()
        return diff(old, self.log, late=key[0], active=self.active())


def _decided(e: EpisodeEvent) -> float:
    """When an event was decided: its confirmation for a duration rule's start (stamped at the onset), else its
    time."""
    return e.time if e.confirmed is None else e.confirmed


def _last_good(rows: Iterable[tuple[float, int, float, str | None]], late: float,
               out: list[float]) -> Iterator[tuple[float, int, float, str | None]]:
    """``rows`` unchanged; ``out`` gets, per member that has one, the time of its last good reading before
    ``late`` (a gap's end can be there)."""
    last: dict[int, float] = {}
    for r in rows:
        if r[0] < late and r[3] is None and r[2] == r[2]:
            last[r[1]] = r[0]
        yield r
    out.extend(last.values())


def _tagged(i: int, rows: Iterable[HistoryRow]) -> Iterator[tuple[float, int, float, str | None]]:
    for t, v, q in rows:
        yield t, i, v, q


def _chain(*its: Iterable[tuple[float, int, float, str | None]]) -> Iterator[tuple[float, int, float, str | None]]:
    for it in its:
        yield from it


def window_tail(wt: array[float], wv: array[float], wq: dict[float, list[str]],
                i: int) -> Iterator[HistoryRow]:
    """A channel window's readings from index ``i``: (time, value, None) for a good reading, (time, NaN,
    quality) for a bad one (a time's qualities are kept in arrival order; a good NaN is judged as the
    ``bad_value`` it is)."""
    used: dict[float, int] = {}
    for j in range(i, len(wt)):
        t, v = wt[j], wv[j]
        if v == v:
            yield t, v, None
            continue
        k = used.get(t)
        if k is None:
            k, b = 0, j - 1
            while b >= 0 and wt[b] == t:
                k += wv[b] != wv[b]
                b -= 1
        qs = wq.get(t)
        used[t] = k + 1
        yield t, v, (qs[k] if qs is not None and k < len(qs) else "bad_value")


def quality_at(wt: array[float], wv: array[float], wq: dict[float, list[str]], j: int) -> str:
    """The quality of the bad sample at window index ``j`` (the k-th NaN at its time has the k-th quality)."""
    t, k, b = wt[j], 0, j - 1
    while b >= 0 and wt[b] == t:
        k += wv[b] != wv[b]
        b -= 1
    qs = wq.get(t)
    return qs[k] if qs is not None and k < len(qs) else "bad_value"


def trim_window(wt: array[float], wv: array[float], wq: dict[float, list[str]], k: int) -> None:
    """Drop the first ``k`` readings, and the qualities of the bad ones among them."""
    if k <= 0:
        return
    if not wq:  # no bad sample in the window: nothing to account for
        del wt[:k]
        del wv[:k]
        return
    dropped: dict[float, int] = {}
    for j in range(k):
        if wv[j] != wv[j]:
            dropped[wt[j]] = dropped.get(wt[j], 0) + 1
    del wt[:k]
    del wv[:k]
    for t, n in dropped.items():
        qs = wq.get(t)
        if qs is not None:
            del qs[:n]
            if not qs:
                del wq[t]


def channel_rank(channels: Iterable[Channel]) -> dict[tuple[str, str], int]:
    """The order of channels in the site file: how readings of one time are ordered across channels (the
    order `pretreat audit` and a restart's warm-up merge them in)."""
    return {(c.site, c.id): i for i, c in enumerate(channels)}
