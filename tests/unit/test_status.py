"""`pretreat status` against files written by the real modules: the health snapshot by
`monitor.health.HealthWriter` (of a real, unstarted `Daemon`), readings by the `Historian`, alarm state by
the `AlarmEngine`; and the exit codes 0 healthy / 1 not running / 2 bad config / 3 degraded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, AlarmSettings, Priority
from config.loader import load_config
from config.schema import SiteConfig
from monitor.app import Daemon
from monitor.health import HealthWriter, health_path
from monitor.read.status import (
    EXIT_DEGRADED,
    EXIT_HEALTHY,
    EXIT_NOT_RUNNING,
    collect,
    default_max_age,
)
from monitor.sample import Quality, Sample
from monitor.status import render
from monitor.stores.historian import Historian

ROOT = Path(__file__).resolve().parents[2]

SITE = """
[daemon]
historian = "pretreat.sqlite"
tick_interval = 1.0

[notify]
state_dir = "notify"

[[notify.channel]]
id = "daemon-log"
kind = "log"

[[site]]
id = "acme"
name = "ACME Plating"
timezone = "UTC"

[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {port}
register_map = "flow_meter"
poll_interval = 1.0
timeout = 0.5

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
host = "127.0.0.1"
port = 1883
poll_interval = 1.0

[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"

[[site.channel]]
id = "lel"
instrument = "lel-meter"
kind = "lel"
unit = "%LEL"
topic = "acme/lel"
payload = "number"
"""


def site_file(tmp_path: Path, port: int = 15020) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(SITE.format(port=port))
    return path


@pytest.fixture
def config(tmp_path: Path) -> SiteConfig:
    return load_config(site_file(tmp_path))


async def record(config: SiteConfig, samples: list[Sample]) -> None:
    h = Historian(path=config.daemon.historian, commit_interval=0.05)
    await h.start()
    h.submit(samples)
    await h.close()


def write_snapshot(config: SiteConfig, *, now: float, polls: int = 12, stale: bool = False,
                   mqtt_connected: bool = True) -> dict[str, Any]:
    """A snapshot in the daemon's own format: HealthWriter over a real (not started) Daemon."""
    daemon = Daemon(config=config, clock=lambda: now)
    daemon.stats["acme/flow-meter"].polls = polls
    daemon.stats["acme/flow-meter"].bad_samples = 2
    daemon.streaming[0].counters.connected = mqtt_connected  # type: ignore[attr-defined]
    if stale:  # the tracker's own logic marks lel stale: no good reading within its window, flow has one
        daemon.staleness.observe([Sample(time=now, site="acme", channel="flow", value=1.0, unit="gpm")],
                                 now + 29.5)
        daemon.staleness.tick(now + 30)
    writer = HealthWriter(path=health_path(config.daemon.historian), counters=daemon.health_counters)
    writer.write()
    path = health_path(config.daemon.historian)
    snap = json.loads(path.read_text())
    # the daemon here never started, so its Modbus links never connected: as a running one's would be
    for link in snap["links"].values():
        link["up"] = True
    path.write_text(json.dumps(snap))
    return snap


async def test_healthy_daemon_shows_instruments_last_readings_and_exits_zero(config: SiteConfig) -> None:
    now = time.time()
    await record(config, [
        Sample(time=now - 4, site="acme", channel="flow", value=120.5, unit="gpm"),
        Sample(time=now - 2, site="acme", channel="lel", value=3.25, unit="%LEL"),
    ])
    snap = write_snapshot(config, now=now)
    report = collect(config, now=snap["time"] + 1.0)
    assert report.running and report.problems == [] and report.exit_code == EXIT_HEALTHY
    flow_meter, lel_meter = report.instruments
    assert flow_meter.key == "acme/flow-meter" and flow_meter.counters["polls"] == 12
    assert flow_meter.counters["bad_samples"] == 2
    assert flow_meter.channels[0].last is not None and flow_meter.channels[0].last.value == 120.5
    assert lel_meter.driver == "mqtt" and lel_meter.link == "up"
    text = render(report, now=snap["time"] + 1.0)
    assert text.startswith("pretreat-monitor: healthy - running")
    assert "acme/flow-meter" in text and "120.5 gpm" in text and "polls 12" in text
    assert "delivery   daemon-log: up, queue 0\n" in text  # the alarm dispatcher's own health
    assert text.endswith("alarms     all normal")  # the daemon's alarm engine created every alarm's state


async def test_a_bad_channel_shows_why_and_its_last_good_reading(config: SiteConfig) -> None:
    now = time.time()
    await record(config, [
        Sample(time=now - 600, site="acme", channel="flow", value=88.0, unit="gpm"),
        *[Sample.bad(time=now - 500 + i, site="acme", channel="flow", unit="gpm",
                     quality=Quality.COMM_FAILURE, reason="no reply from unit 1") for i in range(50)],
    ])
    snap = write_snapshot(config, now=now)
    report = collect(config, now=snap["time"])
    ch = report.instruments[0].channels[0]
    assert ch.last is not None and ch.last.quality == "comm_failure" and ch.last.value is None
    assert ch.last_good is not None and ch.last_good.value == 88.0  # found behind the 50 bad ones
    line = render(report, now=now)
    assert "comm_failure" in line and "(no reply from unit 1); last good 88 gpm 10 min ago" in line


async def test_readings_are_shown_at_their_channels_resolution_with_the_site_file(tmp_path: Path) -> None:
    """`pretreat status` rounds as the daemon's log does: a channel of stated resolution (0.1 gpm) at it, one of
    unknown resolution (MQTT) to four significant digits."""
    from monitor.cli_render import Render

    path = tmp_path / "site.toml"
    path.write_text(SITE.format(port=15020).replace('unit = "gpm"\n', 'unit = "gpm"\nresolution = 0.1\n'))
    config = load_config(path)
    now = time.time()
    flow = next(c for c in config.channels if c.id == "flow")
    await record(config, [Sample(time=now - 5, site="acme", channel="flow", value=88.123456, unit="gpm"),
                          Sample(time=now - 5, site="acme", channel="lel", value=1.27614, unit="%LEL")])
    snap = write_snapshot(config, now=now)
    report = collect(config, now=snap["time"])
    text = render(report, now=now, numbers=Render(config))
    assert flow.decimals == 1 and "88.1 gpm" in text
    assert "1.276 %LEL" in text and "1.27614" not in text and "88.1235" not in text
    assert "1.276 %LEL" in render(report, now=now)  # no site file: four significant digits, as the log


async def test_a_channel_with_no_good_reading_says_for_how_long_in_time(config: SiteConfig) -> None:
    """Not "no good reading in the last 100000": how long, in time, and how many readings that was."""
    now = time.time()
    await record(config, [Sample.bad(time=now - 7200 + i, site="acme", channel="flow", unit="gpm",
                                     quality=Quality.COMM_FAILURE, reason="no reply from unit 1") for i in range(30)])
    snap = write_snapshot(config, now=now)
    report = collect(config, now=snap["time"])
    ch = report.instruments[0].channels[0]
    assert ch.last_good is None and ch.bad_since == pytest.approx(now - 7200) and ch.searched == 30
    line = render(report, now=now)
    assert "(no reply from unit 1); no good reading for at least 2.0 h (none of the 30 readings recorded)" in line
    assert "100000" not in line and "100,000" not in line


async def test_stale_channel_and_active_alarms_make_it_degraded(config: SiteConfig) -> None:
    now = time.time()
    snap = write_snapshot(config, now=now, stale=True)
    assert snap["stale_channels"] == ["acme/lel"]
    engine = AlarmEngine(path=config.daemon.historian, now=now, alarms=[
        ("acme", "lel", "lel_single", AlarmSettings(priority=Priority.CRITICAL, latched=True)),
        ("acme", "flow", "flow_high", AlarmSettings(priority=Priority.LOW)),
    ])
    engine.apply(AlarmInput(time=now - 5, site="acme", channel="lel", rule="lel_single", active=True,
                            value=12.0, limit=10.0), now - 5)
    engine.close()
    report = collect(config, now=snap["time"] + 1)
    assert report.running and report.exit_code == EXIT_DEGRADED
    assert report.problems == ["1 stale channel(s): acme/lel"]
    assert report.alarms is not None and [a.id for a in report.alarms] == ["acme/lel/lel_single"]
    alarm = report.alarms[0]
    assert (alarm.state, alarm.priority, alarm.value, alarm.limit) == ("active-unacknowledged", "critical", 12.0, 10.0)
    text = render(report, now=now)
    assert "DEGRADED" in text and "! 1 stale channel(s): acme/lel" in text and "STALE" in text
    assert "alarms     1 not normal" in text and "value 12 limit 10" in text


def test_links_reported_down_and_a_historian_backlog_are_problems(config: SiteConfig) -> None:
    """Fields the snapshot may carry ("up" per link, "pid", "state"): status uses them when present."""
    now = time.time()
    snap = write_snapshot(config, now=now, mqtt_connected=False)
    snap["links"]["modbus_tcp:127.0.0.1:15020"] = {"up": False, "comm_failures": 7}
    snap["historian"]["queue_depth"] = 25_000
    snap["alarms"]["delivery"]["daemon-log"].update(up=False, depth=3, oldest_age_s=125.0, last_error="EPIPE")
    snap["pid"] = os.getpid()
    health_path(config.daemon.historian).write_text(json.dumps(snap))
    report = collect(config, now=now)
    assert report.instruments[0].link == "down" and report.instruments[0].counters["link_comm_failures"] == 7
    assert report.problems == ["link down: acme/flow-meter, acme/lel-meter",
                               "historian backlog: 25000 samples waiting to be written",
                               "alarm delivery daemon-log down (3 queued): EPIPE"]
    text = render(report, now=now)
    assert f"pid {os.getpid()}" in text and "delivery   daemon-log: DOWN, queue 3 (oldest 2 min)" in text


def test_late_modbus_tcp_replies_our_client_dropped_are_shown_once_there_are_any(config: SiteConfig) -> None:
    """A reply that came after its request timed out is dropped by transaction id and counted: a slow device
    or network an operator should know of; a line per instrument stays short while there are none."""
    now = time.time()
    snap = write_snapshot(config, now=now)
    key = "modbus_tcp:127.0.0.1:15020"
    snap["links"][key] = {"up": True, "comm_failures": 0, "stray_replies": 0}
    health_path(config.daemon.historian).write_text(json.dumps(snap))
    flow = next(line for line in render(collect(config, now=now), now=now).splitlines() if "flow-meter" in line)
    assert "stray_replies" not in flow and "comm_failures 0" in flow
    snap["links"][key]["stray_replies"] = 3
    health_path(config.daemon.historian).write_text(json.dumps(snap))
    flow = next(line for line in render(collect(config, now=now), now=now).splitlines() if "flow-meter" in line)
    assert flow.endswith("stray_replies 3")


def test_a_device_clock_too_far_ahead_is_a_problem_until_its_timestamps_are_usable(config: SiteConfig) -> None:
    now = time.time()
    snap = write_snapshot(config, now=now)
    assert snap["streaming"]["acme/lel-meter"]["clock_ahead"] is None
    snap["streaming"]["acme/lel-meter"].update(clock_ahead=3600.4, clock_skews=12)
    health_path(config.daemon.historian).write_text(json.dumps(snap))
    report = collect(config, now=now)
    assert report.exit_code == EXIT_DEGRADED
    assert report.problems == ["acme/lel-meter: device clock 3600 s ahead, its readings recorded as clock_skew "
                               "(not judged): set the instrument's clock"]


def test_not_running_when_the_snapshot_is_missing_old_stopped_or_its_process_gone(config: SiteConfig) -> None:
    report = collect(config)
    assert not report.running and report.exit_code == EXIT_NOT_RUNNING and "no health snapshot" in report.reason
    text = render(report, now=time.time())
    assert text.startswith("pretreat-monitor: NOT RUNNING - no health snapshot")
    assert text.endswith("alarms     no alarm state recorded in this file")  # no historian file yet
    now = time.time()
    snap = write_snapshot(config, now=now)
    max_age = default_max_age(config)
    assert max_age == 15.0
    assert collect(config, now=snap["time"] + max_age - 0.5).running
    old = collect(config, now=snap["time"] + max_age + 0.5)
    assert not old.running and "old (over 15 s)" in old.reason and old.problems == []
    path = health_path(config.daemon.historian)
    path.write_text(json.dumps({**snap, "state": "stopped"}))
    assert "stopped" in collect(config, now=snap["time"] + 1).reason
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path.write_text(json.dumps({**snap, "pid": gone.pid}))
    report = collect(config, now=snap["time"] + 1)
    assert not report.running and f"process {gone.pid} no longer exists" in report.reason


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from monitor.status import add_arguments, argparse; p = argparse.ArgumentParser(); " \
           "add_arguments(p); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


async def test_command_line_exit_codes_and_json(tmp_path: Path) -> None:
    site = site_file(tmp_path)
    config = load_config(site)
    out = cli("--config", str(site))
    assert out.returncode == EXIT_NOT_RUNNING and "NOT RUNNING" in out.stdout
    write_snapshot(config, now=time.time())
    out = cli("--config", str(site), "--json")
    assert out.returncode == EXIT_HEALTHY, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "healthy" and doc["exit_code"] == 0 and doc["running"] is True
    assert [i["key"] for i in doc["instruments"]] == ["acme/flow-meter", "acme/lel-meter"]
    assert cli("--config", str(site), "--max-age", "0").returncode == EXIT_NOT_RUNNING
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon]\n")
    out = cli("--config", str(bad))
    assert out.returncode == 2 and "error(s) in the configuration" in out.stderr
