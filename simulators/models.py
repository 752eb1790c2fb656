"""Process models: what a healthy control manhole looks like, as deterministic functions of simulated time.

Every model is reproducible: the same seed and the same simulated time give the same value, whatever the
tick rate or the wall clock. Time is *simulated seconds since the run started* (``t``); models that follow the
working day also know the local time of day at ``t = 0`` (``day_offset``, seconds after local midnight), so
a run can start "at 09:00" in a test and "now" on a demo.

Two shapes of model:

- **pure** (`LevelModel`): ``value_at(t)``; used for rate of flow, pH, temperature, % LEL and the sampler's
  fridge. Noise is `ValueNoise`: random knots at a fixed period, smoothly interpolated, so a value does not
  jump between two polls one second apart.
- **integrating** (`Totaliser`, `CompositeSampler`): ``advance(t, flow_gpm)`` consumes the flow rate that was
  actually *served* (including a scenario's override, e.g. a slug), because a real totaliser and a real
  flow-paced sampler follow the meter's signal, not an ideal curve.

Units follow the shipped register maps: gpm and gallons, pH units, degC, % LEL.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

DAY = 86400.0
HOUR = 3600.0

# Fraction of the peak rate for each local hour (0 = midnight-01:00). Night flow is leakage and cooling
# water; two production shifts (06-14, 14-22) with a lunch dip and a shift change. Linear between hours.
DEFAULT_FLOW_PROFILE: tuple[float, ...] = (
    0.12, 0.11, 0.10, 0.10, 0.11, 0.20,  # 00-05 night
    0.60, 0.90, 1.00, 0.98, 0.95, 0.92,  # 06-11 first shift
    0.70, 0.90, 0.80, 0.95, 1.00, 0.97,  # 12 lunch, 14 shift change
    0.93, 0.90, 0.85, 0.60, 0.30, 0.15,  # 21-23 wind-down
)


class LevelModel(Protocol):
    """A pure model: the value (engineering units) at simulated time ``t`` seconds."""

    def value_at(self, t: float) -> float: ...


class ValueNoise:
    """Smooth, seeded noise in [-amplitude, +amplitude]: random knots every ``period`` s, cosine-blended.

    A knot is drawn from `random.Random` seeded with a *string* ("seed:index"): string seeds are hashed with
    SHA-512, so knots do not depend on ``PYTHONHASHSEED`` and are the same on every machine and run.
    """

    def __init__(self, *, seed: str, amplitude: float, period: float = 60.0) -> None:
        if period <= 0:
            raise ValueError("noise period must be positive")
        self.seed = seed
        self.amplitude = amplitude
        self.period = period
        self._cache: dict[int, float] = {}

    def _knot(self, k: int) -> float:
        v = self._cache.get(k)
        if v is None:
            if len(self._cache) > 64:  # keep only the recent knots; time moves forward
                self._cache.clear()
            v = self._cache[k] = random.Random(f"{self.seed}:{k}").uniform(-1.0, 1.0)
        return v

    def at(self, t: float) -> float:
        if self.amplitude == 0:
            return 0.0
        x = t / self.period
        k = math.floor(x)
        w = (1.0 - math.cos(math.pi * (x - k))) / 2.0
        return self.amplitude * (self._knot(k) * (1.0 - w) + self._knot(k + 1) * w)


@dataclass(frozen=True, slots=True)
class Constant:
    """A level with noise: pH around 7.2, % LEL near zero, and any channel kind without a specific model."""

    mean: float
    noise: ValueNoise
    minimum: float | None = None  # a clamp for quantities that cannot go negative (% LEL)

    def value_at(self, t: float) -> float:
        v = self.mean + self.noise.at(t)
        return v if self.minimum is None else max(self.minimum, v)


@dataclass(frozen=True, slots=True)
class DailyWave:
    """A quantity that follows the day, e.g. wastewater temperature: warmest at ``peak_hour`` local time."""

    mean: float
    swing: float  # half the peak-to-trough difference
    peak_hour: float
    day_offset: float  # local seconds after midnight at t = 0
    noise: ValueNoise

    def value_at(self, t: float) -> float:
        hours = ((t + self.day_offset) % DAY) / HOUR
        wave = self.swing * math.cos(2 * math.pi * (hours - self.peak_hour) / 24)
        return self.mean + wave + self.noise.at(t)


@dataclass(frozen=True, slots=True)
class DiurnalFlow:
    """Rate of flow (gpm): ``peak_gpm`` × the hourly profile at local time, times (1 + relative noise)."""

    peak_gpm: float
    day_offset: float
    noise: ValueNoise  # relative: 0.05 = ±5 %
    profile: tuple[float, ...] = DEFAULT_FLOW_PROFILE

    def __post_init__(self) -> None:
        if len(self.profile) != 24:
            raise ValueError("a flow profile has 24 hourly fractions")

    def shape_at(self, t: float) -> float:
        """The profile fraction at ``t``, without noise (linear between the hours)."""
        hours = ((t + self.day_offset) % DAY) / HOUR
        h = int(hours)
        frac = hours - h
        return self.profile[h] * (1 - frac) + self.profile[(h + 1) % 24] * frac

    def value_at(self, t: float) -> float:
        return max(0.0, self.peak_gpm * self.shape_at(t) * (1.0 + self.noise.at(t)))


@dataclass(frozen=True, slots=True)
class FridgeCycle:
    """A refrigerated sampler's storage temperature: the compressor holds ``setpoint`` ± ``band``.

    The box warms slowly while the compressor is off (80 % of the cycle) and is pulled down quickly while it
    runs, a sawtooth. With the defaults (4 ± 1 °C, noise 0.1) it stays well inside the 4 ± 2 °C that
    sampling protocols require; a scenario's drift to 9 °C is what an alarm must catch.
    """

    setpoint: float
    band: float
    period: float
    noise: ValueNoise

    def value_at(self, t: float) -> float:
        phase = (t % self.period) / self.period
        warm = 0.8
        ramp = phase / warm if phase < warm else 1.0 - (phase - warm) / (1.0 - warm)
        return self.setpoint - self.band + 2 * self.band * ramp + self.noise.at(t)


class Totaliser:
    """Cumulative volume (gallons) = ∫ rate (gpm) dt / 60, integrated with the trapezoidal rule per step.

    ``advance`` must be called with non-decreasing ``t``; a repeated ``t`` adds nothing. A rate that is not
    a finite non-negative number (a scenario serving NaN, say) adds nothing rather than poisoning the total.
    """

    def __init__(self, *, start_gallons: float = 0.0) -> None:
        self.gallons = start_gallons
        self._t: float | None = None
        self._rate = 0.0

    def advance(self, t: float, rate_gpm: float) -> float:
        rate = rate_gpm if math.isfinite(rate_gpm) and rate_gpm > 0 else 0.0
        if self._t is not None and t > self._t:
            self.gallons += (self._rate + rate) / 2.0 * (t - self._t) / 60.0
        if self._t is None or t >= self._t:
            self._t = t
            self._rate = rate
        return self.gallons


@dataclass(frozen=True, slots=True)
class SamplerState:
    count: int
    bottle_full: bool
    fault: bool


class CompositeSampler:
    """A refrigerated composite sampler's program: one aliquot per pacing event until the bottle is full.

    Pacing (``pace``): ``"time"`` takes a sample each time ``interval`` s of run time elapses (the first
    at ``t = interval``: 15 min after the start by default); ``"flow"`` takes one each time
    ``gallons_per_sample`` gallons have passed the meter; ``"both"`` does either (the two triggers run
    independently). When ``count`` reaches ``capacity`` the sampler stops and sets its bottle-full bit.
    The fault bit is the instrument's own (distributor jam, power loss): the model never sets it, a
    scenario can.
    """

    def __init__(self, *, pace: str = "time", interval: float = 900.0, gallons_per_sample: float = 1000.0,
                 capacity: int = 96) -> None:
        if pace not in ("time", "flow", "both"):
            raise ValueError(f"pace must be 'time', 'flow' or 'both', not {pace!r}")
        if interval <= 0 or gallons_per_sample <= 0 or capacity < 1:
            raise ValueError("interval, gallons_per_sample and capacity must be positive")
        self.pace = pace
        self.interval = interval
        self.gallons_per_sample = gallons_per_sample
        self.capacity = capacity
        self.count = 0
        self._volume = Totaliser()
        self._time_events = 0
        self._flow_events = 0

    def advance(self, t: float, rate_gpm: float) -> SamplerState:
        gallons = self._volume.advance(t, rate_gpm)
        due = 0
        if self.pace in ("time", "both"):
            events = math.floor(t / self.interval) if t >= 0 else 0
            due += max(0, events - self._time_events)
            self._time_events = max(self._time_events, events)
        if self.pace in ("flow", "both"):
            # + 1e-6 gal: summing many small steps lands at 5999.99999 for 6000; that must not delay a sample
            events = int((gallons + 1e-6) // self.gallons_per_sample)
            due += max(0, events - self._flow_events)
            self._flow_events = max(self._flow_events, events)
        self.count = min(self.capacity, self.count + due)
        return self.state

    @property
    def state(self) -> SamplerState:
        return SamplerState(count=self.count, bottle_full=self.count >= self.capacity, fault=False)
