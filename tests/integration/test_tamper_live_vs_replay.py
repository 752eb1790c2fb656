"""Tamper signs live and replayed: the demo site's simulators with the pH meter held at 7.12 while the flow
varies (ph_frozen), stepped from 7.0 to 7.8 across an excursion below 5.0 (offset_step) and held at 14.0, the top
of its span (span_pinned), recorded by the running daemon; then the recorded readings replayed with `pretreat
replay`: the same data-quality episodes, to the reading."""

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
description = "pH frozen at 7.12, a step from 7.0 to 7.8 across an excursion, then pinned at 14.0"
start_hour = 10.0
duration = 60

[[step]]
at = 1.0
kind = "ph"
value = 7.12

[[step]]
at = 9.0
kind = "ph"
value = 7.0

[[step]]
at = 13.0
kind = "ph"
value = 4.0

[[step]]
at = 15.0
kind = "ph"
value = 7.8

[[step]]
at = 19.5
kind = "ph"
value = 14.0

[[step]]
at = 24.0
kind = "ph"
clear = true
"""

RULES = """
[site.rules.ph_frozen]
readings = 5
[site.rules.offset_step]
readings = 3
step = 0.5
[site.rules.span_pinned]
channels = ["ph"]
readings = 3

"""
TAMPER = ("ph_frozen", "offset_step", "span_pinned")


def _exact(e: dict) -> tuple:  # type: ignore[type-arg]
    return e["channel"], e["rule"], e["event"], e["value"], e["limit"], e.get("end_reason")


async def test_tamper_signs_recorded_live_are_the_ones_replay_finds(tmp_path: Path, mosquitto: Mosquitto) -> None:
    require_binary("socat")
    site_file = demo_site_file(tmp_path, mosquitto.port)
    text = site_file.read_text()
    site_file.write_text(text.replace("[[site.instrument]]", RULES + "[[site.instrument]]", 1))
    config = load_config(site_file)
    scenario_file = tmp_path / "tamper.toml"
    scenario_file.write_text(SCENARIO)
    async with SiteSimulator(config=config, scenario=load_scenario(scenario_file)):
        await run_for(Daemon(config=config), 28.0)

    store = EpisodeStore(path=config.daemon.historian)
    live = [dict(e.to_dict(), time_s=e.time) for e in store.events() if e.rule in TAMPER]
    store.close()
    starts = {e["rule"] for e in live if e["event"] == "start"}
    assert starts >= set(TAMPER), live
    step = next(e for e in live if e["rule"] == "offset_step" and e["event"] == "start")
    assert abs(step["value"] - 0.8) < 1e-9  # 7.8 after, 7.0 before
    assert any(e["rule"] == "ph_frozen" and e["event"] == "start" and e["value"] == 7.12 for e in live)
    assert any(e["rule"] == "span_pinned" and e["event"] == "start" and e["value"] == 14.0 for e in live)

    readings = recorded_readings_csv(config.daemon.historian, "acme-plating",
                                     [ch.id for ch in config.sites[0].channels], tmp_path / "readings.csv")
    out = tmp_path / "episodes.jsonl"
    assert main(["replay", "--config", str(site_file), str(readings), "--output", str(out)]) == 0
    replayed = [json.loads(line) for line in out.read_text().splitlines()]
    replayed = [dict(e, time_s=datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp())
                for e in replayed if e["rule"] in TAMPER]
    assert_same_episodes(replayed, live, _exact, ("time_s", "measured_seconds"))
