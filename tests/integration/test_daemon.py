"""The daemon end to end: the demo site's simulators (Modbus TCP, Modbus RTU on a pty, MQTT through a real
mosquitto), `pretreat run` polling them, every reading in the SQLite historian."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.app import Daemon, _by_interval
from monitor.health import health_path
from monitor.sample import Quality
from monitor.stores.historian import Historian
from simulators.modbus_server import SimFault
from simulators.runner import SiteSimulator
from tests.support import Mosquitto, demo_site_file, free_port, require_binary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path: Path, mosquitto: Mosquitto) -> SiteConfig:
    require_binary("socat")
    return load_config(demo_site_file(tmp_path, mosquitto.port))


async def run_for(daemon: Daemon, seconds: float) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.wait_for(daemon.ready.wait(), 10)
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(task, 15)


async def silence_during_run(daemon: Daemon, instrument: str, *, before: float, after: float) -> float:
    """Run ``daemon`` against its site's simulators; ``before`` s in, silence ``instrument``; stop ``after`` s
    later. Returns when it was silenced (Unix time)."""
    async with SiteSimulator(config=daemon.config) as sim:
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        await asyncio.wait_for(daemon.ready.wait(), 10)
        await asyncio.sleep(before)
        silenced = time.time()
        sim.device("acme-plating", instrument).fault = SimFault.SILENT
        await asyncio.sleep(after)
        stop.set()
        await asyncio.wait_for(task, 15)
    return silenced


def recorded(config: SiteConfig, channel: str) -> list:  # type: ignore[type-arg]
    return list(Historian.read(path=config.daemon.historian, site="acme-plating", channel=channel))


async def test_every_channel_of_every_driver_is_recorded_with_the_served_value(site: SiteConfig) -> None:
    async with SiteSimulator(config=site) as sim:
        await run_for(Daemon(config=site), 3.5)
        served = {ch: sim.value(ch) for ch in ("flow", "ph", "temperature", "sampler_temperature", "lel")}
    for ch in site.sites[0].channels:
        rows = recorded(site, ch.id)
        good = [s for s in rows if s.good]
        assert good, f"no good reading recorded for {ch.id}: {rows[:3]}"
    # the value the simulator served is the value recorded, through each driver's decoding and scaling
    assert recorded(site, "ph")[-1].value == pytest.approx(served["ph"], abs=0.005)  # int16 x 0.01
    assert recorded(site, "temperature")[-1].value == pytest.approx(served["temperature"], abs=0.05)
    assert recorded(site, "flow")[-1].value == pytest.approx(served["flow"], rel=1e-3)  # float32
    assert recorded(site, "lel")[-1].value == pytest.approx(served["lel"], rel=1e-6)  # MQTT JSON


async def test_a_silent_device_is_recorded_as_bad_quality_and_neighbours_keep_reporting(site: SiteConfig) -> None:
    daemon = Daemon(config=site)
    silenced = await silence_during_run(daemon, "flow-meter", before=1.5, after=5.0)
    flow_after = [s for s in recorded(site, "flow") if s.time > silenced + 0.6]
    assert flow_after and all(not s.good for s in flow_after)
    assert {s.quality for s in flow_after} <= {Quality.COMM_FAILURE, Quality.STALE}
    assert any("no reply" in s.reason for s in flow_after)
    assert any(s.quality is Quality.STALE for s in flow_after)  # judged on the clock tick
    assert all(s.value is None for s in flow_after)  # never a number, never the last good value
    # the pH meter (RTU) and the sampler (another TCP link) kept their 1 s / 5 s cadence
    ph_after = [s for s in recorded(site, "ph") if s.time > silenced]
    assert len(ph_after) >= 4 and all(s.good for s in ph_after)


def three_meters(tmp_path: Path, *, interval: float, timeout: float) -> SiteConfig:
    """Three Modbus TCP flow meters with the same poll interval (one APScheduler job polls them all)."""
    parts = ['[daemon]\nhistorian = "h.sqlite"\ncommit_interval = 0.1\ntick_interval = 1.0\n'
             '[[site]]\nid = "acme-plating"\njurisdiction = "southeast"\ntimezone = "UTC"\n']
    for n in range(3):
        parts.append(f'[[site.instrument]]\nid = "fm{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                     f'port = {free_port()}\nregister_map = "flow_meter"\npoll_interval = {interval}\n'
                     f'timeout = {timeout}\n'
                     f'[[site.channel]]\nid = "flow{n}"\ninstrument = "fm{n}"\npoint = "flow_rate"\n'
                     'kind = "flow"\nunit = "gpm"\n')
    (tmp_path / "site.toml").write_text("".join(parts))
    return load_config(tmp_path / "site.toml")


async def test_a_poll_still_running_when_the_next_is_due_is_skipped_and_counted(tmp_path: Path) -> None:
    """No two polls of one device at once: while the silent meter waits out its 0.4 s timeout, the rounds due
    every 0.1 s skip it (and count each skip), and its two neighbours are polled on every round regardless."""
    site = three_meters(tmp_path, interval=0.1, timeout=0.4)
    daemon = Daemon(config=site)
    silenced = await silence_during_run(daemon, "fm0", before=1.0, after=3.0)
    stats = daemon.stats
    rows = {n: [s for s in recorded(site, f"flow{n}") if s.time > silenced + 0.5] for n in range(3)}
    # the silent meter: each poll waited its full timeout, the rounds in between were skipped and counted
    assert stats["acme-plating/fm0"].skipped >= 10
    waited = [s.time for s in rows[0] if "no reply within" in s.reason]  # polls that waited out the timeout
    assert len(waited) >= 3 and all(b - a >= 0.39 for a, b in itertools.pairwise(waited))
    # every poll finished is recorded, once, the last ones before the stop included: one row per poll (STALE
    # rows come from the clock tick)
    for n in range(3):
        polled = [s for s in recorded(site, f"flow{n}") if s.quality is not Quality.STALE]
        assert len(polled) == stats[f"acme-plating/fm{n}"].polls
    # its neighbours kept the 0.1 s cadence: ~25 polls in 2.5 s, none skipped for long
    for n in (1, 2):
        assert len(rows[n]) >= 18 and all(s.good for s in rows[n])
        assert stats[f"acme-plating/fm{n}"].skipped <= 3


async def test_a_poll_round_due_as_the_daemon_stops_starts_no_poll(tmp_path: Path) -> None:
    """APScheduler runs a due poll round as a task of its own: one created just before the stop runs after the
    shutdown has paused the scheduler and drained the polls in flight. It used to start polls then, whose samples
    reached a closed historian and were lost although the polls were counted (bench_polling lost 25 polls' worth
    in one of ten stops). A stopping daemon's rounds start nothing; every poll counted is recorded."""
    site = three_meters(tmp_path, interval=30.0, timeout=0.5)  # one round at start, then none
    daemon = Daemon(config=site)
    async with SiteSimulator(config=site):
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        await asyncio.wait_for(daemon.ready.wait(), 10)
        await asyncio.sleep(0.5)  # the first round's polls are done
        (drivers,) = _by_interval(daemon.polled).values()  # the one round, as the scheduler was given it
        stop.set()
        late = asyncio.create_task(daemon._poll_round(drivers))  # what APScheduler hands the loop when due
        await asyncio.wait_for(task, 15)
        await late
    for n in range(3):
        polled = [s for s in recorded(site, f"flow{n}") if s.quality is not Quality.STALE]
        assert len(polled) == daemon.stats[f"acme-plating/fm{n}"].polls == 1


def test_sigterm_flushes_every_reading_and_exits_zero(tmp_path: Path, mosquitto: Mosquitto) -> None:
    require_binary("socat")
    site_file = demo_site_file(tmp_path, mosquitto.port)
    config = load_config(site_file)
    sim = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config",
                            str(site_file), "--no-broker"], cwd=ROOT)
    try:
        time.sleep(2.0)
        daemon = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(site_file)],
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True)
        time.sleep(4.0)
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(20)
    assert daemon.returncode == 0, err
    health = json.loads(health_path(config.daemon.historian).read_text())
    with sqlite3.connect(config.daemon.historian) as db:
        rows = db.execute("SELECT count(*) FROM readings").fetchone()[0]
    # every sample the daemon produced is on disk: the final health snapshot is written after the flush
    assert health["historian"]["samples_written"] == rows > 0
    polled = sum(i["polls"] for i in health["instruments"].values())
    assert polled >= 4
    assert "stopped;" in err
    # `pretreat run` set what start-up made aside from the garbage collector (monitor.memory.settle_gc)
    assert health["memory"]["gc_frozen"] > 10_000 and health["memory"]["gc_collections"] > 0


def test_invalid_config_starts_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[daemon]\nhistorian = "h.sqlite"\n[[site]]\nid = "x"\ntimezone = "UTC"\n'
                   '[[site.instrument]]\nid = "i"\ndriver = "modbus_tcp"\n'
                   '[[site.channel]]\nid = "c"\ninstrument = "i"\nkind = "ph"\n')
    out = subprocess.run([sys.executable, "-m", "monitor.cli", "run", "--config", str(bad)], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "site[0].instrument[0].host" in out.stderr and "site[0].channel[0].unit" in out.stderr
    assert "nothing started" in out.stderr
    assert not (tmp_path / "h.sqlite").exists()
