"""The vendor maps of the instrument catalogue (config/maps/, each citing its manual), and what the tests that go
through them share: a catalogue instrument on a free loopback port, our simulator serving it, a driver reading
it, a site with one instrument per catalogue map, and the daemon running it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from config.maps import MAPS_DIR, load_register_map
from config.schema import Channel, DriverKind, Instrument, RegisterMap, SiteConfig
from drivers.modbus import ModbusDriver, ModbusLink
from monitor.app import Daemon
from monitor.sample import Sample
from monitor.stores.historian import Historian
from simulators.modbus_server import ModbusSimServer
from simulators.runner import SiteSimulator
from tests.support import PATIENCE, free_port

CATALOGUE = ["dynasonics_tfx_5000", "dynasonics_tfx_ultra", "eh_liquistation_csf22", "hach_3400sc_conductivity",
             "hach_pc_sc_ph", "msa_ultima_x"]


def catalogue_map(name: str) -> RegisterMap:
    return load_register_map(MAPS_DIR / f"{name}.toml")



def instrument(rmap: RegisterMap, port: int, iid: str = "dev") -> Instrument:
    return Instrument(id=iid, site="s", driver=DriverKind.MODBUS_TCP, poll_interval=1.0, timeout=0.5,
                      host="127.0.0.1", port=port, register_map=rmap)



@contextlib.asynccontextmanager
async def served(inst: Instrument) -> AsyncIterator[ModbusSimServer]:
    [server] = ModbusSimServer.for_instruments([inst])
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def driver_for(inst: Instrument, chans: Sequence[Channel]) -> AsyncIterator[ModbusDriver]:
    link = ModbusLink.for_instrument(inst, backoff_initial=0.05, backoff_max=0.2)
    try:
        yield ModbusDriver(instrument=inst, channels=chans, link=link)
    finally:
        await link.close()



def catalogue_site(tmp_path: Path) -> Path:
    """A site with one instrument per catalogue map, each on its own loopback port."""
    specs = {  # map -> [(channel id, point, kind, unit, extra TOML)]
        "hach_pc_sc_ph": [("ph", "ph", "ph", "pH", "valid_min = 0\nvalid_max = 14"),
                          ("ph_temperature", "temperature", "temperature", "degC", 'location = "discharge"')],
        "hach_3400sc_conductivity": [("conductivity", "conductivity", "conductivity", "uS/cm", "")],
        "dynasonics_tfx_ultra": [("flow", "flow_rate_gpm", "flow", "gpm", "valid_min = 0"),
                                 ("flow_total", "net_totalizer", "flow_total", "gal", "")],
        "dynasonics_tfx_5000": [("flow_2", "flow_rate", "other", "gpm", "")],
        "msa_ultima_x": [("lel", "gas_level", "lel", "%LEL", "valid_min = 0\nvalid_max = 100")],
        "eh_liquistation_csf22": [("sampler_temperature", "ai_1", "sampler_temperature", "degC", "")],
    }
    text = [f'[daemon]\nhistorian = "{tmp_path / "h.sqlite"}"\ncommit_interval = 0.05\ntick_interval = 0.2\n',
            '[[site]]\nid = "s"\njurisdiction = "southeast"\ntimezone = "UTC"\n']
    for name in specs:
        text.append(f'[[site.instrument]]\nid = "{name}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                    f'port = {free_port()}\nregister_map = "{name}"\npoll_interval = 0.2\ntimeout = 0.5\n')
    for name, chans in specs.items():
        for cid, point, kind, unit, extra in chans:
            text.append(f'[[site.channel]]\nid = "{cid}"\ninstrument = "{name}"\npoint = "{point}"\n'
                        f'kind = "{kind}"\nunit = "{unit}"\n{extra}\n')
    path = tmp_path / "catalogue.toml"
    path.write_text("\n".join(text))
    return path


def recorded(config: SiteConfig, channel: str) -> list[Sample]:
    return list(Historian.read(path=config.daemon.historian, site="s", channel=channel))


@contextlib.asynccontextmanager
async def running(config: SiteConfig, sim: SiteSimulator) -> AsyncIterator[Daemon]:
    daemon = Daemon(config=config)
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
        yield daemon
    finally:
        stop.set()
        await asyncio.wait_for(task, PATIENCE)
