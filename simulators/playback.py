"""A scenario bound to a site configuration, and its playback over simulated time.

`resolve` checks, once and before anything is served, that every step and model setting targets something
that exists in the configuration and that every value can be put on the target's register; every mistake is
reported with the scenario file and the step's key path (``ConfigErrors``, like the site loader). `Playback`
then hands out the steps as simulated time reaches them and keeps the channel overrides they set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from config.schema import Channel, Instrument, RegisterPoint, Site, SiteConfig
from drivers.modbus.codec import encode
from simulators.encoding import unencodable
from simulators.process import Source, defaults_for
from simulators.scenario import FaultKind, ModelSetting, Scenario, ScenarioErrors, Step, Target

_POSITIVE = {"interval", "gallons_per_sample", "capacity", "period", "noise_period"}
_NON_NEGATIVE = {"noise", "peak_gpm", "band", "swing", "start_gallons"}
_CHOICES = {"pace": ("time", "flow", "both")}


@dataclass(frozen=True, slots=True)
class Hold:
    """A constant override."""

    value: float

    def value_at(self, t: float) -> float:
        return self.value


@dataclass(frozen=True, slots=True)
class Ramp:
    """A linear change from ``v0`` at ``t0`` to ``v1`` at ``t1``, then held at ``v1``."""

    t0: float
    v0: float
    t1: float
    v1: float

    def value_at(self, t: float) -> float:
        if t >= self.t1:
            return self.v1
        if t <= self.t0:
            return self.v0
        return self.v0 + (self.v1 - self.v0) * (t - self.t0) / (self.t1 - self.t0)


@dataclass(frozen=True, slots=True)
class ResolvedStep:
    step: Step
    channels: tuple[Channel, ...] = ()  # value steps
    instruments: tuple[Instrument, ...] = ()  # fault steps


@dataclass(frozen=True, slots=True)
class ResolvedScenario:
    scenario: Scenario
    steps: tuple[ResolvedStep, ...]
    # site -> channel -> model parameters
    params: dict[str, dict[str, dict[str, float | str]]] = field(default_factory=dict)


def point_of(config: SiteConfig, channel: Channel) -> RegisterPoint | None:
    """The register point serving ``channel`` (None for MQTT channels)."""
    inst = config.instruments_by_id.get((channel.site, channel.instrument))
    if inst is None or inst.register_map is None:
        return None
    return inst.register_map.points.get(channel.point)


def day_offset(site: Site, start_hour: float | None, now: float) -> float:
    """Local seconds after midnight at the start: ``start_hour`` if the scenario fixes it, else now."""
    if start_hour is not None:
        return start_hour * 3600.0
    local = datetime.fromtimestamp(now, tz=ZoneInfo(site.timezone))
    return local.hour * 3600.0 + local.minute * 60.0 + local.second


def resolve(scenario: Scenario, config: SiteConfig) -> ResolvedScenario:
    """Bind ``scenario`` to ``config``; raises `ConfigErrors` naming every step that does not fit."""
    errs = ScenarioErrors(scenario.file)
    steps = tuple(_resolve_step(step, config, errs) for step in scenario.steps)
    params: dict[str, dict[str, dict[str, float | str]]] = {}
    for setting in scenario.models:
        for ch in _channels(setting.target, config, setting.path, errs):
            if _check_params(setting, ch, errs):
                params.setdefault(ch.site, {}).setdefault(ch.id, {}).update(setting.params)
    errs.raise_if_any()
    return ResolvedScenario(scenario=scenario, steps=steps, params=params)


def _sites(target: Target, config: SiteConfig, path: str, errs: ScenarioErrors) -> tuple[Site, ...]:
    if target.site is None:
        return config.sites
    sites = tuple(s for s in config.sites if s.id == target.site)
    if not sites:
        errs.error(f"{path}.site", target.site, f"one of the configured sites {[s.id for s in config.sites]}")
    return sites


def _channels(target: Target, config: SiteConfig, path: str, errs: ScenarioErrors) -> tuple[Channel, ...]:
    sites = _sites(target, config, path, errs)
    if not sites:
        return ()
    if target.channel is not None:
        found = tuple(c for s in sites for c in s.channels if c.id == target.channel)
        key, known = "channel", sorted({c.id for s in sites for c in s.channels})
    elif target.kind is not None:
        found = tuple(c for s in sites for c in s.channels if c.kind is target.kind)
        key, known = "kind", sorted({c.kind.value for s in sites for c in s.channels})
    else:
        return ()
    if not found:
        errs.error(f"{path}.{key}", target.channel or (target.kind and target.kind.value),
                   f"a {key} present in the configuration: {known}")
    return found


def _instruments(target: Target, config: SiteConfig, path: str,
                 errs: ScenarioErrors) -> tuple[Instrument, ...]:
    if target.instrument is None:
        chans = _channels(target, config, path, errs)
        keys = dict.fromkeys((c.site, c.instrument) for c in chans)  # Instrument is not hashable
        return tuple(config.instruments_by_id[k] for k in keys)
    sites = _sites(target, config, path, errs)
    found = tuple(i for s in sites for i in s.instruments if i.id == target.instrument)
    if sites and not found:
        errs.error(f"{path}.instrument", target.instrument,
                   f"a configured instrument: {sorted({i.id for s in sites for i in s.instruments})}")
    return found


def _resolve_step(step: Step, config: SiteConfig, errs: ScenarioErrors) -> ResolvedStep:
    if step.register is not None:
        instruments = _instruments(step.target, config, step.path, errs)
        for inst in instruments:
            problem = _unservable(inst, step.register, step.raw)
            if problem:
                errs.error(f"{step.path}.register", step.register, f"{problem} (instrument '{inst.id}')")
        return ResolvedStep(step=step, instruments=instruments)
    if step.fault is not None:
        instruments = _instruments(step.target, config, step.path, errs)
        if step.fault is FaultKind.EXCEPTION:
            for inst in instruments:
                if not inst.driver.is_modbus:
                    errs.error(f"{step.path}.fault", step.fault.value,
                               f"a fault an MQTT instrument can have ('{inst.id}' has no exception replies): "
                               "silent, garbage, restart or none")
        return ResolvedStep(step=step, instruments=instruments)
    channels = _channels(step.target, config, step.path, errs)
    for ch in channels:
        point = point_of(config, ch)
        for key, v in (("value", step.value), ("to", step.to), ("from", step.start)):
            why = None if v is None else unencodable(ch, point, v)
            if why is not None:
                errs.error(f"{step.path}.{key}", v, f"{why} for channel '{ch.id}' of site '{ch.site}'")
    return ResolvedStep(step=step, channels=channels)


def _unservable(inst: Instrument, register: str, raw: float | None) -> str:
    """Why a register step cannot be served by ``inst`` ("" when it can)."""
    rmap = inst.register_map
    if not inst.driver.is_modbus or rmap is None:
        return "a point of a Modbus instrument's register map"
    point = rmap.points.get(register)
    if point is None:
        return f"a point of register map '{rmap.name}': {sorted(rmap.points)}"
    try:
        encode(point, raw if raw is not None else 0)
    except ValueError as exc:
        return f"a value the point can hold: {exc}"
    return ""


def _check_params(setting: ModelSetting, ch: Channel, errs: ScenarioErrors) -> bool:
    known = defaults_for(ch)
    ok = True
    for key, v in setting.params.items():
        where = f"{setting.path}.{key}"
        if key not in known:
            errs.error(where, v, f"a parameter of the {ch.kind.value} model of '{ch.id}': {sorted(known)}")
        elif key in _CHOICES and v not in _CHOICES[key]:
            errs.error(where, v, f"one of {list(_CHOICES[key])}")
        elif key not in _CHOICES and isinstance(v, str):
            errs.error(where, v, "a number")
        elif isinstance(v, float) and key in _POSITIVE and v <= 0:
            errs.error(where, v, "a number > 0")
        elif isinstance(v, float) and key in _NON_NEGATIVE and v < 0:
            errs.error(where, v, "a number >= 0")
        else:
            continue
        ok = False
    return ok


class Playback:
    """Steps handed out in time order; channel overrides kept per (site, channel).

    A ramp without ``from`` starts where the channel is at the step's time: the override already in
    force there, else ``current(channel, t)`` (the runner's model value).
    """

    def __init__(self, resolved: ResolvedScenario) -> None:
        self.resolved = resolved
        self._next = 0
        self.overrides: dict[str, dict[str, Source]] = {}  # site -> channel -> override
        self.faults: dict[tuple[str, str], FaultKind] = {}  # (site, instrument) -> fault in force

    @property
    def finished(self) -> bool:
        return self._next >= len(self.resolved.steps)

    def due(self, t: float, current: Callable[[Channel, float], float]) -> list[ResolvedStep]:
        """Apply the value steps whose time has come; return every step fired (fault steps for the caller)."""
        fired: list[ResolvedStep] = []
        steps = self.resolved.steps
        while self._next < len(steps) and steps[self._next].step.at <= t:
            rs = steps[self._next]
            self._next += 1
            fired.append(rs)
            if rs.step.register is not None:
                continue  # served by the caller, on the instrument's simulated device
            if rs.step.fault is not None:
                for inst in rs.instruments:
                    if rs.step.fault is not FaultKind.RESTART:
                        self.faults[(inst.site, inst.id)] = rs.step.fault
                continue
            for ch in rs.channels:
                self._apply(rs.step, ch, current)
        return fired

    def _apply(self, step: Step, ch: Channel, current: Callable[[Channel, float], float]) -> None:
        site = self.overrides.setdefault(ch.site, {})
        if step.clear:
            site.pop(ch.id, None)
        elif step.value is not None:
            site[ch.id] = Hold(step.value)
        elif step.to is not None:
            v0 = step.start
            if v0 is None:
                in_force = site.get(ch.id)
                v0 = in_force.value_at(step.at) if in_force is not None else current(ch, step.at)
            site[ch.id] = Ramp(t0=step.at, v0=v0, t1=step.at + step.over, v1=step.to)


def short_steps(resolved: ResolvedScenario, config: SiteConfig, speed: float) -> list[str]:
    """Warnings for value steps that, at ``speed``, last less wall time than their instrument's poll
    interval: the daemon may never see them (a 60 s step at speed 600 lasts 0.1 s)."""
    warnings = []
    steps = resolved.steps
    for i, rs in enumerate(steps):
        if rs.step.fault is not None or rs.step.clear:
            continue
        for ch in rs.channels:
            later = [s.step.at for s in steps[i + 1:] if ch in s.channels]
            if not later:
                continue
            wall = (later[0] - rs.step.at) / speed
            inst = config.instruments_by_id[(ch.site, ch.instrument)]
            if wall < inst.poll_interval:
                warnings.append(f"scenario {resolved.scenario.name}: {rs.step.path} on {ch.site}/{ch.id} "
                                f"lasts {wall:.3g} s at speed {speed:g}, less than {inst.id}'s poll interval "
                                f"({inst.poll_interval:g} s): the daemon may not see it")
    return warnings
