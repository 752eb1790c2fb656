"""The daemon's clocks, and the demonstration clock that plays simulated time faster than the wall.

Everything that stamps a reading or measures elapsed time in the daemon, the simulator and the console calls
``clock.wall()`` / ``clock.monotonic()`` (module attributes, looked up at each call) instead of ``time.time`` /
``time.monotonic``. Normally they *are* those two functions, so this costs one attribute lookup.

Why a demonstration clock: the rules that matter most to a pretreatment program have durations (a slug is more
than five times the average for *more than 15 minutes*; a 401.17 excursion lasts more than 60). A newcomer
watching ``make demo`` will not wait 15 minutes, and compressing the scenario alone would not do: the daemon
stamps a Modbus reading with the time it arrives, so the readings would show a 45-second "slug" that no rule
may call one. Instead every process of the demo (simulator, daemon, console) runs on the same simulated time,
read from the environment variable ``PRETREAT_DEMO_CLOCK = "<wall anchor>,<simulated anchor>,<speed>"``
(epoch seconds, epoch seconds, simulated seconds per wall second):

    simulated(w) = sim_anchor + (w - wall_anchor)                     before the wall anchor
                 = min(sim_anchor + (w - wall_anchor) * speed, w)      from it on

Simulated time lies in the past. It runs at the wall's pace until the wall anchor (time for every process to
start: nothing the demo shows happens then), then ``speed`` times faster until it catches up with the present,
then at the wall's pace again; it never passes the wall clock, so no reading is stamped in the future and the
console's "now" windows show everything. While it runs fast the daemon polls ``speed`` times as often
(`monitor.app`), so readings are as dense in simulated time as on site and every rule judges them exactly as it
would in real time. Readings are *stamped in simulated time*: the demo says so. Staleness alone keeps measuring
wall time (`monitor.staleness` uses ``time.monotonic``): a silence of a few simulated seconds is a fraction of a
second of wall time, shorter than a busy machine's scheduling hiccups. Never set it for a real site:
the daemon and the simulator log a warning when they start with it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

ENV = "PRETREAT_DEMO_CLOCK"

wall: Callable[[], float] = time.time
monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class DemoClock:
    """Simulated time ``speed`` times faster than the wall from ``wall_anchor`` until it catches up."""

    wall_anchor: float  # epoch s: the wall moment at which simulated time is sim_anchor
    sim_anchor: float  # epoch s, at most wall_anchor
    speed: float  # simulated seconds per wall second while catching up (> 1)

    @classmethod
    def parse(cls, text: str) -> DemoClock:
        """``"<wall anchor>,<simulated anchor>,<speed>"``; ValueError naming what is wrong."""
        parts = text.split(",")
        if len(parts) != 3:
            raise ValueError(f"{ENV}={text!r}: expected '<wall anchor>,<simulated anchor>,<speed>'")
        try:
            wall_anchor, sim_anchor, speed = (float(p) for p in parts)
        except ValueError:
            raise ValueError(f"{ENV}={text!r}: the three fields must be numbers") from None
        if not speed > 1 or not sim_anchor <= wall_anchor:
            raise ValueError(f"{ENV}={text!r}: speed must be above 1 and the simulated anchor not after the "
                             "wall anchor")
        return cls(wall_anchor=wall_anchor, sim_anchor=sim_anchor, speed=speed)

    @property
    def catch_up(self) -> float:
        """The wall (and simulated) time at which simulated time reaches the present."""
        return self.wall_anchor + (self.wall_anchor - self.sim_anchor) / (self.speed - 1.0)

    def at(self, w: float) -> float:
        """Simulated time at wall time ``w``."""
        if w < self.wall_anchor:
            return self.sim_anchor + (w - self.wall_anchor)
        return min(self.sim_anchor + (w - self.wall_anchor) * self.speed, w)

    def now(self) -> float:
        return self.at(time.time())

    def rate(self, w: float) -> float:
        """Simulated seconds per wall second at wall time ``w``."""
        return self.speed if self.wall_anchor <= w < self.catch_up else 1.0

    def changes(self) -> tuple[float, float]:
        """The wall times at which the rate changes: the anchor (to ``speed``) and the catch-up (to 1)."""
        return self.wall_anchor, self.catch_up


_demo: DemoClock | None = None


def demo() -> DemoClock | None:
    """The demonstration clock in force, or None (a real site)."""
    return _demo


def rate() -> float:
    """Simulated seconds per wall second now: 1 unless a demonstration clock is catching up."""
    return 1.0 if _demo is None else _demo.rate(time.time())


def install(demo_clock: DemoClock | None) -> None:
    """Make ``wall`` and ``monotonic`` follow ``demo_clock`` (None: the real clocks again)."""
    global wall, monotonic, _demo
    _demo = demo_clock
    if demo_clock is None:
        wall, monotonic = time.time, time.monotonic
    else:
        # One simulated timeline serves both: a demonstration has no NTP steps to guard against.
        wall = monotonic = demo_clock.now


def install_from_env(environ: dict[str, str] | None = None) -> DemoClock | None:
    """Install the demonstration clock named by ``PRETREAT_DEMO_CLOCK`` if it is set; ValueError if malformed."""
    text = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not text:
        return None
    demo_clock = DemoClock.parse(text)
    install(demo_clock)
    return demo_clock


def describe(demo_clock: DemoClock) -> str:
    """What the daemon and the simulator log at start under a demonstration clock."""
    left = max(0.0, demo_clock.catch_up - time.time())
    return (f"demonstration clock: readings are stamped in simulated time, {demo_clock.speed:g}x the wall clock "
            f"until it meets the present in {left:.0f} s ({ENV} is set; never use it for a real site)")
