"""Word order of 32/64-bit values as an instrument setting: where a manual does not state it (or makes it a setting
of the device: the Hach sc controller's 'Data Order', the TFX-5000's 'word order (endian)'), the site sets
``word_order`` on the instrument. Both orders go round trip through our simulator over real Modbus TCP: the
simulator serves the site's instrument as configured, the raw registers on the wire are checked for the order,
and the driver reads back the value served."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from pymodbus.client import ModbusTcpClient

from config.loader import load_config
from config.maps import MAPS_DIR, load_register_map
from config.schema import DataType, RegisterPoint, Table
from drivers.modbus import ModbusDriver, ModbusLink
from monitor.sample import Quality
from simulators.modbus_server import ModbusSimServer
from tests.catalogue_maps import CATALOGUE
from tests.support import free_port

VALUE = 1234.5  # float32 0x449A5000: high word 0x449A, low word 0x5000


def float_point(name: str) -> RegisterPoint:
    """The map's first single-precision value point."""
    rmap = load_register_map(MAPS_DIR / f"{name}.toml")
    return next(p for p in rmap.points.values() if p.dtype is DataType.FLOAT32 and not p.is_status)


def site(tmp_path: Path, name: str, order: str, port: int) -> Path:
    rmap = load_register_map(MAPS_DIR / f"{name}.toml")
    p = float_point(name)
    unit = min(rmap.points[p.unit_point].units.items())[1] if p.unit_point else (p.unit or "u")
    path = tmp_path / "site.toml"
    path.write_text(f"""
[daemon]
historian = "{tmp_path / 'h.sqlite'}"
[[site]]
id = "s"
jurisdiction = "southeast"
timezone = "UTC"
[[site.instrument]]
id = "dev"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {port}
register_map = "{name}"
word_order = "{order}"
timeout = 1.0
[[site.channel]]
id = "v"
instrument = "dev"
point = "{p.name}"
kind = "other"
unit = "{unit}"
""")
    return path


def raw_words(port: int, point: RegisterPoint) -> list[int]:
    client = ModbusTcpClient("127.0.0.1", port=port, timeout=1, retries=0)
    assert client.connect()
    try:
        read = client.read_holding_registers if point.table is Table.HOLDING else client.read_input_registers
        rr = read(point.address, count=2, device_id=1)
    finally:
        client.close()
    assert not rr.isError()
    return list(rr.registers)


@pytest.mark.parametrize("name", CATALOGUE)
@pytest.mark.parametrize("order", ["big", "little"])
async def test_an_instruments_word_order_goes_round_trip_through_the_simulator(tmp_path: Path, name: str,
                                                                            order: str) -> None:
    port = free_port()
    config = load_config(site(tmp_path, name, order, port))
    [inst] = config.instruments
    assert inst.register_map is not None
    point = inst.register_map.points[float_point(name).name]
    [server] = ModbusSimServer.for_instruments(config.instruments)
    await server.start()
    try:
        dev = server.device("dev")
        if point.unit_point:
            dev.set(point.unit_point, min(inst.register_map.points[point.unit_point].units))
        dev.set(point.name, VALUE)
        hi, lo = struct.unpack(">HH", struct.pack(">f", VALUE))
        words = await asyncio.to_thread(raw_words, port, point)  # a plain client: the server shares our loop
        assert words == ([hi, lo] if order == "big" else [lo, hi]), "the order on the wire"
        link = ModbusLink.for_instrument(inst, backoff_initial=0.05, backoff_max=0.2)
        try:
            [sample] = await ModbusDriver(instrument=inst, channels=config.channels, link=link).poll()
        finally:
            await link.close()
    finally:
        await server.stop()
    assert (sample.quality, sample.value) == (Quality.GOOD, VALUE)
