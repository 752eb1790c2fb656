"""`pretreat sim`: prints where each instrument is served, serves it, and stops cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pymodbus.client import ModbusTcpClient

from monitor.cli import main
from tests.support import PATIENCE, Mosquitto, demo_like, free_port, mqtt_only_site, require_binary

ROOT = Path(__file__).resolve().parents[2]


def _read_until(proc: subprocess.Popen[str], needle: str, wait: float = PATIENCE) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} never printed; got {lines}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serves_prints_endpoints_and_stops_on_signal(tmp_path: Path, mosquitto: Mosquitto,
                                                     sig: signal.Signals) -> None:
    require_binary("socat")
    config = demo_like(tmp_path, mosquitto.port)
    flow_port = config.sites[0].instruments[0].port
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config", str(config.source),
         "--scenario", "slug", "--speed", "60"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = _read_until(proc, "lel-meter")
        text = "\n".join(lines)
        assert "scenario 'slug'" in text
        assert f"acme-plating/flow-meter: modbus_tcp unit 1 on 127.0.0.1:{flow_port}" in text
        assert f"modbus_rtu unit 2 on {tmp_path / 'ttyPH'}" in text
        assert f"mqtt://127.0.0.1:{mosquitto.port}" in text and "started mosquitto" not in text
        client = ModbusTcpClient("127.0.0.1", port=flow_port, timeout=1, retries=0)
        assert client.connect()
        rr = client.read_holding_registers(0, count=2, device_id=1)
        client.close()
        assert not rr.isError()
        rate = client.convert_from_registers(rr.registers, data_type=client.DATATYPE.FLOAT32)
        # ~112 gpm, or 900 once the slug starts (5 s in at speed 60; a loaded machine may get there)
        assert isinstance(rate, float) and 0 < rate <= 900
        assert (tmp_path / "ttyPH").exists()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopping at simulated t" in out
    assert not (tmp_path / "ttyPH").exists()  # the pty pair is cleaned up


def test_duration_in_simulated_seconds_then_exit_0(tmp_path: Path, mosquitto: Mosquitto,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    site = mqtt_only_site(tmp_path, mosquitto.port)
    started = time.monotonic()
    assert main(["sim", "--config", str(site), "--speed", "100", "--duration", "30"]) == 0
    assert 0.25 <= time.monotonic() - started < 3.0
    out = capsys.readouterr().out
    assert "s1/lel-meter: publishing to mqtt://127.0.0.1" in out
    assert "stopping at simulated t = 3" in out


def test_starts_a_local_broker_when_none_listens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_binary("mosquitto")
    port = free_port()
    site = mqtt_only_site(tmp_path, port)
    assert main(["sim", "--config", str(site), "--speed", "100", "--duration", "20"]) == 0
    assert f"started mosquitto on 127.0.0.1:{port}" in capsys.readouterr().out
    with pytest.raises(OSError):  # and stopped it again
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()


def test_no_broker_means_exit_1_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = mqtt_only_site(tmp_path, free_port())
    assert main(["sim", "--config", str(site), "--no-broker", "--duration", "1"]) == 1
    assert "cannot serve" in capsys.readouterr().err


def test_bad_scenario_exit_2_naming_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = mqtt_only_site(tmp_path, free_port())
    bad = tmp_path / "bad.toml"
    bad.write_text("[[step]]\nat = 1\nkind = 'ph'\nvalue = 4\n")
    assert main(["sim", "--config", str(site), "--no-broker", "--scenario", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: step[0].kind: got 'ph', expected a kind present in the configuration: ['lel']" in err
    assert main(["sim", "--config", str(site), "--scenario", "nonesuch"]) == 2
    assert "ph_excursion" in capsys.readouterr().err
    assert main(["sim", "--config", str(site), "--speed", "0"]) == 2


def test_bad_site_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "nothing started" in capsys.readouterr().err



def test_port_in_use_means_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        site = tmp_path / "tcp_site.toml"
        site.write_text(f"""
[[site]]
id = "s1"
timezone = "UTC"
[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {port}
register_map = "flow_meter"
[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"
""")
        assert main(["sim", "--config", str(site), "--duration", "1"]) == 1
    err = capsys.readouterr().err
    assert "cannot serve" in err and str(port) in err
