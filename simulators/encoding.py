"""Engineering value -> what the device puts on the wire, the inverse of the channel's scale and offset.

raw = (engineering - channel.offset) / channel.scale, rounded to the nearest integer for integer registers
and turned into a bit for coils and discrete inputs. The *served* value (the simulator's ground truth) is
then raw × scale + offset: exactly what a correct driver must read back, quantisation included.
"""

from __future__ import annotations

import math
import struct

from config.schema import Channel, DataType, RegisterPoint

INT_RANGES: dict[DataType, tuple[int, int]] = {
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.UINT16: (0, 2**16 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.UINT32: (0, 2**32 - 1),
}

Raw = float | int | bool


def unencodable(channel: Channel, point: RegisterPoint | None, value: float) -> str | None:
    """Why ``value`` cannot be served on this channel's register (None when it can).

    Non-finite values fit only float registers and MQTT payloads (``point`` None); integer registers
    must hold the rounded raw value; bits take 0 or 1.
    """
    if point is None or point.dtype in (DataType.FLOAT32, DataType.FLOAT64):
        return None
    if point.dtype is DataType.BOOL:
        return None if value in (0.0, 1.0) else "0 or 1 (a bit)"
    if not math.isfinite(value):
        return f"a finite number ({point.dtype.value} register '{point.name}' cannot hold {value})"
    lo, hi = INT_RANGES[point.dtype]
    raw = round((value - channel.offset) / channel.scale)
    if not lo <= raw <= hi:
        eng = sorted((lo * channel.scale + channel.offset, hi * channel.scale + channel.offset))
        return (f"a value the {point.dtype.value} register '{point.name}' can hold "
                f"({eng[0]:g} to {eng[1]:g} {channel.unit})")
    return None


def to_raw(channel: Channel, point: RegisterPoint | None, value: float) -> tuple[Raw, bool]:
    """(raw, clamped): the device value for ``value``; ``clamped`` when an integer had to be limited to
    its register's range (models stay in range; only a bad override gets here, and it is logged)."""
    if point is not None and point.dtype is DataType.BOOL:
        return value != 0.0 and not math.isnan(value), False
    raw = (value - channel.offset) / channel.scale
    if point is not None and point.dtype is DataType.FLOAT32:
        return _float32(raw), False
    if point is None or point.dtype is DataType.FLOAT64:
        return raw, False
    lo, hi = INT_RANGES[point.dtype]
    if not math.isfinite(raw):
        return (lo if raw < 0 else hi) if math.isinf(raw) else 0, True
    r = round(raw)
    return min(hi, max(lo, r)), not lo <= r <= hi


def served_value(channel: Channel, raw: Raw) -> float:
    """The engineering value a correct reader derives from ``raw``."""
    return float(raw) * channel.scale + channel.offset


def _float32(x: float) -> float:
    """``x`` as a float32 register holds it (so the ground truth matches the wire bit for bit)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:  # beyond float32's range: the register holds infinity
        return math.copysign(math.inf, x)
