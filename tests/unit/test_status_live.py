"""`pretreat status` beside a real daemon: the `Daemon` polls a simulated Modbus TCP flow meter on a free
loopback port (no broker, no pty needed); status reads what it writes while it runs, turns degraded when
the meter goes silent, and reports "not running" once the daemon has stopped."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path

from config.loader import load_config
from monitor.app import Daemon
from monitor.read.status import EXIT_DEGRADED, EXIT_HEALTHY, EXIT_NOT_RUNNING, Report, collect
from monitor.status import render
from simulators.modbus_server import SimFault
from simulators.runner import SiteSimulator
from tests.support import FLOW_METER_SITE, PATIENCE, free_port


async def wait_for(config_path: Path, predicate: Callable[[Report], bool]) -> Report:
    """The first report satisfying ``predicate`` within PATIENCE, else the last one (the caller's assert shows it)."""
    config = load_config(config_path)
    deadline = time.monotonic() + PATIENCE
    while True:
        report = await asyncio.to_thread(collect, config)  # file reads off the daemon's loop
        if predicate(report) or time.monotonic() > deadline:
            return report
        await asyncio.sleep(0.1)


async def test_status_follows_a_running_daemon_through_a_silent_device_and_its_stop(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(FLOW_METER_SITE.format(port=free_port()))
    config = load_config(site)
    async with SiteSimulator(config=config) as sim:
        daemon = Daemon(config=config)
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        try:
            await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
            healthy = await wait_for(site, lambda r: r.running and r.instruments[0].channels[0].last is not None
                                     and r.instruments[0].counters.get("polls", 0) > 0)
            assert healthy.exit_code == EXIT_HEALTHY, render(healthy, now=time.time())
            last = healthy.instruments[0].channels[0].last
            assert last is not None and last.quality == "good"
            assert abs(last.value - sim.value("flow")) < 1.0  # type: ignore[operator]
            # where the memory is: the process's RSS and, within it, SQLite's allocations (open connections)
            mem = healthy.snapshot["memory"]  # type: ignore[index]
            assert mem["rss_kib"] > mem["sqlite_kib"] > 0 and mem["python_blocks"] > 0
            assert len(re.findall(r"^process +RSS \d+\.\d MiB \(SQLite \d+\.\d MiB\), event-loop lag p99",
                                  render(healthy, now=time.time()), re.M)) == 1
            sim.device("acme", "flow-meter").fault = SimFault.SILENT
            degraded = await wait_for(site, lambda r: r.exit_code == EXIT_DEGRADED)
            # the channel goes stale first; on a starved machine the link's failure count may already have
            # reached "link down" by the first snapshot that shows it: both are true of a silent device
            assert "1 stale channel(s): acme/flow" in degraded.problems, render(degraded, now=time.time())
            assert set(degraded.problems) <= {"1 stale channel(s): acme/flow", "link down: acme/flow-meter"}, \
                render(degraded, now=time.time())
            flow = degraded.instruments[0].channels[0]
            assert flow.stale and flow.last is not None and flow.last.quality in ("comm_failure", "stale")
            assert flow.last_good is not None and flow.last_good.value is not None
        finally:
            stop.set()
            await asyncio.wait_for(task, PATIENCE)
    stopped = collect(config, now=time.time() + 60)  # the final snapshot ages: nobody rewrites it
    assert stopped.exit_code == EXIT_NOT_RUNNING and "not running" in stopped.reason
