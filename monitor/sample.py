"""The unit of data that flows through the daemon: one reading of one channel, with its quality.

A failed read is never a number. Drivers turn every poll outcome into a `Sample`: a good one carries the
engineering value; a bad one carries ``value=None`` and a `Quality` saying why, plus a human-readable
``reason`` naming the device and the failure. One quality carries a number although it is not good:
``over_range``, a reading above the span of an instrument that saturates high (an LEL meter at 120 %): the
value is what the instrument reported, the checks judge it as the span's top (`monitor.checks.engine`).
Stores record bad samples too (that is the evidence that the instrument was down), and checks never judge
them. ``maintenance`` is the instrument's own word that it is being serviced or calibrated (a catalogue map's
status register, `config.maps`): not judged, but the device is answering, so it is not silence
(`monitor.staleness` does not call the channel stale for it). ``clock_skew`` is a reading whose device timestamp
is further ahead of its arrival than any clock drift explains (`drivers.mqtt.payload`): its time is unknown, so
it is no measurement; it is kept at its arrival time, the number read and the timestamp rejected in its reason.

Time is ``float`` seconds since the Unix epoch (UTC). A float keeps the hot paths (polling 1,000 devices a
second, replaying 10 million rows) free of datetime allocations; `Sample.utc` gives the aware datetime for
display and export.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final, TypeVar, dataclass_transform


class Quality(StrEnum):
    """Why a sample can or cannot be trusted. Values are the words stored in the historian and CSV."""

    GOOD = "good"
    COMM_FAILURE = "comm_failure"  # timeout, connection refused or dropped: nothing came back
    DEVICE_EXCEPTION = "device_exception"  # the device answered with a Modbus exception code
    DECODE_ERROR = "decode_error"  # bytes came back but could not become a number (short reply, bad JSON)
    BAD_VALUE = "bad_value"  # NaN or infinity
    OUT_OF_RANGE = "out_of_range"  # a number outside the channel's configured valid range
    STALE = "stale"  # no good reading within the channel's staleness window (judged on a clock tick)
    DEVICE_FAULT = "device_fault"  # the instrument's own fault bit is set (the reason quotes the vendor's text)
    OVER_RANGE = "over_range"  # above the span of a channel that judges it as valid_max (an LEL meter saturating)
    MAINTENANCE = "maintenance"  # the instrument says it is in service or calibration: not a measurement
    UNIT_MISMATCH = "unit_mismatch"  # the instrument's units register disagrees with the channel's unit
    CLOCK_SKEW = "clock_skew"  # the device timestamp is further ahead of the receive time than drift explains

    @property
    def is_good(self) -> bool:
        return self is Quality.GOOD


GOOD = Quality.GOOD  # for the per-reading paths: ``s.quality is GOOD`` without the class attribute look-up

# Stable codes of each quality, as the historian stores them (`monitor.stores.historian_db`) and the Modbus
# gateway serves them (`alarms.gateway`). Never renumber: they are in every file already written. Adding a
# quality needs a new code here and a historian SCHEMA_VERSION bump (older readers would not know the code).
QUALITY_CODES: Final[dict[Quality, int]] = {
    Quality.GOOD: 0,
    Quality.COMM_FAILURE: 1,
    Quality.DEVICE_EXCEPTION: 2,
    Quality.DECODE_ERROR: 3,
    Quality.BAD_VALUE: 4,
    Quality.OUT_OF_RANGE: 5,
    Quality.STALE: 6,
    Quality.DEVICE_FAULT: 7,
    Quality.OVER_RANGE: 8,
    Quality.MAINTENANCE: 9,
    Quality.UNIT_MISMATCH: 10,
    Quality.CLOCK_SKEW: 11,
}
_missing_codes = set(Quality) - set(QUALITY_CODES)
if _missing_codes:  # pragma: no cover - guards a future edit of Quality
    raise RuntimeError(f"historian has no storage code for {_missing_codes}; add one to QUALITY_CODES")
QUALITY_BY_CODE: Final[dict[int, Quality]] = {c: q for q, c in QUALITY_CODES.items()}

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def evidence(cls: type[T]) -> type[T]:
    """A record that is never changed once made: frozen to the type checker, a plain slotted dataclass at run
    time (hashable, compared by value, `dataclasses.replace` for a changed copy).

    Why not ``dataclass(frozen=True)``: a frozen dataclass sets each field through ``object.__setattr__``, which
    made creating a `Sample` cost 0.83 µs instead of 0.19 µs. The daemon creates one per reading, ~100,000 a
    second flat out: 6 % of the event loop (bench/bench_polling.py). mypy, run by ``make test``, rejects any
    assignment to a field (``frozen_default``), so no code of ours can alter recorded evidence; code that
    sets a field through ``setattr`` or ``object.__setattr__`` bypasses either form."""
    return dataclass(slots=True, unsafe_hash=True)(cls)  # with slots=True, a new class


@evidence
class Sample:
    """One reading. ``value`` is in the channel's engineering ``unit`` and is ``None`` unless quality is good.

    ``time`` is seconds since the epoch, UTC: the device's own timestamp where it sends one (MQTT), otherwise
    the moment the poll's reply arrived.
    """

    time: float
    site: str
    channel: str
    value: float | None
    unit: str
    quality: Quality = Quality.GOOD
    reason: str = ""

    @property
    def good(self) -> bool:
        return self.quality is Quality.GOOD

    @property
    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.time, tz=UTC)

    @classmethod
    def bad(cls, *, time: float, site: str, channel: str, unit: str, quality: Quality, reason: str) -> Sample:
        if quality is Quality.GOOD:
            raise ValueError("a bad sample needs a quality other than GOOD")
        return cls(time=time, site=site, channel=channel, value=None, unit=unit, quality=quality, reason=reason)


def in_span(value: float, lo: float, hi: float) -> bool:
    """`judge_value`'s good case: a scaled value that is finite and inside the instrument's span [lo, hi], both
    ends inclusive (an end nobody set is ±inf). The Modbus driver asks it for every register it reads before
    building the good sample itself, and leaves every other case to `judge_value`, which says why."""
    return lo <= value <= hi and value - value == 0.0  # the subtraction is NaN for ±inf and NaN


def judge_value(
    raw: float,
    *,
    time: float,
    site: str,
    channel: str,
    unit: str,
    scale: float = 1.0,
    offset: float = 0.0,
    valid_min: float | None = None,
    valid_max: float | None = None,
    over_max: float | None = None,
) -> Sample:
    """Scale a decoded number into engineering units and judge it against the channel's valid range.

    The valid range is inclusive at both ends: it describes what the instrument can physically report
    (pH 0–14, 0–100 % LEL), so a reading exactly at the end of the span is a real reading. ``over_max``
    (`config.schema.Channel.over_range_limit`, None for channels that do not judge over-range readings): a
    value above ``valid_max`` up to it (inclusive) is an OVER_RANGE sample that keeps its value; beyond it, it
    is OUT_OF_RANGE like any other.
    """
    if not math.isfinite(raw):
        return Sample.bad(time=time, site=site, channel=channel, unit=unit, quality=Quality.BAD_VALUE,
                          reason=f"non-finite value {raw!r}")
    value = raw * scale + offset
    if in_span(value, -math.inf if valid_min is None else valid_min, math.inf if valid_max is None else valid_max):
        return Sample(time=time, site=site, channel=channel, value=value, unit=unit)
    if not math.isfinite(value):  # a finite raw number can overflow once scaled
        return Sample.bad(time=time, site=site, channel=channel, unit=unit, quality=Quality.BAD_VALUE,
                          reason=f"value {raw!r} x {scale:g} + {offset:g} is not finite")
    if over_max is not None and valid_max is not None and valid_max < value <= over_max:
        return Sample(time=time, site=site, channel=channel, value=value, unit=unit, quality=Quality.OVER_RANGE,
                      reason=f"{value:g} {unit} above the span [{valid_min}, {valid_max}]: judged as {valid_max:g}")
    return Sample.bad(time=time, site=site, channel=channel, unit=unit, quality=Quality.OUT_OF_RANGE,
                      reason=f"{value:g} {unit} outside valid range [{valid_min}, {valid_max}]")


try:  # built by setup.py where a C compiler is at hand; without it samples stay tracked (slower, same results)
    from monitor._untrack import untrack as _untrack
except ImportError:  # pragma: no cover - the extension is built in every environment the tests run in
    _untrack = None  # type: ignore[assignment]

NATIVE_UNTRACK = _untrack is not None


def release_from_gc(samples: list[Sample] | tuple[Sample, ...]) -> int:
    """Take ``samples`` out of the cyclic garbage collector's sight; returns how many it took (0 without the C
    extension `monitor._untrack`). The daemon calls it once for every batch it ingests (`monitor.app`).

    Why: a sample can never be part of a reference cycle (its fields are atoms and a `Quality` member), yet as a
    slotted class it is tracked, and the daemon keeps each one alive for up to a historian commit interval, so
    nearly all of them were scanned by the young generations' passes: ~100,000 samples a pass at 1,000
    instruments a second, 30-190 ms with the GIL held, the event loop's worst stalls (bench/bench_peers.py).
    Freeing is unchanged: reference counting frees a sample once nothing holds it. Only objects whose type is
    exactly `Sample` are touched."""
    if _untrack is None:
        return 0
    return _untrack(samples, Sample)
