"""Data-quality rules: the evidence has a hole or a fault. Kept apart from discharge exceedances.

These are the only rules that react to bad samples, and they never claim a discharge broke a limit; their
events cite `config.rule_binders.DATA_QUALITY_CITATION`.

- ``stale``: the daemon records, on its clock tick, one STALE sample when a channel has had no good reading
  within its window (`monitor.staleness`); replayed CSVs carry those rows with quality ``stale``. A STALE
  sample starts the episode and the channel's next good reading ends it, so the same rows give the same
  episodes live and in replay (the staleness judgement itself happens once, in the daemon, and is recorded).
- ``sensor_fault``: a bad sample saying the instrument or its value is at fault (out of range, NaN or
  infinity, a Modbus exception, an undecodable reply, the device's fault bit, a units register naming another
  unit than the channel's, a device timestamp too far ahead to be believed: `base.SENSOR_FAULT_QUALITIES`)
  starts an episode; the next good reading ends it. A communication failure is not a sensor fault: if it
  lasts, the channel goes stale.
- ``maintenance``: the instrument says it is in service or calibration (a catalogue map's status bit,
  `drivers.modbus.device_state`): the first ``maintenance`` sample starts the episode, the next good reading ends
  it. Bound only on channels of instruments whose register map has such a bit (`config.maps`). It
  alleges nothing about the discharge: it puts the period in the record and the report, beside the faults.
- ``flatline``: N successive identical good readings of an analogue sensor (opt-in per channel, because zero
  flow at night or 0 % LEL legitimately repeat) start an episode at the Nth; the first different reading ends
  it. Readings with a gap between them (`monitor.checks.coverage`) are not successive: a gap ends the episode
  at the last reading before it and the run starts again.

``stale`` and ``sensor_fault`` episodes are about missing or faulty data themselves: a gap does not end them,
it is counted as their unmeasured time.
"""

from __future__ import annotations

from config.rule_catalogue import RuleName
from config.rule_model import FlatlineParams
from config.rules import RuleBinding
from monitor.checks.base import EMPTY, FULL, INF, SENSOR_FAULT_QUALITIES, Band, Rule
from monitor.checks.events import EpisodeEvent

_QUALITIES = {"stale": frozenset({"stale"}), "maintenance": frozenset({"maintenance"})}


class BadSampleRule(Rule):
    """``stale``, ``sensor_fault`` and ``maintenance``: opened by a bad sample of the given qualities, closed by
    a good reading."""

    __slots__ = ("qualities",)
    runs = (RuleName.STALE, RuleName.SENSOR_FAULT, RuleName.MAINTENANCE)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.qualities = _QUALITIES.get(binding.rule, SENSOR_FAULT_QUALITIES)
        self.is_open = False

    def bad(self, t: float, quality: str, port: int) -> None:
        if not self.is_open and quality in self.qualities:
            self.is_open = True
            self.start(t, None, None)

    def good(self, t: float, v: float, port: int) -> None:
        if self.is_open:
            self.is_open = False
            self.end(t, v, None, None)

    def band(self, port: int) -> Band:
        return EMPTY if self.is_open else FULL


class Flatline(Rule):
    """A run of ``readings`` identical good readings (exact equality: a live analogue signal always
    jitters)."""

    __slots__ = ("needed", "prev", "run")
    runs = (RuleName.FLATLINE,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.needed = binding.typed(FlatlineParams).readings
        self.prev: float | None = None
        self.run = 0  # capped at `needed`
        self.is_open = False

    def good(self, t: float, v: float, port: int) -> None:
        if v == self.prev:
            if self.run < self.needed:
                self.run += 1
                if self.run == self.needed:
                    self.is_open = True
                    self.start(t, v, float(self.needed))
            return
        if self.is_open:
            self.is_open = False
            self.end(t, v, float(self.needed), None)
        self.prev = v
        self.run = 1

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, float(self.needed), None)
        self.prev = None
        self.run = 0

    def band(self, port: int) -> Band:
        if self.is_open and self.prev is not None:
            return self.prev, self.prev, INF
        return EMPTY
