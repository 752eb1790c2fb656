"""Registers to numbers and back, for every `DataType` in all four byte/word orders.

Orders, as devices document them (A = most significant byte of the value):

=============  ==========  =========  ===========================================
byte_order     word_order  32-bit     meaning
=============  ==========  =========  ===========================================
big            big         ABCD       the Modbus convention (high byte, high word first)
big            little      CDAB       low word first ("word swapped"), common on PLCs
little         big         BADC       bytes swapped inside each register
little         little      DCBA       fully little-endian
=============  ==========  =========  ===========================================

``byte_order`` is the order of the two bytes inside each 16-bit register; ``word_order`` is the order of the
registers of a 32/64-bit value. For 16-bit types only ``byte_order`` matters.

A decoder is chosen once per point when the read plan is compiled (`decoder_for`), so the poll loop calls a
ready-made function and never looks at a type or an order again. Decoders take the whole block of registers
and the point's offset inside it, so a block is never sliced per point.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Final

from config.schema import ByteOrder, DataType, RegisterPoint

Decoder = Callable[[Sequence[int], int], float]
"""``decode(block, offset) -> number``: the value of one point from a block read (registers or bits)."""

# struct format of the value, read big-endian from the bytes in ABCD order.
_VALUE_FORMAT: dict[DataType, str] = {
    DataType.INT16: ">h",
    DataType.UINT16: ">H",
    DataType.INT32: ">i",
    DataType.UINT32: ">I",
    DataType.FLOAT32: ">f",
    DataType.FLOAT64: ">d",
}
_INTEGER_RANGE: dict[DataType, tuple[int, int]] = {
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.UINT16: (0, 2**16 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.UINT32: (0, 2**32 - 1),
}


def _swap(reg: int) -> int:
    return ((reg & 0xFF) << 8) | (reg >> 8)


def decoder_for(point: RegisterPoint) -> Decoder:
    """The decoder of one point, specialised for its type and orders (fast paths for the common cases)."""
    dtype = point.dtype
    if dtype is DataType.BOOL:
        return _decode_bit
    swap_bytes = point.byte_order is ByteOrder.LITTLE
    if dtype is DataType.UINT16:
        return _decode_uint16_swapped if swap_bytes else _decode_uint16
    if dtype is DataType.INT16:
        return _decode_int16_swapped if swap_bytes else _decode_int16
    if not swap_bytes and point.word_order is ByteOrder.BIG and dtype is DataType.UINT32:
        return _decode_uint32_abcd
    return _struct_decoder(dtype, point.count, swap_bytes, point.word_order is ByteOrder.LITTLE)


def _decode_bit(bits: Sequence[int], i: int) -> float:
    return 1.0 if bits[i] else 0.0


def _decode_uint16(regs: Sequence[int], i: int) -> float:
    return regs[i]


def _decode_uint16_swapped(regs: Sequence[int], i: int) -> float:
    return _swap(regs[i])


def _decode_int16(regs: Sequence[int], i: int) -> float:
    return (regs[i] ^ 0x8000) - 0x8000


def _decode_int16_swapped(regs: Sequence[int], i: int) -> float:
    return (_swap(regs[i]) ^ 0x8000) - 0x8000


def _decode_uint32_abcd(regs: Sequence[int], i: int) -> float:
    return (regs[i] << 16) | regs[i + 1]


# The integer decoders, in the order `drivers.modbus._blockdecode` knows them: it decodes these in C, exactly as
# above (a register must be an int in 0..65535 there; anything else it leaves to these functions).
INTEGER_DECODERS: Final = (_decode_uint16, _decode_uint16_swapped, _decode_int16, _decode_int16_swapped,
                           _decode_uint32_abcd)


def _struct_decoder(dtype: DataType, n: int, swap_bytes: bool, reverse_words: bool) -> Decoder:
    """Put the registers back in ABCD order, pack them as big-endian words and unpack the value."""
    pack_words = struct.Struct(f">{n}H").pack
    unpack_value = struct.Struct(_VALUE_FORMAT[dtype]).unpack
    order = tuple(reversed(range(n))) if reverse_words else tuple(range(n))

    if swap_bytes:
        def decode(regs: Sequence[int], i: int) -> float:
            return unpack_value(pack_words(*[_swap(regs[i + k]) for k in order]))[0]
    else:
        def decode(regs: Sequence[int], i: int) -> float:
            return unpack_value(pack_words(*[regs[i + k] for k in order]))[0]
    return decode


def encode(point: RegisterPoint, value: float | int | bool) -> list[int]:
    """The registers (or, for BOOL, the one bit as 0/1) that make a device report ``value`` for ``point``.

    Used by the simulators. Integer types accept ints and floats; a float is rounded to the nearest integer
    (half to even), because scenario values are computed in engineering units and divided by the channel
    scale. A value the type cannot hold (NaN or infinity for an integer type, a number outside its range)
    raises `ValueError` naming the point: a simulator must not quietly serve something else.
    """
    dtype = point.dtype
    if dtype is DataType.BOOL:
        return [1 if value else 0]
    if dtype in _INTEGER_RANGE:
        number: float | int = _to_integer(point, value)
    else:
        number = float(value)
    try:
        raw = struct.pack(_VALUE_FORMAT[dtype], number)
    except (struct.error, OverflowError) as exc:
        raise ValueError(f"point {point.name!r} ({dtype.value}) cannot hold {value!r}: {exc}") from exc
    regs = [int.from_bytes(raw[k : k + 2], "big") for k in range(0, len(raw), 2)]
    if point.byte_order is ByteOrder.LITTLE:
        regs = [_swap(r) for r in regs]
    if point.word_order is ByteOrder.LITTLE:
        regs.reverse()
    return regs


def _to_integer(point: RegisterPoint, value: float | int | bool) -> int:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"point {point.name!r} ({point.dtype.value}) cannot hold {value!r}")
        value = round(value)
    lo, hi = _INTEGER_RANGE[point.dtype]
    if not lo <= int(value) <= hi:
        raise ValueError(
            f"point {point.name!r} ({point.dtype.value}) cannot hold {value!r}: outside [{lo}, {hi}]")
    return int(value)
