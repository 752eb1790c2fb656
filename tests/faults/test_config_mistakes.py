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
    assert {line.split(": ")[1] for line in lines[:-1]} == expected
    run = subprocess.run([sys.executable, "-m", "monitor.cli", "run", "--config", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "nothing started" in run.stderr
    assert not (tmp_path / "pretreat.sqlite").exists()
