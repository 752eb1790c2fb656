"""What each catalogue map says of its sources: the units register it checks (or why none can be checked), the
word order the manual states (or that it states none, and the instrument's ``word_order`` that then sets it), and
where the vendor hosts the manual. `pretreat maps show` prints all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.loader import load_config
from config.maps import MAPS_DIR, load_register_map
from config.schema import ByteOrder, DataType
from monitor.cli import main
from tests.catalogue_maps import CATALOGUE

# the maps whose manual states the order of 32-bit words in so many words
STATED = {"msa_ultima_x": "most significant word is located in the first register"}
VENDOR_HOSTS = {"hach_pc_sc_ph": "hach.com", "hach_3400sc_conductivity": "hach.com", "msa_ultima_x": "msasafety.com",
                "dynasonics_tfx_ultra": "badgermeter.com", "dynasonics_tfx_5000": "badgermeter.com",
                "eh_liquistation_csf22": "endress.com"}


@pytest.mark.parametrize("name", CATALOGUE)
def test_every_catalogue_map_says_where_the_vendor_hosts_its_manual_and_what_its_units_registers_are(
        name: str) -> None:
    m = load_register_map(MAPS_DIR / f"{name}.toml").manual
    assert m is not None
    host = VENDOR_HOSTS[name]
    # the cited url is a third party's: the vendor copy was looked for on the vendor's own host and not found
    assert host not in m.url and f"not found on {host}" in m.vendor_copy
    assert m.units_register.strip()


@pytest.mark.parametrize("name", CATALOGUE)
def test_word_order_is_cited_or_said_to_be_unstated_and_settable(name: str) -> None:
    m = load_register_map(MAPS_DIR / f"{name}.toml").manual
    assert m is not None
    if name in STATED:
        assert "stated" in m.word_order and STATED[name] in m.word_order
    else:  # no statement to cite: the map says so and the instrument's word_order sets it
        assert "not stated" in m.word_order or "a meter setting" in m.word_order
        assert "word_order on the instrument" in m.word_order


@pytest.mark.parametrize("name", ["hach_pc_sc_ph", "hach_3400sc_conductivity", "msa_ultima_x"])
def test_maps_show_says_the_unit_comes_from_the_configuration_where_no_units_register_can_be_checked(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maps", "show", name]) == 0
    out = capsys.readouterr().out
    value_points = [p for p in load_register_map(MAPS_DIR / f"{name}.toml").points.values()
                    if not p.units and not p.is_status and not p.unit and p.dtype is not DataType.UINT16]
    assert value_points
    assert out.count("no units register: unit taken from the configuration") == len(value_points)
    assert "units register:" in out and "vendor copy:" in out


def test_maps_show_names_the_checked_units_register_and_the_page_of_an_unlisted_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maps", "show", "msa_ultima_x"]) == 0
    out = capsys.readouterr().out
    assert "Table 3-15 'Sensor Engineering Units' (p. 3-11" in out and "Base+213" in out
    assert main(["maps", "show", "eh_liquistation_csf22"]) == 0
    out = capsys.readouterr().out
    assert "unit: checked at connect and every units_check_interval against units register 'ai_1_unit'" in out
    assert "no units register" not in out


def test_maps_show_puts_each_unit_line_under_its_value_never_under_a_status_or_setting_register(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The sections of `maps show`: values (each saying where its unit comes from), units registers, status
    registers, settings and states; "no units register" is said of values only."""
    assert main(["maps", "show", "msa_ultima_x"]) == 0
    out = capsys.readouterr().out.split("\npoints (", 1)[1]
    values, rest = out.split("\nstatus registers (read every poll):\n")
    status, settings = rest.split("\nsettings and states (read for the record, not measurements):\n")
    assert "gas_level" in values and "no units register: unit taken from the configuration" in values
    assert "general_status" in status and "fault_status" in status and "no units register" not in status
    assert "engineering_units" in settings and "no units register" not in settings
    assert main(["maps", "show", "dynasonics_tfx_ultra"]) == 0
    out = capsys.readouterr().out
    assert out.count("unit: gpm, fixed by the register (no units register)") == 3
    assert out.count("unit: L/min, fixed by the register") == 1 and "unit taken from the configuration" not in out


@pytest.mark.parametrize(("name", "point", "unit"), [
    ("dynasonics_tfx_ultra", "flow_rate_gpm", "gpm"), ("dynasonics_tfx_ultra", "flow_rate_gpm_long", "gpm"),
    ("dynasonics_tfx_ultra", "flow_rate_gpm_double", "gpm"), ("dynasonics_tfx_ultra", "flow_rate_lpm", "L/min"),
    ("hach_pc_sc_ph", "temperature", "degC"),
])
def test_a_register_whose_unit_the_manual_fixes_states_it(name: str, point: str, unit: str) -> None:
    p = load_register_map(MAPS_DIR / f"{name}.toml").points[point]
    assert p.unit == unit and not p.unit_point
    assert {"gpm": "GPM", "L/min": "LPM", "degC": "degC"}[unit] in p.description  # as the manual names it


def test_check_config_refuses_a_channel_in_another_unit_than_its_register_fixes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The GPM register configured in litres per minute: refused, naming instrument, channel, point and both units;
    the same unit spelt otherwise ("GPM") is the same unit."""
    path = _site(tmp_path, "")
    path.write_text(path.read_text().replace('unit = "gpm"', 'unit = "L/min"'))
    assert main(["check-config", str(path)]) != 0
    err = capsys.readouterr()
    text = err.out + err.err
    assert "channel 'flow' of instrument 'flow' reads point 'flow_rate_gpm'" in text, text
    assert "'gpm'" in text and "'L/min'" in text and "dynasonics_tfx_ultra" in text
    path.write_text(path.read_text().replace('unit = "L/min"', 'unit = "GPM"'))
    assert load_config(path).channels[0].unit == "GPM"


def test_a_fixed_unit_beside_a_units_register_is_a_map_mistake(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[[point]]\nname = "v"\ntable = "holding"\naddress = 0\nunit = "gpm"\n'
                   'unit_point = "u"\n[[point]]\nname = "u"\ntable = "holding"\naddress = 2\n'
                   '[point.units]\n"1" = "gal"\n')
    with pytest.raises(ConfigErrors) as exc:
        load_register_map(bad)
    assert any("point[0].unit" in str(e) and "unit_point" in str(e) for e in exc.value.errors)


def _site(tmp_path: Path, extra: str, driver: str = 'driver = "modbus_tcp"\nhost = "127.0.0.1"') -> Path:
    path = tmp_path / "site.toml"
    path.write_text(f"""
[daemon]
historian = "{tmp_path / 'h.sqlite'}"
[[site]]
id = "s"
jurisdiction = "southeast"
timezone = "UTC"
[[site.instrument]]
id = "flow"
{driver}
register_map = "dynasonics_tfx_ultra"
{extra}
[[site.channel]]
id = "flow"
instrument = "flow"
point = "flow_rate_gpm"
topic = "t/flow"
kind = "flow"
unit = "gpm"
""")
    return path


def test_an_instruments_word_order_sets_every_point_of_its_map(tmp_path: Path) -> None:
    config = load_config(_site(tmp_path, 'word_order = "little"'))
    [inst] = config.instruments
    assert inst.register_map is not None
    assert {p.word_order for p in inst.register_map.points.values()} == {ByteOrder.LITTLE}
    assert load_register_map(MAPS_DIR / "dynasonics_tfx_ultra.toml").points["flow_rate_gpm"].word_order \
        is ByteOrder.BIG  # the shipped map itself is unchanged
    [default] = load_config(_site(tmp_path, "")).instruments
    assert default.register_map is not None
    assert default.register_map.points["flow_rate_gpm"].word_order is ByteOrder.BIG


def test_a_wrong_word_order_or_one_on_an_mqtt_instrument_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors) as exc:
        load_config(_site(tmp_path, 'word_order = "middle"'))
    [err] = [str(e) for e in exc.value.errors]
    assert "site[0].instrument[0].word_order" in err and "'big'" in err and "'little'" in err
    with pytest.raises(ConfigErrors) as exc:
        load_config(_site(tmp_path, 'word_order = "little"', driver='driver = "mqtt"'))
    assert any("instrument[0].word_order" in str(e) and "Modbus instruments" in str(e) for e in exc.value.errors)
