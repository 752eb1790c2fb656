"""Maintenance live and in replay: an MSA Ultima X (catalogue map) served by our simulator reads over 5 % LEL on
successive readings, then says it is in calibration for longer than the channel's max_gap, then reads again. The
daemon records the episodes; a replay of the recorded readings finds the same ones, maintenance seconds included.
The calibration is no gap: the LEL episode before it ends with end_reason "maintenance", the maintenance episode's
time is maintenance time, not measured and not unmeasured (`monitor.checks.coverage`)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from config.loader import load_config
from monitor.app import Daemon
from monitor.cli import main
from monitor.stores.episodes import EpisodeStore
from simulators.runner import SiteSimulator
from simulators.scenario import load_scenario
from tests.support import assert_same_episodes, free_port, recorded_readings_csv, run_for

# poll every 0.5 s: max_gap = 5 s (the loader's minimum); the calibration lasts 8 s
SCENARIO = """
description = "LEL over 5 %, then 8 s of calibration, then LEL back to normal"
start_hour = 10.0
duration = 60
[[step]]
at = 0.5
kind = "lel"
value = 7.0
[[step]]
at = 3.0
instrument = "gas"
register = "general_status"
raw = 2        # bit 1: Calibration Active - Sensor 1
[[step]]
at = 11.0
instrument = "gas"
register = "general_status"
raw = 0
[[step]]
at = 13.0
kind = "lel"
value = 1.0
"""


def _exact(e: dict) -> tuple:  # type: ignore[type-arg]
    return e["channel"], e["rule"], e["event"], e["value"], e.get("end_reason")


NUMBERS = ("time_s", "measured_seconds", "unmeasured_seconds", "maintenance_seconds")


async def test_a_calibration_longer_than_max_gap_is_maintenance_time_live_and_in_replay(tmp_path: Path) -> None:
    site_file = tmp_path / "site.toml"
    site_file.write_text(f"""
[daemon]
historian = "{tmp_path / 'h.sqlite'}"
commit_interval = 0.05
tick_interval = 0.2
[[site]]
id = "s"
jurisdiction = "southeast"
timezone = "UTC"
[[site.instrument]]
id = "gas"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {free_port()}
register_map = "msa_ultima_x"
poll_interval = 0.5
timeout = 0.5
[[site.channel]]
id = "lel"
instrument = "gas"
point = "gas_level"
kind = "lel"
unit = "%LEL"
valid_min = 0
valid_max = 100
""")
    config = load_config(site_file)
    scenario = tmp_path / "calibration.toml"
    scenario.write_text(SCENARIO)
    async with SiteSimulator(config=config, scenario=load_scenario(scenario)):
        await run_for(Daemon(config=config), 16.0)

    store = EpisodeStore(path=config.daemon.historian)
    live = [dict(e.to_dict(), time_s=e.time) for e in store.events()]
    store.close()
    [maint] = [e for e in live if e["rule"] == "maintenance" and e["event"] == "end"]
    span = maint["measured_seconds"] + maint["unmeasured_seconds"] + maint["maintenance_seconds"]
    assert maint["maintenance_seconds"] > 5.0, "longer than max_gap, all of it maintenance time"
    assert maint["maintenance_seconds"] >= 0.9 * span and maint["unmeasured_seconds"] == pytest.approx(0.0)
    lel_ends = [e for e in live if e["rule"] == "lel_successive" and e["event"] == "end"]
    assert lel_ends and lel_ends[0]["end_reason"] == "maintenance", live
    assert not any(e.get("end_reason") == "gap" for e in live), "a calibration is no gap in the record"

    readings = recorded_readings_csv(config.daemon.historian, "s", ["lel"], tmp_path / "readings.csv")
    out = tmp_path / "episodes.jsonl"
    assert main(["replay", "--config", str(site_file), str(readings), "--output", str(out)]) == 0
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    for e in replayed:
        e["time_s"] = datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
    assert_same_episodes(replayed, live, _exact, NUMBERS)
