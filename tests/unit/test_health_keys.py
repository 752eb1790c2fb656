"""Health counters are keyed by (site, instrument): two sites' instruments with the same id (every site of a
town has its "lel-meter") must not share, or overwrite, each other's counters in the snapshot, in `pretreat
status` or in the console."""

from __future__ import annotations

import json
import time
from pathlib import Path

from monitor.app import Daemon
from monitor.health import HealthWriter, health_path
from monitor.read.status import collect
from tests.browser.harness import ACME, BOLT, load, write_site


def test_same_instrument_id_at_two_sites_keeps_two_sets_of_counters(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    now = time.time()
    daemon = Daemon(config=config, clock=lambda: now)
    by_key = {f"{d.instrument.site}/{d.instrument_id}": d for d in daemon.streaming}
    by_key[f"{ACME}/lel-meter"].counters.connected = True  # type: ignore[attr-defined]
    by_key[f"{ACME}/lel-meter"].counters.messages = 7  # type: ignore[attr-defined]
    by_key[f"{BOLT}/lel-meter"].counters.connected = False  # type: ignore[attr-defined]
    by_key[f"{BOLT}/lel-meter"].counters.messages = 3  # type: ignore[attr-defined]
    HealthWriter(path=health_path(config.daemon.historian), counters=daemon.health_counters).write()
    snap = json.loads(health_path(config.daemon.historian).read_text())
    assert snap["streaming"][f"{ACME}/lel-meter"]["messages"] == 7
    assert snap["streaming"][f"{BOLT}/lel-meter"]["messages"] == 3
    report = {i.key: i for i in collect(config, now=snap["time"] + 1).instruments}
    assert report[f"{ACME}/lel-meter"].link == "up" and report[f"{ACME}/lel-meter"].counters["messages"] == 7
    assert report[f"{BOLT}/lel-meter"].link == "down" and report[f"{BOLT}/lel-meter"].counters["messages"] == 3
