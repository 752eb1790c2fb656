"""The [uplink] table: defaults, every mistake reported with its key path and what was expected, and the
whole site file refused through `pretreat check-config` (exit 2) with each mistake named."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.loader import load_config
from config.reader import Reader
from config.uplink import UplinkSettings, parse_uplink, sanitise
from monitor.cli import main
from tests.faults.harness import channel, mqtt_instrument, site_file, tcp_instrument


def parse(text: str, base: Path, first_site: str = "acme-plating") -> tuple[UplinkSettings | None, list[str]]:
    reader = Reader("site.toml")
    settings = parse_uplink(tomllib.loads(text), reader, base, historian=base / "var" / "pretreat.sqlite",
                            first_site=first_site)
    return settings, [f"{e.path}: {e.found!r}: {e.expected}" for e in reader.errors]


def test_absent_table_means_no_uplink(tmp_path: Path) -> None:
    assert parse("[daemon]\n", tmp_path) == (None, [])


def test_minimal_table_gets_the_documented_defaults(tmp_path: Path) -> None:
    s, errors = parse('[uplink]\nhost = "broker.example.org"\n', tmp_path, first_site="acme plating/2")
    assert errors == []
    assert s == UplinkSettings(host="broker.example.org", node="acme_plating_2",
                               queue_path=tmp_path / "var" / "pretreat.uplink-queue.sqlite")
    assert (s.port, s.group, s.keepalive, s.batch_size, s.backlog_rate) == (1883, "pretreat", 30, 500, 5000.0)
    assert s.mqtt_client_id == "pretreat-edge-acme_plating_2" and s.read_password() is None
    assert parse('[uplink]\nhost = "b"\ntls = true\n', tmp_path)[0].port == 8883  # type: ignore[union-attr]


def test_sanitise_keeps_sparkplug_ids_plain() -> None:
    assert sanitise("acme-plating_1") == "acme-plating_1"
    assert sanitise("a/b+c#d e") == "a_b_c_d_e"


@pytest.mark.parametrize(("body", "expected"), [
    ('port = 0', "uplink.port: 0: an integer >= 1"),
    ('port = "1883"', "uplink.port: '1883': an integer"),
    ('group = "county/west"', "uplink.group: 'county/west': 1 to 64 letters"),
    ('node = "edge+1"', "uplink.node: 'edge+1': 1 to 64 letters"),
    ('node = ""', "uplink.node: '': 1 to 64 letters"),
    ('client_id = "edge 1"', "uplink.client_id: 'edge 1': an MQTT client id"),
    ('tls = "yes"', "uplink.tls: 'yes': true or false"),
    ('keepalive = 1', "uplink.keepalive: 1: an integer >= 5"),
    ('batch_size = 0', "uplink.batch_size: 0: an integer >= 1"),
    ('backlog_rate = 0', "uplink.backlog_rate: 0: a number >= 1"),
    ('flush_interval = -1', "uplink.flush_interval: -1: a number >= 0.01"),
    ('disk_budget_mb = 0', "uplink.disk_budget_mb: 0: a number >= 1"),
    ('password_file = "absent.secret"\nusername = "edge"', "uplink.password_file: 'absent.secret': a readable file"),
    ('hots = "x"', "uplink.hots"),
])
def test_each_mistake_is_named_with_its_key(tmp_path: Path, body: str, expected: str) -> None:
    _, errors = parse(f'[uplink]\nhost = "broker.example.org"\n{body}\n', tmp_path)
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_a_missing_host_and_a_password_without_user(tmp_path: Path) -> None:
    (tmp_path / "edge.secret").write_text("pw\n")
    _, errors = parse('[uplink]\npassword_file = "edge.secret"\n', tmp_path)
    assert [e.split(":")[0] for e in errors] == ["uplink.host", "uplink.username"], errors


def test_check_config_lists_every_uplink_mistake_and_exits_2(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = site_file(tmp_path, instruments=[tcp_instrument("flow-meter", port=5020)],
                     channels=[channel("flow", instrument="flow-meter", kind="flow", unit="gpm",
                                       point="flow_rate")],
                     top='[uplink]\nhost = "broker"\nnode = "a/b"\nbacklog_rate = 0\n')
    with pytest.raises(ConfigErrors) as info:
        load_config(path)
    assert {e.path for e in info.value.errors} == {"uplink.node", "uplink.backlog_rate"}
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    assert "uplink.node" in text and "uplink.backlog_rate" in text


def test_the_uplink_client_id_is_not_shared_with_an_instrument_on_the_same_broker(tmp_path: Path) -> None:
    path = site_file(tmp_path, instruments=[mqtt_instrument("lel-meter", port=1883, client_id="edge-1")],
                     channels=[channel("lel", instrument="lel-meter", kind="lel", unit="%LEL", topic="mh/lel",
                                       field="v")],
                     top='[uplink]\nhost = "127.0.0.1"\nclient_id = "edge-1"\n')
    with pytest.raises(ConfigErrors) as info:
        load_config(path)
    assert [e.path for e in info.value.errors] == ["uplink.client_id"], info.value.errors
