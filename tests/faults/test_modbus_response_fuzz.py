"""Modbus response fuzzing (hypothesis) through the real driver and a real pymodbus server on loopback: random
values of every register type (NaN, infinities, extremes), random raw register words under them, short
replies (the simulator's GARBAGE fault) and exception replies with random codes. A poll never raises and
always yields exactly one sample per channel, in channel order; a sample is good only when the device served
a finite value inside the channel's valid range, and then it carries exactly that value, scaled.

Examples are derandomized (the same ones every run); each is one poll against the state it set up.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.schema import (
    ByteOrder,
    Channel,
    ChannelKind,
    DataType,
    DriverKind,
    Instrument,
    RegisterMap,
    RegisterPoint,
    Table,
)
from drivers.modbus import ModbusDriver, ModbusLink
from monitor.sample import Quality
from simulators.modbus_server import ModbusSimServer, SimFault
from tests.faults.harness import LoopThread
from tests.support import PATIENCE, free_port

H, L = ByteOrder.BIG, ByteOrder.LITTLE
# name -> (table, address, type, byte order, word order, scale, offset, valid_min, valid_max)
POINTS: dict[str, tuple[Table, int, DataType, ByteOrder, ByteOrder, float, float, float | None, float | None]] = {
    "f32": (Table.HOLDING, 0, DataType.FLOAT32, H, H, 1.0, 0.0, -1e6, 1e6),
    "f32_cdab": (Table.HOLDING, 2, DataType.FLOAT32, H, L, 0.5, 10.0, None, None),
    "i16": (Table.HOLDING, 4, DataType.INT16, H, H, 0.01, 0.0, -100.0, 100.0),
    "u32": (Table.HOLDING, 5, DataType.UINT32, H, H, 1.0, 0.0, None, 4e9),
    "f64_dcba": (Table.HOLDING, 7, DataType.FLOAT64, L, L, 1.0, 0.0, None, None),
    "i32_badc": (Table.HOLDING, 11, DataType.INT32, L, H, 2.0, -5.0, -1e9, 1e9),
    "u16": (Table.HOLDING, 13, DataType.UINT16, H, H, 1.0, 0.0, 0.0, 1000.0),
    "in_i16": (Table.INPUT, 0, DataType.INT16, L, H, 0.1, 0.0, -50.0, 50.0),
    "coil": (Table.COIL, 3, DataType.BOOL, H, H, 1.0, 0.0, None, None),
    "di": (Table.DISCRETE, 5, DataType.BOOL, H, H, 1.0, 0.0, None, None),
}
WORDS = 14  # holding 0..13: raw uint16 points "w<n>" over the typed ones, to serve any bit pattern


def register_map() -> RegisterMap:
    points = [RegisterPoint(name=n, table=t, address=a, dtype=d, byte_order=b, word_order=w)
              for n, (t, a, d, b, w, *_rest) in POINTS.items()]
    points += [RegisterPoint(name=f"w{i}", table=Table.HOLDING, address=i, dtype=DataType.UINT16)
               for i in range(WORDS)]
    return RegisterMap(name="fuzz", points={p.name: p for p in points})


def channels(inst: Instrument) -> list[Channel]:
    return [Channel(id=n, site=inst.site, instrument=inst.id, kind=ChannelKind.OTHER, unit="u", point=n,
                    scale=scale, offset=offset, valid_min=lo, valid_max=hi)
            for n, (*_head, scale, offset, lo, hi) in POINTS.items()]


def _value(dtype: DataType) -> st.SearchStrategy[Any]:
    if dtype is DataType.FLOAT32:
        return st.floats(width=32)
    if dtype is DataType.FLOAT64:
        return st.floats()
    if dtype is DataType.BOOL:
        return st.booleans()
    bits = {DataType.INT16: 16, DataType.UINT16: 16, DataType.INT32: 32, DataType.UINT32: 32}[dtype]
    signed = dtype in (DataType.INT16, DataType.INT32)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return st.integers(lo, hi) | st.sampled_from([lo, hi, 0])


_values = st.fixed_dictionaries({}, optional={n: _value(spec[2]) for n, spec in POINTS.items()})
_words = st.dictionaries(st.integers(0, WORDS - 1), st.integers(0, 0xFFFF) | st.sampled_from([0x7FC0, 0xFF80,
                                                                                              0x7F80, 0x8000]),
                         max_size=4)
_faults = st.sampled_from([SimFault.NONE] * 6 + [SimFault.GARBAGE, SimFault.EXCEPTION])
_codes = st.sampled_from([1, 2, 3, 4, 6, 8, 10, 11])


def served_raw(dtype: DataType, value: Any) -> float:
    """What a device holding ``value`` in a register of ``dtype`` reports, independently of our codec."""
    if dtype is DataType.FLOAT32:
        return float(struct.unpack(">f", struct.pack(">f", value))[0])
    return float(value)


def test_random_replies_never_raise_and_give_one_honest_sample_per_channel(tmp_path: Path) -> None:
    # every fuzzed reply comes (garbage, an exception or values; no silence): the reply timeout only has to
    # outlast a loaded machine, where a 0.5 s one turned a late reply into comm_failure (make test-loaded)
    inst = Instrument(id="fuzz", site="plant", driver=DriverKind.MODBUS_TCP, poll_interval=1.0, timeout=PATIENCE,
                      host="127.0.0.1", port=free_port(), register_map=register_map())
    chans = channels(inst)
    with LoopThread("fuzz-modbus") as loop:
        [server] = ModbusSimServer.for_instruments([inst])
        loop.run(server.start())
        dev = server.device("fuzz")
        link = loop.call(lambda: ModbusLink.for_instrument(inst, backoff_initial=0.01, backoff_max=0.05))
        driver = loop.call(lambda: ModbusDriver(instrument=inst, channels=chans, link=link))
        polls = {"n": 0, "good": 0, "bad": 0}
        try:
            @settings(max_examples=200, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
            @given(values=_values, words=_words, fault=_faults, code=_codes)
            def one_poll(values: dict[str, Any], words: dict[int, int], fault: SimFault, code: int) -> None:
                def arrange() -> None:
                    for name, v in values.items():
                        dev.set(name, v)
                    for i, w in words.items():
                        dev.set(f"w{i}", w)
                    dev.fault = fault
                    dev.exception_code = code
                loop.call(arrange)
                samples = loop.run(driver.poll())  # never raises: an exception here fails the example
                polls["n"] += 1
                assert [s.channel for s in samples] == [c.id for c in chans]
                for s in samples:
                    assert (s.value is None) == (not s.good) and (s.good or s.reason)
                    if fault is SimFault.GARBAGE:
                        assert s.quality is Quality.DECODE_ERROR, s
                    elif fault is SimFault.EXCEPTION:
                        assert s.quality is Quality.DEVICE_EXCEPTION and f"exception code {code}" in s.reason, s
                    else:
                        check_value(s, values, words, dev)
                    polls["good" if s.good else "bad"] += 1

            one_poll()
        finally:
            loop.run(link.close())
            loop.run(server.stop())
    assert polls["n"] >= 200 and driver.counters.polls == polls["n"]
    assert polls["good"] > 0 and polls["bad"] > 0


def check_value(s: Any, values: dict[str, Any], words: dict[int, int], dev: Any) -> None:
    table, address, dtype, _b, _w, scale, offset, lo, hi = POINTS[s.channel]
    overwritten = table is Table.HOLDING and any(address <= i < address + dtype.registers for i in words)
    if s.channel in values and not overwritten:
        raw = served_raw(dtype, values[s.channel])
    else:  # a raw bit pattern (or an earlier example's value): what the simulator now serves
        raw = dev.get(s.channel)
    if not math.isfinite(raw):
        assert s.quality is Quality.BAD_VALUE, (s, raw)
        return
    value = raw * scale + offset
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        assert s.quality is Quality.OUT_OF_RANGE, (s, value)
        return
    assert s.good and s.value == value, (s, raw, value)
