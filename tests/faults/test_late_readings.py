"""Late readings on the real daemon: the three ways the issue found the record blind, each must now give the
episode and its alarm, and `pretreat audit` must find the record equal to a replay of the stored readings.

- a device clock 4 minutes fast (MQTT, inside the allowed skew): one reading stamped now+240 s, then five real
  readings at pH 3.0: every real one is older than the channel's newest, and is judged at its time;
- an instrument re-sending its buffer after 8 s offline (MQTT, real times): 6.5/7.0/7.5/8.0 % LEL arrive after
  the channel went stale and after a newer reading: `lel_successive`;
- the wall clock stepped back 120 s (`monitor.clock.wall`, the seam every stamp goes through): the 5-s
  excursion after the step carries times older than the readings before it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import paho.mqtt.publish as publish

from config.loader import load_config
from config.schema import SiteConfig
from monitor import clock
from monitor.app import Daemon
from monitor.audit import audit
from monitor.stores.episodes import EpisodeStore
from simulators.modbus_server import ModbusSimServer
from tests.faults.harness import (
    ROOT,
    SITE,
    InProcessDaemon,
    channel,
    mqtt_instrument,
    site_file,
    tcp_instrument,
)
from tests.support import PATIENCE, Mosquitto, eventually, free_port


def _mqtt_site(tmp_path: Path, broker: Mosquitto, *, kind: str, unit: str, field: str, vmax: float) -> SiteConfig:
    instruments = [mqtt_instrument("meter", port=broker.port, poll=0.5, client_id=f"late-{kind}")]
    channels = [channel(kind, instrument="meter", kind=kind, unit=unit, topic=f"plant/mh1/{kind}", field=field,
                        valid_min=0, valid_max=vmax)]
    return load_config(site_file(tmp_path, instruments=instruments, channels=channels))


async def _send(broker: Mosquitto, kind: str, field: str, value: float, ts: float) -> None:
    await asyncio.to_thread(publish.single, f"plant/mh1/{kind}", json.dumps({field: value, "ts": round(ts, 3)}),
                            qos=1, hostname="127.0.0.1", port=broker.port)


def _episodes(config: SiteConfig, rule: str) -> list[tuple[float, float | None]]:
    store = EpisodeStore(path=config.daemon.historian)
    try:
        return [(e.start, e.end) for e in store.episodes(rule=rule)]
    finally:
        store.close()


def _raised(daemon: Daemon, alarm: str) -> list[str]:
    """The ``why`` of every raise of ``alarm`` in the journal."""
    return [r.payload.get("why", "") for r in daemon.alarming.engine.journal.records(kinds=["transition"])
            if r.payload.get("alarm") == alarm and r.payload.get("kind") == "raise"]


def _audit_cli(config_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor.cli", "audit", "--config", str(config_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


async def _subscribed(daemon: Daemon) -> None:
    assert await eventually(lambda: all(s.counters.subscribed for s in daemon.streaming), PATIENCE)


async def test_a_device_clock_4_minutes_fast_hides_no_excursion(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = _mqtt_site(tmp_path, mosquitto, kind="ph", unit="pH", field="ph", vmax=14)
    async with InProcessDaemon(config) as daemon:
        await _subscribed(daemon)
        now = time.time()
        await _send(mosquitto, "ph", "ph", 7.0, now + 240.0)  # the device clock is 4 minutes fast
        firsts: list[float] = []
        for _ in range(5):
            # stamps at least 2 ms apart: sent within one millisecond (a fast machine), two would carry the same
            # stamp and value, and the driver rightly takes the second for a repeat delivery (its `repeats`)
            t = round(max(time.time(), firsts[-1] + 0.002 if firsts else 0.0), 3)
            firsts.append(t)
            await _send(mosquitto, "ph", "ph", 3.0, t)
        # the 7.0 stamped 4 minutes ahead is further than max_gap after the last 3.0: the episode ends at the
        # last reading before that gap (monitor.checks.coverage), once all five are judged at their times
        assert await eventually(lambda: _episodes(config, "ph_low") == [(firsts[0], firsts[-1])], PATIENCE)
        alarm = f"{SITE}/ph/ph_low"
        assert await eventually(lambda: _raised(daemon, alarm), PATIENCE)
        assert "late reading" in _raised(daemon, alarm)[0]
        assert await eventually(lambda: daemon.engine.counters()["late"] >= 5, PATIENCE)  # all five judged late
        assert daemon.engine.counters()["revisions"] >= 1
    result = audit(config)
    assert result.mismatches == [] and result.recorded >= 1, result.mismatches
    done = _audit_cli(tmp_path / "site.toml")
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_buffered_resend_after_8_s_offline_gives_lel_successive(tmp_path: Path,
                                                                        mosquitto: Mosquitto) -> None:
    config = _mqtt_site(tmp_path, mosquitto, kind="lel", unit="%LEL", field="lel_pct", vmax=100)
    async with InProcessDaemon(config) as daemon:
        await _subscribed(daemon)
        await _send(mosquitto, "lel", "lel_pct", 1.0, time.time())
        offline = time.time()
        stale = f"{SITE}/lel/stale"
        assert await eventually(lambda: _episodes(config, "stale"), PATIENCE)  # the daemon saw the outage
        assert await eventually(lambda: time.time() >= offline + 8.0, PATIENCE)
        for i, v in enumerate((6.5, 7.0, 7.5, 8.0)):  # the instrument's buffer, with the real times
            await _send(mosquitto, "lel", "lel_pct", v, offline + 1.0 + i)
        await _send(mosquitto, "lel", "lel_pct", 1.0, time.time())
        want = round(offline + 2.0, 3)  # the second successive reading over 5 % LEL
        assert await eventually(lambda: [s for s, _e in _episodes(config, "lel_successive")] == [want], PATIENCE)
        alarm = f"{SITE}/lel/lel_successive"
        assert await eventually(lambda: _raised(daemon, alarm), PATIENCE)
        assert daemon.engine.counters()["late"] >= 1  # at least 6.5 %: older than the STALE sample recorded
        assert _raised(daemon, stale)  # the outage itself is on record too, and audited below
    result = audit(config)
    assert result.mismatches == [], result.mismatches
    done = _audit_cli(tmp_path / "site.toml")
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_wall_clock_stepped_back_120_s_hides_no_excursion(tmp_path: Path) -> None:
    port = free_port()
    instruments = [tcp_instrument("ph-meter", port=port, rmap="ph_meter", poll=0.25, timeout=0.3)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels))
    offset = [0.0]

    def wall() -> float:
        return time.time() + offset[0]

    (server,) = ModbusSimServer.for_instruments(config.instruments)
    await server.start()
    meter = server.device("ph-meter")
    meter.set("ph", 720)
    real_wall = clock.wall
    clock.wall = wall  # the seam every reading's stamp goes through (`monitor.clock`)
    try:
        async with InProcessDaemon(config, clock=wall) as daemon:
            assert await eventually(lambda: daemon.engine.counters()["late"] == 0 and daemon.stats, PATIENCE)
            await asyncio.sleep(0)
            before = time.time()
            assert await eventually(lambda: time.time() >= before + 2.0, PATIENCE)  # readings before the step
            offset[0] = -120.0  # the wall clock steps back
            stepped = time.time()
            meter.set("ph", 300)  # a 5-s acid excursion right after the step
            assert await eventually(lambda: time.time() >= stepped + 5.0, PATIENCE)
            meter.set("ph", 720)
            end = time.time()
            assert await eventually(lambda: time.time() >= end + 1.0, PATIENCE)
            assert await eventually(lambda: len(_episodes(config, "ph_low")) == 1, PATIENCE)
            (start, finish) = _episodes(config, "ph_low")[0]
            assert stepped - 121.0 <= start <= stepped - 119.0 and finish is not None
            assert await eventually(lambda: _raised(daemon, f"{SITE}/ph/ph_low"), PATIENCE)
            assert daemon.engine.counters()["late"] > 0
    finally:
        clock.wall = real_wall
        await server.stop()
    result = audit(config)
    assert result.mismatches == [], result.mismatches
    done = _audit_cli(tmp_path / "site.toml")
    assert done.returncode == 0, done.stdout + done.stderr
