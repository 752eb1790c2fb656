"""The same engine live and offline: a simulator scenario recorded by the daemon, then the recorded readings
replayed with `pretreat replay`, give the same exceedance episodes: times, values, end reasons, measured and
unmeasured seconds, censoring. The scenario has a gap (the pH meter silent for 8 s inside an excursion: max_gap
is 5 s) and an LEL meter reading 120 % (over its span: judged as 100 %, censored)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from config.loader import load_config
from monitor.app import Daemon
from monitor.cli import main
from monitor.stores.episodes import EpisodeStore
from simulators.runner import SiteSimulator
from simulators.scenario import load_scenario
from tests.support import (
    Mosquitto,
    assert_same_episodes,
    demo_site_file,
    recorded_readings_csv,
    require_binary,
    run_for,
)

SCENARIO = """
description = "pH below 5.0 for four seconds, LEL over 5 % on successive readings, back to normal"
start_hour = 10.0
duration = 60

[[step]]
at = 1.5
kind = "ph"
value = 4.5

[[step]]
at = 14.0
kind = "ph"
clear = true

[[step]]
at = 2.0
kind = "lel"
value = 6.5

[[step]]
at = 6.0
kind = "lel"
clear = true

[[step]]
at = 3.0
kind = "ph"
fault = "silent"

[[step]]
at = 11.0
kind = "ph"
fault = "none"

[[step]]
at = 8.0
kind = "lel"
value = 120.0

[[step]]
at = 10.0
kind = "lel"
clear = true
"""


def _exact(e: dict) -> tuple:  # type: ignore[type-arg]
    return (e["site"], e["channel"], e["rule"], e["event"], e["value"], e["limit"], e["citation"],
            e.get("end_reason"), e.get("censored", False))


NUMBERS = ("time_s", "measured_seconds", "unmeasured_seconds", "maintenance_seconds")


async def test_recorded_scenario_replays_to_the_same_episodes(tmp_path: Path, mosquitto: Mosquitto) -> None:
    require_binary("socat")
    site_file = demo_site_file(tmp_path, mosquitto.port)
    config = load_config(site_file)
    scenario_file = tmp_path / "excursion.toml"
    scenario_file.write_text(SCENARIO)
    async with SiteSimulator(config=config, scenario=load_scenario(scenario_file)):
        await run_for(Daemon(config=config), 17.0)

    store = EpisodeStore(path=config.daemon.historian)
    live = [dict(e.to_dict(), time_s=e.time) for e in store.events()]
    store.close()
    rules = {(e["rule"], e["event"]) for e in live}
    assert {("ph_low", "start"), ("ph_low", "end"), ("lel_successive", "start"), ("lel_successive", "end")} <= rules
    assert any(e["rule"] == "ph_low" and e.get("end_reason") == "gap" for e in live), live
    # the flow channel's slug has no day of normal operation yet: the daemon says so (data quality), as replay does
    assert ("slug_no_baseline", "start") in rules, live
    assert any(e["rule"] == "lel_single" and e["event"] == "start" and e.get("censored") and e["value"] == 100.0
               for e in live), live

    readings = recorded_readings_csv(config.daemon.historian, "acme-plating",
                                     [ch.id for ch in config.sites[0].channels], tmp_path / "readings.csv")
    out = tmp_path / "episodes.jsonl"
    assert main(["replay", "--config", str(site_file), str(readings), "--output", str(out)]) == 0
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    for e in replayed:
        e["time_s"] = datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
    assert_same_episodes(replayed, live, _exact, NUMBERS)
    assert len(replayed) == len(live) >= 4
