"""`check-config` catches each class of mistake, all at once, each with its key path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.loader import SITES_DIR, check_config, load_config
from config.schema import ByteOrder, DataType, DriverKind, Table
from monitor.cli import main
from tests.unit.config_helpers import errors_of, site, write

GOOD_MAP = """
name = "m"
[[point]]
name = "v"
table = "holding"
address = 0
type = "float32"
"""


def test_shipped_demo_site_is_valid() -> None:
    cfg = load_config(SITES_DIR / "demo.toml")
    assert [s.id for s in cfg.sites] == ["acme-plating", "southeast-wwtp"]  # the industry and the plant's influent
    kinds = {i.driver for i in cfg.instruments}
    assert kinds == {DriverKind.MODBUS_TCP, DriverKind.MODBUS_RTU, DriverKind.MQTT}
    point = cfg.sites[0].instruments[0].register_map.points["flow_rate"]  # type: ignore[union-attr]
    assert (point.table, point.dtype, point.word_order) == (Table.HOLDING, DataType.FLOAT32, ByteOrder.BIG)
    # relative paths resolve against the site file's folder, not the working directory
    assert cfg.daemon.historian.is_absolute()


def test_minimal_site_loads(tmp_path: Path) -> None:
    assert errors_of(tmp_path, site()) == []


@pytest.mark.parametrize(
    ("instrument", "channel", "expected_path"),
    [
        # unknown driver
        ('[[site.instrument]]\nid="fm"\ndriver="modbus"\nhost="h"\nregister_map="flow_meter"', "",
         "site[0].instrument[0].driver"),
        # a register map that does not exist
        ('[[site.instrument]]\nid="fm"\ndriver="modbus_tcp"\nhost="h"\nregister_map="no_such_map"', "",
         "site[0].instrument[0].register_map"),
        # port out of range
        ('[[site.instrument]]\nid="fm"\ndriver="modbus_tcp"\nhost="h"\nport=70000\nregister_map="flow_meter"',
         "", "site[0].instrument[0].port"),
        # negative poll interval
        ('[[site.instrument]]\nid="fm"\ndriver="modbus_tcp"\nhost="h"\npoll_interval=-1\n'
         'register_map="flow_meter"', "", "site[0].instrument[0].poll_interval"),
        # misspelt key
        ('[[site.instrument]]\nid="fm"\ndriver="modbus_tcp"\nhost="h"\nregister_map="flow_meter"\nunitid=3', "",
         "site[0].instrument[0].unitid"),
        # channel names an unknown instrument
        ("", '[[site.channel]]\nid="flow"\ninstrument="nope"\npoint="flow_rate"\nkind="flow"\nunit="gpm"',
         "site[0].channel[0].instrument"),
        # channel names an unknown register point
        ("", '[[site.channel]]\nid="flow"\ninstrument="fm"\npoint="nope"\nkind="flow"\nunit="gpm"',
         "site[0].channel[0].point"),
        # unknown kind
        ("", '[[site.channel]]\nid="flow"\ninstrument="fm"\npoint="flow_rate"\nkind="flux"\nunit="gpm"',
         "site[0].channel[0].kind"),
        # inverted valid range
        ("", '[[site.channel]]\nid="flow"\ninstrument="fm"\npoint="flow_rate"\nkind="flow"\nunit="gpm"\n'
             "valid_min=10\nvalid_max=1", "site[0].channel[0].valid_max"),
        # zero scale would turn every reading into 0
        ("", '[[site.channel]]\nid="flow"\ninstrument="fm"\npoint="flow_rate"\nkind="flow"\nunit="gpm"\n'
             "scale=0", "site[0].channel[0].scale"),
        # MQTT channel without a topic
        ('[[site.instrument]]\nid="fm"\ndriver="mqtt"\nhost="h"',
         '[[site.channel]]\nid="flow"\ninstrument="fm"\nfield="x"\nkind="flow"\nunit="gpm"',
         "site[0].channel[0].topic"),
    ],
)
def test_each_class_of_mistake_is_named(tmp_path: Path, instrument: str, channel: str,
                                        expected_path: str) -> None:
    paths = [p.split(": ")[0] for p in errors_of(tmp_path, site(instrument, channel))]
    assert expected_path in paths


def test_duplicates_are_errors_not_silently_dropped(tmp_path: Path) -> None:
    text = site(channel="""
        [[site.channel]]
        id = "flow"
        instrument = "fm"
        point = "flow_rate"
        kind = "flow"
        unit = "gpm"
        [[site.channel]]
        id = "flow"
        instrument = "fm"
        point = "flow_total"
        kind = "flow_total"
        unit = "gal"
        """)
    assert any(e.startswith("site[0].channel[1].id") for e in errors_of(tmp_path, text))


def test_two_instruments_on_one_link_need_distinct_unit_ids(tmp_path: Path) -> None:
    inst = """
        [[site.instrument]]
        id = "fm"
        driver = "modbus_tcp"
        host = "127.0.0.1"
        register_map = "flow_meter"
        [[site.instrument]]
        id = "fm2"
        driver = "modbus_tcp"
        host = "127.0.0.1"
        register_map = "flow_meter"
        """
    assert any("unit_id" in e for e in errors_of(tmp_path, site(instrument=inst)))


def test_bad_register_map_file_reports_its_own_errors(tmp_path: Path) -> None:
    write(tmp_path, GOOD_MAP.replace('type = "float32"', 'type = "bool"'), "bad_map.toml")
    inst = """
        [[site.instrument]]
        id = "fm"
        driver = "modbus_tcp"
        host = "127.0.0.1"
        register_map = "bad_map.toml"
        """
    errs = check_config(write(tmp_path, site(instrument=inst, channel="""
        [[site.channel]]
        id = "flow"
        instrument = "fm"
        point = "v"
        kind = "flow"
        unit = "gpm"
        """)))
    files = {Path(e.file).name for e in errs}
    assert "bad_map.toml" in files  # the map's own mistake, named in the map file
    assert any(e.path == "point[0].type" for e in errs)


def test_all_errors_reported_at_once(tmp_path: Path) -> None:
    text = """
        [daemon]
        tick_interval = 0
        [[site]]
        id = "bad id"
        timezone = "Nowhere/Else"
        [[site.instrument]]
        id = "fm"
        driver = "modbus_tcp"
        register_map = "flow_meter"
        [[site.channel]]
        id = "flow"
        instrument = "fm"
        point = "flow_rate"
        kind = "flow"
        """
    paths = {e.split(": ")[0] for e in errors_of(tmp_path, text)}
    assert {"daemon.tick_interval", "site[0].id", "site[0].timezone", "site[0].instrument[0].host",
            "site[0].channel[0].unit"} <= paths


def test_toml_syntax_error_and_missing_file(tmp_path: Path) -> None:
    assert check_config(write(tmp_path, "[[site]\nid=")) and check_config(tmp_path / "absent.toml")
    with pytest.raises(ConfigErrors):
        load_config(tmp_path / "absent.toml")


def test_cli_check_config_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(SITES_DIR / "demo.toml")]) == 0
    bad = write(tmp_path, site(channel='[[site.channel]]\nid="flow"\ninstrument="fm"\nkind="flow"\nunit="x"'))
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "site[0].channel[0].point" in err and "1 error(s)" in err


def _channel(**keys: object) -> str:
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    head = '[[site.channel]]\nid = "flow"\ninstrument = "fm"\npoint = "flow_rate"\nkind = "flow"\n'
    return f'{head}unit = "gpm"\n{lines}'


def test_max_gap_defaults_to_three_poll_intervals_but_never_under_5_s(tmp_path: Path) -> None:
    def gap(poll: float, **keys: object) -> float:
        inst = (f'[[site.instrument]]\nid = "fm"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                f'register_map = "flow_meter"\npoll_interval = {poll}\n')
        return load_config(write(tmp_path, site(inst, _channel(**keys)))).channels[0].max_gap

    assert (gap(1.0), gap(0.5), gap(60.0), gap(60.0, max_gap=30)) == (5.0, 5.0, 180.0, 30.0)


@pytest.mark.parametrize(("keys", "expected"), [
    ({"max_gap": 4}, "a number >= 5"), ({"max_gap": "a minute"}, "a number"),
    ({"max_gap": 40 * 86400}, "a number"), ({"judge_over_range": "yes"}, "true or false")])
def test_max_gap_and_judge_over_range_are_validated(tmp_path: Path, keys: dict[str, object],
                                                    expected: str) -> None:
    errors = errors_of(tmp_path, site(channel=_channel(**keys)))
    key = next(iter(keys))
    assert any(f"site[0].channel[0].{key}" in e and expected in e for e in errors), errors


_HACH = '[[site.instrument]]\nid = "hach"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\nregister_map = "hach_pc_sc_ph"\n'


@pytest.mark.parametrize("kind,unit,accepted", [
    ("ph", "mV", False), ("ph", "pH", True), ("ph", "pH units", True), ("ph", "s.u.", True),
    ("temperature", "mV", False), ("temperature", "degF", True), ("temperature", "°C", True),
    ("lel", "ppm", False), ("lel", "% LEL", True), ("sampler_temperature", "pH", False),
])
def test_a_channel_whose_unit_its_kind_cannot_be_judged_in_is_refused(
        tmp_path: Path, kind: str, unit: str, accepted: bool) -> None:
    """The Hach pH/ORP probe's point set to ORP (mV) would be judged against pH limits ("a reading < 5 mV"):
    refused, and so is a temperature or LEL channel in a unit its limits cannot be stated in."""
    ch = f'[[site.channel]]\nid = "probe"\ninstrument = "hach"\npoint = "ph"\nkind = "{kind}"\nunit = "{unit}"\n'
    errors = errors_of(tmp_path, site(instrument=_HACH, channel=ch))
    unit_errors = [e for e in errors if e.startswith("site[0].channel[0].unit:")]
    assert (unit_errors == []) is accepted, errors
    if not accepted:
        assert "'probe'" in unit_errors[0] and f"kind = '{kind}'" in unit_errors[0]
    if kind == "ph" and not accepted:
        assert "an ORP (mV) reading cannot be judged as pH" in unit_errors[0]


def test_a_setting_several_rules_read_is_named_once(tmp_path: Path) -> None:
    """Two flow meters and a sampler: the sampling interval and its data-quality twin both need to know which
    flow paces the sampler. check-config named the same missing setting once per rule; now once, saying why."""
    src = (Path(__file__).resolve().parents[1] / "cases" / "sampler_pawling_fridge_and_interval" / "site.toml")
    text = src.read_text(encoding="utf-8")
    second = ('[[site.channel]]\nid = "flow2"\ninstrument = "m"\ntopic = "mh1/flow2"\npayload = "number"\n'
              'kind = "flow"\nunit = "gpm"\nvalid_min = 0\nvalid_max = 5000\n\n')
    path = tmp_path / "site.toml"
    path.write_text(text.replace("[site.permit]", second + "[site.permit]", 1), encoding="utf-8")
    with pytest.raises(ConfigErrors) as info:
        load_config(path)
    (error,) = [e for e in info.value.errors if "sampler_interval" in e.path]
    assert error.path == "site[0].rules.sampler_interval.flow" and error.found == ["flow", "flow2"]
    assert "several, name one" in error.expected
