"""Every catalogue map round trip over real Modbus TCP: our pymodbus simulator serves the map, the driver reads it.

Per map: every value point in every data type it uses and in all four byte/word orders; the units register
checked at connect (a code for another unit, a code the manual does not list); status bits becoming
``device_fault`` with the vendor's text and ``maintenance``; and the end to end run (`pretreat run`'s daemon
polling `pretreat sim`'s simulator for a site that uses every catalogue map), down to the historian and the
health snapshot. Nothing is mocked: real servers on free loopback ports.

Kept in one module (a little over 400 lines): every case shares the same catalogue-wide fixtures (the maps, a
simulator serving each, a driver reading it), and the end-to-end case is the sum of the per-map ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pymodbus.client import ModbusTcpClient

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import (
    ByteOrder,
    Channel,
    ChannelKind,
    DataType,
    Instrument,
    RegisterMap,
    RegisterPoint,
)
from monitor.cli import main
from monitor.health import health_path
from monitor.read.status import collect, problems
from monitor.reports.compliance import build_report
from monitor.reports.periods import Period
from monitor.reports.sections import build_sections
from monitor.sample import Quality, Sample
from simulators.modbus_server import SimFault
from simulators.playback import resolve
from simulators.runner import SiteSimulator
from simulators.scenario import load_scenario
from tests.catalogue_maps import (
    CATALOGUE,
    catalogue_map,
    catalogue_site,
    driver_for,
    instrument,
    recorded,
    running,
    served,
)
from tests.support import PATIENCE, eventually, free_port, wait_for_simulator, wait_until

ORDERS = [(b, w) for b in ByteOrder for w in ByteOrder]
VALUE = {DataType.FLOAT32: -1234.5, DataType.FLOAT64: math.pi * 1000, DataType.INT32: -123_456_789,
         DataType.UINT32: 3_000_000_000, DataType.INT16: -12_345, DataType.UINT16: 54_321}


def is_value(p: RegisterPoint) -> bool:
    return not p.units and not p.is_status


def with_orders(rmap: RegisterMap, byte_order: ByteOrder, word_order: ByteOrder) -> RegisterMap:
    points = {n: dataclasses.replace(p, byte_order=byte_order, word_order=word_order) for n, p in rmap.points.items()}
    return dataclasses.replace(rmap, points=points)


def channels(inst: Instrument) -> list[Channel]:
    """One channel per value point; a point with a units register takes the unit of the register's first code."""
    assert inst.register_map is not None
    points = inst.register_map.points
    out = []
    for name, p in points.items():
        if not is_value(p):
            continue
        unit = min(points[p.unit_point].units.items())[1] if p.unit_point else (p.unit or "u")
        out.append(Channel(id=name, site="s", instrument=inst.id, kind=ChannelKind.OTHER, unit=unit, point=name))
    return out


def set_units_to_match(dev: object, inst: Instrument, chans: Sequence[Channel]) -> None:
    assert inst.register_map is not None
    points = inst.register_map.points
    for ch in chans:
        p = points[ch.point]
        if p.unit_point:
            code = min(points[p.unit_point].units)
            dev.set(p.unit_point, code)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", CATALOGUE)
@pytest.mark.parametrize(("byte_order", "word_order"), ORDERS, ids=lambda o: o.value)
async def test_every_value_point_round_trips_in_every_order(name: str, byte_order: ByteOrder,
                                                            word_order: ByteOrder) -> None:
    inst = instrument(with_orders(catalogue_map(name), byte_order, word_order), free_port())
    chans = channels(inst)
    assert chans, f"{name} has value points"
    async with served(inst) as server:
        dev = server.device("dev")
        set_units_to_match(dev, inst, chans)
        expected = {}
        for i, ch in enumerate(chans):
            p = inst.register_map.points[ch.point]  # type: ignore[union-attr]
            value = VALUE[p.dtype] + (i if p.dtype in (DataType.FLOAT32, DataType.FLOAT64) else 0)
            dev.set(ch.point, value)
            expected[ch.id] = float(value)
        async with driver_for(inst, chans) as driver:
            samples = await driver.poll()
    assert {s.channel: (s.quality, s.value) for s in samples} == {c: (Quality.GOOD, v) for c, v in expected.items()}
    assert driver.device.units_read or not any(inst.register_map.points[c.point].unit_point  # type: ignore[union-attr]
                                               for c in chans)


def test_the_catalogue_uses_every_register_data_type() -> None:
    used = {p.dtype for n in CATALOGUE for p in catalogue_map(n).points.values()}
    assert used >= {DataType.FLOAT32, DataType.FLOAT64, DataType.INT32, DataType.UINT16}


@pytest.mark.parametrize(("name", "point", "unit", "wrong", "says", "read"), [
    ("dynasonics_tfx_ultra", "net_totalizer", "gal", 2, "in 'L'", "(read 1500 L)"),  # the meter was set to litres
    ("dynasonics_tfx_ultra", "net_totalizer_long", "gal", 99, "code 99, which the manual does not list",
     "(read 1500 in a unit its manual does not list)"),
    ("eh_liquistation_csf22", "ai_1", "degC", 53, "in 'pH'", "(read 1500 pH)"),  # slot 1 holds the pH
])
async def test_a_units_register_that_disagrees_makes_every_reading_unit_mismatch(
        name: str, point: str, unit: str, wrong: int, says: str, read: str) -> None:
    inst = instrument(catalogue_map(name), free_port())
    rmap = inst.register_map
    assert rmap is not None
    ch = Channel(id="total", site="s", instrument="dev", kind=ChannelKind.OTHER, unit=unit, point=point)
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set(point, 1500)
        dev.set(rmap.points[point].unit_point, wrong)
        async with driver_for(inst, [ch]) as driver:
            first, second = await driver.poll(), await driver.poll()
            health = driver.device.health()
    for [s] in (first, second):
        assert s.quality is Quality.UNIT_MISMATCH and s.value is None
        # the value read is labelled in the unit the instrument reports it in, never the channel's
        assert says in s.reason and repr(unit) in s.reason and s.reason.endswith(read), s.reason
    assert says in health["unit_mismatch"]["total"]  # type: ignore[index]
    assert driver.counters.bad[Quality.UNIT_MISMATCH] == 2 and driver.counters.good == 0


async def test_the_units_register_is_read_again_after_the_device_was_lost() -> None:
    """At connect: a meter switched to litres while it was off the wire is caught on the first answer back."""
    inst = instrument(catalogue_map("dynasonics_tfx_ultra"), free_port())
    ch = Channel(id="total", site="s", instrument="dev", kind=ChannelKind.OTHER, unit="gal", point="net_totalizer")
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set("net_totalizer", 10.5)
        dev.set("flow_unit_code", 1)
        async with driver_for(inst, [ch]) as driver:
            assert [s.quality for s in await driver.poll()] == [Quality.GOOD]
            dev.set("flow_unit_code", 2)  # not noticed before units_check_interval (30 s by default) has passed
            assert [s.quality for s in await driver.poll()] == [Quality.GOOD]
            dev.fault = SimFault.SILENT
            assert [s.quality for s in await driver.poll()] == [Quality.COMM_FAILURE]
            dev.fault = SimFault.NONE
            answers: list[Sample] = []

            async def answered() -> bool:  # polls until the device answers again (the link reconnects)
                answers.extend(s for s in await driver.poll() if s.quality is not Quality.COMM_FAILURE)
                return bool(answers)

            deadline = time.monotonic() + PATIENCE
            while not await answered() and time.monotonic() < deadline:
                pass
    assert answers, "the device answered again"
    assert answers[0].quality is Quality.UNIT_MISMATCH and "in 'L'" in answers[0].reason


@pytest.mark.parametrize(("register", "bit", "quality", "text"), [
    ("general_status", 0, Quality.DEVICE_FAULT, "Device Fault (any fault)"),
    ("fault_status", 1, Quality.DEVICE_FAULT, "Sensor Missing - Sensor 1"),
    ("fault_status", 11, Quality.DEVICE_FAULT, "Sensor End of life - Sensor 1"),
    ("general_status", 1, Quality.MAINTENANCE, "Calibration Active - Sensor 1"),
    ("general_status", 4, Quality.MAINTENANCE, "Warm up Mode"),
])
async def test_status_bits_become_the_readings_quality_with_the_vendors_text(
        register: str, bit: int, quality: Quality, text: str) -> None:
    inst = instrument(catalogue_map("msa_ultima_x"), free_port())
    ch = Channel(id="lel", site="s", instrument="dev", kind=ChannelKind.LEL, unit="%LEL", point="gas_level",
                 valid_min=0, valid_max=100)
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set("gas_level", 3.5)
        async with driver_for(inst, [ch]) as driver:
            [before] = await driver.poll()
            dev.set(register, 1 << bit)
            [during] = await driver.poll()
            dev.set(register, 0)
            [after] = await driver.poll()
    assert (before.quality, before.value) == (Quality.GOOD, 3.5)
    assert during.quality is quality and during.value is None
    assert text in during.reason and f"{register} bit {bit}" in during.reason and "(read 3.5 %LEL)" in during.reason
    assert (after.quality, after.value) == (Quality.GOOD, 3.5)


async def test_a_fault_wins_over_maintenance_and_unread_status_is_never_a_good_reading() -> None:
    inst = instrument(catalogue_map("msa_ultima_x"), free_port())
    ch = Channel(id="lel", site="s", instrument="dev", kind=ChannelKind.LEL, unit="%LEL", point="gas_level")
    async with served(inst) as server:
        dev = server.device("dev")
        dev.set("gas_level", 1.0)
        dev.set("general_status", 1 << 1)  # calibrating
        dev.set("fault_status", 1 << 4)  # and the calibration failed
        async with driver_for(inst, [ch]) as driver:
            [s] = await driver.poll()
            assert s.quality is Quality.DEVICE_FAULT and "Calibration Fault - Sensor 1" in s.reason
            dev.fault = SimFault.EXCEPTION  # the status read itself is refused
            [s] = await driver.poll()
    assert s.quality is Quality.DEVICE_EXCEPTION and s.value is None


# -- end to end: `pretreat run` (the daemon) against `pretreat sim` (the site simulator) -------------------
def maintenance_span(samples: Sequence[Sample]) -> float:
    times = [s.time for s in samples if s.quality is Quality.MAINTENANCE]
    return max(times) - min(times) if times else 0.0


async def test_the_daemon_records_every_catalogue_instrument_served_by_the_simulator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(site_file := catalogue_site(tmp_path))
    ids = [c.id for c in config.channels]
    async with SiteSimulator(config=config, history=100_000) as sim:
        async with running(config, sim) as daemon:
            assert await eventually(lambda: all(any(s.good for s in recorded(config, c)) for c in ids)), \
                "a good reading on every channel of every catalogue map"
            # the instrument's own words, through the wire, into the record
            msa = sim.device("s", "msa_ultima_x")
            msa.set("general_status", 1 << 1)
            window = daemon.staleness.window("s", "lel")
            assert await eventually(lambda: maintenance_span(recorded(config, "lel")) > 2 * window), \
                "maintenance readings for longer than twice the staleness window"
            msa.set("general_status", 0)
            calibrated = maintenance_span(recorded(config, "lel"))
            assert await eventually(lambda: recorded(config, "lel")[-1].good), "readings good again after it"
            assert maintenance_span(recorded(config, "lel")) >= calibrated
            msa.set("fault_status", 1 << 1)
            assert await eventually(lambda: any(s.quality is Quality.DEVICE_FAULT for s in recorded(config, "lel")))
            health = health_path(config.daemon.historian)
            assert await eventually(lambda: health.is_file() and "Sensor Missing - Sensor 1" in health.read_text())
        served = {k: [x.value for x in v] for k, v in sim.history.items()}
    for cid in ids:
        good = [s.value for s in recorded(config, cid) if s.good]
        assert good and all(any(v == pytest.approx(x, rel=1e-6, abs=1e-6) for x in served[("s", cid)])
                            for v in good), f"{cid}: a recorded value the simulator never served"
    lel = recorded(config, "lel")
    maintenance = next(s for s in lel if s.quality is Quality.MAINTENANCE)
    assert "Calibration Active - Sensor 1" in maintenance.reason and maintenance.value is None
    fault = next(s for s in lel if s.quality is Quality.DEVICE_FAULT)
    assert "Sensor Missing - Sensor 1" in fault.reason
    # the period the instrument said it was being calibrated is an episode of its own, in the report's
    # instrument section beside the faults, never among the exceedances
    day = datetime.now(UTC).date()
    report = build_report(config, "s", Period(day, day, day, "today"), now=time.time())
    [period] = [e for e in report.faults if e.rule == "maintenance"]
    assert period.channel == "lel" and period.end is not None and period.start == pytest.approx(maintenance.time)
    assert not any(e.rule == "maintenance" for e in report.exceedances)
    [faults] = [sec for sec in build_sections(report) if sec.key == "faults"]
    assert any(row[1].startswith("Instrument maintenance") for row in faults.rows)
    # the sensor_fault episode quotes the vendor's fault text, in the report and in `pretreat exceedances`
    assert any(e.rule == "sensor_fault" and e.channel == "lel" and "Sensor Missing - Sensor 1" in e.fault
               for e in report.faults)
    assert any(row[1] == "Sensor fault" and "Sensor Missing - Sensor 1 (fault_status bit 1)" in row[-1]
               for row in faults.rows)
    capsys.readouterr()
    assert main(["exceedances", "--config", str(site_file), "--data-quality", "--channel", "lel"]) == 0
    assert "fault: instrument fault: Sensor Missing - Sensor 1 (fault_status bit 1)" in capsys.readouterr().out
    first = maintenance.time
    last = max(s.time for s in lel if s.quality is Quality.MAINTENANCE)
    # maintenance is the device answering, not silence: a stale sample while it lasts is only one a real
    # silence explains (no reading at all for the window: under load every channel's polls can stall)
    reporting = [s.time for s in lel if s.quality in (Quality.GOOD, Quality.MAINTENANCE)]
    for st in (s for s in lel if s.quality is Quality.STALE and first <= s.time <= last):
        before = max((t for t in reporting if t < st.time), default=-math.inf)
        assert st.time - before >= 0.9 * window, \
            f"stale {st.time - before:.2f} s after a maintenance reading (window {window} s): it is no silence"


async def test_a_unit_mismatch_is_an_error_in_the_health_view_and_never_a_number(tmp_path: Path) -> None:
    config = load_config(catalogue_site(tmp_path))
    async with SiteSimulator(config=config) as sim:
        sim.device("s", "dynasonics_tfx_ultra").set("flow_unit_code", 2)  # the meter totals in litres
        async with running(config, sim):
            assert await eventually(lambda: any(s.quality is Quality.UNIT_MISMATCH
                                                for s in recorded(config, "flow_total")))
            path = health_path(config.daemon.historian)
            assert await eventually(lambda: path.is_file() and "unit mismatch" in path.read_text())
            snapshot = json.loads(path.read_text())
            report = collect(config)
    total = recorded(config, "flow_total")
    assert all(s.value is None for s in total if s.quality is Quality.UNIT_MISMATCH)
    assert not any(s.good for s in total), "a total in litres is never recorded as gallons"
    assert any(s.good for s in recorded(config, "flow")), "the fixed-unit GPM register of the same meter is fine"
    why = snapshot["devices"]["s/dynasonics_tfx_ultra"]["unit_mismatch"]["flow_total"]
    assert "'L'" in why and "'gal'" in why
    assert any("s/dynasonics_tfx_ultra channel flow_total: unit mismatch" in p for p in problems(report))


# -- `pretreat sim` scenarios set what the instrument says about itself ---------------------------------------
_CALIBRATION = """
description = "the gas monitor is calibrated for a minute, then reports a missing sensor"
[[step]]
at = 60
instrument = "msa_ultima_x"
register = "general_status"
raw = 2        # bit 1: Calibration Active - Sensor 1
[[step]]
at = 120
kind = "lel"   # the instrument carrying the channel
register = "general_status"
raw = 0
[[step]]
at = 180
instrument = "msa_ultima_x"
register = "fault_status"
raw = 2        # bit 1: Sensor Missing - Sensor 1
"""


async def test_a_scenario_plays_the_instruments_status_bits_over_the_wire(tmp_path: Path) -> None:
    config = load_config(catalogue_site(tmp_path))
    scenario = tmp_path / "calibration.toml"
    scenario.write_text(_CALIBRATION)
    inst = config.instruments_by_id[("s", "msa_ultima_x")]
    [lel] = [c for c in config.channels if c.id == "lel"]
    async with SiteSimulator(config=config, scenario=load_scenario(scenario), clock=False) as sim:
        async with driver_for(inst, [lel]) as driver:
            seen = []
            for t in (0.0, 61.0, 121.0, 181.0):
                sim.advance(t)
                [s] = await driver.poll()
                seen.append((s.quality, s.reason.split(" (")[0]))
    assert seen == [(Quality.GOOD, ""),
                    (Quality.MAINTENANCE, "instrument in maintenance: Calibration Active - Sensor 1"),
                    (Quality.GOOD, ""),
                    (Quality.DEVICE_FAULT, "instrument fault: Sensor Missing - Sensor 1")]


def test_a_register_step_names_a_point_the_instrument_has(tmp_path: Path) -> None:
    config = load_config(catalogue_site(tmp_path))
    scenario = tmp_path / "bad.toml"
    scenario.write_text('[[step]]\nat = 1\ninstrument = "msa_ultima_x"\nregister = "general_stat"\nraw = 2\n'
                        '[[step]]\nat = 2\ninstrument = "msa_ultima_x"\nregister = "general_status"\nraw = 70000\n'
                        '[[step]]\nat = 3\nchannel = "lel"\nvalue = 1\nraw = 2\n')
    with pytest.raises(ConfigErrors) as exc:
        resolve(load_scenario(scenario), config)
    errs = [str(e) for e in exc.value.errors]
    assert any("step[2].raw" in e for e in errs), errs  # raw without a register
    with pytest.raises(ConfigErrors) as exc:
        scenario.write_text(scenario.read_text().rsplit("[[step]]", 1)[0])
        resolve(load_scenario(scenario), config)
    errs = [str(e) for e in exc.value.errors]
    assert any("step[0].register" in e and "general_status" in e for e in errs), errs  # the map's points listed
    assert any("step[1].register" in e and "70000" in e for e in errs), errs  # uint16 cannot hold it



def test_pretreat_sim_serves_every_catalogue_map_with_the_units_the_site_states(tmp_path: Path) -> None:
    """The command itself, in its own process: each catalogue instrument answers on its port with its own map,
    its units registers holding the code of the channel's unit, and a scenario's register steps on the wire."""
    path = catalogue_site(tmp_path)
    config = load_config(path)
    scenario = tmp_path / "calibration.toml"
    scenario.write_text(_CALIBRATION)
    port = {i.id: i.port for i in config.instruments}

    def read(iid: str, address: int, count: int = 1, *, table: str = "holding") -> list[int]:
        client = ModbusTcpClient("127.0.0.1", port=port[iid], timeout=1, retries=0)
        assert client.connect()
        try:
            reader = client.read_holding_registers if table == "holding" else client.read_input_registers
            rr = reader(address, count=count, device_id=1)
        finally:
            client.close()
        assert not rr.isError(), rr
        return list(rr.registers)

    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config", str(path),
         "--scenario", str(scenario), "--speed", "60"],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_simulator(config)
        assert read("dynasonics_tfx_ultra", 141, 2) == [0, 1]  # int32 Flow Unit Code 1 = the channel's 'gal'
        assert read("eh_liquistation_csf22", 3, table="input") == [89]  # AI 1 unit code 89 = the channel's degC
        assert len(read("msa_ultima_x", 40207, 2)) == 2  # the gas level, at the protocol address the manual gives
        # the scenario at speed 60: calibration from 1 s of wall time, then a missing sensor from 3 s
        assert wait_until(lambda: read("msa_ultima_x", 40202) == [2]), "fault_status bit 1 set by the scenario"
        assert read("msa_ultima_x", 40201) == [0]  # the calibration bit set at 60 s was cleared at 120 s
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err
