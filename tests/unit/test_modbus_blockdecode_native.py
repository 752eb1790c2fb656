"""A Modbus block's samples with and without their C path (`drivers.modbus._blockdecode`): the same samples, value
for value bit for bit, the same good count and the same bad-quality counters, for any registers (edges of every
integer type, words out of 0..65535, bools, floats, short replies) under any scale, offset and span (ints, floats,
infinities, open ends); and the C path takes the ordinary good readings and leaves every other case to Python.
Where the extension was not built (no C compiler at install) there is nothing to compare; in CI it must be."""

from __future__ import annotations

import dataclasses
import gc
import math
import random
import struct
import sys
from typing import Any

import pytest

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
from drivers.modbus import driver as driver_mod
from monitor.sample import GOOD, Quality, Sample
from tests.support import IN_CI

H, L = ByteOrder.BIG, ByteOrder.LITTLE
# every decoder a holding block can hold: the five the C path knows, and struct's (floats, swapped words)
TYPES = [(DataType.UINT16, H, H), (DataType.UINT16, L, H), (DataType.INT16, H, H), (DataType.INT16, L, H),
         (DataType.UINT32, H, H), (DataType.UINT32, H, L), (DataType.INT32, H, H), (DataType.FLOAT32, H, H)]
EDGES = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF]
ODD_WORDS = [-1, 0x10000, 2**53 + 1, 2**70, True, False, 3.0]  # (never from the link: its words are 0..65535)


@pytest.fixture
def native() -> Any:
    if driver_mod._native is None:
        assert not IN_CI, "drivers/modbus/_blockdecode.c was not built: see setup.py"
        pytest.skip("drivers.modbus._blockdecode not built")
    return driver_mod._native


def _driver(rnd: random.Random) -> ModbusDriver:
    """A driver of 12 random points over holding 0.., each channel with a random scale, offset and span."""
    points, chans = [], []
    address = 0
    inst_id = "dev"
    for n in range(12):
        dtype, byte_order, word_order = rnd.choice(TYPES)
        name = f"p{n}"
        points.append(RegisterPoint(name=name, table=Table.HOLDING, address=address, dtype=dtype,
                                    byte_order=byte_order, word_order=word_order))
        address += points[-1].count
        scale = rnd.choice([1.0, 0.1, -2.5, 1e-300, 1e300, 3, math.inf, 0.0])  # 3: an int, Python's case
        offset = rnd.choice([0.0, -0.0, 10.5, -1e6, 2])
        lo = rnd.choice([None, 0.0, -100.0, 5, 2**60, -math.inf])
        hi = rnd.choice([None, 1000.0, 65535, 1e9, math.inf, math.nan])
        chans.append(Channel(id=name, site="plant", instrument=inst_id, kind=ChannelKind.OTHER, unit="u",
                             point=name, scale=scale, offset=offset, valid_min=lo, valid_max=hi))
    inst = Instrument(id=inst_id, site="plant", driver=DriverKind.MODBUS_TCP, poll_interval=1.0, timeout=1.0,
                      host="127.0.0.1", port=1502,
                      register_map=RegisterMap(name="m", points={p.name: p for p in points}))
    return ModbusDriver(instrument=inst, channels=chans, link=ModbusLink.for_instrument(inst))


def _registers(rnd: random.Random, n: int) -> list[Any]:
    regs: list[Any] = []
    for _ in range(n):
        r = rnd.random()
        regs.append(rnd.choice(EDGES) if r < 0.4 else rnd.choice(ODD_WORDS) if r < 0.45 else rnd.randrange(0x10000))
    return regs


def _decode(drv: ModbusDriver, values: Any, nat: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], Any]:
    monkeypatch.setattr(driver_mod, "_native", nat)
    before = (drv.counters.good, dict(drv.counters.bad))
    out: list[Sample | None] = [None] * len(drv.channels)
    good = sum(drv._decode_block(values, step, out, 1.7e9 + 0.25) for step in drv._steps)
    bad = {q: n - before[1][q] for q, n in drv.counters.bad.items()}
    assert drv.counters.good == before[0]  # (`poll` adds the good count, `_decode_block` returns it)
    return out, (good, bad)


def _bits(s: Sample | None) -> tuple[Any, ...]:
    assert type(s) is Sample
    v = s.value
    return (type(v), struct.pack("<d", v) if isinstance(v, float) else v, type(s.quality), type(s.reason),
            *(getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "value"))


@pytest.mark.parametrize("seed", range(12))
def test_the_c_path_makes_the_samples_python_makes(native: Any, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rnd = random.Random(seed)
    took = 0
    for _ in range(10):
        drv = _driver(rnd)
        words = drv._steps[-1].address + drv._steps[-1].count
        for _ in range(30):
            regs = _registers(rnd, words)
            if rnd.random() < 0.1:
                regs = regs[:rnd.randrange(words)]  # a short reply's values (the link rejects it first: no matter)
            for values in (tuple(regs), list(regs)):
                by_c, counts_c = _decode(drv, values, native, monkeypatch)
                by_py, counts_py = _decode(drv, values, None, monkeypatch)
                assert [_bits(s) for s in by_c] == [_bits(s) for s in by_py]
                assert counts_c == counts_py
                took += counts_c[0]
    assert took > 0  # good readings were made (by the C path, the next test shows which)


def _targets(**changes: Any) -> tuple[Any, ...]:
    base = driver_mod._Target(index=0, offset=0, decode=driver_mod.INTEGER_DECODERS[0], site="plant", channel="c",
                              unit="u", scale=0.5, value_offset=1.0, valid_min=None, valid_max=None,
                              over_max=None, where="point 'c'")
    return (base, dataclasses.replace(base, **{"index": 1, "offset": 1, **changes}))


@pytest.mark.parametrize("change, values, raw", [
    ({}, (10, 20), 20),  # every decoder it knows, at its type's edges
    ({}, (10, 0xFFFF), 0xFFFF),
    ({"decode": driver_mod.INTEGER_DECODERS[1]}, (10, 0xFF00), 0x00FF),
    ({"decode": driver_mod.INTEGER_DECODERS[1]}, (10, 0x1234), 0x3412),
    ({"decode": driver_mod.INTEGER_DECODERS[2]}, (10, 0x8000), -32768),
    ({"decode": driver_mod.INTEGER_DECODERS[2]}, (10, 0x7FFF), 32767),
    ({"decode": driver_mod.INTEGER_DECODERS[2]}, (10, 0xFFFF), -1),
    ({"decode": driver_mod.INTEGER_DECODERS[3]}, (10, 0x0080), -32768),
    ({"decode": driver_mod.INTEGER_DECODERS[3]}, (10, 0xFEFF), -2),
    ({"decode": driver_mod.INTEGER_DECODERS[4]}, (10, 0xFFFF, 0xFFFF), 0xFFFFFFFF),
    ({"decode": driver_mod.INTEGER_DECODERS[4]}, (10, 0x0001, 0x0000), 0x10000),
    ({"lo": 0, "hi": 21}, (10, 20), 20),  # ends written as ints: compared exactly, as Python compares them
    ({"lo": 10.5, "hi": 10.5}, (10, 19), 19),  # a value exactly at both ends of its span (inclusive)
])
def test_the_c_path_takes_the_ordinary_readings(native: Any, change: dict[str, Any], values: tuple[int, ...],
                                                raw: int) -> None:
    targets = _targets(**change)
    out: list[Any] = [None, None]
    assert native.run(values, targets, 0, out, 1.5) == 2
    assert out[0] == Sample(1.5, "plant", "c", 10 * 0.5 + 1.0, "u")
    assert out[0].time is out[1].time  # (`now` shared, as the Python loop shares it)
    assert type(out[1]) is Sample and out[1].value == raw * 0.5 + 1.0 and type(out[1].value) is float
    assert out[1].quality is GOOD and out[1].reason == "" and type(out[1].reason) is str


@pytest.mark.parametrize("change, values", [
    ({"lo": 20.0}, (10, 10)),  # out of its span: `_judge` says why
    ({"hi": 5}, (10, 10)),
    ({"scale": math.inf}, (10, 10)),  # infinite
    ({"scale": math.nan}, (10, 10)),  # NaN
    ({"scale": 2}, (10, 10)),  # an int scale: Python multiplies ints
    ({"value_offset": 1}, (10, 10)),
    ({"lo": 2**60}, (10, 10)),  # an end no double holds exactly
    ({"decode": driver_mod.INTEGER_DECODERS[4]}, (10, 10)),  # a 32-bit value past the registers read
    ({"offset": 5}, (10, 10)),
    ({"index": 7}, (10, 10)),  # outside `out`
    ({"index": -1}, (10, 10)),
    ({}, (10, 0x10000)),  # not a 16-bit word
    ({}, (10, -3)),
    ({}, (10, True)),  # a bit
    ({}, (10, 4.0)),
])
def test_the_c_path_leaves_the_rest_to_python(native: Any, change: dict[str, Any], values: tuple[Any, ...]) -> None:
    targets = _targets(**change)
    out: list[Any] = [None, None]
    assert native.run(values, targets, 0, out, 1.5) == 1  # the first made, the second left at once
    assert out[1] is None and out[0] is not None
    assert native.run(values, targets, 2, out, 1.5) == 2  # (an empty walk)


def test_unusual_objects_are_left_to_python_or_refused(native: Any) -> None:
    base = _targets()
    odd = (base[0], object())
    assert native.run((1, 2), odd, 0, [None, None], 1.0) == 1
    for bad in [([1, 2], list(base), 0, [None, None], 1.0), ((1, 2), base, 0, (None, None), 1.0),
                ("ab", base, 0, [None, None], 1.0), ((1, 2), base, 1.0, [None, None], 1.0)]:
        with pytest.raises(TypeError):
            native.run(*bad)
    for start in (-1, 3):
        with pytest.raises(ValueError):
            native.run((1, 2), base, start, [None, None], 1.0)
    with pytest.raises(TypeError):
        native.run((1, 2), base, 0)


def test_no_finalizer_runs_under_a_walk(native: Any) -> None:
    """A sample's allocation may start the cyclic collector, whose finalizers are Python code: one that empties
    the registers and ``out`` under the walk would have them read freed memory. The walk pauses the collector."""
    targets = tuple(dataclasses.replace(_targets()[0], index=i, offset=i) for i in range(60))
    values = list(range(60))
    out: list[Any] = [None] * 60
    ran: list[int] = []

    class Finalized:
        def __del__(self) -> None:
            ran.append(sum(type(x) is Sample for x in out))  # the samples made before it ran
            out.clear()
            values.clear()

    threshold = gc.get_threshold()
    gc.collect()
    try:
        cycle = Finalized()
        cycle.self = cycle  # type: ignore[attr-defined]
        del cycle
        gc.set_threshold(gc.get_count()[0] + 5)  # a collection within the walk's first samples
        made = native.run(values, targets, 0, out, 1.5)  # the collection, due within the walk, waits for its end
        gc.collect()
        assert made == 60 and ran == [60] and gc.isenabled()
    finally:
        gc.set_threshold(*threshold)


def test_a_walk_keeps_every_reference_count(native: Any) -> None:
    site, now = "plant-" + str(id(native)), 1.0 + random.random()
    targets = tuple(dataclasses.replace(_targets()[0], index=i, offset=i, site=site) for i in range(100))
    held = [object() for _ in range(100)]  # what `out` holds before: more than the walk keeps aside at once
    counts = [sys.getrefcount(x) for x in (site, now, GOOD, *held)]
    for _ in range(50):
        out: list[Any] = list(held)
        i = 0
        while i < 100:  # (past 64 items other than None, the walk hands one back to Python and goes on)
            i = native.run(tuple(range(100)), targets, i, out, now)
            if i < 100:
                out[targets[i].index] = Sample(now, site, "c", float(i) * 0.5 + 1.0, "u")
                i += 1
        assert [x.value for x in out] == [k * 0.5 + 1.0 for k in range(100)]
        del out
    assert [sys.getrefcount(x) for x in (site, now, GOOD, *held)] == counts


def test_a_list_or_tuple_subclass_of_registers_is_decoded_in_python(native: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    class Registers(list[int]):
        pass

    drv = _driver(random.Random(1))
    regs = [rnd % 0x10000 for rnd in range(drv._steps[-1].address + drv._steps[-1].count)]
    by_c, counts_c = _decode(drv, Registers(regs), native, monkeypatch)
    by_py, counts_py = _decode(drv, regs, None, monkeypatch)
    assert [_bits(s) for s in by_c] == [_bits(s) for s in by_py] and counts_c == counts_py


def test_sample_classes_made_otherwise_are_refused(native: Any) -> None:
    """The C path makes a sample by setting its seven fields; a class that is made any other way is refused."""
    defaults = (Quality.GOOD, "")

    def fields(cls: type) -> type:
        cls.__annotations__ = {"time": float, "site": str, "channel": str, "value": Any, "unit": str,
                               "quality": Quality, "reason": str}
        cls.quality, cls.reason = Quality.GOOD, ""  # type: ignore[attr-defined]
        return dataclasses.dataclass(slots=True)(cls)

    class Rounded:
        def __post_init__(self) -> None:
            self.value = round(self.value, 1)  # type: ignore[attr-defined]

    class Meta(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return super().__call__(*args, **kwargs)

    class Guarded:
        def __setattr__(self, name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

    borrowed = type("Borrowed", (), {"__slots__": ("time", "site", "channel", "value", "unit", "quality", "x")})
    borrowed.reason = borrowed.__dict__["site"]  # type: ignore[attr-defined]  # two fields at one offset
    other = type("Other", (), {"__slots__": ("a",)})
    foreign = type("Foreign", (), {"__slots__": ("time", "site", "channel", "value", "unit", "quality", "reason")})
    foreign.time = other.__dict__["a"]  # type: ignore[attr-defined]  # a slot of another class

    @dataclasses.dataclass(slots=True)
    class Wider:
        time: float
        site: str
        channel: str
        value: float | None
        unit: str
        quality: Quality = Quality.GOOD
        reason: str = ""
        note: str = ""

    for cls in (fields(Rounded), fields(Meta("M", (), {})), fields(Guarded), borrowed, foreign, Wider):
        with pytest.raises(TypeError, match=r"made otherwise|not a slot|not a plain class"):
            native.bind(driver_mod._Target, cls, defaults, driver_mod.INTEGER_DECODERS)
    with pytest.raises(TypeError):
        native.bind(driver_mod._Target, Sample, (Quality.GOOD,), driver_mod.INTEGER_DECODERS)
    # (a refused bind leaves the former one whole: the walk still makes today's samples)
    out: list[Any] = [None, None]
    assert native.run((10, 20), _targets(), 0, out, 1.5) == 2 and type(out[1]) is Sample
