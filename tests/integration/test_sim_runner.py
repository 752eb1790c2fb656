"""`SiteSimulator` on a demo-like site (Modbus TCP, Modbus RTU on a pty, MQTT), read back over the wire with a
plain pymodbus client and a plain paho subscriber, and compared with the simulator's ground truth."""

from __future__ import annotations

import asyncio
import json
import math
import queue
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient
from pymodbus.exceptions import ModbusException
from pymodbus.framer import FramerType

from config.schema import SiteConfig
from simulators.runner import SiteSimulator
from simulators.scenario import load_scenario
from tests.support import PATIENCE, Mosquitto, demo_like, eventually, require_binary


class Reader:
    """Plain pymodbus clients for the three Modbus instruments of the demo site."""

    def __init__(self, config: SiteConfig) -> None:
        site = config.sites[0]
        by_id = {i.id: i for i in site.instruments}
        self.flow = AsyncModbusTcpClient("127.0.0.1", port=by_id["flow-meter"].port, timeout=0.3, retries=0,
                                         reconnect_delay=0)
        self.sampler = AsyncModbusTcpClient("127.0.0.1", port=by_id["sampler"].port, timeout=0.3, retries=0,
                                            reconnect_delay=0)
        serial = by_id["ph-meter"].serial
        assert serial is not None
        self.ph = AsyncModbusSerialClient(port=serial.port, framer=FramerType.RTU, baudrate=serial.baudrate,
                                          timeout=0.3, retries=0, reconnect_delay=0)

    async def connect(self) -> None:
        for c in (self.flow, self.sampler, self.ph):
            assert await c.connect()

    def close(self) -> None:
        for c in (self.flow, self.sampler, self.ph):
            c.close()

    async def values(self) -> dict[str, float]:
        """Every Modbus channel of the demo site, decoded by pymodbus and scaled as the site file says."""
        f = self.flow
        rr = await f.read_holding_registers(0, count=4, device_id=1)
        assert not rr.isError(), rr
        rate = f.convert_from_registers(rr.registers[0:2], data_type=f.DATATYPE.FLOAT32)
        total = f.convert_from_registers(rr.registers[2:4], data_type=f.DATATYPE.UINT32)
        ph = await self.ph.read_input_registers(0, count=2, device_id=2)
        assert not ph.isError(), ph
        ph_value, temp = (f.convert_from_registers([r], data_type=f.DATATYPE.INT16) for r in ph.registers)
        s = await self.sampler.read_holding_registers(0, count=3, device_id=1)
        bits = await self.sampler.read_discrete_inputs(0, count=2, device_id=1)
        assert not s.isError() and not bits.isError()
        fridge = f.convert_from_registers([s.registers[0]], data_type=f.DATATYPE.INT16)
        count = f.convert_from_registers(s.registers[1:3], data_type=f.DATATYPE.UINT32)
        return {
            "flow": float(rate), "flow_total": float(total),  # type: ignore[arg-type]
            "ph": float(ph_value) * 0.01, "temperature": float(temp) * 0.1,  # type: ignore[arg-type]
            "sampler_temperature": float(fridge) * 0.1, "sampler_count": float(count),  # type: ignore[arg-type]
            "sampler_bottle_full": float(bits.bits[0]), "sampler_fault": float(bits.bits[1]),
        }


class Subscriber:
    def __init__(self, port: int) -> None:
        self.messages: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="test-reader")
        ready = queue.Queue[bool]()
        self.client.on_connect = lambda c, *_: c.subscribe("#", qos=1)
        self.client.on_subscribe = lambda *_: ready.put(True)
        self.client.on_message = lambda _c, _u, m: self.messages.put((m.topic, bytes(m.payload)))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        ready.get(timeout=PATIENCE)

    def drain(self) -> list[tuple[str, bytes]]:
        out = []
        while True:
            try:
                out.append(self.messages.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def site(tmp_path: Path, mosquitto: Mosquitto) -> SiteConfig:
    require_binary("socat")
    return demo_like(tmp_path, mosquitto.port)


@pytest.fixture
def subscriber(mosquitto: Mosquitto) -> Iterator[Subscriber]:
    sub = Subscriber(mosquitto.port)
    yield sub
    sub.close()


@pytest.fixture
async def manual(site: SiteConfig) -> AsyncIterator[SiteSimulator]:
    """A simulator whose time the test moves (no clock task): deterministic."""
    async with SiteSimulator(config=site, clock=False, now=0.0) as sim:
        yield sim


async def test_every_channel_reads_back_as_served(subscriber: Subscriber, site: SiteConfig,
                                                  manual: SiteSimulator) -> None:
    # (the subscriber is listed first so that it is subscribed before the simulator publishes at t = 0)
    reader = Reader(site)
    await reader.connect()
    try:
        for t in (0.0, 600.0, 1800.0):
            manual._next_publish.clear()  # publish MQTT at each step, whatever the wall clock says
            manual.advance(t)
            wire = await reader.values()
            truth = {cid: manual.value(cid) for cid in wire}
            assert wire == pytest.approx(truth, abs=1e-9), t
    finally:
        reader.close()
    assert truth["sampler_count"] == 2.0 and truth["flow_total"] > 0  # 30 simulated minutes happened
    assert await manual.publishers[("acme-plating", "lel-meter")].flush()
    lel: list[dict] = []  # type: ignore[type-arg]

    def four_arrived() -> bool:
        lel.extend(json.loads(p) for topic, p in subscriber.drain() if topic == "acme-plating/mh1/lel")
        return len(lel) >= 4

    assert await eventually(four_arrived)
    await asyncio.sleep(0.1)  # room for a fifth, which must not come
    lel.extend(json.loads(p) for topic, p in subscriber.drain() if topic == "acme-plating/mh1/lel")
    assert len(lel) == 4  # start (t = 0) and the three steps
    assert lel[-1] == {"lel_pct": manual.value("lel"), "ts": lel[-1]["ts"]}
    assert lel[-1]["ts"].endswith("Z") and 0 <= lel[-1]["lel_pct"] <= 2


async def test_faults_from_a_scenario_reach_the_wire(site: SiteConfig, tmp_path: Path) -> None:
    scenario_file = tmp_path / "faults.toml"
    scenario_file.write_text("""
[[step]]
at = 10
instrument = "flow-meter"
fault = "silent"
[[step]]
at = 10
kind = "ph"
fault = "exception"
[[step]]
at = 20
kind = "flow"
fault = "none"
[[step]]
at = 20
kind = "ph"
fault = "garbage"
[[step]]
at = 30
kind = "ph"
fault = "none"
""")
    async with SiteSimulator(config=site, scenario=load_scenario(scenario_file), clock=False) as sim:
        reader = Reader(site)
        await reader.connect()
        try:
            sim.advance(10.0)
            with pytest.raises(ModbusException):  # silent: the request times out
                await reader.flow.read_holding_registers(0, count=2, device_id=1)
            rr = await reader.ph.read_input_registers(0, count=2, device_id=2)
            assert rr.isError() and rr.exception_code == 4
            s = await reader.sampler.read_holding_registers(0, count=1, device_id=1)
            assert not s.isError()  # a neighbour on another link is undisturbed
            assert sim.served[("acme-plating", "ph")].fault == "exception"
            sim.advance(20.0)
            assert await reader.flow.connect()
            ok = await reader.flow.read_holding_registers(0, count=2, device_id=1)
            assert not ok.isError()
            garbled: Any
            try:
                garbled = await reader.ph.read_input_registers(0, count=2, device_id=2)
            except ModbusException as exc:  # pymodbus may reject the short frame outright
                garbled = exc
            assert isinstance(garbled, ModbusException) or garbled.isError() or len(garbled.registers) != 2
            sim.advance(30.0)
            await reader.ph.connect()
            ph = await reader.ph.read_input_registers(0, count=2, device_id=2)
            assert not ph.isError() and len(ph.registers) == 2
        finally:
            reader.close()


async def test_a_nan_scenario_value_reaches_the_float_register(site: SiteConfig, tmp_path: Path) -> None:
    path = tmp_path / "nan.toml"
    path.write_text("[[step]]\nat = 5\nkind = 'flow'\nvalue = nan\n"
                    "[[step]]\nat = 5\nkind = 'ph'\nvalue = 15.5\n")
    async with SiteSimulator(config=site, scenario=load_scenario(path), clock=False) as sim:
        reader = Reader(site)
        await reader.connect()
        try:
            sim.advance(5.0)
            values = await reader.values()
        finally:
            reader.close()
    assert math.isnan(values["flow"]) and math.isnan(sim.value("flow"))
    assert values["ph"] == pytest.approx(15.5)  # out of the channel's range: the daemon must judge it


async def test_clocked_slug_at_speed(site: SiteConfig) -> None:
    """At speed 600 the slug (from 300 s to 1500 s simulated) starts 0.5 s after the start and lasts 2 s."""
    sim = SiteSimulator(config=site, scenario=load_scenario("slug"), speed=600.0, tick=0.05, history=100)
    async with sim:
        reader = Reader(site)
        await reader.connect()
        try:
            assert await eventually(lambda: sim.sim_time >= 600)  # a minute into the slug
            values = await reader.values()
        finally:
            reader.close()
    assert 600 <= sim.sim_time < 1500  # read during the slug (1.5 s of wall time to spare)
    assert values["flow"] == 900.0 and sim.value("flow") == 900.0
    assert values["flow_total"] > 900 * (sim.sim_time - 300 - 60) / 60  # the totaliser follows the slug
    flows = [s.value for s in sim.history[("acme-plating", "flow")]]
    assert flows[0] < 200 and flows[-1] == 900.0
    assert not sim._tasks and sim._ticker is None  # nothing left running


async def test_restart_takes_the_link_down_and_brings_it_back(site: SiteConfig, tmp_path: Path) -> None:
    path = tmp_path / "restart.toml"
    path.write_text("[[step]]\nat = 10\nkind = 'flow'\nfault = 'restart'\ndown = 0.3\n")
    async with SiteSimulator(config=site, scenario=load_scenario(path), clock=False) as sim:
        client = AsyncModbusTcpClient("127.0.0.1", port=site.sites[0].instruments[0].port, timeout=0.3,
                                      retries=0, reconnect_delay=0)
        assert await client.connect()
        try:
            sim.advance(10.0)
            await asyncio.sleep(0.1)
            with pytest.raises(ModbusException):
                await client.read_holding_registers(0, count=2, device_id=1)
            assert await eventually(lambda: not sim._tasks)  # the restart is over: the server is back
            assert await client.connect()
            rr = await client.read_holding_registers(0, count=2, device_id=1)
            assert not rr.isError()
        finally:
            client.close()
