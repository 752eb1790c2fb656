"""Fixtures that start real servers on free loopback ports, and the checks every test gets: it leaves no
thread running and no log handler behind."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Mosquitto, VictoriaMetrics, wait_until

LEAK_GRACE = 10.0
"""Seconds a thread a test started may take to finish after the test (a server's shutdown, a writer's flush)."""

POOL_WORKERS = ("AnyIO worker thread", "ThreadPoolExecutor-")
"""Workers of a thread pool start when a task first needs one and belong to the pool's owner (a console server
shared by a module's tests, an event loop's default executor), which stops them; they are not the test's own."""


@pytest.fixture(autouse=True)
def no_thread_left_running() -> Iterator[None]:
    """A test that leaves a thread running (a server, a client's network loop, a historian writer it did not
    close) fails: on a loaded machine such a thread competes with the tests after it and can write into their
    files. Threads of wider-scoped fixtures started before the test are not its own."""
    before = set(threading.enumerate())
    yield

    def left() -> list[threading.Thread]:
        return [t for t in threading.enumerate()
                if t not in before and t.is_alive() and not t.name.startswith(POOL_WORKERS)]

    if not wait_until(lambda: not left(), LEAK_GRACE, 0.05):
        pytest.fail(f"threads left running by the test: {[t.name for t in left()]}", pytrace=False)


@pytest.fixture(autouse=True)
def no_log_handler_left_behind() -> Iterator[None]:
    """`monitor.cli.main` called in-process installs a root handler on the test's captured stderr, which pytest
    closes after the test: left in place, every later test's log lines fail with "I/O operation on closed file".
    Remove what the test added (pytest's own capture handlers come and go by themselves) and restore the level."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A fresh broker per test (tests restart it to exercise reconnects)."""
    broker = Mosquitto(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """A fresh VictoriaMetrics (InfluxDB write API) per test; tests stop/start it to simulate outages."""
    server = VictoriaMetrics(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[Any]:
    """A real SMTP server (aiosmtpd) requiring STARTTLS and AUTH, with a self-signed certificate
    (tests.notify_servers.SmtpServer: ``cert`` to trust, ``user``/``password``, ``messages``)."""
    from tests.notify_servers import SmtpServer

    server = SmtpServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_receiver() -> Iterator[Any]:
    """A real HTTP server recording POSTs (tests.notify_servers.HttpReceiver: ``url``, ``statuses``)."""
    from tests.notify_servers import HttpReceiver

    server = HttpReceiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
