"""The shape every check shares: explicit state, events out, and a *quiet band* that lets the hot path skip
work.

A rule is a small object with explicit state (style rule 8): ``good(t, v, port)`` for a good reading,
``bad(t, quality, port)`` for a bad one, events appended to a shared list. No rule reads a clock: only sample
times, so a live run and a replay of the same samples produce the same events.

``band(port) -> (lo, hi, until)`` is the rule's promise: a good, valid reading ``v`` at time ``t`` with
``lo <= v <= hi`` and ``t < until`` changes none of its state and emits nothing. The engine intersects the
bands of all rules on a channel and skips them entirely for such readings (pH at 7.2 with no excursion open
costs two comparisons), which is what lets `pretreat replay` run near the speed of reading the CSV.
Correctness never depends on the band: a band that is too narrow only costs time, and the test suite runs
every case with the band disabled and compares.

``gap(t0, v0, t1, port)`` tells a rule that the good readings at ``t0`` (value ``v0``) and ``t1`` of input
``port`` are further apart than the channel's ``max_gap`` (`monitor.checks.coverage`); it comes before the
reading at ``t1`` is judged. The default keeps an open episode open and counts the gap as unmeasured time of
it; rules that must not continue across a gap end their episode at ``t0`` with ``end_reason = "gap"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

from config.rule_catalogue import RuleName
from config.rules import RuleBinding
from monitor.checks.coverage import END_CLEARED, END_GAP
from monitor.checks.events import END, START, EpisodeEvent

INF = math.inf
EMPTY = (INF, -INF, -INF)  # no reading is quiet
FULL = (-INF, INF, INF)  # every reading is quiet
MARGIN = 1e-3  # s: deadlines are pulled in by this much so float rounding can never skip a due transition
SENSOR_FAULT_QUALITIES = frozenset(
    {"out_of_range", "bad_value", "device_exception", "decode_error", "device_fault"}
)
Band = tuple[float, float, float]

VIOLATES: dict[str, Callable[[float, float], bool]] = {
    "<": lambda v, lim: v < lim,
    "<=": lambda v, lim: v <= lim,
    ">": lambda v, lim: v > lim,
    ">=": lambda v, lim: v >= lim,
}


def complies_band(op: str, limit: float) -> tuple[float, float]:
    """The closed interval of readings that do not violate ``reading OP limit``."""
    if op == "<":
        return limit, INF
    if op == "<=":
        return math.nextafter(limit, INF), INF
    if op == ">":
        return -INF, limit
    return -INF, math.nextafter(limit, -INF)


def violates_band(op: str, limit: float) -> tuple[float, float]:
    """The closed interval of readings that violate ``reading OP limit``."""
    if op == "<":
        return -INF, math.nextafter(limit, -INF)
    if op == "<=":
        return -INF, limit
    if op == ">":
        return math.nextafter(limit, INF), INF
    return limit, INF


CHECKS: dict[str, Callable[..., Rule]] = {}  # rule name -> how to build its check (filled by `Rule.runs`)


class Rule:
    """Base class: identity of the events and the default reactions (ignore bad samples, always quiet).

    ``runs`` names the catalogue rules (`config.rule_catalogue`) a subclass checks: defining the class registers
    its `build` for them in `CHECKS`, where the engine looks them up. ``is_open`` is True while an episode is
    open, for the rules whose state is that one flag (others override `active`)."""

    __slots__ = ("channel", "citation", "hole", "is_open", "opened", "out", "rule", "site")
    runs: ClassVar[tuple[RuleName, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.__dict__.get("runs", ()):
            if name.value in CHECKS:
                raise TypeError(f"two checks run the rule {name.value}")
            CHECKS[name.value] = cls.build

    @classmethod
    def build(cls, *, binding: RuleBinding, out: list[EpisodeEvent]) -> Rule:
        """The check for ``binding`` (a rule with several shapes picks its class here)."""
        return cls(binding=binding, out=out)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        self.is_open = False
        self.site = binding.site
        self.channel = binding.channel
        self.rule = binding.rule
        self.citation = binding.citation
        self.out = out
        self.opened = 0.0  # time of the open episode's start
        self.hole = 0.0  # unmeasured seconds inside the open episode so far

    def good(self, t: float, v: float, port: int) -> None:
        """A good reading of input ``port`` (index into the binding's inputs)."""

    def bad(self, t: float, quality: str, port: int) -> None:
        """A bad sample: discharge rules ignore it (it neither starts, ends nor interrupts an episode)."""

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        """A gap between the good readings at ``t0`` and ``t1``: by default the open episode spans it."""
        if self.active():
            self.hole += t1 - max(t0, self.opened)

    def band(self, port: int) -> Band:
        return FULL

    def active(self) -> bool:
        """True while an episode of this rule is open (started, not yet ended)."""
        return self.is_open

    def start(self, t: float, value: float | None, limit: float | None, confirmed: float | None = None) -> None:
        """``t`` is the onset; ``confirmed`` (duration rules) the moment the duration was exceeded. The
        episode's span (and its measured/unmeasured split) runs from the onset."""
        self.opened, self.hole = t, 0.0
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, START, value, limit, self.citation,
                         confirmed=confirmed)
        )

    def end(self, t: float, value: float | None, limit: float | None, peak: float | None,
            reason: str = END_CLEARED, coverage: tuple[float, float] | None = None) -> None:
        """The end transition. ``coverage`` (measured, unmeasured seconds) defaults to the span since `start`
        split by the gaps counted in it."""
        if coverage is None:
            unmeasured = min(self.hole, t - self.opened)
            coverage = (t - self.opened - unmeasured, unmeasured)
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, END, value, limit, self.citation, peak,
                         reason, coverage[0], coverage[1])
        )

    def end_at_gap(self, t0: float, v0: float, limit: float | None, peak: float | None) -> None:
        """End the open episode at the last reading before a gap (``end_reason = "gap"``)."""
        self.end(t0, v0, limit, peak, END_GAP)
