"""sd_notify over a real AF_UNIX datagram socket bound by the test (file-system and abstract namespace), the
no-op without $NOTIFY_SOCKET, watchdog interval parsing, and the heartbeat's pet-or-withhold policy."""

from __future__ import annotations

import logging
import math
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from config.loader import load_config
from monitor.systemd import (
    Heartbeat,
    SystemdNotifier,
    notify_address,
    stall_after_for,
    watchdog_interval,
)
from tests.support import DEMO_SITE, eventually

ROOT = Path(__file__).resolve().parents[2]


class Receiver:
    """The service manager's end: a bound datagram socket, read with a timeout."""

    def __init__(self, address: str | bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(2.0)

    def recv(self) -> str:
        return self.sock.recv(4096).decode()

    def pending(self) -> list[str]:
        """Everything queued right now, without waiting."""
        out = []
        self.sock.setblocking(False)
        try:
            while True:
                out.append(self.sock.recv(4096).decode())
        except BlockingIOError:
            return out
        finally:
            self.sock.settimeout(2.0)


@pytest.fixture
def path_socket(tmp_path: Path) -> Iterator[tuple[str, Receiver]]:
    path = str(tmp_path / "notify.sock")
    r = Receiver(path)
    yield path, r
    r.sock.close()


@pytest.fixture
def abstract_socket() -> Iterator[tuple[str, Receiver]]:
    name = f"pretreat-test-{uuid.uuid4().hex}"
    r = Receiver(b"\0" + name.encode())
    yield "@" + name, r
    r.sock.close()


def test_ready_status_watchdog_stopping_reach_a_file_system_socket(path_socket: tuple[str, Receiver]) -> None:
    path, receiver = path_socket
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.ready(status="polling 3 instruments")
    assert receiver.recv() == "READY=1\nSTATUS=polling 3 instruments\n"
    assert n.status("flow-meter link down\nretrying")  # a newline would end the STATUS= assignment
    assert receiver.recv() == "STATUS=flow-meter link down retrying\n"
    assert n.watchdog()
    assert receiver.recv() == "WATCHDOG=1\n"
    assert n.extend_timeout(12.5)
    assert receiver.recv() == "EXTEND_TIMEOUT_USEC=12500000\n"
    assert n.stopping(status="flushing the historian")
    assert receiver.recv() == "STOPPING=1\nSTATUS=flushing the historian\n"
    assert (n.sent, n.failures) == (5, 0)
    n.close()


def test_abstract_namespace_socket(abstract_socket: tuple[str, Receiver]) -> None:
    name, receiver = abstract_socket
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": name})
    assert n.address == b"\0" + name[1:].encode()  # '@' becomes NUL; no trailing NUL
    assert n.ready()
    assert receiver.recv() == "READY=1\n"
    n.close()


def test_a_child_process_notifies_through_the_inherited_environment(path_socket: tuple[str, Receiver]) -> None:
    """How systemd really runs it: the variable is in the environment of a separate process."""
    path, receiver = path_socket
    code = "from monitor.systemd import SystemdNotifier; SystemdNotifier.from_env().ready(status='up')"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=30,
                   env={**os.environ, "NOTIFY_SOCKET": path})
    assert receiver.recv() == "READY=1\nSTATUS=up\n"


def test_without_notify_socket_every_call_is_a_silent_no_op(path_socket: tuple[str, Receiver]) -> None:
    _, receiver = path_socket
    n = SystemdNotifier.from_env({})
    assert not n.enabled
    assert n.watchdog_interval is None
    assert not n.ready(status="x") and not n.watchdog() and not n.stopping()
    assert (n.sent, n.failures) == (0, 0)
    assert receiver.pending() == []


def test_unsupported_address_disables_notifications_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        n = SystemdNotifier.from_env({"NOTIFY_SOCKET": "vsock:2:1234"})
    assert not n.enabled and not n.ready()
    assert "not a socket address" in caplog.text
    assert notify_address("@") is None and notify_address("relative/path") is None


def test_a_missing_listener_is_counted_logged_once_and_recovers(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    path = str(tmp_path / "later.sock")
    n = SystemdNotifier(address=path)
    with caplog.at_level(logging.INFO, logger="monitor.systemd"):
        assert not n.watchdog() and not n.watchdog() and not n.watchdog()
        assert n.failures == 3
        assert caplog.text.count("cannot notify systemd") == 1  # once per outage, not per heartbeat
        receiver = Receiver(path)
        try:
            assert n.watchdog()
            assert receiver.recv() == "WATCHDOG=1\n"
        finally:
            receiver.sock.close()
    assert "delivered again after 3 failures" in caplog.text
    n.close()


@pytest.mark.parametrize(("env", "expected"), [
    ({"WATCHDOG_USEC": "30000000"}, 30.0),
    ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 30.0),
    ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),  # inherited, not ours
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({}, None),
])
def test_watchdog_interval(env: dict[str, str], expected: float | None) -> None:
    assert watchdog_interval(env, os.getpid()) == expected


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_heartbeat_pets_while_polls_progress_and_withholds_when_they_stall(
        path_socket: tuple[str, Receiver], caplog: pytest.LogCaptureFixture) -> None:
    path, receiver = path_socket
    clock = Clock()
    n = SystemdNotifier(address=path, watchdog_interval=30.0)
    hb = Heartbeat(notifier=n, stall_after=60.0, clock=clock)
    assert hb.interval == 10.0
    assert hb.beat()  # start-up counts as progress
    clock.t += 50
    hb.progress()
    clock.t += 59
    assert hb.beat()
    assert receiver.pending() == ["WATCHDOG=1\n", "WATCHDOG=1\n"]
    with caplog.at_level(logging.WARNING, logger="monitor.systemd"):
        clock.t += 2  # 61 s since the last completed poll
        assert not hb.beat() and not hb.beat()
        assert receiver.pending() == []  # systemd will see no pet and restart the service
        assert caplog.text.count("withholding the systemd watchdog") == 1
        hb.progress()
        assert hb.beat()
    assert receiver.pending() == ["WATCHDOG=1\n"]
    assert "watchdog resumed" in caplog.text
    assert (hb.pets, hb.withheld) == (3, 2)
    n.close()


def test_heartbeat_is_idle_when_not_watched_and_rejects_a_bad_window() -> None:
    hb = Heartbeat(notifier=SystemdNotifier(address=None), stall_after=math.inf)
    assert hb.interval is None
    assert hb.beat()  # infinite window: never stalls, and the no-op notifier sends nothing
    with pytest.raises(ValueError):
        Heartbeat(notifier=SystemdNotifier(address=None), stall_after=0)


def test_stall_window_follows_the_slowest_polled_instrument(tmp_path: Path) -> None:
    demo = load_config(DEMO_SITE)
    # demo: slowest poll is the sampler, 5 s + 0.5 s timeout; three of those is under the 60 s floor
    assert stall_after_for(demo) == 60.0
    assert stall_after_for(demo, floor=1.0) == pytest.approx(16.5)
    mqtt_only = tmp_path / "mqtt.toml"
    mqtt_only.write_text('[daemon]\nhistorian = "h.sqlite"\n[[site]]\nid = "s"\nname = "S"\n'
                         'timezone = "UTC"\n[[site.instrument]]\nid = "lel"\ndriver = "mqtt"\n'
                         'host = "127.0.0.1"\nport = 1883\n[[site.channel]]\nid = "lel"\n'
                         'instrument = "lel"\nkind = "lel"\nunit = "%LEL"\ntopic = "lel/1"\n'
                         'payload = "number"\n')
    assert stall_after_for(load_config(mqtt_only)) == math.inf


class ThreadRecordingNotifier(SystemdNotifier):
    """Our own seam: notes which thread each pet came from."""

    def __init__(self) -> None:
        super().__init__(address=None, watchdog_interval=0.15)
        self.threads: list[int] = []

    def watchdog(self) -> bool:
        self.threads.append(threading.get_ident())
        return False


async def test_the_heartbeat_job_runs_on_the_event_loop_under_apscheduler() -> None:
    """APScheduler runs plain functions in a thread pool, where a pet proves nothing about the loop; the
    coroutine `Heartbeat.job` runs on the loop's own thread."""
    notifier = ThreadRecordingNotifier()
    hb = Heartbeat(notifier=notifier, stall_after=60.0)
    assert hb.interval == pytest.approx(0.05)
    scheduler = AsyncIOScheduler()
    scheduler.add_job(hb.job, "interval", seconds=hb.interval, id="watchdog")
    scheduler.add_job(hb.beat, "interval", seconds=hb.interval, id="plain")  # the mistake, for contrast
    loop_thread = threading.get_ident()
    scheduler.start()
    try:
        assert await eventually(lambda: sum(t == loop_thread for t in notifier.threads) >= 3
                                and sum(t != loop_thread for t in notifier.threads) >= 3)
    finally:
        scheduler.shutdown(wait=False)
    on_loop = [t for t in notifier.threads if t == loop_thread]
    elsewhere = [t for t in notifier.threads if t != loop_thread]
    assert len(on_loop) >= 3 and len(elsewhere) >= 3
