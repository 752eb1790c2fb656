"""The rule catalogue: every compliance rule the monitor knows, and everything about it, in one table.

Each `RuleName` has one `RuleSpec` row: the channel kinds it runs on, the binder that finds its limit in force
(`config.rule_binders`, the slug's in `config.slug_binder`, the tamper signs' in `config.tamper_binders`), its
typed parameters (`config.rule_model`), the
``[site.rules.<rule>]`` options it accepts, its default alarm (priority, latched), its label in reports and the
console, whether its ``limit`` and ``peak`` are seconds (a duration) rather than readings, and whether it is a
data-quality rule (an instrument or data fault, kept apart from discharge exceedances), and whether only a
``[site.rules.<rule>]`` table selects it (``opt_in``: the tamper signs). Every other list of rule names in the
code is derived from this table.

The check that runs a rule lives in `monitor.checks` (config never imports monitor): a check class names the
rules it runs (``Rule.runs``), and `monitor.checks.engine` refuses to start when a catalogue rule has no check.
Adding a rule is a row here (with its `RuleName`), its binder in `config.rule_binders`, and its check class
in `monitor.checks`.

The order of the table is the order in which rules are bound and listed (`pretreat rules`, check-config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from config.rule_binders import (
    Binder,
    bind_excursion,
    bind_flatline,
    bind_lel,
    bind_quality,
    bind_sampler,
    bind_sampler_temperature,
    bind_temperature,
    bind_threshold,
)
from config.rule_model import (
    BandParams,
    ExcursionParams,
    FlatlineParams,
    FrozenParams,
    IntervalParams,
    OffsetStepParams,
    PinnedParams,
    RuleParams,
    SlugParams,
    ThresholdParams,
    ZeroFlowParams,
)
from config.schema import ChannelKind
from config.slug_binder import bind_slug
from config.tamper_binders import bind_frozen, bind_offset_step, bind_pinned, bind_zero_flow


class RuleName(StrEnum):
    PH_LOW = "ph_low"
    PH_HIGH = "ph_high"
    PH_EXCURSION_DURATION = "ph_excursion_duration"
    PH_MONTHLY_EXCURSION = "ph_monthly_excursion"
    TEMPERATURE_HIGH = "temperature_high"
    LEL_SUCCESSIVE = "lel_successive"
    LEL_SINGLE = "lel_single"
    SLUG = "slug"
    SLUG_NO_BASELINE = "slug_no_baseline"
    SAMPLER_TEMPERATURE = "sampler_temperature"
    SAMPLER_INTERVAL = "sampler_interval"
    SAMPLER_INTERVAL_UNVERIFIED = "sampler_interval_unverified"
    STALE = "stale"
    SENSOR_FAULT = "sensor_fault"
    FLATLINE = "flatline"
    MAINTENANCE = "maintenance"
    PH_FROZEN = "ph_frozen"
    OFFSET_STEP = "offset_step"
    FLOW_ZERO_SAMPLING = "flow_zero_sampling"
    SPAN_PINNED = "span_pinned"


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One row of the catalogue (see the module doc). ``priority`` is an `alarms.model.Priority` value (config
    does not import the alarm package; `config.alarms` builds the settings)."""

    kinds: tuple[ChannelKind, ...]
    binder: Binder
    params: type[RuleParams]
    label: str
    priority: str
    latched: bool = False
    duration: bool = False  # ``limit`` and ``peak`` are seconds, not readings in the channel's unit
    data_quality: bool = False
    options: frozenset[str] = field(default_factory=frozenset)
    opt_in: bool = False  # selected only by a [site.rules.<rule>] table (the tamper signs, monitor.checks.tamper)


_ALL = tuple(ChannelKind)
_PH = (ChannelKind.PH,)
_SAMPLER = (ChannelKind.SAMPLER_COUNT,)

CATALOGUE: Mapping[RuleName, RuleSpec] = {
    RuleName.PH_LOW: RuleSpec(_PH, bind_threshold("ph_low", "ph_min"), ThresholdParams, "pH low", "high"),
    RuleName.PH_HIGH: RuleSpec(_PH, bind_threshold("ph_high", "ph_max"), ThresholdParams, "pH high", "high"),
    RuleName.PH_EXCURSION_DURATION: RuleSpec(
        _PH, bind_excursion("ph_excursion_duration", "ph_excursion_single"), ExcursionParams,
        "pH single excursion", "high", duration=True),
    RuleName.PH_MONTHLY_EXCURSION: RuleSpec(
        _PH, bind_excursion("ph_monthly_excursion", "ph_excursion_monthly"), ExcursionParams,
        "pH monthly excursion time", "medium", duration=True),
    RuleName.TEMPERATURE_HIGH: RuleSpec(
        (ChannelKind.TEMPERATURE,), bind_temperature, ThresholdParams, "Temperature", "high"),
    RuleName.LEL_SUCCESSIVE: RuleSpec(
        (ChannelKind.LEL,), bind_lel("lel_successive"), ThresholdParams, "Explosive vapour (successive)",
        "critical", latched=True),
    RuleName.LEL_SINGLE: RuleSpec(
        (ChannelKind.LEL,), bind_lel("lel_single"), ThresholdParams, "Explosive vapour (single)", "critical",
        latched=True),
    RuleName.SLUG: RuleSpec(
        (ChannelKind.FLOW, ChannelKind.CONCENTRATION), bind_slug, SlugParams, "Slug load", "high",
        options=frozenset({"loading", "constituents", "baseline_days"})),
    # no kinds: not bound on its own. The slug detector of a channel with a trailing baseline (monitor.checks.slug)
    # raises it while it has no day of normal operation, so no slug is judged; its alarm comes with the slug's
    # binding (config.alarms.alarm_specs)
    RuleName.SLUG_NO_BASELINE: RuleSpec(
        (), bind_quality("slug_no_baseline"), RuleParams,
        "No slug baseline yet (no day of normal operation: no slug judged)", "low", data_quality=True),
    RuleName.SAMPLER_TEMPERATURE: RuleSpec(
        (ChannelKind.SAMPLER_TEMPERATURE,), bind_sampler_temperature, BandParams, "Sampler refrigeration",
        "medium"),
    RuleName.SAMPLER_INTERVAL: RuleSpec(
        _SAMPLER, bind_sampler("sampler_interval"), IntervalParams, "Sampling interval", "medium",
        duration=True, options=frozenset({"flow"})),
    RuleName.SAMPLER_INTERVAL_UNVERIFIED: RuleSpec(
        _SAMPLER, bind_sampler("sampler_interval_unverified"), IntervalParams,
        "Sampling interval unverified (flow unknown)", "low", data_quality=True, options=frozenset({"flow"})),
    RuleName.STALE: RuleSpec(_ALL, bind_quality("stale"), RuleParams, "No data", "low", data_quality=True),
    RuleName.SENSOR_FAULT: RuleSpec(
        _ALL, bind_quality("sensor_fault"), RuleParams, "Sensor fault", "low", data_quality=True),
    RuleName.FLATLINE: RuleSpec(
        _ALL, bind_flatline, FlatlineParams, "Flat-lined signal", "low", data_quality=True,
        options=frozenset({"readings"})),
    # no kinds: bound by `config.maps.maintenance_bindings` on the channels of instruments whose register map
    # has a service/calibration bit, whatever they measure
    RuleName.MAINTENANCE: RuleSpec(
        (), bind_quality("maintenance"), RuleParams, "Instrument maintenance (service or calibration: readings "
        "not judged)", "low", data_quality=True),
    # tamper and failure signs (monitor.checks.tamper): data quality, opt-in per site
    RuleName.PH_FROZEN: RuleSpec(
        _PH, bind_frozen, FrozenParams, "pH frozen while flow varies", "low", data_quality=True,
        options=frozenset({"readings", "flow"}), opt_in=True),
    RuleName.OFFSET_STEP: RuleSpec(
        _PH, bind_offset_step, OffsetStepParams, "Offset step after an excursion", "low", data_quality=True,
        options=frozenset({"readings", "step"}), opt_in=True),
    RuleName.FLOW_ZERO_SAMPLING: RuleSpec(
        (ChannelKind.FLOW,), bind_zero_flow, ZeroFlowParams, "Flow zero while sampling", "low",
        data_quality=True, options=frozenset({"samples", "zero", "sampler"}), opt_in=True),
    RuleName.SPAN_PINNED: RuleSpec(
        _ALL, bind_pinned, PinnedParams, "Pinned at the span limit", "low", data_quality=True,
        options=frozenset({"readings", "tolerance", "at"}), opt_in=True),
}

# Views of the table, for the modules that only ask one question of it.
RULE_NAMES: tuple[str, ...] = tuple(CATALOGUE)
DATA_QUALITY_RULES: frozenset[str] = frozenset(r for r, s in CATALOGUE.items() if s.data_quality)
DURATION_RULES: frozenset[str] = frozenset(r for r, s in CATALOGUE.items() if s.duration)
# rules whose ``peak`` is no reading of the channel: durations, and data-quality episodes (bad or no samples)
NO_READING_PEAK: frozenset[str] = DURATION_RULES | DATA_QUALITY_RULES
TAMPER_RULES: tuple[str, ...] = tuple(r for r, s in CATALOGUE.items() if s.opt_in)
# rules whose episode ``limit`` is a count, not a number in the channel's unit: what is counted
COUNTED: dict[str, str] = {
    RuleName.FLATLINE: "identical readings in a row",
    RuleName.PH_FROZEN: "identical readings in a row",
    RuleName.SPAN_PINNED: "readings in a row at the span limit",
    RuleName.FLOW_ZERO_SAMPLING: "samples counted while the flow read zero",
}


def counted_limit(rule: str, value: float) -> str | None:
    """``5 identical readings in a row``: a counting rule's limit in words (never ``5 pH``); None for others."""
    what = COUNTED.get(rule)
    return None if what is None else f"{value:g} {what}"


def spec(rule: str) -> RuleSpec | None:
    """The catalogue row of ``rule`` (None for a name the catalogue does not know, e.g. from an old record)."""
    try:
        return CATALOGUE[RuleName(rule)]
    except ValueError:
        return None


def label(rule: str) -> str:
    """The rule's label in reports and the console; an unknown name is shown as it is."""
    row = spec(rule)
    return row.label if row is not None else rule


def is_data_quality(rule: str) -> bool:
    return rule in DATA_QUALITY_RULES
