"""Calibration overdue, end to end: a daemon polling a simulated Modbus TCP flow meter whose permit wants it
calibrated every 30 days, last calibrated 40 days ago (entered with `pretreat calibration add`), raises
``calibration_overdue`` to the industry's route and to the plant operator's route (two real HTTP receivers);
a calibration entered while it runs clears it at the next tick, both routes hear the clear, and the journal
holds the entry and the transitions with its chain intact."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from alarms.journal import Journal
from config.loader import load_config
from monitor.app import Daemon
from monitor.cli import main
from simulators.runner import SiteSimulator
from tests.notify_servers import HttpReceiver
from tests.support import PATIENCE, eventually, free_port

SITE = """
[daemon]
historian = "pretreat.sqlite"
tick_interval = 0.2

[notify]
state_dir = "notify"

[[notify.channel]]
id = "industry-hook"
kind = "webhook"
url = "{industry}"

[[notify.channel]]
id = "plant-hook"
kind = "webhook"
url = "{plant}"

[[site]]
id = "acme"
jurisdiction = "southeast"
timezone = "America/New_York"

[site.permit]
id = "IU-7"

[site.permit.calibration]
cite = "Permit IU-7, Part III.B (flow meter verified every 30 days)"
flow = 30

[[site.route]]
name = "industry"
audience = "industry"
notify = "industry-hook"
min_priority = "low"
rules = ["calibration_overdue"]

[[site.route]]
name = "plant-operator"
audience = "plant_operator"
notify = "plant-hook"
min_priority = "low"

[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {port}
unit_id = 1
register_map = "flow_meter"
poll_interval = 0.5
timeout = 0.5

[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"
valid_min = 0
valid_max = 2000
"""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _calibrate(site: Path, when: float) -> None:
    assert main(["calibration", "add", "--config", str(site), "--site", "acme", "--channel", "flow",
                 "--date", _iso(when), "--who", "R. Diaz, meter service", "--method", "flow_reference",
                 "--found", "250:262", "--left", "250:251"]) == 0


def _calibration_events(hook: HttpReceiver) -> list[tuple[str, str]]:
    return [(r.json()["kind"], r.json()["state"]) for r in hook.received()
            if r.json()["rule"] == "calibration_overdue"]


async def test_overdue_is_raised_to_industry_and_plant_and_cleared_by_a_calibration(tmp_path: Path) -> None:
    industry, plant = HttpReceiver(), HttpReceiver()
    industry.start()
    plant.start()
    try:
        site = tmp_path / "site.toml"
        site.write_text(SITE.format(industry=industry.url, plant=plant.url, port=free_port()))
        config = load_config(site)
        _calibrate(site, time.time() - 40 * 86400)  # due 10 days ago
        daemon = Daemon(config=config)
        async with SiteSimulator(config=config):
            stop = asyncio.Event()
            task = asyncio.create_task(daemon.run(stop))
            try:
                await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
                assert await eventually(lambda: ("raise", "active-unacknowledged") in _calibration_events(industry)
                                        and ("raise", "active-unacknowledged") in _calibration_events(plant))
                raised = next(r.json() for r in plant.received() if r.json()["rule"] == "calibration_overdue")
                assert raised["channel"] == "flow" and raised["priority"] == "low"
                assert "calibration OVERDUE since" in raised["citation"]
                assert "Permit IU-7, Part III.B" in raised["citation"]
                _calibrate(site, time.time())  # entered while the daemon runs
                assert await eventually(lambda: any(k == "clear" for k, _s in _calibration_events(industry))
                                        and any(k == "clear" for k, _s in _calibration_events(plant)))
            finally:
                stop.set()
                await asyncio.wait_for(task, PATIENCE)
        # the industry's route takes only this rule; each route heard the raise once
        assert all(r.json()["rule"] == "calibration_overdue" for r in industry.received())
        assert [k for k, _s in _calibration_events(plant)].count("raise") == 1
        journal = Journal(path=config.daemon.historian)
        try:
            kinds = [r.kind for r in journal.records()]
            assert kinds.count("calibration") == 2
            transitions = [r.payload for r in journal.records(kinds=["transition"])
                           if r.payload.get("alarm") == "acme/flow/calibration_overdue"]
            assert len(transitions) >= 2
            assert journal.verify().ok
        finally:
            journal.close()
    finally:
        industry.stop()
        plant.stop()
