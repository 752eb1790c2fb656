"""ModbusDriver against the Modbus simulator over real loopback TCP (Modbus TCP and RTU over TCP).

Nothing is mocked: a pymodbus client (our link) talks to a pymodbus server (our simulator) on free ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence

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
from monitor.sample import Quality, Sample
from simulators.modbus_server import ModbusSimServer, SimFault
from tests.support import PATIENCE, free_port

ORDERS = [(ByteOrder.BIG, ByteOrder.BIG), (ByteOrder.BIG, ByteOrder.LITTLE),
          (ByteOrder.LITTLE, ByteOrder.BIG), (ByteOrder.LITTLE, ByteOrder.LITTLE)]
VALUES = {
    DataType.INT16: -12345, DataType.UINT16: 54321, DataType.INT32: -123456789,
    DataType.UINT32: 3_000_000_000, DataType.FLOAT32: -1234.5, DataType.FLOAT64: math.pi,
}


def every_type_map() -> RegisterMap:
    """Every numeric type in all four orders (holding), a few input registers, coils and discrete inputs."""
    points: list[RegisterPoint] = []
    address = 0
    for dtype in VALUES:
        for byte_order, word_order in ORDERS:
            points.append(RegisterPoint(name=f"{dtype.value}_{byte_order.value}_{word_order.value}",
                                        table=Table.HOLDING, address=address, dtype=dtype,
                                        byte_order=byte_order, word_order=word_order))
            address += dtype.registers
    points += [
        RegisterPoint(name="in_int16", table=Table.INPUT, address=7, dtype=DataType.INT16),
        RegisterPoint(name="in_float", table=Table.INPUT, address=8, dtype=DataType.FLOAT32,
                      word_order=ByteOrder.LITTLE),
        RegisterPoint(name="coil_0", table=Table.COIL, address=0, dtype=DataType.BOOL),
        RegisterPoint(name="coil_3", table=Table.COIL, address=3, dtype=DataType.BOOL),
        RegisterPoint(name="coil_17", table=Table.COIL, address=17, dtype=DataType.BOOL),
        RegisterPoint(name="di_5", table=Table.DISCRETE, address=5, dtype=DataType.BOOL),
        RegisterPoint(name="di_40", table=Table.DISCRETE, address=40, dtype=DataType.BOOL),
    ]
    return RegisterMap(name="every_type", points={p.name: p for p in points})


def small_map() -> RegisterMap:
    points = [
        RegisterPoint(name="level", table=Table.HOLDING, address=0, dtype=DataType.FLOAT32),
        RegisterPoint(name="count", table=Table.HOLDING, address=2, dtype=DataType.UINT16),
    ]
    return RegisterMap(name="small", points={p.name: p for p in points})


def instrument(iid: str, *, port: int, unit: int = 1, timeout: float = 0.5, rmap: RegisterMap | None = None,
               kind: DriverKind = DriverKind.MODBUS_TCP) -> Instrument:
    return Instrument(id=iid, site="s", driver=kind, poll_interval=1.0, timeout=timeout, unit_id=unit,
                      host="127.0.0.1", port=port, register_map=rmap or small_map())


def channels_for(inst: Instrument, **ranges: tuple[float, float]) -> list[Channel]:
    assert inst.register_map is not None
    out = []
    for name in inst.register_map.points:
        lo, hi = ranges.get(name, (None, None))
        out.append(Channel(id=f"{inst.id}.{name}", site=inst.site, instrument=inst.id, kind=ChannelKind.OTHER,
                           unit="u", point=name, valid_min=lo, valid_max=hi))
    return out


@contextlib.asynccontextmanager
async def serving(instruments: Sequence[Instrument]) -> AsyncIterator[list[ModbusSimServer]]:
    servers = ModbusSimServer.for_instruments(instruments)
    try:
        for server in servers:
            await server.start()
        yield servers
    finally:
        for server in servers:
            await server.stop()
    await asyncio.sleep(0)
    stray = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not stray, f"tasks left running: {stray}"


@contextlib.asynccontextmanager
async def links(*items: ModbusLink) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for link in items:
            await link.close()


def fast_link(inst: Instrument) -> ModbusLink:
    return ModbusLink.for_instrument(inst, backoff_initial=0.05, backoff_max=0.2)


def qualities(samples: Sequence[Sample]) -> set[Quality]:
    return {s.quality for s in samples}


async def timed_poll(driver: ModbusDriver) -> tuple[list[Sample], float]:
    started = time.monotonic()
    samples = await driver.poll()
    return samples, time.monotonic() - started


async def test_every_type_and_order_decodes_over_the_wire() -> None:
    inst = instrument("every", port=free_port(), rmap=every_type_map())
    async with serving([inst]) as [server]:
        dev = server.device("every")
        expected: dict[str, float] = {}
        for name, p in every_type_map().points.items():
            value = VALUES.get(p.dtype, name in ("coil_3", "coil_17", "di_40"))
            if name == "in_int16":
                value = -7
            elif name == "in_float":
                value = 21.25
            dev.set(name, value)
            expected[f"every.{name}"] = float(value)
        link = fast_link(inst)
        async with links(link):
            driver = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
            before = time.time()
            samples = await driver.poll()
            after = time.time()
    assert [s.channel for s in samples] == [c.id for c in driver.channels]  # one per channel, in order
    assert {s.channel: s.value for s in samples} == expected
    assert all(s.good and before <= s.time <= after for s in samples)
    assert driver.counters.good == len(expected) and driver.counters.polls == 1


async def test_points_are_read_in_blocks() -> None:
    inst = instrument("every", port=free_port(), rmap=every_type_map())
    async with serving([inst]) as [server]:
        dev = server.device("every")
        link = fast_link(inst)
        async with links(link):
            grouped = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
            await grouped.poll()
            # holding 0..47, input 7..9, coils 0..17, discrete 5..40 (gap of 34 bits bridged)
            assert [(b.table, b.address, b.count) for b in grouped.plan.blocks] == [
                (Table.HOLDING, 0, 48), (Table.INPUT, 7, 3), (Table.COIL, 0, 18), (Table.DISCRETE, 5, 36)]
            assert dev.requests == 4 and link.counters.requests == 4
            apart = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link, max_gap=0,
                                 max_bit_gap=0)
            samples = await apart.poll()
            assert dev.requests == 4 + apart.plan.requests == 4 + 1 + 1 + 3 + 2
            assert qualities(samples) == {Quality.GOOD}


async def test_nan_infinity_and_out_of_range_become_bad_samples_with_reasons() -> None:
    inst = instrument("meter", port=free_port())
    async with serving([inst]) as [server]:
        dev = server.device("meter")
        dev.set("count", 7)
        link = fast_link(inst)
        async with links(link):
            driver = ModbusDriver(instrument=inst, channels=channels_for(inst, level=(0.0, 100.0)), link=link)
            for raw, quality in [(math.nan, Quality.BAD_VALUE), (math.inf, Quality.BAD_VALUE),
                                 (-math.inf, Quality.BAD_VALUE), (100.5, Quality.OUT_OF_RANGE),
                                 (-0.5, Quality.OUT_OF_RANGE), (100.0, Quality.GOOD)]:
                dev.set("level", raw)
                level, count = await driver.poll()
                assert level.quality is quality, raw
                assert count.good and count.value == 7.0  # same block, unaffected
                if quality is not Quality.GOOD:
                    assert level.value is None
                    assert "s/meter" in level.reason and "holding 0" in level.reason
    assert driver.counters.bad[Quality.BAD_VALUE] == 3 and driver.counters.bad[Quality.OUT_OF_RANGE] == 2


@pytest.mark.parametrize(("fault", "quality", "detail"), [
    (SimFault.SILENT, Quality.COMM_FAILURE, "no reply within 1.2 s"),
    (SimFault.EXCEPTION, Quality.DEVICE_EXCEPTION, "exception code 4"),
    (SimFault.GARBAGE, Quality.DECODE_ERROR, "reply carries 2 registers, asked 3"),
])
async def test_a_faulty_device_does_not_disturb_its_neighbours_and_recovers(
        fault: SimFault, quality: Quality, detail: str) -> None:
    # The victim's timeout is long next to a neighbour's poll (a few ms), so "not delayed by it" stays true on a
    # machine loaded enough to take 0.3 s over a poll now and then.
    victim = instrument("victim", port=free_port(), timeout=1.2)
    others = [instrument(f"n{i}", port=free_port()) for i in range(2)]
    async with serving([victim, *others]) as servers:
        for server in servers:
            server.devices[0].set("level", 42.0)
        all_links = [fast_link(i) for i in (victim, *others)]
        async with links(*all_links):
            drivers = [ModbusDriver(instrument=i, channels=channels_for(i), link=lk)
                       for i, lk in zip((victim, *others), all_links, strict=True)]
            servers[0].device("victim").fault = fault
            for round_ in range(4):
                (bad, _), *rest = await asyncio.gather(*(timed_poll(d) for d in drivers))
                assert qualities(bad) == {quality}
                assert all("s/victim unit 1 on modbus_tcp:127.0.0.1:" in s.reason for s in bad)
                if round_ == 0:  # later, a silent single-device link may be waiting to reconnect
                    assert all(detail in s.reason for s in bad)
                for samples, took in rest:
                    assert qualities(samples) == {Quality.GOOD}
                    # on time: the victim's timeout is not theirs (half of it: room for a loaded machine)
                    assert took < victim.timeout / 2
            servers[0].device("victim").fault = SimFault.NONE
            # good again once the link's reconnect backoff has passed: poll until then, PATIENCE at most
            deadline = time.monotonic() + PATIENCE
            samples, _ = await timed_poll(drivers[0])
            while qualities(samples) != {Quality.GOOD} and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                samples, _ = await timed_poll(drivers[0])
            assert qualities(samples) == {Quality.GOOD}
            assert [s.value for s in samples] == [42.0, 0.0]
            assert all(lk.counters.outages == 0 for lk in all_links[1:])


async def test_exception_code_is_configurable_and_does_not_drop_the_link() -> None:
    inst = instrument("busy", port=free_port())
    async with serving([inst]) as [server]:
        server.device("busy").fault = SimFault.EXCEPTION
        server.device("busy").exception_code = 6
        link = fast_link(inst)
        async with links(link):
            driver = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
            for _ in range(5):
                samples = await driver.poll()
                assert qualities(samples) == {Quality.DEVICE_EXCEPTION}
                assert "exception code 6 (server device busy)" in samples[0].reason
            assert link.counters.connects == 1 and link.counters.outages == 0
            assert link.counters.device_exceptions == 5
    with pytest.raises(ValueError):
        server.device("busy").exception_code = 99


async def test_silent_units_on_a_shared_gateway_cost_one_timeout_and_keep_the_connection() -> None:
    """RTU over TCP: three units behind one gateway connection, one of them silent."""
    port = free_port()
    # 0.5 s: "one silent transaction at most" (0.5 s) stays apart from two (1.0 s) on a loaded machine
    silent = instrument("silent", port=port, unit=2, timeout=0.5, kind=DriverKind.MODBUS_RTU_OVER_TCP)
    others = [instrument(f"n{u}", port=port, unit=u, kind=DriverKind.MODBUS_RTU_OVER_TCP) for u in (1, 3)]
    async with serving([silent, *others]) as [server]:
        assert len(server.devices) == 3
        server.device("silent").fault = SimFault.SILENT
        server.device("n3").set("level", 3.5)
        link = fast_link(silent)
        async with links(link):
            drivers = [ModbusDriver(instrument=i, channels=channels_for(i), link=link)
                       for i in (silent, *others)]
            for _ in range(5):  # five silent polls in a row, then the neighbours
                assert qualities(await drivers[0].poll()) == {Quality.COMM_FAILURE}
            for _ in range(3):
                (bad, _), *rest = await asyncio.gather(*(timed_poll(d) for d in drivers))
                assert qualities(bad) == {Quality.COMM_FAILURE}
                for samples, took in rest:
                    assert qualities(samples) == {Quality.GOOD}
                    assert took < silent.timeout * 1.8  # waited for one silent transaction at most
            assert (await drivers[2].poll())[0].value == 3.5
            assert link.counters.connects == 1 and link.counters.outages == 0


async def test_unknown_unit_on_modbus_tcp_gets_gateway_exception() -> None:
    port = free_port()
    served = instrument("served", port=port, unit=1)
    async with serving([served]):
        ghost = instrument("ghost", port=port, unit=9)
        link = fast_link(ghost)
        async with links(link):
            samples = await ModbusDriver(instrument=ghost, channels=channels_for(ghost), link=link).poll()
    assert qualities(samples) == {Quality.DEVICE_EXCEPTION}
    assert "exception code 11" in samples[0].reason


async def test_server_restart_is_one_outage_logged_once_and_recovered(
        caplog: pytest.LogCaptureFixture) -> None:
    # 1.2 s: the neighbour's "not delayed by the meter" bound (half of it) leaves room for a loaded machine
    inst = instrument("meter", port=free_port(), timeout=1.2)
    neighbour = instrument("neighbour", port=free_port())
    async with serving([inst, neighbour]) as [server, _]:
        server.device("meter").set("count", 11)
        link, other_link = fast_link(inst), fast_link(neighbour)
        async with links(link, other_link):
            driver = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
            peer = ModbusDriver(instrument=neighbour, channels=channels_for(neighbour), link=other_link)
            assert qualities(await driver.poll()) == {Quality.GOOD}
            with caplog.at_level(logging.INFO, logger="drivers.modbus.link"):
                restart = asyncio.create_task(server.restart(downtime=0.6))
                seen: list[Quality] = []
                deadline = time.monotonic() + PATIENCE
                while time.monotonic() < deadline and not (restart.done() and seen[-1] is Quality.GOOD):
                    samples, (peer_samples, took) = await asyncio.gather(driver.poll(), timed_poll(peer))
                    seen.append(samples[0].quality)
                    assert qualities(peer_samples) == {Quality.GOOD} and took < inst.timeout / 2
                    await asyncio.sleep(0.05)
                await restart
    assert Quality.COMM_FAILURE in seen and seen[-1] is Quality.GOOD
    assert link.counters.outages == 1 and link.counters.reconnects >= 1
    messages = [r.getMessage() for r in caplog.records if "Modbus link" in r.getMessage()]
    assert len([m for m in messages if " down: " in m]) == 1
    assert len([m for m in messages if "recovered" in m]) == 1


async def test_no_server_fails_fast_after_the_first_refusal() -> None:
    # 2 s: a refusal on loopback takes milliseconds, so the bounds below stay apart from a waited-out timeout
    inst = instrument("absent", port=free_port(), timeout=2.0)
    link = ModbusLink.for_instrument(inst, backoff_initial=5.0, backoff_max=5.0)
    async with links(link):
        driver = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
        first, took_first = await timed_poll(driver)
        second, took_second = await timed_poll(driver)
    assert qualities(first) == qualities(second) == {Quality.COMM_FAILURE}
    assert "cannot connect" in first[0].reason and "next reconnect attempt" in second[0].reason
    # neither waited out the timeout: refused at once, then not tried again before the backoff
    assert took_first < inst.timeout and took_second < inst.timeout / 2
    assert not link.up and link.counters.connect_failures == 1 and link.counters.outages == 1


async def test_a_silent_single_device_link_is_dropped_and_reconnected_without_relogging(
        caplog: pytest.LogCaptureFixture) -> None:
    """A TCP device that accepts the connection but never answers: the link is presumed dead after three
    unanswered requests, reconnected (counted), and the outage is still logged once."""
    inst = instrument("mute", port=free_port(), timeout=0.2)
    async with serving([inst]) as [server]:
        server.device("mute").fault = SimFault.SILENT
        link = ModbusLink.for_instrument(inst, backoff_initial=0.01, backoff_max=0.02)
        async with links(link):
            driver = ModbusDriver(instrument=inst, channels=channels_for(inst), link=link)
            with caplog.at_level(logging.INFO, logger="drivers.modbus.link"):
                for _ in range(10):
                    assert qualities(await driver.poll()) == {Quality.COMM_FAILURE}
                    await asyncio.sleep(0.03)
                server.device("mute").fault = SimFault.NONE
                for _ in range(3):
                    samples = await driver.poll()
                    await asyncio.sleep(0.03)
    assert qualities(samples) == {Quality.GOOD}
    assert link.counters.reconnects >= 2 and link.counters.outages == 1
    assert len([r for r in caplog.records if " down: " in r.getMessage()]) == 1


async def test_port_zero_picks_a_free_port_that_survives_restarts() -> None:
    inst = instrument("anywhere", port=0)
    async with serving([inst]) as [server]:
        port = server.port
        assert port != 0 and server.where == f"127.0.0.1:{port}"
        server.device("anywhere").set("count", 5)
        await server.restart()
        assert server.port == port
        reachable = instrument("anywhere", port=port)
        link = fast_link(reachable)
        async with links(link):
            driver = ModbusDriver(instrument=reachable, channels=channels_for(reachable), link=link)
            samples = await driver.poll()
    assert [s.value for s in samples] == [0.0, 5.0]
