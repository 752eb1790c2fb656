"""What an instrument says about its own readings: its units registers and its status registers.

Catalogue maps (`config.maps`) name, for a value, the register holding its unit code, and list status
registers whose bits mean a fault or a service/calibration mode, each with the vendor's own text.

- **Units**: read when the link (re)connects (the first poll, and the first after a poll that got no answer),
  and again every ``units_check_interval`` seconds while it stands (the instrument's key, 30 s by default; 0:
  every poll), because a unit can be changed at the transmitter's keypad without the link noticing. Each read
  is compared with each channel's ``unit``. A code that means another unit, or a code the manual does not
  list, makes every reading of that channel ``unit_mismatch`` with the reason naming both units, from that
  poll on until a later check agrees: a reading in the wrong unit is never recorded as a number (a flow meter
  switched from gallons to litres would otherwise read 3.8 times high without a word). Readings taken between
  the keypad change and the next check cannot be told apart; the interval bounds that time. Each change of a
  channel's verdict is logged once (a warning when it starts, an info line when the units agree again), and
  the mismatch is kept for the health snapshot (`mismatches`), where an operator sees it without reading
  the record.
- **Status**: read every poll, before the values. A fault bit makes every reading of the instrument
  ``device_fault`` (the reason quotes the vendor's text); a service/calibration bit makes it ``maintenance``:
  the instrument is answering but what it reports is not a measurement of the discharge. A fault wins over
  maintenance (a calibration that failed is a fault).

When these registers cannot be read, the values are not vouched for either: the instrument's readings take the
failed read's quality and reason. The reads are planned once (one request per table, the same gap rules as
the values: `drivers.modbus.planner`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from config.maps import same_unit
from config.schema import Channel, ChannelKind, Instrument, RegisterPoint
from drivers.modbus.link import ReadFailure
from drivers.modbus.planner import Block, plan_reads
from monitor.sample import Quality, Sample

log = logging.getLogger(__name__)

BlockRead = Callable[[Block], Awaitable[Sequence[int]]]
"""Reads one planned block from the instrument (registers or bits); raises `ReadFailure`."""
_ANSWERED = frozenset({Quality.GOOD, Quality.OVER_RANGE, Quality.OUT_OF_RANGE, Quality.BAD_VALUE})


@dataclass(frozen=True, slots=True)
class _UnitCheck:
    channel: Channel
    value_point: RegisterPoint
    unit_point: RegisterPoint


class DeviceState:
    """The units and status registers of one instrument, planned once; see the module docstring."""

    def __init__(self, *, instrument: Instrument, channels: Sequence[Channel],
                 clock: Callable[[], float] = time.monotonic) -> None:
        rmap = instrument.register_map
        if rmap is None:
            raise ValueError(f"instrument {instrument.id!r} has no register map")
        points = rmap.points
        self._checks = tuple(_UnitCheck(ch, points[ch.point], points[points[ch.point].unit_point])
                             for ch in channels if ch.point in points and points[ch.point].unit_point)
        self._status = rmap.status_points
        self._unit_plan = self._plan(instrument, [c.unit_point for c in self._checks])
        self._status_plan = self._plan(instrument, list(self._status))
        self.units_read = not self._checks  # nothing to check: as good as checked
        self._name = f"{instrument.site}/{instrument.id}"
        self._recheck = instrument.units_check_interval  # s between units reads while the link stands
        self._clock = clock
        self._units_due = 0.0  # monotonic time of the next units read while connected
        self.mismatches: dict[str, str] = {}  # channel id -> why its readings are unit_mismatch
        self.reported: dict[str, str] = {}  # channel id -> the unit its units register names, while mismatched
        self.faults: tuple[str, ...] = ()  # the vendor's texts of the fault bits set at the last poll
        self.maintenance: tuple[str, ...] = ()
        self.failure: ReadFailure | None = None  # why the last read of these registers got no answer

    @property
    def active(self) -> bool:
        """Whether this instrument has anything to read here (plain maps have not)."""
        return bool(self._checks or self._status)

    @staticmethod
    def _plan(instrument: Instrument, points: list[RegisterPoint]) -> tuple[Block, ...]:
        """Blocks over ``points`` (pseudo-channels named after the points, one per distinct point)."""
        unique = {p.name: p for p in points}
        pseudo = [Channel(id=name, site=instrument.site, instrument=instrument.id, kind=ChannelKind.OTHER,
                          unit="", point=name) for name in unique]
        return plan_reads(pseudo, unique).blocks

    async def refresh(self, read: BlockRead) -> None:
        """Read what is due (units after a (re)connect and every ``units_check_interval``, status always);
        never raises for a device problem."""
        self.failure = None
        try:
            if not self.units_read or (self._checks and self._clock() >= self._units_due):
                self._check_units(await _values(read, self._unit_plan))
                self.units_read = True
                self._units_due = self._clock() + self._recheck
            if self._status:
                self._check_status(await _values(read, self._status_plan))
        except ReadFailure as failure:
            self.failure = failure
            if failure.quality is Quality.COMM_FAILURE:
                self.units_read = not self._checks  # no answer: maybe a new connection, check again

    def lost_contact(self) -> None:
        """A value read got no answer: the next answer may come from a reconnected (or swapped) device."""
        self.units_read = not self._checks

    def _check_units(self, codes: dict[str, float]) -> None:
        before, self.mismatches, self.reported = self.mismatches, {}, {}
        for c in self._checks:
            code = int(codes[c.unit_point.name])
            found = c.unit_point.units.get(code)
            if found is None:
                self.mismatches[c.channel.id] = (
                    f"units register {c.unit_point.name!r} ({_where(c.unit_point)}) holds code {code}, which "
                    f"the manual does not list ({_listed(c.unit_point)}); channel unit is {c.channel.unit!r}")
            elif not same_unit(found, c.channel.unit):
                self.reported[c.channel.id] = found
                self.mismatches[c.channel.id] = (
                    f"unit mismatch: the instrument reports {c.value_point.name!r} in {found!r} (units register "
                    f"{c.unit_point.name!r} = {code}, {_where(c.unit_point)}), the channel is configured in "
                    f"{c.channel.unit!r}: readings not recorded as numbers until they agree")
        self._log_changes(before)

    def _log_changes(self, before: dict[str, str]) -> None:
        """One line per channel whose verdict changed (never one per poll): the mismatch, or that it ended."""
        for channel, why in self.mismatches.items():
            if before.get(channel) != why:
                log.warning("%s channel %s: %s", self._name, channel, why,
                            extra={"instrument": self._name, "channel": channel, "unit_mismatch": why})
        for channel in before.keys() - self.mismatches.keys():
            log.info("%s channel %s: the units register agrees with the channel's unit again; readings recorded",
                     self._name, channel, extra={"instrument": self._name, "channel": channel})

    def _check_status(self, words: dict[str, float]) -> None:
        faults: list[str] = []
        service: list[str] = []
        for p in self._status:
            word = int(words[p.name])
            faults += [f"{text} ({p.name} bit {bit})" for bit, text in sorted(p.faults.items()) if word >> bit & 1]
            service += [f"{text} ({p.name} bit {bit})" for bit, text in sorted(p.maintenance.items())
                        if word >> bit & 1]
        self.faults, self.maintenance = tuple(faults), tuple(service)

    def apply(self, samples: list[Sample], counters_bad: dict[Quality, int]) -> tuple[list[Sample], int]:
        """The samples as the device state makes them; returns them and how many good ones were taken back."""
        failure = self.failure
        taken = 0
        out: list[Sample] = []
        for s in samples:
            verdict = self._verdict(s, failure)
            if verdict is None:
                out.append(s)
                continue
            quality, reason = verdict
            if s.quality is Quality.GOOD:
                taken += 1
            else:
                counters_bad[s.quality] -= 1
            counters_bad[quality] += 1
            shown = "" if s.value is None else f" (read {s.value:g} {self._unit_read(s, quality)})"
            out.append(dataclasses.replace(s, value=None, quality=quality, reason=reason + shown))
        return out, taken

    def _unit_read(self, s: Sample, quality: Quality) -> str:
        """The unit the value read is in: the channel's, except under a unit mismatch, where it is the unit the
        instrument's units register names (or an unlisted one)."""
        if quality is not Quality.UNIT_MISMATCH:
            return s.unit
        return self.reported.get(s.channel, "in a unit its manual does not list")

    def _verdict(self, s: Sample, failure: ReadFailure | None) -> tuple[Quality, str] | None:
        if s.quality not in _ANSWERED:
            return None  # the value read itself failed: its own reason says more
        if failure is not None:
            return failure.quality, f"status/units registers unread: {failure.detail}"
        mismatch = self.mismatches.get(s.channel)
        if mismatch is not None:
            return Quality.UNIT_MISMATCH, mismatch
        if self.faults:
            return Quality.DEVICE_FAULT, "instrument fault: " + "; ".join(self.faults)
        if self.maintenance:
            return Quality.MAINTENANCE, "instrument in maintenance: " + "; ".join(self.maintenance)
        return None

    def health(self) -> dict[str, object]:
        """For the health snapshot: unit mismatches by channel, active fault and maintenance texts."""
        return {"unit_mismatch": dict(self.mismatches), "faults": list(self.faults),
                "maintenance": list(self.maintenance), "units_checked": self.units_read}


async def _values(read: BlockRead, blocks: tuple[Block, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for block in blocks:
        regs = await read(block)
        for pc in block.channels:
            out[pc.point.name] = pc.decode(regs, pc.offset)
    return out


def _where(p: RegisterPoint) -> str:
    return f"{p.table.value} {p.address}" + (f", manual register {p.register}" if p.register else "")


def _listed(p: RegisterPoint) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sorted(p.units.items()))

