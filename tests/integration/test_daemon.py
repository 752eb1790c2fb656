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
from collections.abc import Callable
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.app import Daemon
from monitor.health import health_path
from monitor.sample import Quality
from monitor.stores.historian import Historian
from simulators.modbus_server import SimFault
from simulators.runner import SiteSimulator
from tests.faults.harness import served_values
from tests.support import (
    PATIENCE,
    Mosquitto,
    demo_site_file,
    eventually,
    free_port,
    require_binary,
    wait_for_simulator,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path: Path, mosquitto: Mosquitto) -> SiteConfig:
    require_binary("socat")
    return load_config(demo_site_file(tmp_path, mosquitto.port))


def recorded(config: SiteConfig, channel: str, site: str = "acme-plating") -> list:  # type: ignore[type-arg]
    return list(Historian.read(path=config.daemon.historian, site=site, channel=channel))


async def silence_during_run(daemon: Daemon, instrument: str, *, until: Callable[[float], bool], what: str) -> float:
    """Run ``daemon`` against its site's simulators; once every channel has a good reading, silence
    ``instrument``; stop when ``until(silenced)`` holds. Returns when it was silenced (Unix time)."""
    config = daemon.config
    async with SiteSimulator(config=config) as sim:
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        try:
            await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
            assert await eventually(lambda: all(any(s.good for s in recorded(config, c.id, c.site))
                                                for c in config.channels)), "a good reading on every channel"
            silenced = time.time()
            sim.device("acme-plating", instrument).fault = SimFault.SILENT
            assert await eventually(lambda: until(silenced), interval=0.1), what  # each look reads the historian
        finally:
            stop.set()
            await asyncio.wait_for(task, PATIENCE)
    return silenced


async def run_until(daemon: Daemon, condition: Callable[[], bool], what: str) -> None:
    """Run ``daemon`` until ``condition()`` holds (checked on the daemon's own loop), then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
        assert await eventually(condition), what
    finally:
        stop.set()
        await asyncio.wait_for(task, PATIENCE)


# How close a recorded value is to the served one, through each driver's decoding and scaling.
_DECODED = {"ph": {"abs": 0.005},  # int16 x 0.01 over RTU
            "temperature": {"abs": 0.05},
            "flow": {"rel": 1e-3},  # float32
            "lel": {"rel": 1e-6}}  # MQTT JSON


async def test_every_channel_of_every_driver_is_recorded_with_the_served_value(site: SiteConfig) -> None:
    """Each good reading recorded is a value the simulator served on that channel. Not the *last* served value:
    the simulator keeps serving while the daemon stops, so its last value may be newer than the last poll."""
    channels = [ch.id for ch in site.sites[0].channels]

    def every_channel_has_two_good_readings() -> bool:
        return all(sum(s.good for s in recorded(site, ch)) >= 2 for ch in channels)

    async with SiteSimulator(config=site, history=100_000) as sim:
        await run_until(Daemon(config=site), every_channel_has_two_good_readings,
                        "a good reading on every channel")
        served = served_values(sim)
    for ch, tolerance in _DECODED.items():
        values = served[(site.sites[0].id, ch)]
        good = [s.value for s in recorded(site, ch) if s.good]
        unserved = [v for v in good if not any(v == pytest.approx(x, **tolerance) for x in values)]
        assert not unserved, f"{ch}: recorded {unserved[:3]} never served (served {values[-5:]} …)"


async def test_a_silent_device_is_recorded_as_bad_quality_and_neighbours_keep_reporting(site: SiteConfig) -> None:
    def flow_after(silenced: float) -> list:  # type: ignore[type-arg]
        return [s for s in recorded(site, "flow") if s.time > silenced + 0.6]

    def ph_after(silenced: float) -> list:  # type: ignore[type-arg]
        return [s for s in recorded(site, "ph") if s.time > silenced]

    silenced = await silence_during_run(
        Daemon(config=site), "flow-meter",
        until=lambda t: any(s.quality is Quality.STALE for s in flow_after(t))
        and sum(s.good for s in ph_after(t)) >= 4,
        what="the silent flow meter judged stale while the pH meter kept reporting")
    flow = flow_after(silenced)
    assert flow and all(not s.good for s in flow)
    assert {s.quality for s in flow} <= {Quality.COMM_FAILURE, Quality.STALE}
    assert any("no reply" in s.reason for s in flow)
    assert any(s.quality is Quality.STALE for s in flow)  # judged on the clock tick
    assert all(s.value is None for s in flow)  # never a number, never the last good value
    # the pH meter (RTU) and the sampler (another TCP link) kept reporting
    # (a poll of the RTU meter starved of CPU on a loaded machine may time out and is recorded as such: what
    # matters is that the silent TCP device does not stop the other link's good readings)
    ph = ph_after(silenced)
    assert sum(s.good for s in ph) >= 4


def three_meters(tmp_path: Path, *, interval: float, timeout: float, others_timeout: float | None = None) -> SiteConfig:
    """Three Modbus TCP flow meters with the same poll interval (one APScheduler job polls them all); fm0 has
    ``timeout``, fm1 and fm2 ``others_timeout`` (default: the same)."""
    parts = ['[daemon]\nhistorian = "h.sqlite"\ncommit_interval = 0.1\ntick_interval = 1.0\n'
             '[[site]]\nid = "acme-plating"\njurisdiction = "southeast"\ntimezone = "UTC"\n']
    for n in range(3):
        parts.append(f'[[site.instrument]]\nid = "fm{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                     f'port = {free_port()}\nregister_map = "flow_meter"\npoll_interval = {interval}\n'
                     f'timeout = {timeout if n == 0 or others_timeout is None else others_timeout}\n'
                     f'[[site.channel]]\nid = "flow{n}"\ninstrument = "fm{n}"\npoint = "flow_rate"\n'
                     'kind = "flow"\nunit = "gpm"\n')
    (tmp_path / "site.toml").write_text("".join(parts))
    return load_config(tmp_path / "site.toml")


async def test_a_poll_still_running_when_the_next_is_due_is_skipped_and_counted(tmp_path: Path) -> None:
    """No two polls of one device at once: while the silent meter waits out its 0.4 s timeout, the rounds due
    every 0.1 s skip it (and count each skip), and its two neighbours are polled on every round regardless."""
    # the neighbours' own timeout is long: a starved event loop can hold a good reply past 0.4 s
    site = three_meters(tmp_path, interval=0.1, timeout=0.4, others_timeout=3.0)
    daemon = Daemon(config=site)

    def after(n: int, silenced: float) -> list:  # type: ignore[type-arg]
        return [s for s in recorded(site, f"flow{n}") if s.time > silenced + 0.5]

    def waited(silenced: float) -> list[float]:  # polls that waited out the timeout
        return [s.time for s in after(0, silenced) if "no reply within" in s.reason]

    silenced = await silence_during_run(
        daemon, "fm0", until=lambda t: len(waited(t)) >= 4 and daemon.stats["acme-plating/fm0"].skipped >= 10,
        what="four polls of the silent meter waited out their timeout, ten rounds skipped it")
    stats = daemon.stats
    rows = {n: after(n, silenced) for n in range(3)}
    # the silent meter: each poll waited its full timeout, the rounds in between were skipped and counted
    assert stats["acme-plating/fm0"].skipped >= 10
    assert all(b - a >= 0.39 for a, b in itertools.pairwise(waited(silenced)))
    # every poll finished is recorded, once, the last ones before the stop included: one row per poll (STALE
    # rows come from the clock tick)
    for n in range(3):
        polled = [s for s in recorded(site, f"flow{n}") if s.quality is not Quality.STALE]
        assert len(polled) == stats[f"acme-plating/fm{n}"].polls
    # its neighbours were not held up by its timeout: polled on every round (~4 per timeout waited; held up, they
    # would get one), all good. Counted against the silent meter's polls, not the clock, so a loaded machine
    # slowing all alike changes nothing; 1.5 leaves room for rounds a starved event loop runs late.
    silent_polls = len([s for s in rows[0] if s.quality is not Quality.STALE])
    for n in (1, 2):
        assert all(s.good for s in rows[n])
        assert len(rows[n]) >= 1.5 * silent_polls, (len(rows[n]), silent_polls)


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
        await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
        assert await eventually(lambda: all(daemon.stats[f"acme-plating/fm{n}"].polls == 1 for n in range(3)))
        (drivers,) = daemon.polls.rounds().values()  # the one round, as the scheduler was given it
        stop.set()
        late = asyncio.create_task(daemon.polls.round(drivers))  # what APScheduler hands the loop when due
        await asyncio.wait_for(task, PATIENCE)
        await late
    for n in range(3):
        polled = [s for s in recorded(site, f"flow{n}") if s.quality is not Quality.STALE]
        assert len(polled) == daemon.stats[f"acme-plating/fm{n}"].polls == 1


def polls_so_far(config: SiteConfig) -> int:
    """Polls the running daemon's health snapshot counts (0 before its first snapshot)."""
    try:
        health = json.loads(health_path(config.daemon.historian).read_text())
    except (OSError, ValueError):
        return 0
    return sum(i["polls"] for i in health["instruments"].values())


def test_sigterm_flushes_every_reading_and_exits_zero(tmp_path: Path, mosquitto: Mosquitto) -> None:
    require_binary("socat")
    site_file = demo_site_file(tmp_path, mosquitto.port)
    config = load_config(site_file)
    sim = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config",
                            str(site_file), "--no-broker"], cwd=ROOT)
    try:
        wait_for_simulator(config)
        daemon = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(site_file)],
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert wait_until(lambda: polls_so_far(config) >= 4), "the daemon polled"
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=PATIENCE)
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(PATIENCE)
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
