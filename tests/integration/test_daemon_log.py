"""The daemon's log as operators and log shippers get it: `pretreat run` against a simulated pH meter whose
reading falls below Southeast's 5.0, logging in the default text format and with ``--log-format json``.

Each event is one line (the alarm's raise was logged twice, by the engine at INFO and by the daemon at
WARNING); text lines carry the site's local time and zone and the reading at the channel's resolution,
never ``None``; JSON lines each parse on their own and keep the values as measured."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from config.loader import load_config
from simulators.runner import SiteSimulator
from simulators.scenario import load_scenario
from tests.faults.harness import ROOT, SimThread, channel, site_file, tcp_instrument
from tests.support import free_port, wait_until

SCENARIO = """
description = "pH falls to 4.5 one second in, and stays there"
start_hour = 10.0
duration = 600

[[step]]
at = 1.0
kind = "ph"
value = 4.5
"""
ALARM = "plant/ph/ph_low"


def run_daemon(tmp_path: Path, fmt: str | None) -> str:
    """Run `pretreat run` until the pH alarm has been raised, then stop it; what it wrote to stderr."""
    site = site_file(tmp_path, instruments=[tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter")],
                     channels=[channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01)])
    scenario = tmp_path / "acid.toml"
    scenario.write_text(SCENARIO)
    config = load_config(site)
    log = tmp_path / "daemon.log"
    options = [] if fmt is None else ["--log-format", fmt]
    with SimThread(lambda: SiteSimulator(config=config, scenario=load_scenario(scenario))), log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(site), *options],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            raised = wait_until(lambda: "ph_low" in log.read_text() and "stopped" not in log.read_text()
                                and _raised(log.read_text(), fmt))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    text = log.read_text()
    assert raised, text[-3000:]
    return text


def _raised(text: str, fmt: str | None) -> bool:
    if fmt == "json":
        return any(f'"alarm": "{ALARM}"' in line and '"kind": "raise"' in line for line in text.splitlines())
    return "ALARM [" in text


def test_text_lines_are_local_time_rounded_once_and_never_none(tmp_path: Path) -> None:
    text = run_daemon(tmp_path, None)
    lines = text.splitlines()
    assert "None" not in text
    # every line starts with the site's local time and zone (America/New_York) and a level
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
    assert all(stamp.match(line) for line in lines), [ln for ln in lines if not stamp.match(ln)][:3]
    alarm = [ln for ln in lines if "ALARM [" in ln and "plant ph ph_low" in ln]
    assert len(alarm) == 1, lines  # logged once, not by the engine and again by the daemon
    assert " WARNING ALARM [" in alarm[0] and ": 4.50 pH (limit 5.00 pH)" in alarm[0]  # scale 0.01: two places
    assert not re.search(r"1\d{9}", alarm[0])  # the condition's time as a local time, not epoch seconds
    started = [ln for ln in lines if "episode started: plant ph ph_low" in ln]
    assert len(started) == 1 and ", 4.50 pH (limit 5.00 pH; " in started[0]
    assert re.search(r" at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T, ", started[0])  # the sample's local time


def test_json_lines_parse_one_by_one_and_keep_the_structured_fields(tmp_path: Path) -> None:
    text = run_daemon(tmp_path, "json")
    docs = [json.loads(line) for line in text.splitlines()]  # each line on its own
    assert docs and all({"time", "level", "logger", "message"} <= d.keys() for d in docs)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d["time"]) for d in docs)  # UTC
    raises = [d for d in docs if d.get("alarm") == ALARM and d.get("kind") == "raise"]
    assert len(raises) == 1, [d["message"] for d in docs]
    (raise_,) = raises
    assert raise_["level"] == "warning" and raise_["value"] == pytest.approx(4.5) and raise_["limit"] == 5.0
    assert raise_["site"] == "plant" and raise_["rule"] == "ph_low" and raise_["event_time"].endswith("Z")
    assert raise_["message"].startswith("ALARM [")
    starts = [d for d in docs if d.get("rule") == "ph_low" and d.get("event") == "start"]
    assert len(starts) == 1 and starts[0]["value"] == pytest.approx(4.5)
