"""Register codec: every type in all four byte/word orders, against known vectors and against pymodbus."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymodbus.client.mixin import ModbusClientMixin

from config.schema import ByteOrder, DataType, RegisterPoint, Table
from drivers.modbus.codec import decoder_for, encode

BIG, LITTLE = ByteOrder.BIG, ByteOrder.LITTLE
ORDERS = [(BIG, BIG), (BIG, LITTLE), (LITTLE, BIG), (LITTLE, LITTLE)]
NUMERIC = [DataType.INT16, DataType.UINT16, DataType.INT32, DataType.UINT32, DataType.FLOAT32,
           DataType.FLOAT64]
PYMODBUS_TYPE = {
    DataType.INT16: ModbusClientMixin.DATATYPE.INT16,
    DataType.UINT16: ModbusClientMixin.DATATYPE.UINT16,
    DataType.INT32: ModbusClientMixin.DATATYPE.INT32,
    DataType.UINT32: ModbusClientMixin.DATATYPE.UINT32,
    DataType.FLOAT32: ModbusClientMixin.DATATYPE.FLOAT32,
    DataType.FLOAT64: ModbusClientMixin.DATATYPE.FLOAT64,
}


def point(dtype: DataType, byte_order: ByteOrder = BIG, word_order: ByteOrder = BIG) -> RegisterPoint:
    table = Table.COIL if dtype is DataType.BOOL else Table.HOLDING
    return RegisterPoint(name="p", table=table, address=0, dtype=dtype, byte_order=byte_order,
                         word_order=word_order)


# 1.0 as float32 is 3F 80 00 00 (A B C D); 0x12345678 as uint32 is 12 34 56 78.
@pytest.mark.parametrize(("byte_order", "word_order", "float_regs", "uint_regs"), [
    (BIG, BIG, [0x3F80, 0x0000], [0x1234, 0x5678]),  # ABCD
    (BIG, LITTLE, [0x0000, 0x3F80], [0x5678, 0x1234]),  # CDAB
    (LITTLE, BIG, [0x803F, 0x0000], [0x3412, 0x7856]),  # BADC
    (LITTLE, LITTLE, [0x0000, 0x803F], [0x7856, 0x3412]),  # DCBA
])
def test_known_32_bit_vectors(byte_order: ByteOrder, word_order: ByteOrder, float_regs: list[int],
                              uint_regs: list[int]) -> None:
    f32 = point(DataType.FLOAT32, byte_order, word_order)
    u32 = point(DataType.UINT32, byte_order, word_order)
    assert decoder_for(f32)(float_regs, 0) == 1.0
    assert decoder_for(u32)(uint_regs, 0) == 0x12345678
    assert encode(f32, 1.0) == float_regs
    assert encode(u32, 0x12345678) == uint_regs


def test_16_bit_types_honour_byte_order_only() -> None:
    assert decoder_for(point(DataType.INT16))([0xFFFE], 0) == -2
    assert decoder_for(point(DataType.INT16, LITTLE))([0xFEFF], 0) == -2
    assert decoder_for(point(DataType.UINT16, LITTLE, LITTLE))([0x3412], 0) == 0x1234
    assert encode(point(DataType.INT16, LITTLE), -2) == [0xFEFF]


def test_float64_word_orders() -> None:
    abcd = encode(point(DataType.FLOAT64), 1.5)
    assert abcd == [0x3FF8, 0, 0, 0]
    assert encode(point(DataType.FLOAT64, BIG, LITTLE), 1.5) == [0, 0, 0, 0x3FF8]
    assert encode(point(DataType.FLOAT64, LITTLE, LITTLE), 1.5) == [0, 0, 0, 0xF83F]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(("byte_order", "word_order"), ORDERS)
def test_decoder_reads_at_an_offset_inside_a_block(dtype: DataType, byte_order: ByteOrder,
                                                   word_order: ByteOrder) -> None:
    p = point(dtype, byte_order, word_order)
    words = encode(p, 1234)
    block = [0xDEAD] * 3 + words + [0xBEEF] * 3
    assert decoder_for(p)(block, 3) == 1234
    assert decoder_for(p)(words, 0) == 1234


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("word_order", [BIG, LITTLE])
@settings(derandomize=True, max_examples=50)
@given(data=st.data())
def test_matches_pymodbus_convert_from_registers(dtype: DataType, word_order: ByteOrder,
                                                 data: st.DataObject) -> None:
    """pymodbus knows word order but not byte order: compare the big-byte cases directly, and the swapped
    cases after swapping the bytes of each register back."""
    n = dtype.registers
    regs = data.draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    ours = decoder_for(point(dtype, BIG, word_order))(regs, 0)
    theirs = ModbusClientMixin.convert_from_registers(regs, PYMODBUS_TYPE[dtype], word_order=word_order.value)
    assert _same(ours, theirs)
    swapped = [((r & 0xFF) << 8) | (r >> 8) for r in regs]
    ours_swapped = decoder_for(point(dtype, LITTLE, word_order))(swapped, 0)
    assert _same(ours_swapped, theirs)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


_VALUES = {
    DataType.INT16: st.integers(-(2**15), 2**15 - 1),
    DataType.UINT16: st.integers(0, 2**16 - 1),
    DataType.INT32: st.integers(-(2**31), 2**31 - 1),
    DataType.UINT32: st.integers(0, 2**32 - 1),
    DataType.FLOAT32: st.floats(width=32, allow_nan=False),
    DataType.FLOAT64: st.floats(allow_nan=False),
}


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(("byte_order", "word_order"), ORDERS)
@settings(derandomize=True, max_examples=50)
@given(data=st.data())
def test_encode_then_decode_round_trips(dtype: DataType, byte_order: ByteOrder, word_order: ByteOrder,
                                        data: st.DataObject) -> None:
    p = point(dtype, byte_order, word_order)
    value = data.draw(_VALUES[dtype])
    regs = encode(p, value)
    assert len(regs) == dtype.registers
    assert all(0 <= r <= 0xFFFF for r in regs)
    assert decoder_for(p)(regs, 0) == value


def test_nan_and_infinity_survive_float_types() -> None:
    for byte_order, word_order in ORDERS:
        p = point(DataType.FLOAT32, byte_order, word_order)
        assert math.isnan(decoder_for(p)(encode(p, math.nan), 0))
        assert decoder_for(p)(encode(p, -math.inf), 0) == -math.inf


def test_integer_types_round_floats_and_refuse_what_they_cannot_hold() -> None:
    assert encode(point(DataType.INT16), 719.6) == [720]
    assert encode(point(DataType.UINT16), 2.5) == [2]  # half to even
    with pytest.raises(ValueError, match="cannot hold nan"):
        encode(point(DataType.INT16), math.nan)
    with pytest.raises(ValueError, match="outside"):
        encode(point(DataType.UINT16), -1)
    with pytest.raises(ValueError, match="outside"):
        encode(point(DataType.INT32), 2**31)
    with pytest.raises(ValueError, match="cannot hold"):
        encode(point(DataType.FLOAT32), 1e39)  # beyond float32


def test_bool_points() -> None:
    p = point(DataType.BOOL)
    assert encode(p, True) == [1]
    assert encode(p, 0) == [0]
    assert decoder_for(p)([False, True, False], 1) == 1.0
    assert decoder_for(p)([False, True, False], 2) == 0.0


def test_decoders_are_chosen_once_and_are_distinct_per_order() -> None:
    """Different orders must give different functions (no order test left for the hot path)."""
    regs = [0x1234, 0x5678]
    results = {decoder_for(point(DataType.UINT32, b, w))(regs, 0) for b, w in ORDERS}
    assert results == {0x12345678, 0x56781234, 0x34127856, 0x78563412}
    assert struct.pack(">I", 0x34127856) == bytes([0x34, 0x12, 0x78, 0x56])
