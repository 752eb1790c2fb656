"""A transmitter's unit changed at its keypad while the link stands: the units register is read again every
``units_check_interval`` seconds, not only at (re)connect, and a change to a wrong unit makes the readings
``unit_mismatch`` from that poll on, with one log line per change and the error in the health view. Over real
Modbus TCP: our pymodbus simulator serves the catalogue map, the driver (or `pretreat run`'s daemon) reads it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import Channel, ChannelKind, Instrument
from monitor.health import health_path
from monitor.read.status import collect, problems
from monitor.sample import Quality
from monitor.stores.readonly import connect_readonly
from simulators.runner import SiteSimulator
from tests.catalogue_maps import (
    catalogue_map,
    catalogue_site,
    driver_for,
    instrument,
    recorded,
    running,
    served,
)
from tests.support import eventually, free_port

DEVICE_LOG = "drivers.modbus.device_state"


def _meter(units_check_interval: float) -> tuple[Instrument, Channel]:
    """A TFX Ultra on a free port whose net totaliser is configured in gallons."""
    inst = dataclasses.replace(instrument(catalogue_map("dynasonics_tfx_ultra"), free_port()),
                               units_check_interval=units_check_interval)
    return inst, Channel(id="total", site="s", instrument="dev", kind=ChannelKind.OTHER, unit="gal",
                         point="net_totalizer")


def _mismatch_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == DEVICE_LOG and r.levelno == logging.WARNING]


async def test_a_unit_changed_at_the_keypad_is_caught_while_the_link_stands(
        caplog: pytest.LogCaptureFixture) -> None:
    """Every poll re-reads (interval 0): the poll after the change is a mismatch, one log line however many polls
    follow, and the readings come back when the unit is set back (one more line)."""
    inst, ch = _meter(0.0)
    caplog.set_level(logging.INFO, logger=DEVICE_LOG)
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set("net_totalizer", 10.5)
        dev.set("flow_unit_code", 1)
        async with driver_for(inst, [ch]) as driver:
            [before] = await driver.poll()
            dev.set("flow_unit_code", 2)  # litres, set at the meter's keypad: the connection stands
            during = [s for _ in range(3) for s in await driver.poll()]
            assert driver.link.counters.reconnects == 0, "the same connection throughout"
            dev.set("flow_unit_code", 1)
            [after] = await driver.poll()
    assert (before.quality, before.value) == (Quality.GOOD, 10.5)
    assert all(s.quality is Quality.UNIT_MISMATCH and s.value is None and "in 'L'" in s.reason for s in during)
    assert (after.quality, after.value) == (Quality.GOOD, 10.5)
    [line] = _mismatch_lines(caplog)  # once per change, not per poll
    assert line.startswith("s/dev channel total: unit mismatch") and "'L'" in line and "'gal'" in line
    assert any("agrees with the channel's unit again" in r.getMessage() for r in caplog.records
               if r.name == DEVICE_LOG and r.levelno == logging.INFO)


async def test_between_checks_the_units_register_is_not_read() -> None:
    """The interval is what it says: a change is not seen before it has passed, and is seen after it."""
    inst, ch = _meter(3600.0)
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set("net_totalizer", 10.5)
        dev.set("flow_unit_code", 1)
        async with driver_for(inst, [ch]) as driver:
            await driver.poll()
            requests = driver.link.counters.requests
            dev.set("flow_unit_code", 2)
            [s] = await driver.poll()
            assert s.quality is Quality.GOOD and driver.link.counters.requests == requests + 1  # the value only
            driver.device._units_due = time.monotonic()  # the hour has passed
            [s] = await driver.poll()
    assert s.quality is Quality.UNIT_MISMATCH


async def test_the_daemon_marks_readings_from_the_poll_after_a_keypad_change(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`pretreat run`'s daemon against the simulator; the site states units_check_interval = 0.5 s for the
    meter. The simulator's units register changes while the daemon runs: readings become unit_mismatch (never a
    number), the health view and `pretreat status` show it, one warning is logged."""
    path = catalogue_site(tmp_path)
    path.write_text(path.read_text().replace('register_map = "dynasonics_tfx_ultra"\n',
                                             'register_map = "dynasonics_tfx_ultra"\nunits_check_interval = 0.5\n'))
    config = load_config(path)
    assert config.instruments_by_id[("s", "dynasonics_tfx_ultra")].units_check_interval == 0.5
    caplog.set_level(logging.INFO, logger=DEVICE_LOG)
    async with SiteSimulator(config=config) as sim:
        async with running(config, sim):
            assert await eventually(lambda: any(s.good for s in recorded(config, "flow_total")))
            changed = time.time()
            sim.device("s", "dynasonics_tfx_ultra").set("flow_unit_code", 2)  # litres, at the keypad
            assert await eventually(lambda: any(s.quality is Quality.UNIT_MISMATCH
                                                for s in recorded(config, "flow_total")))
            health = health_path(config.daemon.historian)
            assert await eventually(lambda: health.is_file() and "unit mismatch" in health.read_text())
            snapshot = json.loads(health.read_text())
            report = collect(config)
            first = min(s.time for s in recorded(config, "flow_total") if s.quality is Quality.UNIT_MISMATCH)
            # polled every 0.2 s and rechecked every 0.5 s: not one good reading after the first mismatch
            assert await eventually(lambda: len([s for s in recorded(config, "flow_total") if s.time > first]) >= 5)
    total = recorded(config, "flow_total")
    assert not any(s.good for s in total if s.time >= first), "a total in litres is never recorded as gallons"
    assert first >= changed - 0.01
    why = snapshot["devices"]["s/dynasonics_tfx_ultra"]["unit_mismatch"]["flow_total"]
    assert "'L'" in why and "'gal'" in why
    assert any("s/dynasonics_tfx_ultra channel flow_total: unit mismatch" in p for p in problems(report))
    lines = [m for m in _mismatch_lines(caplog) if "flow_total" in m]
    assert len(lines) == 1 and "'L'" in lines[0], lines
    # the enforcement record says why there were no numbers: a sensor_fault episode from the first mismatch
    conn = connect_readonly(config.daemon.historian)
    try:
        starts = conn.execute("SELECT time FROM episode_events WHERE channel = 'flow_total' AND "
                              "rule = 'sensor_fault' AND event = 'start'").fetchall()
    finally:
        conn.close()
    assert [t for (t,) in starts] == [first]


def test_units_check_interval_is_for_modbus_instruments(tmp_path: Path) -> None:
    path = catalogue_site(tmp_path)
    text = path.read_text()
    path.write_text(text.replace('register_map = "msa_ultima_x"\n', 'register_map = "msa_ultima_x"\n'
                                 'units_check_interval = -1\n'))
    with pytest.raises(Exception, match="units_check_interval"):
        load_config(path)
    assert load_config(catalogue_site(tmp_path)).instruments[0].units_check_interval == 30.0  # the default
