"""The Modbus TCP gateway over real loopback TCP: a plain pymodbus client (as a plant PLC would poll) reads
what the daemon serves. Alarm states come from a real AlarmEngine; nothing is mocked."""

from __future__ import annotations

import csv
import io
import math
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pymodbus.client import AsyncModbusTcpClient

from alarms.engine import AlarmEngine
from alarms.gateway import ALARM_BASE, ModbusGateway, plan, register_table
from alarms.model import AlarmInput, AlarmKey, AlarmSettings, AlarmState, Priority, Refusal
from config.gateway import GatewaySettings, parse_gateway
from config.loader import load_config
from config.reader import Reader
from config.schema import SiteConfig
from monitor import cli
from monitor.sample import Quality, Sample

T0 = 1_767_571_200.0
SITE_FILE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme-plating"
timezone = "UTC"
jurisdiction = "southeast"

[[site.instrument]]
id = "ph-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
register_map = "ph_meter"

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"

[[site.channel]]
id = "ph"
instrument = "ph-meter"
point = "ph"
kind = "ph"
unit = "pH"

[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "mh1/lel"
field = "lel"
kind = "lel"
unit = "%LEL"

[[site]]
id = "bravo-foods"
timezone = "UTC"

[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 1503
register_map = "flow_meter"

[[site.channel]]
id = "flow_total"
instrument = "flow-meter"
point = "flow_total"
kind = "flow_total"
unit = "gal"
"""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def config(tmp_path: Path) -> SiteConfig:
    p = tmp_path / "site.toml"
    p.write_text(SITE_FILE, encoding="utf-8")
    return load_config(p)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def gateway(config: SiteConfig, clock: Clock) -> AsyncIterator[ModbusGateway]:
    gw = ModbusGateway(config=config, host="127.0.0.1", port=0, clock=clock)
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


@pytest.fixture
async def plc(gateway: ModbusGateway) -> AsyncIterator[AsyncModbusTcpClient]:
    client = AsyncModbusTcpClient("127.0.0.1", port=gateway.port, timeout=2, retries=0, reconnect_delay=0)
    assert await client.connect()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def engine(tmp_path: Path, config: SiteConfig) -> Iterator[AlarmEngine]:
    specs = [(b.site, b.channel, b.rule, AlarmSettings(priority=Priority.CRITICAL if b.rule == "lel_single"
                                                        else Priority.HIGH, latched=b.rule == "lel_single"))
             for s in config.sites for b in s.checks]
    e = AlarmEngine(path=tmp_path / "pretreat.sqlite", alarms=specs, now=T0)
    try:
        yield e
    finally:
        e.close()


async def regs(plc: AsyncModbusTcpClient, address: int, count: int, unit: int = 1, fc: int = 4) -> list[int]:
    read = plc.read_input_registers if fc == 4 else plc.read_holding_registers
    rr = await read(address, count=count, device_id=unit)
    assert not rr.isError(), rr
    return list(rr.registers)


async def bits(plc: AsyncModbusTcpClient, count: int, unit: int = 1, fc: int = 2) -> list[bool]:
    read = plc.read_discrete_inputs if fc == 2 else plc.read_coils
    rr = await read(0, count=count, device_id=unit)
    assert not rr.isError(), rr
    return list(rr.bits[:count])


def as_float(plc: AsyncModbusTcpClient, words: list[int], order: str = "big") -> float:
    return float(plc.convert_from_registers(words, data_type=plc.DATATYPE.FLOAT32,  # type: ignore[arg-type]
                                            word_order=order))  # type: ignore[arg-type]


def alarm_index(config: SiteConfig, alarm_id: str) -> int:
    return plan(config, GatewaySettings())[0].alarms.index(alarm_id)


async def test_summary_block_per_site_unit(gateway: ModbusGateway, plc: AsyncModbusTcpClient,
                                           config: SiteConfig) -> None:
    acme, bravo = plan(config, GatewaySettings())
    assert (acme.unit, bravo.unit) == (1, 2)
    assert (await regs(plc, 0, 10))[:4] == [1, 0, 2, len(acme.alarms)]
    assert (await regs(plc, 0, 10, unit=2))[:4] == [1, 0, 1, len(bravo.alarms)]
    assert await regs(plc, 0, 4, fc=3) == await regs(plc, 0, 4)  # holding mirrors input
    # no reading yet: NaN, quality 65535, age 65535
    ph = await regs(plc, 100, 4)
    assert math.isnan(as_float(plc, ph[:2])) and ph[2:] == [65535, 65535]


async def test_values_quality_and_age(gateway: ModbusGateway, plc: AsyncModbusTcpClient, clock: Clock) -> None:
    gateway.update_sample(Sample(time=T0, site="acme-plating", channel="ph", value=9.25, unit="pH"))
    gateway.update_sample(Sample(time=T0 - 2, site="bravo-foods", channel="flow_total", value=123456.5,
                                 unit="gal"))
    clock.now = T0 + 7.9
    ph = await regs(plc, 100, 4)
    assert as_float(plc, ph[:2]) == 9.25 and ph[2:] == [0, 7]
    flow = await regs(plc, 100, 4, unit=2)
    assert as_float(plc, flow[:2]) == 123456.5 and flow[3] == 9
    assert (await regs(plc, 1, 1))[0] == 7  # heartbeat
    # a failed read is NaN with its quality code, never the last good value
    gateway.update_sample(Sample.bad(time=T0 + 8, site="acme-plating", channel="ph", unit="pH",
                                     quality=Quality.COMM_FAILURE, reason="timeout"))
    ph = await regs(plc, 100, 4, fc=3)
    assert math.isnan(as_float(plc, ph[:2])) and ph[2] == 1 and ph[3] == 0
    gateway.update_sample(Sample.bad(time=T0 + 8, site="acme-plating", channel="lel", unit="%LEL",
                                     quality=Quality.STALE, reason="no reading"))
    assert (await regs(plc, 104, 4))[2] == 6
    clock.now = T0 + 100_000
    assert (await regs(plc, 103, 1))[0] == 65535  # saturates
    gateway.update_sample(Sample(time=T0, site="acme-plating", channel="nope", value=1.0, unit="x"))
    assert gateway.counters["unknown_samples"] == 1


async def test_little_word_order(config: SiteConfig, clock: Clock) -> None:
    gw = ModbusGateway(config=config, host="127.0.0.1", port=0, word_order="little", clock=clock)
    await gw.start()
    client = AsyncModbusTcpClient("127.0.0.1", port=gw.port, timeout=2, retries=0, reconnect_delay=0)
    try:
        assert await client.connect()
        gw.update_sample(Sample(time=T0, site="acme-plating", channel="ph", value=-3.5, unit="pH"))
        words = await regs(client, 100, 2)
        assert as_float(client, words, "little") == -3.5 and as_float(client, words, "big") != -3.5
    finally:
        client.close()
        await gw.stop()


async def test_alarm_bits_states_and_counts_follow_the_engine(gateway: ModbusGateway, plc: AsyncModbusTcpClient,
                                                               engine: AlarmEngine, config: SiteConfig) -> None:
    gateway.update_alarms(engine.states())
    ph_high, lel = "acme-plating/ph/ph_high", "acme-plating/lel/lel_single"
    j, m = alarm_index(config, ph_high), alarm_index(config, lel)
    n = len(plan(config, GatewaySettings())[0].alarms)
    assert await bits(plc, 2 * n) == [False] * (2 * n)

    def inp(channel: str, rule: str, active: bool, t: float) -> AlarmInput:
        return AlarmInput(time=t, site="acme-plating", channel=channel, rule=rule, active=active, value=12.0,
                          limit=10.0)

    for t in engine.apply_many([inp("ph", "ph_high", True, T0 + 1), inp("lel", "lel_single", True, T0 + 1)],
                               T0 + 1):
        gateway.update_alarm(t)
    di = await bits(plc, 2 * n)
    assert (di[2 * j], di[2 * j + 1], di[2 * m], di[2 * m + 1]) == (True, True, True, True)
    assert sum(di) == 4
    assert await bits(plc, 2 * n, fc=1) == di  # coils mirror
    assert (await regs(plc, 4, 6)) == [2, 2, 1, 0, 0, 5]  # active, unacked, critical, shelved, oos, priority
    assert (await regs(plc, ALARM_BASE + j, 1))[0] == 1
    # acknowledged: still active, no longer unacknowledged
    assert not isinstance(engine.ack(ph_high, user="jdoe", now=T0 + 2), Refusal)
    gateway.update_alarm(engine.state(ph_high))
    di = await bits(plc, 2 * n)
    assert (di[2 * j], di[2 * j + 1]) == (True, False)
    assert (await regs(plc, 4, 2)) == [2, 1] and (await regs(plc, ALARM_BASE + j, 1))[0] == 2
    # the LEL condition goes away: latched, still annunciated until reset
    for t in engine.apply(inp("lel", "lel_single", False, T0 + 3), T0 + 3):
        gateway.update_alarm(t)
    assert (await regs(plc, ALARM_BASE + m, 1))[0] == 4 and (await bits(plc, 2 * n))[2 * m]
    engine.shelve(ph_high, user="jdoe", until=T0 + 3600, reason="probe cleaning", now=T0 + 4)
    gateway.update_alarm(engine.state(ph_high))
    assert (await regs(plc, 4, 6)) == [1, 1, 1, 1, 0, 5]
    gateway.update_alarm(AlarmState(key=AlarmKey("other-site", "ph", "ph_high")))
    assert gateway.counters["unknown_alarms"] == 1


async def test_writes_and_unknown_units_and_addresses_are_refused(gateway: ModbusGateway,
                                                                  plc: AsyncModbusTcpClient) -> None:
    rr = await plc.write_register(0, 7, device_id=1)
    assert rr.isError() and rr.exception_code == 2
    rr = await plc.write_coil(0, True, device_id=1)
    assert rr.isError() and rr.exception_code == 2
    assert (await regs(plc, 0, 1))[0] == 1  # unchanged
    rr = await plc.read_input_registers(0, count=1, device_id=9)
    assert rr.isError() and rr.exception_code == 11
    rr = await plc.read_input_registers(ALARM_BASE + 500, count=1, device_id=1)
    assert rr.isError() and rr.exception_code == 2


def test_map_is_deterministic_and_printed(config: SiteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    text = register_table(config, GatewaySettings(), fmt="csv")
    assert text == register_table(config, GatewaySettings(), fmt="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    ph = [r for r in rows if r["content"].startswith("ph ")]
    assert [(r["unit"], r["address"], r["content"]) for r in ph] == [
        ("1", "100", "ph value [pH]"), ("1", "102", "ph quality code"), ("1", "103", "ph age (s)")]
    assert {r["unit"] for r in rows if r["site"] == "bravo-foods"} == {"2"}
    shifted = register_table(config, GatewaySettings(first_unit=10, units={"bravo-foods": 3}), fmt="csv")
    assert {(r["site"], r["unit"]) for r in csv.DictReader(io.StringIO(shifted))} == {
        ("acme-plating", "10"), ("bravo-foods", "3")}
    monkeypatch.setitem(cli.SUBCOMMANDS, "gateway", ("monitor.alarms_cli:add_gateway", "gateway"))
    site = tmp_path / "site.toml"
    assert cli.main(["gateway", "map", "--config", str(site)]) == 0
    out = capsys.readouterr().out
    assert "layout version 1" in out and "acme-plating/ph/ph_high active" in out


def test_parse_gateway_table() -> None:
    def parse(text: str) -> tuple[GatewaySettings | None, list[str]]:
        doc = tomllib.loads(text + '\n[[site]]\nid = "a"\ntimezone = "UTC"\n[[site]]\nid = "b"\ntimezone = "UTC"\n')
        reader = Reader("site.toml")
        return parse_gateway(doc, reader, Path(".")), [f"{e.path}: {e.expected}" for e in reader.errors]

    assert parse("") == (None, [])
    settings, errors = parse('[gateway]\nhost = "0.0.0.0"\nport = 502\nword_order = "little"\n'
                             '[gateway.units]\nb = 7\n')
    assert errors == [] and settings == GatewaySettings(host="0.0.0.0", port=502, word_order="little",
                                                        units={"b": 7})
    _, errors = parse('[gateway]\nprot = 502\nword_order = "middle"\nenabled = "yes"\n'
                      '[gateway.units]\nb = 1\nc = 3\n')
    assert any(e.startswith("gateway.prot") for e in errors)
    assert any(e.startswith("gateway.word_order") for e in errors)
    assert any(e.startswith("gateway.enabled") for e in errors)
    assert any(e.startswith("gateway.units.c") for e in errors)  # no such site
    assert any("not already given to site 'a'" in e for e in errors)  # a = first_unit 1, b = 1
