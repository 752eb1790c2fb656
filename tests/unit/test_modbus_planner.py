"""Read planner: block grouping, gaps, protocol limits, only points in use."""

from __future__ import annotations

import pytest

from config.schema import Channel, ChannelKind, DataType, RegisterPoint, Table
from drivers.modbus.planner import MAX_BITS, MAX_REGISTERS, plan_reads


def pt(name: str, address: int, dtype: DataType = DataType.UINT16,
       table: Table = Table.HOLDING) -> RegisterPoint:
    return RegisterPoint(name=name, table=table, address=address, dtype=dtype)


def ch(point: str, cid: str | None = None) -> Channel:
    return Channel(id=cid or point, site="s", instrument="i", kind=ChannelKind.OTHER, unit="x", point=point)


def spans(plan: object) -> list[tuple[str, int, int]]:
    return [(b.table.value, b.address, b.count) for b in plan.blocks]  # type: ignore[attr-defined]


def test_contiguous_points_become_one_block_with_offsets() -> None:
    points = {"a": pt("a", 10, DataType.FLOAT32), "b": pt("b", 12, DataType.UINT32), "c": pt("c", 14)}
    plan = plan_reads([ch("c"), ch("a"), ch("b")], points)
    assert spans(plan) == [("holding", 10, 5)]
    offsets = {pc.channel.id: pc.offset for pc in plan.blocks[0].channels}
    assert offsets == {"a": 0, "b": 2, "c": 4}


def test_small_gaps_are_bridged_and_large_ones_split() -> None:
    points = {"a": pt("a", 0), "b": pt("b", 9), "c": pt("c", 30)}  # gaps of 8 and 20 registers
    assert spans(plan_reads([ch("a"), ch("b"), ch("c")], points)) == [("holding", 0, 10), ("holding", 30, 1)]
    assert spans(plan_reads([ch("a"), ch("b"), ch("c")], points, max_gap=7)) == [
        ("holding", 0, 1), ("holding", 9, 1), ("holding", 30, 1)]
    assert spans(plan_reads([ch("a"), ch("b"), ch("c")], points, max_gap=20)) == [("holding", 0, 31)]


def test_max_gap_zero_reads_only_adjacent_points_together() -> None:
    points = {"a": pt("a", 0), "b": pt("b", 1), "c": pt("c", 3)}
    assert spans(plan_reads([ch("a"), ch("b"), ch("c")], points, max_gap=0)) == [
        ("holding", 0, 2), ("holding", 3, 1)]


def test_only_points_used_by_channels_are_read() -> None:
    points = {"a": pt("a", 0), "unused": pt("unused", 1), "b": pt("b", 100)}
    assert spans(plan_reads([ch("a"), ch("b")], points)) == [("holding", 0, 1), ("holding", 100, 1)]


def test_tables_are_never_mixed_and_come_in_a_stable_order() -> None:
    points = {
        "d": pt("d", 0, DataType.BOOL, Table.DISCRETE),
        "i": pt("i", 0, table=Table.INPUT),
        "h": pt("h", 0),
        "c": pt("c", 5, DataType.BOOL, Table.COIL),
    }
    plan = plan_reads([ch("d"), ch("i"), ch("h"), ch("c")], points)
    assert spans(plan) == [("holding", 0, 1), ("input", 0, 1), ("coil", 5, 1), ("discrete", 0, 1)]


def test_never_more_than_125_registers_per_request() -> None:
    points = {f"p{i}": pt(f"p{i}", i * 2, DataType.FLOAT32) for i in range(100)}  # 200 registers, no gaps
    plan = plan_reads([ch(name) for name in points], points)
    assert all(b.count <= MAX_REGISTERS for b in plan.blocks)
    assert sum(b.count for b in plan.blocks) == 200
    assert spans(plan) == [("holding", 0, 124), ("holding", 124, 76)]  # a float32 is never split


def test_never_more_than_2000_bits_per_request() -> None:
    points = {f"b{i}": pt(f"b{i}", i * 10, DataType.BOOL, Table.DISCRETE) for i in range(400)}
    plan = plan_reads([ch(name) for name in points], points, max_bit_gap=16)
    assert all(b.count <= MAX_BITS for b in plan.blocks)
    assert len(plan.blocks) == 2
    assert {pc.channel.id for b in plan.blocks for pc in b.channels} == set(points)


def test_two_channels_on_one_point_share_the_read() -> None:
    points = {"t": pt("t", 4, DataType.INT16)}
    plan = plan_reads([ch("t", "temp_c"), ch("t", "temp_raw")], points)
    assert spans(plan) == [("holding", 4, 1)]
    assert [pc.channel.id for pc in plan.blocks[0].channels] == ["temp_c", "temp_raw"]


def test_overlapping_points_extend_the_block_to_the_longest() -> None:
    points = {"wide": pt("wide", 0, DataType.FLOAT64), "inner": pt("inner", 1)}
    assert spans(plan_reads([ch("inner"), ch("wide")], points)) == [("holding", 0, 4)]


def test_a_channel_naming_a_missing_point_is_refused() -> None:
    with pytest.raises(KeyError):
        plan_reads([ch("nope")], {"a": pt("a", 0)})
    with pytest.raises(ValueError):
        plan_reads([ch("a")], {"a": pt("a", 0)}, max_gap=-1)
