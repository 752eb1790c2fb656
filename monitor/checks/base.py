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
it; rules that must not continue across a gap end their episode at ``t0`` with ``end_reason = "gap"`` (or
``"maintenance"`` when the interval is long only because the instrument was in service: ``why``).
``maint(a, b, counted, port)`` then tells the rule that [a, b) of that interval was maintenance time; the
default counts it as maintenance time of an open episode (and takes it out of the gap already counted,
``counted``): measured + unmeasured + maintenance is an episode's span.
"""

from __future__ import annotations

import copy
import math
import operator
import types
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from config.rule_catalogue import RuleName
from config.rules import RuleBinding
from monitor.checks.coverage import END_CLEARED, END_GAP
from monitor.checks.events import END, START, EpisodeEvent

INF = math.inf
EMPTY = (INF, -INF, -INF)  # no reading is quiet
FULL = (-INF, INF, INF)  # every reading is quiet
MARGIN = 1e-3  # s: deadlines are pulled in by this much so float rounding can never skip a due transition
# a unit mismatch is the value at fault too: the instrument reports it in another unit than the channel's, so the
# enforcement record shows a sensor_fault episode quoting why (not only, later, a stale one saying "no reading");
# so is a clock skew: the device stamps its readings with a time it cannot have read them at (its clock is fast),
# and the episode's alarm is what tells the operator to set the instrument's clock
SENSOR_FAULT_QUALITIES = frozenset(
    {"out_of_range", "bad_value", "device_exception", "decode_error", "device_fault", "unit_mismatch", "clock_skew"}
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

    __slots__ = ("channel", "citation", "hole", "is_open", "maint_s", "opened", "out", "rule", "site", "why")
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
        self.maint_s = 0.0  # maintenance seconds inside the open episode so far
        self.why = END_GAP  # the end reason of the gap being told (set by the engine before `gap`)

    def good(self, t: float, v: float, port: int) -> None:
        """A good reading of input ``port`` (index into the binding's inputs)."""

    def bad(self, t: float, quality: str, port: int) -> None:
        """A bad sample: discharge rules ignore it (it neither starts, ends nor interrupts an episode)."""

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        """A gap between the good readings at ``t0`` and ``t1``: by default the open episode spans it."""
        if self.active():
            self.hole += t1 - max(t0, self.opened)

    def maint(self, a: float, b: float, counted: bool, port: int) -> None:
        """[a, b) was maintenance time (the instrument in service or calibration): counted as such in an open
        episode; ``counted``: the interval holding it was told as a gap, whose unmeasured time it leaves."""
        if self.active():
            d = b - max(a, self.opened)
            if d > 0.0:
                self.maint_s += d
                if counted:
                    self.hole = max(0.0, self.hole - d)

    def band(self, port: int) -> Band:
        return FULL

    def active(self) -> bool:
        """True while an episode of this rule is open (started, not yet ended)."""
        return self.is_open

    def snapshot(self) -> tuple[Any, ...]:
        """A copy of the rule's state, for the engine's checkpoints (`monitor.checks.rewind`).

        Generic over ``__slots__``, so a rule gains it by keeping its state in slots as plain values
        (numbers, strings, None, functions, time zones) or containers of plain values (list, dict, set, deque,
        array), which are copied; a rule held inside another (mass-loading slug) is snapshot in turn."""
        vals = _getter(type(self))(self)
        plain = _PLAIN
        for v in vals:
            if type(v) not in plain:
                return tuple(v if type(v) in plain else _save(v) for v in vals)
        return vals

    @classmethod
    def state_names(cls) -> tuple[str, ...]:
        """The slot names of a `snapshot`'s values, in order."""
        return _state_slots(cls)

    def restore(self, snap: tuple[Any, ...]) -> None:
        """Put back a `snapshot` (the snapshot stays usable: containers are copied again)."""
        for s, v in zip(_state_slots(type(self)), snap, strict=True):
            if type(v) in _PLAIN:
                setattr(self, s, v)
            elif isinstance(v, _Nested):
                v.rule.restore(v.snap)
            else:
                setattr(self, s, _copy(v) if isinstance(v, _CONTAINERS) else v)

    def start(self, t: float, value: float | None, limit: float | None, confirmed: float | None = None) -> None:
        """``t`` is the onset; ``confirmed`` (duration rules) the moment the duration was exceeded. The
        episode's span (and its measured/unmeasured split) runs from the onset."""
        self.opened, self.hole, self.maint_s = t, 0.0, 0.0
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, START, value, limit, self.citation,
                         confirmed=confirmed)
        )

    def end(self, t: float, value: float | None, limit: float | None, peak: float | None,
            reason: str = END_CLEARED, coverage: tuple[float, float] | None = None,
            maintenance: float | None = None) -> None:
        """The end transition. ``coverage`` (measured, unmeasured seconds) and ``maintenance`` (seconds) default
        to the span since `start` split by the gaps and the maintenance counted in it."""
        span = t - self.opened
        maint = min(self.maint_s, max(span, 0.0)) if maintenance is None else maintenance
        if coverage is None:
            unmeasured = min(self.hole, span - maint)
            coverage = (span - maint - unmeasured, unmeasured)
        self.out.append(
            EpisodeEvent(t, self.site, self.channel, self.rule, END, value, limit, self.citation, peak,
                         reason, coverage[0], coverage[1], maintenance=maint if maint > 0.0 else None)
        )

    def end_at_gap(self, t0: float, v0: float, limit: float | None, peak: float | None) -> None:
        """End the open episode at the last reading before a gap (``end_reason`` ``"gap"``, or ``"maintenance"``
        when the engine said the interval is long only because the instrument was in service: ``why``)."""
        self.end(t0, v0, limit, peak, self.why)

_CONTAINERS = (list, dict, set, deque, array, bytearray)
_PLAIN = frozenset({float, int, bool, str, type(None), tuple, frozenset, types.FunctionType,
                    types.BuiltinFunctionType, ZoneInfo, RuleName})  # immutable: kept by reference
_SLOTS: dict[type, tuple[str, ...]] = {}
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def _getter(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """One C-level ``attrgetter`` per rule class: every state slot's value as a tuple."""
    g = _GETTERS.get(cls)
    if g is None:
        names = _state_slots(cls)
        getter = operator.attrgetter(*names)
        g = _GETTERS[cls] = getter if len(names) > 1 else (lambda o: (getter(o),))
    return g


class _Nested:
    """A rule held inside another, with its snapshot. Two are equal when their states are (the rule objects may
    differ: the property tests compare a live engine's state with a replay's)."""

    __slots__ = ("rule", "snap")

    def __init__(self, rule: Rule) -> None:
        self.rule, self.snap = rule, rule.snapshot()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Nested) and self.snap == other.snap

    __hash__ = None  # type: ignore[assignment]


def _copy(v: Any) -> Any:
    """A shallow copy of a state container (``array`` and ``list`` by slicing: `copy.copy` of an array goes
    through pickling's reduce and costs 100 times as much)."""
    if type(v) in (array, list):
        return v[:]
    return copy.copy(v)


def _save(v: Any) -> Any:
    if isinstance(v, _CONTAINERS):
        return _copy(v)
    if isinstance(v, Rule):
        return _Nested(v)
    return v


def _state_slots(cls: type) -> tuple[str, ...]:
    """Every slot of ``cls`` and its bases but the shared event list."""
    slots = _SLOTS.get(cls)
    if slots is None:
        names: list[str] = []
        for k in reversed(cls.__mro__):
            own = k.__dict__.get("__slots__", ())
            names += [own] if isinstance(own, str) else list(own)
        slots = _SLOTS[cls] = tuple(n for n in dict.fromkeys(names) if n != "out")
    return slots
