"""Slug loads: more than 5 × the average of normal operation, sustained for longer than 15 minutes.

The baseline (Southeast § 112-5A(1)(j), Mineola § 46.2(24)) is the mean of the channel's good readings over
the trailing 24 hours *of normal operation*: readings taken while a slug candidate or episode is open are left
out, so a slug never inflates its own baseline. It is kept as per-minute sums in a ring of ``window / 60``
buckets (three arrays of 8-byte numbers: 24 B per minute, 34,560 B for 24 h, whatever the sample rate). For a
reading in minute *m* the baseline is the mean over the complete minutes *m - 1440 … m - 1*, so it changes
once a minute, and there is none (so no slug) until the channel's first reading is at least a full window old.
Vestal words the rule against a fixed "normal sewage" strength instead: the binding then carries ``baseline``
and no ring is used.

A reading above multiplier × baseline opens a *candidate* and freezes the threshold; the candidate continues
while every good reading stays above the frozen threshold; the first reading once it has lasted longer than
the duration (``>``, or ``>=`` for "for a duration of 15 minutes") starts the episode, and the first reading
at or below the frozen threshold ends candidate or episode. That reading is normal operation again: it
counts.
Mass loading (flow × concentration) runs the same detector on the product of the latest good readings of
both channels, computed whenever either reports; a bad reading of either leaves no product until it recovers.
"""

from __future__ import annotations

import math
from array import array

from config.rules import RuleBinding
from monitor.checks.base import EMPTY, INF, MARGIN, VIOLATES, Band, Rule
from monitor.checks.events import EpisodeEvent

IDLE, CANDIDATE, EPISODE = 0, 1, 2


class SlugDetector(Rule):
    """The slug state machine on one series of values (a channel's readings, or a derived mass loading)."""

    __slots__ = (
        "above",
        "cand_start",
        "cnts",
        "cur_cnt",
        "cur_min",
        "cur_sum",
        "duration",
        "first_min",
        "fixed",
        "frozen",
        "longer",
        "mins",
        "multiplier",
        "peak",
        "state",
        "strict",
        "sums",
        "thr",
        "wcnt",
        "width",
        "wsum",
    )

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.params
        self.multiplier = float(p["multiplier"])
        self.above = VIOLATES[str(p["operator"])]
        self.strict = str(p["operator"]) == ">"
        self.duration = float(p["duration"])
        self.longer = VIOLATES[str(p["duration_operator"])]
        self.fixed = float(p["baseline"]) if "baseline" in p else None
        self.width = max(1, round(float(p["window"]) / 60.0))  # minutes in the baseline window
        n = self.width if self.fixed is None else 1
        self.sums = array("d", [0.0]) * n
        self.cnts = array("q", [0]) * n
        self.mins = array("q", [-1]) * n  # minute index held by each slot, -1 when empty
        self.wsum, self.wcnt = 0.0, 0  # totals over the slots inside the window
        self.cur_min: int | None = None
        self.cur_sum, self.cur_cnt = 0.0, 0  # the minute in progress (not yet in the window)
        self.first_min = 0
        self.thr = INF  # multiplier × baseline in force for this minute
        self.state = IDLE
        self.cand_start = self.frozen = self.peak = 0.0

    def good(self, t: float, v: float, port: int) -> None:
        self.feed(t, v)

    def feed(self, t: float, v: float) -> None:
        m = int(t // 60.0)
        if m != self.cur_min:
            self._rollover(m)
        if self.state == IDLE:
            if not self.above(v, self.thr):
                self.cur_sum += v
                self.cur_cnt += 1
                return
            self.state, self.cand_start, self.frozen, self.peak = CANDIDATE, t, self.thr, v
        elif self.above(v, self.frozen):
            self.peak = max(self.peak, v)
        else:
            if self.state == EPISODE:
                self.end(t, v, self.frozen, self.peak)
            self.state = IDLE
            self.cur_sum += v
            self.cur_cnt += 1
            return
        if self.state == CANDIDATE and self.longer(t - self.cand_start, self.duration):
            self.state = EPISODE
            self.start(t, v, self.frozen)

    def _rollover(self, m: int) -> None:
        """Close the minute in progress into the ring and drop minutes that left the window."""
        old, w = self.cur_min, self.width
        if old is None:
            self.first_min = m
        elif self.fixed is None:
            slot = old % w
            if self.mins[slot] != -1:  # minute old - w: leaves the window now
                self.wsum -= self.sums[slot]
                self.wcnt -= self.cnts[slot]
            self.mins[slot], self.sums[slot], self.cnts[slot] = old, self.cur_sum, self.cur_cnt
            self.wsum += self.cur_sum
            self.wcnt += self.cur_cnt
            if m - old > w:
                self.mins = array("q", [-1]) * w
                self.wsum, self.wcnt = 0.0, 0
            else:
                for k in range(old - w + 1, m - w):
                    s = k % w
                    if self.mins[s] == k:
                        self.wsum -= self.sums[s]
                        self.wcnt -= self.cnts[s]
                        self.mins[s] = -1
            if m // w != old // w:
                self._resum(m)  # once per window length: no drift from running subtraction
        self.cur_min, self.cur_sum, self.cur_cnt = m, 0.0, 0
        self.thr = self._threshold(m)

    def _resum(self, m: int) -> None:
        live = [i for i in range(self.width) if m - self.width <= self.mins[i] < m]
        self.wsum = math.fsum(self.sums[i] for i in live)
        self.wcnt = sum(self.cnts[i] for i in live)

    def _threshold(self, m: int) -> float:
        if self.fixed is not None:
            return self.multiplier * self.fixed
        if self.first_min > m - self.width or self.wcnt <= 0:
            return INF  # less than a full window of history: no baseline, so no slug
        return self.multiplier * (self.wsum / self.wcnt)

    @property
    def baseline(self) -> float | None:
        return None if self.thr == INF else self.thr / self.multiplier

    @property
    def accumulating(self) -> bool:
        return self.state == IDLE and self.cur_min is not None

    def band(self, port: int) -> Band:
        if self.cur_min is None:
            return EMPTY
        minute_end = (self.cur_min + 1) * 60.0
        if self.state == IDLE:  # in band: the reading only adds to the minute's sum (see Processor)
            return -INF, (self.thr if self.strict else math.nextafter(self.thr, -INF)), minute_end
        lo = math.nextafter(self.frozen, INF) if self.strict else self.frozen
        until = minute_end
        if self.state == CANDIDATE:
            until = min(until, self.cand_start + self.duration - MARGIN)
        return lo, self.peak, until

    def active(self) -> bool:
        return self.state == EPISODE

    def memory_bytes(self) -> int:
        """Bytes held by the baseline ring (the part that scales with the window, not the sample rate)."""
        return sum(a.itemsize * len(a) for a in (self.sums, self.cnts, self.mins))


class LoadingSlug(Rule):
    """Slug on mass loading: port 0 is the flow, port 1 the concentration; events name
    ``flow*concentration``."""

    __slots__ = ("detector", "latest")

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.detector = SlugDetector(binding=binding, out=out)
        self.latest: list[float | None] = [None, None]

    def good(self, t: float, v: float, port: int) -> None:
        self.latest[port] = v
        flow, conc = self.latest
        if flow is not None and conc is not None:
            self.detector.feed(t, flow * conc)

    def bad(self, t: float, quality: str, port: int) -> None:
        self.latest[port] = None  # never a product of a last-good value

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        self.detector.gap(t0, v0, t1, port)  # the detector's episode holds the unmeasured time

    def band(self, port: int) -> Band:
        return EMPTY

    def active(self) -> bool:
        return self.detector.active()
