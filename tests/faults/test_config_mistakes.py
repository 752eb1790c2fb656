"""A site file with every class of mistake: `pretreat check-config` lists each one (key path, value found,
what was expected) and exits 2, and `pretreat run` starts nothing. Complements tests/unit/test_config.py and
tests/unit/test_alarm_config.py (the classes they cover are not repeated here), one mistake at a time, then
all of them in one file through the real command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config.loader import check_config
from tests.faults.harness import ROOT

VALID = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "s1"
timezone = "America/New_York"
jurisdiction = "southeast"

[[site.instrument]]
id = "fm"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 5020
register_map = "flow_meter"

[[site.instrument]]
id = "ph2"
driver = "modbus_rtu"
serial_port = "/dev/ttyUSB7"
baudrate = 9600
unit_id = 2
register_map = "ph_meter"

[[site.instrument]]
id = "ph3"
driver = "modbus_rtu"
serial_port = "/dev/ttyUSB7"
baudrate = 9600
unit_id = 3
register_map = "ph_meter"

[[site.instrument]]
id = "lel"
driver = "mqtt"
host = "127.0.0.1"

[[site.channel]]
id = "flow"
instrument = "fm"
point = "flow_rate"
kind = "flow"
unit = "gpm"

[[site.channel]]
id = "ph"
instrument = "ph2"
point = "ph"
kind = "ph"
unit = "pH"
scale = 0.01

[[site.channel]]
id = "ph_b"
instrument = "ph3"
point = "ph"
kind = "ph"
unit = "pH"
scale = 0.01

[[site.channel]]
id = "lel"
instrument = "lel"
topic = "mh1/lel"
field = "lel_pct"
kind = "lel"
unit = "%LEL"
"""

INFLUX = '\n[influx]\nurl = "http://127.0.0.1:8428"\nbucket = "b"\n'

# (what is wrong, text replaced, replacement, the key path the error must name)
CASES = [
    ("unknown top-level table", "[daemon]", "[deamon]\nx = 1\n[daemon]", "deamon"),
    ("unknown [daemon] key", 'historian = "pretreat.sqlite"', 'historian = "pretreat.sqlite"\nflush = true',
     "daemon.flush"),
    ("daemon number out of range", 'historian = "pretreat.sqlite"',
     'historian = "pretreat.sqlite"\ncommit_interval = 120', "daemon.commit_interval"),
    ("stale_after_polls below one poll", 'historian = "pretreat.sqlite"',
     'historian = "pretreat.sqlite"\nstale_after_polls = 0.5', "daemon.stale_after_polls"),
    ("a string where a number belongs", "port = 5020", 'port = 5020\npoll_interval = "fast"',
     "site[0].instrument[0].poll_interval"),
    ("zero timeout", "port = 5020", "port = 5020\ntimeout = 0", "site[0].instrument[0].timeout"),
    ("unit id beyond 247", "port = 5020", "port = 5020\nunit_id = 300", "site[0].instrument[0].unit_id"),
    ("RTU without a serial port", 'serial_port = "/dev/ttyUSB7"\nbaudrate = 9600\nunit_id = 2',
     "baudrate = 9600\nunit_id = 2", "site[0].instrument[1].serial_port"),
    ("unknown parity", "unit_id = 2", 'unit_id = 2\nparity = "X"', "site[0].instrument[1].parity"),
    ("one bus, two line settings", "baudrate = 9600\nunit_id = 3", "baudrate = 19200\nunit_id = 3",
     "site[id=s1].instrument[id=ph3].baudrate"),
    ("MQTT QoS 3", 'driver = "mqtt"', 'driver = "mqtt"\nqos = 3', "site[0].instrument[3].qos"),
    ("MQTT keepalive too short", 'driver = "mqtt"', 'driver = "mqtt"\nkeepalive = 1',
     "site[0].instrument[3].keepalive"),
    ("MQTT password file missing", 'driver = "mqtt"',
     'driver = "mqtt"\nusername = "u"\npassword_file = "no-such.password"', "site[0].instrument[3].password_file"),
    ("MQTT password without a user name", 'driver = "mqtt"', 'driver = "mqtt"\npassword_file = "site.toml"',
     "site[0].instrument[3].username"),
    ("Modbus channel without a point", 'point = "flow_rate"\n', "", "site[0].channel[0].point"),
    ("unknown payload format", 'field = "lel_pct"', 'field = "lel_pct"\npayload = "xml"',
     "site[0].channel[3].payload"),
    ("negative stale_after", 'unit = "gpm"', 'unit = "gpm"\nstale_after = -1', "site[0].channel[0].stale_after"),
    ("unknown measuring point", 'unit = "gpm"', 'unit = "gpm"\nlocation = "moon"', "site[0].channel[0].location"),
    ("wildcard topic", 'topic = "mh1/lel"', 'topic = "mh1/#"', "site[0].channel[3].topic"),
    ("JSON channel without a field", 'field = "lel_pct"\n', "", "site[0].channel[id=lel].field"),
    ("one topic/field pair twice", 'id = "ph_b"', 'id = "ph_b"', "site[0].channel[id=lel2].field"),
    ("unknown jurisdiction", 'jurisdiction = "southeast"', 'jurisdiction = "atlantis"', "site[0].jurisdiction"),
    ("unknown rule", '[[site.instrument]]\nid = "fm"',
     '[site.rules.no_such_rule]\nenabled = false\n\n[[site.instrument]]\nid = "fm"', "site[0].rules.no_such_rule"),
    ("no site at all", "[[site]]", "[[nosite]]", "site"),
    ("site without channels", "", "", "site[0].channel"),
    ("duplicate site id", "", "", "site[1].id"),
    ("InfluxDB URL without a scheme", INFLUX, INFLUX.replace("http://", ""), "influx.url"),
    ("empty bucket", INFLUX, INFLUX.replace('"b"', '""'), "influx.bucket"),
    ("unreadable token file", INFLUX, INFLUX + 'token_file = "no-such.token"', "influx.token_file"),
    ("token file and credential both", INFLUX, INFLUX + 'token_file = "site.toml"\ntoken_credential = "t"',
     "influx.token_credential"),
    ("batch size zero", INFLUX, INFLUX + "batch_size = 0", "influx.batch_size"),
]


def variant(old: str, new: str, name: str) -> str:
    text = VALID + (INFLUX if old == INFLUX else "")
    if name == "one topic/field pair twice":
        return text + '\n[[site.channel]]\nid = "lel2"\ninstrument = "lel"\ntopic = "mh1/lel"\n' \
                      'field = "lel_pct"\nkind = "lel"\nunit = "%LEL"\n'
    if name == "site without channels":
        return text[:text.index("[[site.channel]]")]
    if name == "duplicate site id":
        second = VALID[VALID.index("[[site]]"):].replace('"fm"', '"fm9"').replace("port = 5020", "port = 5029")
        return text + "\n" + second.replace("/dev/ttyUSB7", "/dev/ttyUSB8")
    assert old in text, old
    return text.replace(old, new, 1)


def test_the_valid_file_is_valid(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(VALID + INFLUX)
    assert check_config(site) == []


@pytest.mark.parametrize(("what", "old", "new", "path"), CASES, ids=[c[0] for c in CASES])
def test_each_class_of_mistake_is_named_with_its_key_path(tmp_path: Path, what: str, old: str, new: str,
                                                        path: str) -> None:
    site = tmp_path / "site.toml"
    site.write_text(variant(old, new, what))
    errors = check_config(site)
    assert path in [e.path for e in errors], (what, [str(e) for e in errors])
    found = next(e for e in errors if e.path == path)
    assert found.expected and str(site) in str(found)  # what was expected, and in which file


ALONE_ONLY = {  # each of these hides or renumbers the others' key paths: checked alone above
    "no site at all", "site without channels", "duplicate site id", "RTU without a serial port",
    "JSON channel without a field", "wildcard topic", "Modbus channel without a point", "unknown top-level table",
    "MQTT password without a user name",
}
BAD_INFLUX = ('\n[influx]\nurl = "127.0.0.1:8428"\nbucket = ""\ntoken_file = "no-such.token"\n'
              'token_credential = "t"\nbatch_size = 0\n')


def test_every_mistake_at_once_is_listed_by_the_command_and_nothing_starts(tmp_path: Path) -> None:
    """One file holding one mistake of (nearly) each class, through the real command line."""
    text = VALID
    for what, old, new, _ in CASES:
        if what in ALONE_ONLY or old == INFLUX:
            continue
        text = variant(old, new, what).replace(VALID, text) if what == "one topic/field pair twice" \
            else text.replace(old, new, 1)
    site = tmp_path / "site.toml"
    site.write_text(text + BAD_INFLUX)
    expected = {e.path for e in check_config(site)}
    paths = {c[3] for c in CASES if c[0] not in ALONE_ONLY}
    assert paths <= expected, sorted(paths - expected)

    out = subprocess.run([sys.executable, "-m", "monitor.cli", "check-config", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines[-1] == f"{len(lines) - 1} error(s); nothing started"
    assert lines[:-1] == [str(e) for e in check_config(site)]
    run = subprocess.run([sys.executable, "-m", "monitor.cli", "run", "--config", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "nothing started" in run.stderr
    assert not (tmp_path / "pretreat.sqlite").exists()


# --- messages an operator can act on (issue 18) ------------------------------------------------------------

def errors_of(tmp_path: Path, text: str) -> list[str]:
    site = tmp_path / "site.toml"
    site.write_text(text)
    return [str(e) for e in check_config(site)]


def test_an_error_inside_an_item_names_it_by_id_and_by_index(tmp_path: Path) -> None:
    (line,) = errors_of(tmp_path, VALID.replace("unit_id = 3", "unit_id = 3\nqos = 1\ntimeout = 0", 1))
    assert "site 's1' instrument 'ph3' timeout (site[0].instrument[2].timeout): got 0" in line
    # a check that names an item by id gets its index added
    (line,) = errors_of(tmp_path, VALID.replace("baudrate = 9600\nunit_id = 3", "baudrate = 19200\nunit_id = 3"))
    assert "site 's1' instrument 'ph3' baudrate (site[0].instrument[2].baudrate): got 19200" in line
    # a route is named by its name
    lines = errors_of(tmp_path, VALID.replace('[[site.instrument]]\nid = "fm"', '[[site.route]]\nname = "ops"\n'
                                              'notify = "nowhere"\n\n[[site.instrument]]\nid = "fm"', 1))
    assert any("site 's1' route 'ops' notify (site[0].route[0].notify): got 'nowhere'" in ln for ln in lines), lines


def test_a_misspelt_key_is_answered_with_the_nearest_known_key(tmp_path: Path) -> None:
    (line,) = errors_of(tmp_path, VALID.replace("port = 5020", "port = 5020\npoll_intervall = 2.0"))
    assert "poll_intervall (site[0].instrument[0].poll_intervall): got 2.0" in line
    assert line.endswith("(did you mean 'poll_interval'?)")
    (line,) = errors_of(tmp_path, VALID.replace('port = 5020', 'port = 5020\nzzz = 1'))
    assert "did you mean" not in line  # nothing near: no guess


def test_an_unknown_register_map_lists_the_shipped_maps(tmp_path: Path) -> None:
    (line,) = errors_of(tmp_path, VALID.replace('register_map = "flow_meter"', 'register_map = "flow_metre"'))
    assert "register_map (site[0].instrument[0].register_map): got 'flow_metre'" in line
    shipped = sorted(p.stem for p in (ROOT / "config" / "maps").glob("*.toml"))
    assert str(shipped) in line and line.endswith("(did you mean 'flow_meter'?), or a map file's path")
    (line,) = errors_of(tmp_path, VALID.replace('register_map = "flow_meter"', 'register_map = "maps/mine.toml"'))
    assert f"{tmp_path / 'maps' / 'mine.toml'} not found" in line and str(shipped) in line


# --- config mistakes that used to pass check-config (issue 15) ------------------------------------------------

MQTT_TWIN = '\n[[site.instrument]]\nid = "lel-b"\ndriver = "mqtt"\nhost = "127.0.0.1"\nclient_id = "{cid}"\n' \
            '[[site.channel]]\nid = "lel_b"\ninstrument = "lel-b"\ntopic = "mh1/lel-b"\nfield = "lel_pct"\n' \
            'kind = "lel"\nunit = "%LEL"\n'
SCADA = '\n[notify]\n[[notify.channel]]\nid = "scada"\nkind = "mqtt"\nhost = "127.0.0.1"\nclient_id = "{cid}"\n'


def test_two_instruments_with_one_id_are_one_error_not_a_cascade(tmp_path: Path) -> None:
    """The copy (an MQTT meter named like the flow meter) is the error; the flow channel stays bound to the
    first "fm", so it is not also reported for lacking an MQTT topic."""
    text = VALID + '\n[[site.instrument]]\nid = "fm"\ndriver = "mqtt"\nhost = "127.0.0.1"\n'
    site = tmp_path / "site.toml"
    site.write_text(text)
    assert [(e.path, e.found) for e in check_config(site)] == [("site[0].instrument[4].id", "fm")]


def test_one_mqtt_client_id_for_two_instruments_is_a_config_error_and_run_starts_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(VALID.replace('driver = "mqtt"', 'driver = "mqtt"\nclient_id = "meter"')
                    + MQTT_TWIN.format(cid="meter"))
    (error,) = check_config(site)
    assert error.path == "site[id=s1].instrument[id=lel-b].client_id" and error.found == "meter"
    assert "already used on 127.0.0.1:1883 (by instrument s1/lel)" in str(error)
    assert "instrument 'lel-b' client_id (site[0].instrument[4].client_id)" in str(error)
    run = subprocess.run([sys.executable, "-m", "monitor.cli", "run", "--config", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "nothing started" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "pretreat.sqlite").exists()


def test_an_instrument_and_the_alarm_channel_sharing_a_client_id_is_a_config_error(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(VALID.replace('driver = "mqtt"', 'driver = "mqtt"\nclient_id = "plant"')
                    + SCADA.format(cid="plant"))
    (error,) = check_config(site)
    assert error.path == "notify.channel[id=scada].client_id"
    assert "notify channel 'scada' client_id (notify.channel[0].client_id)" in str(error)
    # the same id on another broker is another client
    site.write_text(VALID.replace('driver = "mqtt"', 'driver = "mqtt"\nclient_id = "plant"')
                    + SCADA.format(cid="plant").replace('"127.0.0.1"', '"10.0.0.9"'))
    assert check_config(site) == []


@pytest.mark.parametrize(("historian", "reason"), [
    ("{tmp}", "it is a directory"),
    ("/proc/pretreat/pretreat.sqlite", "cannot create the folder /proc/pretreat: /proc takes no new files"),
    ("/proc/pretreat.sqlite", "cannot create files in /proc"),
    ("{tmp}/site.toml/pretreat.sqlite", "site.toml is not a folder"),
    ("/sys/pretreat.sqlite", "cannot create files in /sys"),  # read-only to everyone, root included
], ids=["a directory", "under /proc", "in /proc", "under a file", "read-only /sys"])
def test_a_historian_path_that_cannot_be_written_is_a_config_error(tmp_path: Path, historian: str,
                                                                   reason: str) -> None:
    path = historian.format(tmp=tmp_path)
    site = tmp_path / "site.toml"
    site.write_text(VALID.replace('historian = "pretreat.sqlite"', f'historian = "{path}"'))
    (error,) = check_config(site)
    assert error.path == "daemon.historian" and error.found == path
    assert reason in error.expected, error.expected


def test_checking_the_historian_path_creates_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(VALID.replace('historian = "pretreat.sqlite"', 'historian = "var/db/pretreat.sqlite"'))
    assert check_config(site) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site.toml"]  # no folder, no database


@pytest.mark.parametrize("bad", ["nan", "inf", '"14"'])
def test_a_bad_valid_max_is_one_error(tmp_path: Path, bad: str) -> None:
    site = tmp_path / "site.toml"
    site.write_text(VALID.replace('unit = "gpm"', f'unit = "gpm"\nvalid_min = 0\nvalid_max = {bad}'))
    assert [e.path for e in check_config(site)] == ["site[0].channel[0].valid_max"]
