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
"""

from __future__ import annotations

import math
from collections.abc import Callable

from config.rules import RuleBinding
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


class Rule:
    """Base class: identity of the events and the default reactions (ignore bad samples, always quiet)."""

    __slots__ = ("channel", "citation", "out", "rule", "site")

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        self.site = binding.site
        self.channel = binding.channel
        self.rule = binding.rule
        self.citation = binding.citation
        self.out = out

    def good(self, t: float, v: float, port: int) -> None:
        """A good reading of input ``port`` (index into the binding's inputs)."""

    def bad(self, t: float, quality: str, port: int) -> None:
        """A bad sample: discharge rules ignore it (it neither starts, ends nor interrupts an episode)."""

    def band(self, port: int) -> Band:
        return FULL

    def active(self) -> bool:
        """True while an episode of this rule is open (started, not yet ended)."""
        return bool(getattr(self, "is_open", False))

    def start(self, t: float, value: float | None, limit: float | None, confirmed: float | None = None) -> None:
        """``t`` is the onset; ``confirmed`` (duration rules) the moment the duration was exceeded."""
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, START, value, limit, self.citation, None, confirmed)
        )

    def end(self, t: float, value: float | None, limit: float | None, peak: float | None) -> None:
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, END, value, limit, self.citation, peak)
        )
