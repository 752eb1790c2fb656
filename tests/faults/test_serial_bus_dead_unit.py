"""One dead unit on an RS-485 bus (Modbus RTU on a socat pty pair) among live ones: the dead unit costs the
bus its own timeout per poll and nothing more; the live units keep their cadence and every reading; the dead
unit is recorded poll for poll as a communication failure, and goes stale although it never reported."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from config.loader import load_config
from monitor.health import health_path
from simulators.modbus_server import SimFault
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    assert_bad_rows_carry_no_value,
    assert_good_values_were_served,
    by_channel,
    channel,
    duplicates,
    polled_rows,
    recorded,
    rtu_instrument,
    served_values,
    site_file,
)
from tests.support import eventually, require_binary

UNITS = {"ph-a": 1, "ph-dead": 2, "ph-b": 3}
POLL, TIMEOUT = 0.5, 0.8  # a timeout long enough that waiting one out shows through a loaded machine's delays


@pytest.fixture(autouse=True)
def _socat() -> None:
    require_binary("socat")


async def test_a_dead_unit_on_the_bus_costs_the_live_ones_nothing(tmp_path: Path) -> None:
    tty = tmp_path / "ttyBUS"
    instruments = [rtu_instrument(i, tty=tty, unit=u, poll=POLL, timeout=TIMEOUT) for i, u in UNITS.items()]
    channels = [channel(f"{i}_ph", instrument=i, kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14) for i in UNITS]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels))
    async with SiteSimulator(config=config, history=2000) as sim:
        sim.device(SITE, "ph-dead").fault = SimFault.SILENT  # dead before the daemon ever saw it
        async with InProcessDaemon(config) as daemon:
            assert await eventually(lambda: all(daemon.stats[f"{SITE}/{i}"].polls >= 6 for i in ("ph-a", "ph-b")))
        served = served_values(sim)
    rows = recorded(config.daemon.historian)
    channels_rows = by_channel(rows)
    assert duplicates(rows) == []
    assert_bad_rows_carry_no_value(rows)
    for inst in UNITS:
        assert len(polled_rows(channels_rows[f"{inst}_ph"])) == daemon.stats[f"{SITE}/{inst}"].polls > 0
    assert assert_good_values_were_served(rows, served) > 0

    dead = channels_rows["ph-dead_ph"]
    assert {r.quality for r in polled_rows(dead)} == {"comm_failure"}
    assert all("no reply" in r.reason for r in polled_rows(dead))
    assert [r.quality for r in dead].count("stale") == 1  # never reported since start: still stale, once
    for live in ("ph-a", "ph-b"):
        got = channels_rows[f"{live}_ph"]
        assert all(r.good for r in got), [r for r in got if not r.good][:3]
        gaps = [b.time - a.time for a, b in itertools.pairwise(got)]
        # at worst one poll interval plus the dead unit's timeout on the shared bus (waiting out two of its
        # timeouts would take another whole one: half of it is the room left for a loaded machine)
        assert max(gaps) < POLL + 1.5 * TIMEOUT, max(gaps)
        assert daemon.stats[f"{SITE}/{live}"].polls >= 6
    health = json.loads(health_path(config.daemon.historian).read_text())  # the final snapshot, at stop
    [link] = health["links"].values()
    assert link["outages"] == 0  # a silent unit never costs a serial bus its connection
    # the loop was never held up by the dead unit's timeouts (they are awaited, not blocking)
    lag = health["loop_lag"]
    assert lag["samples"] > 10 and lag["p99_ms"] <= lag["max_ms"] < TIMEOUT * 1000 / 2, lag
