"""Tamper and failure signs: data-quality episodes that say the readings may not be the process's.

Each is a pattern a real probe, meter or sampler does not make on its own, but a fouled, disconnected, stuck or
tampered-with one does. They are data-quality episodes (`config.rules.DATA_QUALITY_RULES`): they cite
`config.rules.DATA_QUALITY_CITATION`, are kept apart from discharge exceedances, and raise low-priority alarms
by default. They are opt-in per site (``[site.rules.<rule>]``), every parameter explicit there or at the
default stated below; each judges sample times only, so live and replay agree.

- ``ph_frozen`` (inputs: the pH channel, the flow channel): ``readings`` (default 60) successive good pH
  readings identical to the last digit while the flow varies (its good readings since the first of them are not
  all equal). A live pH probe in a flowing stream always moves in its last digit; one that does not while the
  flow changes is stuck, out of the water, or replaced by a fixed signal. Starts at the first reading of the
  run (onset), ``confirmed`` when both conditions hold; ends at the first different pH reading, or at a gap in
  the pH readings (``gap``). Value: the frozen reading; limit: ``readings``.
- ``offset_step`` (the pH channel): the level right after an excursion differs from the level right before it
  by at least ``step`` (default 0.5 pH). The level before is the mean of the last ``readings`` (default 10)
  good readings within the pH range in force before the first reading outside it; the level after, the mean of
  the first ``readings`` good readings back within the range (a reading outside it meanwhile continues the
  excursion). A probe re-zeroed, swapped or moved right after an excursion shows this step. The episode spans
  those ``readings`` readings after the excursion: it starts at the first of them (confirmed at the last) and
  ends at the last. Value: the step (after − before, in pH); limit: ``step``. A gap anywhere forgets the
  levels (what happened in it is unknown).
- ``flow_zero_sampling`` (inputs: the flow channel, the sampler's count): the sampler's count rises
  ``samples`` times (default 2) while the flow reads at or below ``zero`` (default 0.0, the flow's unit). A
  flow-paced sampler takes samples because flow passes it: a flow meter reading zero meanwhile is disconnected
  or lying. Starts at the first counted sample (onset), confirmed at the ``samples``-th; ends at the first good
  flow reading above ``zero``, or at a gap in the flow readings. Named after the flow channel. A bad flow
  reading changes nothing; a rise of the count across a gap in the count is not counted.
- ``span_pinned`` (any channel with ``valid_min`` and ``valid_max``): ``readings`` (default 10) successive good
  readings at the span limit (``at``: ``high``, ``low`` or ``both``; within ``tolerance``, default 0, of
  ``valid_max`` / ``valid_min``). A transmitter saturated or forced to its range end reads the limit exactly;
  the process rarely does. Over-range readings judged as ``valid_max`` count. Starts at the first reading of the
  run (onset), confirmed at the ``readings``-th; ends at the first reading off the limit, or at a gap.
  The default ``at`` is ``high`` for flow, totaliser, LEL, sampler and concentration channels (zero flow at
  night and 0 % LEL are normal) and ``both`` otherwise.
"""

from __future__ import annotations

import math
from collections import deque

from config.rule_catalogue import RuleName
from config.rule_model import FrozenParams, OffsetStepParams, PinnedParams, ZeroFlowParams
from config.rules import RuleBinding
from monitor.checks.base import EMPTY, FULL, INF, VIOLATES, Band, Rule
from monitor.checks.events import EpisodeEvent


class PhFrozen(Rule):
    """``ph_frozen``: port 0 the pH channel, port 1 the flow channel."""

    __slots__ = ("fhi", "flo", "needed", "prev", "run", "since")
    runs = (RuleName.PH_FROZEN,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.needed = binding.typed(FrozenParams).readings
        self.prev: float | None = None
        self.run = 0  # identical readings so far, capped at `needed`
        self.since = 0.0  # time of the run's first reading
        self.flo, self.fhi = INF, -INF  # range of the flow's good readings since `since`
        self.is_open = False

    def good(self, t: float, v: float, port: int) -> None:
        if port == 1:
            self.flo, self.fhi = min(self.flo, v), max(self.fhi, v)
        elif v == self.prev:
            self.run = min(self.run + 1, self.needed)
        else:
            if self.is_open:
                self.is_open = False
                self.end(t, v, float(self.needed), None)
            self.prev, self.run, self.since = v, 1, t
            self.flo, self.fhi = INF, -INF
        if not self.is_open and self.run >= self.needed and self.fhi > self.flo:
            self.is_open = True
            self.start(self.since, self.prev, float(self.needed), confirmed=t)

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if port == 1:  # the flow's variation seen so far stays seen; the pH readings are still measured
            return
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, float(self.needed), None)
        self.prev, self.run = None, 0

    def band(self, port: int) -> Band:
        if self.is_open:
            return (self.prev, self.prev, INF) if port == 0 and self.prev is not None else FULL
        if port == 1:
            return (self.flo, self.fhi, INF) if self.run > 0 and self.fhi >= self.flo else EMPTY
        return EMPTY


class OffsetStep(Rule):
    """``offset_step`` on one pH channel."""

    __slots__ = ("after", "before", "hi_op", "high", "lo_op", "low", "needed", "onset", "pre", "state", "step")
    runs = (RuleName.OFFSET_STEP,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(OffsetStepParams)
        self.needed, self.step = p.readings, p.step
        self.low, self.lo_op = p.min, p.min_operator
        self.high, self.hi_op = p.max, p.max_operator
        self.pre: deque[float] = deque(maxlen=self.needed)  # last in-range readings before an excursion
        self.before: float | None = None  # the level before the current excursion
        self.after: list[float] = []  # in-range readings since the excursion ended
        self.state = "normal"  # normal | excursion | after
        self.onset = 0.0
        self.is_open = False

    def _outside(self, v: float) -> bool:
        return VIOLATES[self.lo_op](v, self.low) or VIOLATES[self.hi_op](v, self.high)

    def good(self, t: float, v: float, port: int) -> None:
        if self._outside(v):
            if self.state == "normal":
                self.before = sum(self.pre) / len(self.pre) if len(self.pre) == self.needed else None
            self.state, self.after = "excursion", []
            return
        if self.state == "normal":
            self.pre.append(v)
            return
        if self.state == "excursion":
            self.state, self.onset = "after", t
        self.after.append(v)
        if len(self.after) < self.needed:
            return
        level = sum(self.after) / len(self.after)
        if self.before is not None and abs(level - self.before) >= self.step:
            diff = level - self.before
            self.start(self.onset, diff, self.step, confirmed=t)
            self.end(t, diff, self.step, None)
        self.state = "normal"
        self.pre = deque(self.after, maxlen=self.needed)
        self.after = []

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        self.state, self.before, self.after = "normal", None, []
        self.pre.clear()

    def band(self, port: int) -> Band:
        return EMPTY  # every reading moves the levels


class FlowZeroSampling(Rule):
    """``flow_zero_sampling``: port 0 the flow channel, port 1 the sampler's count."""

    __slots__ = ("count", "first", "needed", "rises", "zero", "zero_flow")
    runs = (RuleName.FLOW_ZERO_SAMPLING,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(ZeroFlowParams)
        self.needed, self.zero = p.samples, p.zero
        self.zero_flow: bool | None = None  # the last good flow reading was at or below `zero`; None: unknown
        self.count: float | None = None
        self.rises = 0  # samples counted while the flow read zero
        self.first = 0.0
        self.is_open = False

    def good(self, t: float, v: float, port: int) -> None:
        if port == 0:
            zero = v <= self.zero
            if not zero:
                if self.is_open:
                    self.is_open = False
                    self.end(t, v, float(self.needed), None)
                self.rises = 0
            self.zero_flow = zero
            return
        if self.count is not None and v > self.count and self.zero_flow:
            self.rises += 1
            if self.rises == 1:
                self.first = t
            if self.rises == self.needed and not self.is_open:
                self.is_open = True
                self.start(self.first, v, float(self.needed), confirmed=t)
        self.count = v

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if port == 1:
            self.count = None
            return
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, float(self.needed), None)
        self.zero_flow, self.rises = None, 0

    def band(self, port: int) -> Band:
        if port == 1:
            return (self.count, self.count, INF) if self.count is not None else EMPTY
        if self.zero_flow is None:
            return EMPTY
        if self.zero_flow:
            return -INF, self.zero, INF
        return math.nextafter(self.zero, INF), INF, INF


class SpanPinned(Rule):
    """``span_pinned`` on one channel."""

    __slots__ = ("high", "low", "needed", "run", "since")
    runs = (RuleName.SPAN_PINNED,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(PinnedParams)
        self.needed = p.readings
        self.low = p.low + p.tolerance if p.at in ("low", "both") else -INF  # pinned: v <= low
        self.high = p.high - p.tolerance if p.at in ("high", "both") else INF  # pinned: v >= high
        self.run = 0
        self.since = 0.0
        self.is_open = False

    def good(self, t: float, v: float, port: int) -> None:
        if v <= self.low or v >= self.high:
            self.run += 1
            if self.run == 1:
                self.since = t
            if self.run == self.needed:
                self.is_open = True
                self.start(self.since, v, float(self.needed), confirmed=t)
            return
        if self.is_open:
            self.is_open = False
            self.end(t, v, float(self.needed), None)
        self.run = 0

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, float(self.needed), None)
        self.run = 0

    def band(self, port: int) -> Band:
        if self.run == 0:
            return math.nextafter(self.low, INF), math.nextafter(self.high, -INF), INF
        return EMPTY
