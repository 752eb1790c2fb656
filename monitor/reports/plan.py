"""What each channel contributes to the reports, compiled once from the site configuration.

The aggregator's hot path branches on nothing it could have decided at start-up (style rule 2): each channel
becomes a `ChannelPlan` that says which per-day quantities it accrues (integrated rate, totaliser volume, pH
excursion time, sampler fridge band, sample count), the limits those use (taken from the compiled rule
bindings, with their citations, so a report states exactly the numbers the alarms ran on), how often a reading
is expected, and how long a gap may be before the channel counts as down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from config.rule_catalogue import RuleName
from config.rule_model import BandParams, ExcursionParams, ThresholdParams
from config.rules import RuleBinding
from config.schema import Channel, ChannelKind, Site, SiteConfig
from monitor.checks.base import VIOLATES, complies_band
from monitor.reports.days import zone

# A flow rate unit -> (volume unit it integrates to, seconds per the rate's time unit). Rates integrate into
# the totaliser's volume unit through `VOLUME_IN_LITRES`. Units not listed are not integrated (the report
# says so rather than guessing a conversion).
RATE_UNITS: dict[str, tuple[str, float]] = {
    "gpm": ("gal", 60.0),
    "gph": ("gal", 3600.0),
    "gpd": ("gal", 86400.0),
    "mgd": ("mgal", 86400.0),
    "l/s": ("l", 1.0),
    "l/min": ("l", 60.0),
    "m3/h": ("m3", 3600.0),
    "m3/d": ("m3", 86400.0),
    "cfs": ("ft3", 1.0),
}
VOLUME_IN_LITRES: dict[str, float] = {
    "gal": 3.785411784,  # US gallon
    "mgal": 3_785_411.784,  # million US gallons
    "l": 1.0,
    "m3": 1000.0,
    "ft3": 28.316846592,
}
PEAK_WINDOW = 1800.0  # s: the thirty-minute peak flow rate (Town of Wilson § 105-7E, see `daily`)


def volume_factor(rate_unit: str, volume_unit: str) -> float | None:
    """Multiply ∫rate·dt (rate unit × seconds) by this to get ``volume_unit``; None if not convertible."""
    rate = RATE_UNITS.get(rate_unit.strip().lower())
    target = VOLUME_IN_LITRES.get(volume_unit.strip().lower())
    if rate is None or target is None:
        return None
    vol_unit, per_seconds = rate
    return VOLUME_IN_LITRES[vol_unit] / per_seconds / target


@dataclass(frozen=True, slots=True)
class Range:
    """A compliance range as the rule bindings state it: a reading violates if ``v min_op min`` or
    ``v max_op max`` (operators are violation conditions, so "less than 5.0" is ``<`` and 5.0 complies)."""

    min: float
    min_op: str
    max: float
    max_op: str
    citation: str

    def violates(self) -> Callable[[float], bool]:
        lo, hi = VIOLATES[self.min_op], VIOLATES[self.max_op]
        mn, mx = self.min, self.max
        return lambda v: lo(v, mn) or hi(v, mx)

    def complies(self) -> tuple[float, float]:
        """The closed interval of readings `violates` finds inside the range (for the C accrual's quick test)."""
        a, _ = complies_band(self.min_op, self.min)
        _, b = complies_band(self.max_op, self.max)
        return a, b


@dataclass(frozen=True, slots=True)
class ChannelPlan:
    site: str
    channel: str
    kind: ChannelKind
    unit: str
    tz: ZoneInfo
    interval: float  # s between expected readings (the instrument's poll or publish interval)
    max_gap: float  # s between good readings beyond which the channel is down (the channel's max_gap)
    ph_range: Range | None = None  # pH channels with a stated range: time outside is accrued
    band: Range | None = None  # sampler fridge: time outside set point ± tolerance is accrued
    rolling_peak: bool = False  # flow rate: the 30-minute peak is tracked

    @property
    def is_total(self) -> bool:
        return self.kind in (ChannelKind.FLOW_TOTAL, ChannelKind.SAMPLER_COUNT)


def _ph_range(site: Site, ch: Channel) -> Range | None:
    """The pH range in force on ``ch``: from a 401.17 binding (both sides) or the ph_low/ph_high ones."""
    mine = [b for b in site.checks if b.channel == ch.id]
    for b in mine:
        if b.rule in (RuleName.PH_EXCURSION_DURATION, RuleName.PH_MONTHLY_EXCURSION):
            p = b.typed(ExcursionParams)
            citation = b.citation.split("; pH range: ", 1)[-1]
            return Range(p.min, p.min_operator, p.max, p.max_operator, citation)
    low = next((b for b in mine if b.rule == RuleName.PH_LOW), None)
    high = next((b for b in mine if b.rule == RuleName.PH_HIGH), None)
    if low is None and high is None:
        return None
    cites = list(dict.fromkeys(b.citation for b in (low, high) if b is not None))
    lo = low.typed(ThresholdParams) if low else None
    hi = high.typed(ThresholdParams) if high else None
    return Range(
        lo.limit if lo else -math.inf, lo.operator if lo else "<",
        hi.limit if hi else math.inf, hi.operator if hi else ">",
        "; ".join(cites),
    )


def _band(site: Site, ch: Channel) -> Range | None:
    b: RuleBinding | None = next(
        (b for b in site.checks if b.channel == ch.id and b.rule == RuleName.SAMPLER_TEMPERATURE), None)
    if b is None:
        return None
    # set point ± tolerance complies at both ends (Pawling: "2 °C and 6 °C comply")
    band = b.typed(BandParams)
    return Range(band.low, "<", band.high, ">", b.citation)


def compile_plans(config: SiteConfig, *, stale_after_polls: float | None = None) -> dict[tuple[str, str], ChannelPlan]:
    """One plan per configured channel, keyed by (site, channel)."""
    polls = config.daemon.stale_after_polls if stale_after_polls is None else stale_after_polls
    out: dict[tuple[str, str], ChannelPlan] = {}
    for site in config.sites:
        tz = zone(site.timezone)
        insts = {i.id: i for i in site.instruments}
        for ch in site.channels:
            inst = insts[ch.instrument]
            # the channel's max_gap: one data-coverage rule for the checks and the reports (monitor.checks.coverage);
            # a channel built without one falls back to the staleness tracker's window
            window = ch.max_gap or ch.stale_after or max(inst.poll_interval * polls, inst.poll_interval + inst.timeout)
            out[(site.id, ch.id)] = ChannelPlan(
                site=site.id, channel=ch.id, kind=ch.kind, unit=ch.unit, tz=tz,
                interval=inst.poll_interval, max_gap=window,
                ph_range=_ph_range(site, ch) if ch.kind is ChannelKind.PH else None,
                band=_band(site, ch) if ch.kind is ChannelKind.SAMPLER_TEMPERATURE else None,
                rolling_peak=ch.kind is ChannelKind.FLOW,
            )
    return out
