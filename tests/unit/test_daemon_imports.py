"""What a daemon loads depends on its site file: paho (the MQTT client, ~8 MB of the daemon's resident memory
with the modules it pulls in) only for a site with MQTT instruments or MQTT notification. A gateway polling
Modbus devices alone stays that much smaller (bench/bench_peers.py measures the paced daemon's RSS).

Each case runs in a fresh interpreter: this test process has imported paho long before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.faults.harness import ROOT, channel, mqtt_instrument, site_file, tcp_instrument
from tests.support import free_port

PROBE = """
import sys
from config.loader import load_config
from monitor.app import Daemon
daemon = Daemon(config=load_config(sys.argv[1]))
print("paho" in sys.modules, len(daemon.polled), len(daemon.streaming))
"""


def loaded(site: Path) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(site)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_a_modbus_only_site_never_loads_paho(tmp_path: Path) -> None:
    site = site_file(tmp_path, instruments=[tcp_instrument("flow-meter", port=free_port())],
                     channels=[channel("flow", instrument="flow-meter", kind="flow", unit="gpm",
                                       point="flow_rate")])
    assert loaded(site) == "False 1 0"


def test_a_site_with_an_mqtt_instrument_loads_it(tmp_path: Path) -> None:
    site = site_file(tmp_path, instruments=[tcp_instrument("flow-meter", port=free_port()),
                                            mqtt_instrument("lel-meter", port=free_port())],
                     channels=[channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate"),
                               channel("lel", instrument="lel-meter", kind="lel", unit="%LEL",
                                       topic="plant/mh1/lel", field="lel_pct")])
    assert loaded(site) == "True 1 1"
