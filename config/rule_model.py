"""What a compiled rule is: a `RuleBinding` and its typed, frozen parameters.

`config.rules` selects the rules of a site and its binders (`config.rule_binders`) resolve each one's numbers
once, at load, into one of the parameter classes below: numbers in the channel's unit, durations in seconds,
operators as the violation condition (``"<"``: a reading below the limit violates it, the limit itself
complies). The check engine reads the attributes (`RuleBinding.typed`); nothing parses them again.

Each parameter class is also a read-only mapping of the parameters that are set (a ``None`` number or an empty
text is absent), which is how `pretreat rules`, the reports and the console print the words kept beside the
numbers (``quote``, ``reading``, ``looser``, ``wording``, ``permitted``) without knowing the rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TypeVar, overload

T = TypeVar("T")
_NAMES: dict[type, tuple[str, ...]] = {}  # each parameters class's field names (`RuleParams._names`)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleParams(Mapping[str, "float | str"]):
    """The words every rule may carry beside its numbers (engines ignore them), and the mapping view.

    ``quote``: the ordinance's words; ``clause``: the whole sentence they stand in (a notice quotes it);
    ``reading``: the reading of ambiguous law in force; ``literal``: the words read literally, which that
    reading refers to ("see literal"); ``looser``: a permit
    figure set aside as looser than the ordinance's (40 CFR 403.5(d)); ``wording``: how the limit is worded;
    ``permitted``: the federal rule under which excursions are permitted (40 CFR 401.17), when adopted.
    A rule without numbers (``stale``, ``sensor_fault``) binds this class itself."""

    quote: str = ""
    clause: str = ""
    reading: str = ""
    literal: str = ""
    looser: str = ""
    wording: str = ""
    permitted: str = ""

    def __getitem__(self, key: str) -> float | str:
        if key in self._names():
            value = getattr(self, key)
            if value is not None and value != "":
                return value
        raise KeyError(key)

    @overload
    def get(self, key: str) -> float | str | None: ...
    @overload
    def get(self, key: str, default: float | str | T) -> float | str | T: ...

    def get(self, key: str, default: object = None) -> object:
        """`Mapping.get` without raising and catching a KeyError for each word a rule leaves out (asked of
        every check of a site file at each start)."""
        if key in self._names():
            value = getattr(self, key)
            if value is not None and value != "":
                return value
        return default

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._names() if getattr(self, name) not in (None, ""))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _names(self) -> tuple[str, ...]:
        names = _NAMES.get(type(self))
        if names is None:  # (once a class: `fields` walks the class's fields on every call)
            names = _NAMES[type(self)] = tuple(f.name for f in fields(self))
        return names


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdParams(RuleParams):
    """``ph_low``, ``ph_high``, ``temperature_high``, ``lel_*``: ``reading OPERATOR limit`` violates, on
    ``readings`` successive good readings (1 but for ``lel_successive``)."""

    limit: float
    operator: str
    readings: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcursionParams(RuleParams):
    """The 40 CFR 401.17 excursion rules: ``limit`` seconds (one excursion, or a calendar month's total in
    ``timezone``) outside the pH range ``min``/``max`` (±inf for a side nobody limits), each with the operator
    of its violation."""

    limit: float
    min: float
    min_operator: str
    max: float
    max_operator: str
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True, kw_only=True)
class SlugParams(RuleParams):
    """``slug``: above ``multiplier`` × the baseline (``operator``) for ``duration`` seconds
    (``duration_operator``); the baseline is the mean of the last ``baseline_days`` days of normal operation in
    ``timezone``, or the fixed normal-sewage strength ``baseline`` (ppm) where the ordinance words it so."""

    multiplier: float
    operator: str
    duration: float
    duration_operator: str
    baseline_days: int
    timezone: str = "UTC"
    baseline: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BandParams(RuleParams):
    """``sampler_temperature``: the fridge complies inside [``low``, ``high``], both ends inclusive."""

    low: float
    high: float


@dataclass(frozen=True, slots=True, kw_only=True)
class IntervalParams(RuleParams):
    """``sampler_interval`` (and its data-quality twin): more than ``limit`` seconds of flow without a
    sample."""

    limit: float
    operator: str = ">"


@dataclass(frozen=True, slots=True, kw_only=True)
class FlatlineParams(RuleParams):
    """``flatline``: a run of ``readings`` identical good readings."""

    readings: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenParams(RuleParams):
    """``ph_frozen`` (a tamper sign, `monitor.checks.tamper`): ``readings`` successive identical pH readings
    while the channel ``flow`` varies."""

    readings: int
    flow: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetStepParams(RuleParams):
    """``offset_step``: the mean of the first ``readings`` readings back inside the pH range ``min``/``max``
    (each with the operator of its violation; ±inf for a side nobody limits) after an excursion differs by at
    least ``step`` (pH) from the mean of the last ``readings`` before it."""

    readings: int
    step: float
    min: float
    min_operator: str
    max: float
    max_operator: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroFlowParams(RuleParams):
    """``flow_zero_sampling``: the count of the sampler channel ``sampler`` rises ``samples`` times while the
    flow reads at or below ``zero`` (the flow's unit)."""

    samples: int
    zero: float
    sampler: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedParams(RuleParams):
    """``span_pinned``: ``readings`` successive readings within ``tolerance`` of the span's ``low`` and/or
    ``high`` end (``at``: "low", "high" or "both")."""

    readings: int
    tolerance: float
    at: str
    low: float
    high: float


P = TypeVar("P", bound=RuleParams)


@dataclass(frozen=True, slots=True)
class RuleBinding:
    """One compiled rule on one channel (or a derived pair): what the check engine runs.

    ``params`` holds the resolved numbers (see the module doc); ``inputs`` are the channels the rule reads,
    primary first; ``channel`` is the name its events carry (a mass-loading slug on flow × concentration is
    named ``flow*concentration``).
    """

    rule: str
    site: str
    channel: str
    citation: str
    inputs: tuple[str, ...]
    params: RuleParams = field(default_factory=RuleParams)

    def typed(self, kind: type[P]) -> P:
        """The parameters as the class a check expects; a binding of another shape is a programming error."""
        if not isinstance(self.params, kind):
            raise TypeError(f"{self.rule} on {self.site}/{self.channel}: parameters are "
                            f"{type(self.params).__name__}, expected {kind.__name__}")
        return self.params


@dataclass(frozen=True, slots=True)
class Skipped:
    """A rule that does not run on a channel, and why (for `pretreat rules` and check-config's count)."""

    channel: str
    rule: str
    why: str
