"""`pretreat run` SIGKILLed several times at random moments while the InfluxDB-protocol server (a real
VictoriaMetrics) is down, with readings arriving continuously over Modbus TCP and MQTT; restarted each time,
then the server comes back. VictoriaMetrics must then hold exactly what the historian holds, reading by
reading: every recorded reading at its millisecond, with its value (good readings) or without one (bad),
nothing the historian lacks, and a reading sent twice only as the same point (same series, timestamp and
value: VictoriaMetrics keeps repeats, so a second copy with another timestamp or value would show).

No flush is awaited before a kill: what the sink held only in memory at that moment is what this test is
about (the sink re-queues it from the historian at the next start, `monitor.stores.influx`).
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    DaemonProcess,
    Row,
    SimThread,
    channel,
    mqtt_instrument,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.support import PATIENCE, Mosquitto, VictoriaMetrics, free_port, wait_until

KINDS = {"ph": "ph", "flow": "flow", "lel": "lel"}  # channel → measurement (its kind)


def outage_site(tmp_path: Path, broker: int, url: str) -> Path:
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.2, timeout=0.3),
                   tcp_instrument("flow-meter", port=free_port(), poll=0.2, timeout=0.3),
                   mqtt_instrument("lel-meter", port=broker, poll=0.2)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14),
                channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000),
                channel("lel", instrument="lel-meter", kind="lel", unit="%LEL", topic="plant/mh1/lel",
                        field="lel_pct", valid_min=0, valid_max=100)]
    # the shipped flush_interval (1 s): the window a kill used to lose
    top = f'[influx]\nurl = "{url}"\nbucket = "pretreat"\nflush_interval = 1.0\nmax_backoff = 0.5\ntimeout = 2.0\n'
    return site_file(tmp_path, instruments=instruments, channels=channels, top=top)


def health(config: SiteConfig) -> dict[str, Any]:
    path = config.daemon.historian.with_name(config.daemon.historian.name + ".health.json")
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def influx_drained(config: SiteConfig) -> bool:
    c = health(config).get("influx") or {}
    return bool(c.get("server_up")) and c.get("queue_depth") == 0 and c.get("pending_in_memory", 1) < 50


def server_points(victoria: VictoriaMetrics) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], list[float]]]:
    """(channel, ms) → how many `quality` points, and → every `value` the server holds there."""
    match = '{__name__=~"(ph|flow|lel)_(quality|value)"}'
    quality: dict[tuple[str, int], int] = defaultdict(int)
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for s in victoria.export(match):
        name, ch = s["metric"]["__name__"], s["metric"]["channel"]
        for ts, v in zip(s["timestamps"], s["values"], strict=True):
            if name.endswith("_quality"):
                quality[(ch, ts)] += 1
            else:
                values[(ch, ts)].append(v)
    return quality, values


def compare(rows: list[Row], victoria: VictoriaMetrics) -> list[str]:
    """What differs between the historian and the server, reading by reading (empty: identical)."""
    expected: dict[tuple[str, int], Row] = {}
    for r in rows:  # (an MQTT message redelivered after a kill may be recorded twice: the same point)
        seen = expected.setdefault((r.channel, round(r.time * 1000)), r)
        assert (seen.value, seen.quality) == (r.value, r.quality), f"two readings in one millisecond: {seen}, {r}"
    quality, values = server_points(victoria)
    problems = [f"missing from the server: {k} {expected[k]}" for k in sorted(expected.keys() - quality.keys())]
    problems += [f"on the server but not in the historian: {k}" for k in sorted(quality.keys() - expected.keys())]
    for key, r in expected.items():
        got = values.get(key, [])
        if r.good and (not got or any(not _same(v, r.value) for v in got)):
            problems.append(f"{key}: historian value {r.value!r}, server {got}")
        if not r.good and got:
            problems.append(f"{key}: a bad reading ({r.quality}) has values on the server: {got}")
    return problems


def _same(server: float, recorded: float | None) -> bool:
    """VictoriaMetrics keeps ~12 significant digits of a float (successive readings here differ in the 6th)."""
    return recorded is not None and abs(server - recorded) <= 1e-10 * max(1.0, abs(recorded))


def run_outage_kills(tmp_path: Path, mosquitto: Mosquitto, victoria: VictoriaMetrics, *, kills: int,
                     seed: int) -> None:
    config = load_config(outage_site(tmp_path, mosquitto.port, victoria.url))
    rng = random.Random(seed)
    daemon = DaemonProcess(config.source, tmp_path / "daemon.log")  # type: ignore[arg-type]
    factory = lambda: SiteSimulator(config=config, mqtt_time_format="epoch")  # noqa: E731
    victoria.stop()  # the outage covers every kill
    try:
        with SimThread(factory):
            for _ in range(kills):
                daemon.start()
                daemon.wait_ready()
                time.sleep(rng.uniform(0.3, 2.5))  # readings keep arriving; no flush is awaited
                daemon.signal(signal.SIGKILL)
            daemon.start()
            daemon.wait_ready()
            time.sleep(rng.uniform(0.3, 1.0))
            victoria.start()
            drained = wait_until(lambda: influx_drained(config), 30, 0.1)
            assert daemon.stop() == 0, daemon.output()[-3000:]
        assert drained, (health(config).get("influx"), daemon.output()[-3000:])
        final = health(config)["influx"]
        assert final["queue_depth"] == 0 and final["pending_in_memory"] == 0, final
        log = daemon.log.read_text()
        assert "Traceback" not in log, log[-3000:]
    finally:
        daemon.kill()
    rows = recorded(config.daemon.historian)
    assert {r.channel for r in rows} == set(KINDS)
    wait_until(lambda: not compare(rows, victoria), PATIENCE, 0.5)  # new series take a moment to become searchable
    problems = compare(rows, victoria)
    assert problems == [], f"{len(problems)} differences among {len(rows)} readings: {problems[:5]}"
    assert "re-queuing the readings" in log, "no kill left anything to re-queue: the test proved nothing"


def test_sigkill_during_an_influx_outage_loses_no_reading(tmp_path: Path, mosquitto: Mosquitto,
                                                         victoria: VictoriaMetrics) -> None:
    run_outage_kills(tmp_path, mosquitto, victoria, kills=3, seed=23)


@pytest.mark.slow
def test_sigkill_ten_times_during_an_influx_outage_loses_no_reading(tmp_path: Path, mosquitto: Mosquitto,
                                                                   victoria: VictoriaMetrics) -> None:
    run_outage_kills(tmp_path, mosquitto, victoria, kills=10, seed=2323)
