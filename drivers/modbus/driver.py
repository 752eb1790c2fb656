"""`ModbusDriver`: poll one instrument over its shared link and turn every outcome into samples.

Everything that can be decided at start-up is: the read plan (block reads, one decoder per point), each
block's function, address and count, each channel's scaling and valid range, the reason prefixes. A poll walks
that plan: one request per block, then one `Sample` per channel, good or bad, in the order the channels were
given. A failed block costs only its own channels; a poll never raises for a device problem.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from config.schema import Channel, Instrument, SiteConfig, Table
from drivers.modbus.codec import INTEGER_DECODERS, Decoder
from drivers.modbus.device_state import DeviceState
from drivers.modbus.link import ModbusLink, ReadFailure, bus_idle_time, quiet_pymodbus_logging
from drivers.modbus.planner import DEFAULT_MAX_BIT_GAP, DEFAULT_MAX_GAP, Block, ReadPlan, plan_reads
from monitor import clock
from monitor.sample import Quality, Sample, in_span, judge_value

try:  # optional: built by setup.py where a C compiler is available (the Python below gives the same samples)
    from drivers.modbus import _blockdecode as _native
except ImportError:  # pragma: no cover - exercised only on an install without the extension
    _native = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DriverCounters:
    """Per-instrument counters for health reporting. ``bad`` holds every non-good quality (zeros included)."""

    polls: int = 0
    good: int = 0
    bad: dict[Quality, int] = field(default_factory=lambda: {q: 0 for q in Quality if not q.is_good})
    last_poll_seconds: float = 0.0  # duration of the latest poll, all blocks


@dataclass(frozen=True, slots=True)
class _Target:
    """One channel of a block, with everything `judge_value` needs, resolved once."""

    index: int  # position of the channel in the driver's output
    offset: int
    decode: Decoder
    site: str
    channel: str
    unit: str
    scale: float
    value_offset: float
    valid_min: float | None
    valid_max: float | None
    over_max: float | None  # over-range readings up to this are judged as valid_max (LEL), see judge_value
    where: str  # "point 'ph' (input 0)", for reasons
    lo: float = -math.inf  # the valid range with no ends as infinities, for `in_span` in `poll`
    hi: float = math.inf


@dataclass(frozen=True, slots=True)
class _Step:
    table: Table
    address: int
    count: int
    targets: tuple[_Target, ...]
    prefix: str  # "acme/ph-meter unit 2 on rtu:/dev/ttyUSB0, input 0..1"


class ModbusDriver:
    """Polls one instrument; implements `drivers.base.PolledDriver`.

    ``channels`` are the instrument's channels (each names a point of its register map); ``link`` is the
    shared connection for ``instrument.link_key``. The driver does not own the link: whoever built it
    closes it (`build_modbus_drivers` returns the links for that).
    """

    def __init__(
        self,
        *,
        instrument: Instrument,
        channels: Sequence[Channel],
        link: ModbusLink,
        max_gap: int = DEFAULT_MAX_GAP,
        max_bit_gap: int = DEFAULT_MAX_BIT_GAP,
    ) -> None:
        if instrument.register_map is None or not instrument.driver.is_modbus:
            raise ValueError(f"instrument {instrument.id!r} is not a Modbus instrument with a register map")
        if link.key != instrument.link_key:
            raise ValueError(f"instrument {instrument.id!r} is on {instrument.link_key}, not {link.key}")
        for ch in channels:
            if (ch.site, ch.instrument) != (instrument.site, instrument.id):
                raise ValueError(
                    f"channel {ch.site}/{ch.id} belongs to {ch.instrument!r}, not {instrument.id!r}")
        self.instrument = instrument
        self.instrument_id = instrument.id
        self.channels = tuple(channels)
        self.link = link
        self.counters = DriverCounters()
        self.plan: ReadPlan = plan_reads(self.channels, instrument.register_map.points,
                                         max_gap=max_gap, max_bit_gap=max_bit_gap)
        index = {id(ch): i for i, ch in enumerate(self.channels)}
        self._steps = tuple(self._step(block, index) for block in self.plan.blocks)
        self._unit = instrument.unit_id
        self._timeout = instrument.timeout
        self._idle = bus_idle_time(instrument)
        # units and status registers of catalogue maps (`drivers.modbus.device_state`); None for plain maps
        self.device = DeviceState(instrument=instrument, channels=self.channels)
        self._device = self.device if self.device.active else None
        link.attach(instrument.unit_id)

    def _step(self, block: Block, index: dict[int, int]) -> _Step:
        inst = self.instrument
        targets = tuple(
            _Target(index=index[id(pc.channel)], offset=pc.offset, decode=pc.decode, site=pc.channel.site,
                    channel=pc.channel.id, unit=pc.channel.unit, scale=pc.channel.scale,
                    value_offset=pc.channel.offset, valid_min=pc.channel.valid_min,
                    valid_max=pc.channel.valid_max, over_max=pc.channel.over_range_limit,
                    where=f"point {pc.point.name!r} ({block.table.value} {pc.point.address})",
                    lo=-math.inf if pc.channel.valid_min is None else pc.channel.valid_min,
                    hi=math.inf if pc.channel.valid_max is None else pc.channel.valid_max)
            for pc in block.channels
        )
        prefix = (f"{inst.site}/{inst.id} unit {inst.unit_id} on {self.link.key}, "
                  f"{block.table.value} {block.address}..{block.end - 1}")
        return _Step(table=block.table, address=block.address, count=block.count, targets=targets,
                     prefix=prefix)

    def __repr__(self) -> str:
        return f"ModbusDriver({self.instrument.site}/{self.instrument_id}, {self.plan.requests} requests)"

    async def poll(self) -> list[Sample]:
        """Read every block once; exactly one sample per channel, in channel order. Never raises for I/O."""
        started = time.monotonic()
        out: list[Sample | None] = [None] * len(self.channels)
        read = self.link.read
        device = self._device
        if device is not None:
            await device.refresh(self._read_block)
        for step in self._steps:
            try:
                values = await read(unit=self._unit, table=step.table, address=step.address, count=step.count,
                                    reply_timeout=self._timeout, idle_after=self._idle)
            except ReadFailure as failure:
                self._fail(out, step, failure.quality, f"{step.prefix}: {failure.detail}", clock.wall())
                if device is not None and failure.quality is Quality.COMM_FAILURE:
                    device.lost_contact()
                continue
            self.counters.good += self._decode_block(values, step, out, clock.wall())
        c = self.counters
        samples: list[Sample] = out  # type: ignore[assignment]  # every index is filled: the plan covers them all
        if device is not None:  # what the instrument says of its readings: units, faults, maintenance
            samples, taken = device.apply(samples, c.bad)
            c.good -= taken
        c.polls += 1
        c.last_poll_seconds = time.monotonic() - started
        return samples

    def _decode_block(self, values: Sequence[int], step: _Step, out: list[Sample | None], now: float) -> int:
        """One sample per channel of a block read at ``now``, each at its place in ``out``; returns how many are good.

        The good case (`in_span`) builds its sample here, in C where the extension is built
        (`drivers.modbus._blockdecode`: the integer decoders, the same arithmetic and comparisons); `_judge` says
        why a value is not good, and takes every case the C path leaves to Python."""
        targets = step.targets
        run = _native.run if _native is not None and (type(values) is tuple or type(values) is list) else None
        good = i = 0
        n = len(targets)
        while i < n:
            if run is not None:
                j = run(values, targets, i, out, now)
                good += j - i
                if j == n:
                    break
                i = j
            t = targets[i]
            try:
                value = t.decode(values, t.offset) * t.scale + t.value_offset
            except Exception:
                value = math.nan  # `_judge` decodes again and says why
            if in_span(value, t.lo, t.hi):
                good += 1
                out[t.index] = Sample(now, t.site, t.channel, value, t.unit)
            else:
                out[t.index] = self._judge(values, t, step, now)
            i += 1
        return good

    async def _read_block(self, block: Block) -> Sequence[int]:
        """One read of the units/status registers (`DeviceState`), its failure told with where it was."""
        try:
            return await self.link.read(unit=self._unit, table=block.table, address=block.address,
                                        count=block.count, reply_timeout=self._timeout, idle_after=self._idle)
        except ReadFailure as failure:
            inst = self.instrument
            failure.detail = (f"{inst.site}/{inst.id} unit {inst.unit_id} on {self.link.key}, {block.table.value} "
                              f"{block.address}..{block.end - 1}: {failure.detail}")
            raise

    def _judge(self, values: Sequence[int], t: _Target, step: _Step, now: float) -> Sample:
        """One channel's sample from a block's registers; `poll` handles the good case itself."""
        try:
            raw = t.decode(values, t.offset)
        except Exception as exc:  # cannot happen after the link's length check; never let it escape
            return self._bad(t, now, Quality.DECODE_ERROR, f"{step.prefix}, {t.where}: cannot decode ({exc})")
        sample = judge_value(raw, time=now, site=t.site, channel=t.channel, unit=t.unit, scale=t.scale,
                             offset=t.value_offset, valid_min=t.valid_min, valid_max=t.valid_max,
                             over_max=t.over_max)
        if sample.quality is Quality.GOOD:
            self.counters.good += 1
            return sample
        self.counters.bad[sample.quality] += 1
        return dataclasses.replace(sample, reason=f"{step.prefix}, {t.where}: {sample.reason}")

    def _fail(self, out: list[Sample | None], step: _Step, quality: Quality, reason: str, now: float) -> None:
        for t in step.targets:
            out[t.index] = self._bad(t, now, quality, reason)

    def _bad(self, t: _Target, now: float, quality: Quality, reason: str) -> Sample:
        self.counters.bad[quality] += 1
        return Sample(time=now, site=t.site, channel=t.channel, value=None, unit=t.unit, quality=quality,
                      reason=reason)

    async def close(self) -> None:
        """Nothing to release: the link is shared and closed by its owner."""


def build_modbus_drivers(
    config: SiteConfig,
    *,
    max_gap: int = DEFAULT_MAX_GAP,
    max_bit_gap: int = DEFAULT_MAX_BIT_GAP,
    backoff_initial: float = 0.1,
    backoff_max: float = 10.0,
) -> tuple[list[ModbusDriver], list[ModbusLink]]:
    """One driver per Modbus instrument that has channels, and one link per `Instrument.link_key`.

    Instruments without channels are not polled (nothing would be recorded). The caller owns the links and
    closes them (`ModbusLink.close`) after the last poll.
    """
    quiet_pymodbus_logging()
    by_instrument: dict[tuple[str, str], list[Channel]] = {}
    for ch in config.channels:
        by_instrument.setdefault((ch.site, ch.instrument), []).append(ch)
    links: dict[str, ModbusLink] = {}
    drivers: list[ModbusDriver] = []
    for inst in config.instruments:
        channels = by_instrument.get((inst.site, inst.id))
        if not inst.driver.is_modbus or not channels:
            continue
        link = links.get(inst.link_key)
        if link is None:
            link = links[inst.link_key] = ModbusLink.for_instrument(
                inst, backoff_initial=backoff_initial, backoff_max=backoff_max)
        drivers.append(ModbusDriver(instrument=inst, channels=channels, link=link, max_gap=max_gap,
                                    max_bit_gap=max_bit_gap))
    return drivers, list(links.values())


if _native is not None:
    # the (quality, reason) defaults a sample made without them gets, as `_decode_block`'s Python makes them
    _native.bind(_Target, Sample, tuple(f.default for f in dataclasses.fields(Sample)
                                        if f.default is not dataclasses.MISSING), INTEGER_DECODERS)
