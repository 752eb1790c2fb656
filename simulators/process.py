"""One site's simulated process: a model per channel, chosen by `Channel.kind`, evaluated at simulated time.

`SiteProcess.step(t, overrides)` returns the engineering value of every channel at ``t``: the model's, or a
scenario's override. Integrating channels (totaliser, composite sampler) follow the flow that was *served*,
override included, so a slug fills the totaliser and paces a flow-proportional sampler as it would on site.

Model parameters have defaults per kind (`DEFAULTS`); a scenario's ``[[model]]`` tables change them per
channel (see `simulators.scenario`). Which flow an integrator follows: the FLOW channel of the same
instrument if there is one, else the site's first FLOW channel, else a private default flow model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from config.schema import Channel, ChannelKind, Site
from simulators.models import (
    CompositeSampler,
    Constant,
    DailyWave,
    DiurnalFlow,
    FridgeCycle,
    LevelModel,
    Totaliser,
    ValueNoise,
)

Params = Mapping[str, float | str]

# Default model parameters per channel kind. Units: gpm, pH, degC, % LEL, seconds, gallons.
DEFAULTS: dict[ChannelKind, dict[str, float | str]] = {
    ChannelKind.FLOW: {"peak_gpm": 120.0, "noise": 0.04, "noise_period": 120.0},
    ChannelKind.FLOW_TOTAL: {"start_gallons": 0.0},
    ChannelKind.PH: {"mean": 7.2, "noise": 0.12, "noise_period": 60.0},
    ChannelKind.TEMPERATURE: {"mean": 21.5, "swing": 2.5, "peak_hour": 15.0, "noise": 0.3,
                              "noise_period": 300.0},
    ChannelKind.LEL: {"mean": 0.8, "noise": 0.7, "noise_period": 30.0},
    ChannelKind.SAMPLER_TEMPERATURE: {"setpoint": 4.0, "band": 1.0, "period": 1200.0, "noise": 0.1},
    ChannelKind.SAMPLER_COUNT: {"pace": "time", "interval": 900.0, "gallons_per_sample": 1000.0,
                                "capacity": 96.0},
    ChannelKind.SAMPLER_BOTTLE_FULL: {},
    ChannelKind.SAMPLER_FAULT: {},
}
GENERIC_DEFAULTS: dict[str, float | str] = {"mean": 1.0, "noise": 0.0, "noise_period": 60.0}
_SAMPLER_KINDS = (ChannelKind.SAMPLER_COUNT, ChannelKind.SAMPLER_BOTTLE_FULL, ChannelKind.SAMPLER_FAULT)
_INTEGRATED = (ChannelKind.FLOW_TOTAL, *_SAMPLER_KINDS)


def defaults_for(channel: Channel) -> dict[str, float | str]:
    """The default parameters of ``channel``'s model; other kinds sit mid-span of their valid range."""
    if channel.kind in DEFAULTS:
        return dict(DEFAULTS[channel.kind])
    params = dict(GENERIC_DEFAULTS)
    lo, hi = channel.valid_min, channel.valid_max
    if lo is not None and hi is not None:
        params["mean"] = (lo + hi) / 2
    elif lo is not None:
        params["mean"] = lo
    return params


class Source(Protocol):
    """Anything with a value at simulated time: a model or a scenario's override."""

    def value_at(self, t: float) -> float: ...


@dataclass(slots=True)
class _Integrated:
    """The sampler and totaliser of one instrument, and the flow channel they follow."""

    flow: str | None  # channel id served on this site, or None: follow the private model
    own_flow: DiurnalFlow
    totaliser: Totaliser | None = None
    sampler: CompositeSampler | None = None


class SiteProcess:
    """Models for every channel of one site. Not thread-safe; `step` with non-decreasing ``t``."""

    def __init__(self, *, site: Site, seed: int = 1, day_offset: float = 9 * 3600.0,
                 params: Mapping[str, Params] | None = None) -> None:
        """``params``: channel id -> parameter overrides (already validated by the scenario loader)."""
        self.site = site
        self.seed = seed
        self.day_offset = day_offset
        params = params or {}
        self.params = {ch.id: {**defaults_for(ch), **params.get(ch.id, {})} for ch in site.channels}
        self.pure: dict[str, LevelModel] = {}
        self._integrated: dict[str, _Integrated] = {}  # instrument id -> its integrators
        self._order: list[Channel] = [c for c in site.channels if c.kind not in _INTEGRATED] + [
            c for c in site.channels if c.kind in _INTEGRATED]
        for ch in site.channels:
            if ch.kind in _INTEGRATED:
                self._attach_integrated(ch)
            else:
                self.pure[ch.id] = self._pure_model(ch)
        self.last: dict[str, float] = {}

    def _noise(self, ch: Channel, amplitude: float, period: float) -> ValueNoise:
        return ValueNoise(seed=f"{self.seed}:{self.site.id}:{ch.id}", amplitude=amplitude, period=period)

    def _pure_model(self, ch: Channel) -> LevelModel:
        p = self.params[ch.id]
        f = {k: float(v) for k, v in p.items() if not isinstance(v, str)}
        if ch.kind is ChannelKind.FLOW:
            return DiurnalFlow(peak_gpm=f["peak_gpm"], day_offset=self.day_offset,
                               noise=self._noise(ch, f["noise"], f["noise_period"]))
        if ch.kind is ChannelKind.TEMPERATURE:
            return DailyWave(mean=f["mean"], swing=f["swing"], peak_hour=f["peak_hour"],
                             day_offset=self.day_offset, noise=self._noise(ch, f["noise"], f["noise_period"]))
        if ch.kind is ChannelKind.SAMPLER_TEMPERATURE:
            return FridgeCycle(setpoint=f["setpoint"], band=f["band"], period=f["period"],
                               noise=self._noise(ch, f["noise"], 60.0))
        minimum = 0.0 if ch.kind is ChannelKind.LEL else None
        return Constant(mean=f["mean"], noise=self._noise(ch, f["noise"], f["noise_period"]), minimum=minimum)

    def _attach_integrated(self, ch: Channel) -> None:
        group = self._integrated.get(ch.instrument)
        if group is None:
            flows = [c for c in self.site.channels if c.kind is ChannelKind.FLOW]
            same = [c for c in flows if c.instrument == ch.instrument]
            follow: Channel | None = (same or flows)[0] if (same or flows) else None
            own = DiurnalFlow(peak_gpm=float(DEFAULTS[ChannelKind.FLOW]["peak_gpm"]),
                              day_offset=self.day_offset, noise=self._noise(ch, 0.0, 60.0))
            group = self._integrated[ch.instrument] = _Integrated(
                flow=follow.id if follow is not None else None, own_flow=own)
        p = self.params[ch.id]
        if ch.kind is ChannelKind.FLOW_TOTAL and group.totaliser is None:
            group.totaliser = Totaliser(start_gallons=float(p["start_gallons"]))
        if ch.kind in _SAMPLER_KINDS and group.sampler is None:
            sp = self._sampler_params(ch.instrument)
            group.sampler = CompositeSampler(pace=str(sp["pace"]), interval=float(sp["interval"]),
                                             gallons_per_sample=float(sp["gallons_per_sample"]),
                                             capacity=int(float(sp["capacity"])))

    def _sampler_params(self, instrument: str) -> dict[str, float | str]:
        """The sampler's programme is set on its SAMPLER_COUNT channel (defaults if it has none)."""
        for c in self.site.channels:
            if c.instrument == instrument and c.kind is ChannelKind.SAMPLER_COUNT:
                return self.params[c.id]
        return dict(DEFAULTS[ChannelKind.SAMPLER_COUNT])

    def base_value(self, channel: str, t: float) -> float:
        """What the model alone gives at ``t`` (the last served value for integrating channels)."""
        model = self.pure.get(channel)
        if model is not None:
            return model.value_at(t)
        return self.last.get(channel, 0.0)

    def step(self, t: float, overrides: Mapping[str, Source] | None = None) -> dict[str, float]:
        """Every channel's engineering value at ``t``; booleans are 1.0 / 0.0."""
        overrides = overrides or {}
        out: dict[str, float] = {}
        advanced: set[str] = set()
        for ch in self._order:
            if ch.kind in _INTEGRATED:
                group = self._integrated[ch.instrument]
                if ch.instrument not in advanced:
                    rate = out[group.flow] if group.flow is not None else group.own_flow.value_at(t)
                    if group.totaliser is not None:
                        group.totaliser.advance(t, rate)
                    if group.sampler is not None:
                        group.sampler.advance(t, rate)
                    advanced.add(ch.instrument)
                value = _integrated_value(ch.kind, group)
            else:
                value = self.pure[ch.id].value_at(t)
            override = overrides.get(ch.id)
            out[ch.id] = override.value_at(t) if override is not None else value
        self.last = out
        return out


def _integrated_value(kind: ChannelKind, group: _Integrated) -> float:
    if kind is ChannelKind.FLOW_TOTAL:
        assert group.totaliser is not None
        return group.totaliser.gallons
    assert group.sampler is not None
    state = group.sampler.state
    if kind is ChannelKind.SAMPLER_COUNT:
        return float(state.count)
    if kind is ChannelKind.SAMPLER_BOTTLE_FULL:
        return 1.0 if state.bottle_full else 0.0
    return 1.0 if state.fault else 0.0
