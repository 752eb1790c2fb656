"""The instrument catalogue: every shipped map loads, every catalogue map cites its manual, the manual's register
numbers are converted once to protocol addresses, mistakes in the new keys are reported with their key path,
and `pretreat maps list|show` prints the catalogue with the manual of each map."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.maps import MAPS_DIR, load_register_map, same_unit, shipped_maps, unit_code
from monitor.cli import main
from tests.catalogue_maps import CATALOGUE


def test_every_shipped_map_loads_and_the_catalogue_is_there() -> None:
    names = shipped_maps()
    assert set(CATALOGUE) <= set(names)
    for name in names:
        rmap = load_register_map(MAPS_DIR / f"{name}.toml")
        assert rmap.name == name, f"{name}.toml names itself {rmap.name!r}"


@pytest.mark.parametrize("name", CATALOGUE)
def test_each_catalogue_map_cites_its_manual_completely(name: str) -> None:
    rmap = load_register_map(MAPS_DIR / f"{name}.toml")
    m = rmap.manual
    assert m is not None, f"{name}: a catalogue map needs its [manual]"
    for field in ("vendor", "model", "title", "revision", "pages", "url", "function_codes", "addressing",
                  "word_order"):
        assert getattr(m, field).strip(), f"{name}: manual.{field} is empty"
    assert m.url.startswith("https://")
    assert all(p.register for p in rmap.points.values()), f"{name}: every point as the manual numbers it"


@pytest.mark.parametrize(("name", "point", "register", "address"), [
    ("hach_pc_sc_ph", "ph", "40002", 1),  # 40001-style: address = register - 40001
    ("dynasonics_tfx_ultra", "flow_rate_gpm", "40230", 229),
    ("dynasonics_tfx_ultra", "flow_rate_gpm_double", "40360", 359),
    ("dynasonics_tfx_5000", "flow_rate", "40601", 600),
    ("msa_ultima_x", "gas_level", "40207", 40207),  # base (default 40000) + 207 goes on the wire as printed
    ("eh_liquistation_csf22", "ai_1_unit", "3", 3),  # printed as protocol addresses
])
def test_manual_register_numbers_become_protocol_addresses_once(name: str, point: str, register: str,
                                                                address: int) -> None:
    p = load_register_map(MAPS_DIR / f"{name}.toml").points[point]
    assert (p.register, p.address) == (register, address)


def test_units_and_status_registers_carry_the_manuals_words() -> None:
    msa = load_register_map(MAPS_DIR / "msa_ultima_x.toml").points
    assert msa["general_status"].faults == {0: "Device Fault (any fault)"}
    assert msa["general_status"].maintenance[1] == "Calibration Active - Sensor 1"
    assert msa["fault_status"].faults[1] == "Sensor Missing - Sensor 1"
    tfx = load_register_map(MAPS_DIR / "dynasonics_tfx_ultra.toml").points
    assert tfx["net_totalizer"].unit_point == "flow_unit_code"
    assert unit_code(tfx["flow_unit_code"], "gal") == 1
    assert unit_code(tfx["flow_unit_code"], "L") == 2
    assert unit_code(tfx["flow_unit_code"], "gpm") is None
    csf = load_register_map(MAPS_DIR / "eh_liquistation_csf22.toml").points
    assert unit_code(csf["ai_1_unit"], "degC") == 89
    assert same_unit("% LEL", "%lel") and not same_unit("gal", "L")


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(body)
    return path


_MANUAL = """
[manual]
vendor = "V"
model = "M"
title = "T"
revision = "R"
pages = "p. 1"
url = "https://example.org/m"
function_codes = "3"
addressing = "40001-style"
register_offset = 40001
word_order = "stated"
"""


def _errors(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ConfigErrors) as exc:
        load_register_map(_write(tmp_path, body))
    return [str(e) for e in exc.value.errors]


def test_a_register_number_needs_a_manual_offset(tmp_path: Path) -> None:
    errs = _errors(tmp_path, '[[point]]\nname = "x"\ntable = "holding"\nregister = 40002\ntype = "float32"\n')
    assert any("point[0].register" in e and "register_offset" in e for e in errs), errs


def test_a_register_below_the_offset_and_address_with_register_are_refused(tmp_path: Path) -> None:
    errs = _errors(tmp_path, _MANUAL + '[[point]]\nname = "x"\ntable = "holding"\nregister = 30002\n'
                   '[[point]]\nname = "y"\ntable = "holding"\nregister = 40003\naddress = 2\n')
    assert any("point[0].register" in e for e in errs), errs
    assert any("point[1].address" in e and "not both" in e for e in errs), errs


def test_mistakes_in_units_and_status_registers_name_their_key(tmp_path: Path) -> None:
    errs = _errors(tmp_path, _MANUAL + """
[[point]]
name = "v"
table = "holding"
register = 40001
type = "float32"
unit_point = "status"
[[point]]
name = "status"
table = "holding"
register = 40003
type = "float32"
[point.faults]
"16" = "beyond a 16-bit register"
"1" = "Sensor Missing"
""")
    assert any("point[0].unit_point" in e for e in errs), errs  # names a point without [point.units]
    assert any("point[1].faults.16" in e for e in errs), errs
    assert any("point[1].type" in e and "status register" in e for e in errs), errs


def test_maps_list_cites_the_manual_of_every_catalogue_map(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maps", "list"]) == 0
    out = capsys.readouterr().out
    for name in shipped_maps():
        assert name in out
    for name in CATALOGUE:
        title = load_register_map(MAPS_DIR / f"{name}.toml").manual.title  # type: ignore[union-attr]
        assert title in out, f"{name}: its manual's title is not listed"
    assert "generic (no vendor's manual)" in out  # the old generic maps say so
    assert "Teledyne ISCO Signature" in out  # what could not be found is said, not guessed


def test_maps_show_prints_addressing_word_order_and_every_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maps", "show", "msa_ultima_x"]) == 0
    out = capsys.readouterr().out
    assert "(L) Rev 4" in out and "most significant word is located in the first register" in out
    assert "manual 40207 -> holding 40207 (float32, bytes big, words big)" in out
    assert "bit 1: maintenance 'Calibration Active - Sensor 1'" in out
    assert "bit 1: fault 'Sensor Missing - Sensor 1'" in out
    assert main(["maps", "show", "dynasonics_tfx_ultra"]) == 0
    out = capsys.readouterr().out
    assert "manual 40230 -> holding 229" in out and "1 = gal" in out
    assert "unit: checked at connect and every units_check_interval against units register 'flow_unit_code'" in out


def test_maps_show_an_unknown_name_lists_the_shipped_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maps", "show", "msa_ultima"]) == 2
    err = capsys.readouterr().err
    assert "msa_ultima_x" in err and "no shipped map 'msa_ultima'" in err


def _site(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(f"""
[daemon]
historian = "{tmp_path / 'h.sqlite'}"
[[site]]
id = "s"
jurisdiction = "southeast"
timezone = "UTC"
[[site.instrument]]
id = "gas"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 1502
register_map = "msa_ultima_x"
poll_interval = 1.0
[[site.instrument]]
id = "flow"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 1503
register_map = "dynasonics_tfx_ultra"
poll_interval = 1.0
[[site.channel]]
id = "lel"
instrument = "gas"
point = "gas_level"
kind = "lel"
unit = "%LEL"
valid_min = 0
valid_max = 100
[[site.channel]]
id = "flow"
instrument = "flow"
point = "flow_rate_gpm"
kind = "flow"
unit = "gpm"
""")
    return path


def test_maintenance_is_a_data_quality_episode_only_where_the_instrument_can_report_it(tmp_path: Path) -> None:
    """Bound on the gas monitor's channel (its map has a calibration bit), not on the flow meter's (none); the
    same rows give the same episode whichever way they arrive (the engine the daemon and the replay share)."""
    from config.loader import load_config
    from config.rules import is_data_quality
    from monitor.checks.engine import CheckEngine
    from monitor.sample import Quality, Sample

    config = load_config(_site(tmp_path))
    bound = [(b.rule, b.channel) for b in config.sites[0].checks if b.rule == "maintenance"]
    assert bound == [("maintenance", "lel")] and is_data_quality("maintenance")
    engine = CheckEngine.for_config(config)
    t = 1_800_000_000.0

    def lel(dt: float, quality: Quality = Quality.GOOD) -> Sample:
        value = 2.0 if quality is Quality.GOOD else None
        return Sample(time=t + dt, site="s", channel="lel", value=value, unit="%LEL", quality=quality,
                      reason="" if value is not None else "instrument in maintenance: Calibration Active - Sensor 1")

    events = engine.process_many([lel(0), lel(1, Quality.MAINTENANCE), lel(2, Quality.MAINTENANCE), lel(3)])
    assert [(e.rule, e.event, e.time - t) for e in events] == [("maintenance", "start", 1.0),
                                                               ("maintenance", "end", 3.0)]
    assert "service or calibration mode" in events[0].citation


def test_a_channel_unit_its_units_register_cannot_report_is_a_configuration_error(tmp_path: Path) -> None:
    """Checked at load, not only at connect: a totaliser configured in gpm could never match a volume code."""
    from config.loader import load_config

    site = _site(tmp_path)
    site.write_text(site.read_text() + '[[site.channel]]\nid = "total"\ninstrument = "flow"\n'
                    'point = "net_totalizer"\nkind = "flow_total"\nunit = "gpm"\n')
    with pytest.raises(ConfigErrors) as exc:
        load_config(site)
    [err] = [str(e) for e in exc.value.errors]
    assert "site[0].channel[2].unit" in err and "'flow_unit_code'" in err and "'gal'" in err


def test_an_industry_user_sees_what_its_own_instruments_say_of_their_readings() -> None:
    """The console's health view: an industry user gets the unit mismatch of its own meter, not another site's
    devices nor the daemon's queues."""
    from monitor.console.api import industry_snapshot

    snap = {"time": 1.0, "uptime_s": 2.0, "historian": {"queue_depth": 3},
            "devices": {"acme/flow": {"unit_mismatch": {"total": "unit mismatch: ..."}, "faults": []},
                        "bolt/gas": {"unit_mismatch": {}, "faults": ["Sensor Missing - Sensor 1"]}}}
    seen = industry_snapshot(snap, {"acme/flow", "acme/ph"})
    assert seen == {"time": 1.0, "uptime_s": 2.0,
                    "devices": {"acme/flow": {"unit_mismatch": {"total": "unit mismatch: ..."}, "faults": []}},
                    "streaming": {}}  # no device clock of its own ahead (test_console_hardening has one)
    assert industry_snapshot(None, {"acme/flow"}) is None
