"""The daemon's start and stop order: a start step that fails stops what started before it, in reverse."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path

import pytest

from config.loader import load_config
from monitor.app import Daemon
from monitor.health import health_path
from monitor.sample import Sample
from monitor.stores.historian import Historian
from tests.support import PATIENCE, free_port


def _historian_writers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "historian-writer" and t.is_alive()}


async def test_an_alarm_start_that_fails_still_closes_the_historian(tmp_path: Path) -> None:
    """The alarm gateway's port is taken by another program, so the alarm start fails after the historian
    started (and warm-up ran). The daemon raises the error, and on its way out the historian has flushed and
    closed (its writer thread ended, what was submitted is on disk), and the final health snapshot says
    ``stopped``. Before the exit stack, the historian was left open with its writer thread running."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "site.toml").write_text(
            '[daemon]\nhistorian = "h.sqlite"\ncommit_interval = 0.1\n'
            f'[gateway]\nport = {port}\n'
            '[[site]]\nid = "acme-plating"\njurisdiction = "southeast"\ntimezone = "UTC"\n'
            '[[site.instrument]]\nid = "fm"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
            f'port = {free_port()}\nregister_map = "flow_meter"\npoll_interval = 1.0\n'
            '[[site.channel]]\nid = "flow"\ninstrument = "fm"\npoint = "flow_rate"\nkind = "flow"\nunit = "gpm"\n')
        config = load_config(tmp_path / "site.toml")
        daemon = Daemon(config=config)
        before = _historian_writers()
        started = asyncio.Event()
        start = daemon.alarming.start

        async def start_after_a_reading(clock):  # type: ignore[no-untyped-def]
            # a reading submitted after the historian started and before the failing step: it must be on disk
            daemon.historian.submit([Sample(time=1.0e9, site="acme-plating", channel="flow", value=12.5,
                                            unit="gpm")])
            started.set()
            await start(clock)

        daemon.alarming.start = start_after_a_reading  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="listen"):  # pymodbus: the address is in use
            await asyncio.wait_for(daemon.run(asyncio.Event()), PATIENCE)

    assert started.is_set(), "the alarm start was reached"
    assert _historian_writers() == before, "the historian's writer thread ended"
    assert [s.value for s in Historian.read(path=config.daemon.historian, site="acme-plating",
                                            channel="flow")] == [12.5]
    assert json.loads(health_path(config.daemon.historian).read_text())["state"] == "stopped"
    assert not daemon.ready.is_set()
