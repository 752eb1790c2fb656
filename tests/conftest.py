"""Fixtures that start real servers on free loopback ports, and the checks every test gets: it leaves no
thread, child process or asyncio task running and no log handler behind."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support import Mosquitto, PostgreSQL, VictoriaMetrics, eventually, wait_until

# Hypothesis's per-example deadline (200 ms) is a timing assertion: on a shared 2-core machine one example in
# thousands waits for the CPU longer than that ("Unreliable test timings", seen at load 20). Properties are
# about results, so no test here has a deadline; a test that hangs is still stopped by its own waits.
settings.register_profile("pretreat", deadline=None)
settings.load_profile("pretreat")

LEAK_GRACE = 10.0
"""Seconds a thread or process a test started may take to end after it (a server's shutdown, a writer's flush)."""

POOL_WORKERS = ("AnyIO worker thread", "ThreadPoolExecutor-", "asyncio_")
"""Workers of a thread pool start when a task first needs one and belong to the pool's owner (a console server
shared by a module's tests, an event loop's default executor), which stops them; they are not the test's own."""


def _children() -> set[int]:
    """This process's live child processes (zombies, exited but not yet reaped, are not running)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return {p for p in pids if _alive(p)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """A test that leaves a thread or a child process running (a server, a client's network loop, a historian
    writer it did not close, a daemon or simulator it started) fails: on a loaded machine such leftovers compete
    with the tests after them and can write into their files. What wider-scoped fixtures started before the test
    is not its own; this runs after the test's own fixtures have been torn down."""
    threads, children = set(threading.enumerate()), _children()
    yield

    def threads_left() -> list[str]:
        return [t.name for t in threading.enumerate()
                if t not in threads and t.is_alive() and not t.name.startswith(POOL_WORKERS)]

    def children_left() -> list[int]:
        return sorted(_children() - children)

    if not wait_until(lambda: not threads_left() and not children_left(), LEAK_GRACE, 0.05):
        pytest.fail(f"left running by the test: threads {threads_left()}, child processes {children_left()}",
                    pytrace=False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """An async test that leaves a task of its own running fails (as pymodbus's suite checks): the event loop
    would cancel it silently at the end, so a driver, sink or daemon task a test forgot to stop, or one that
    does not end when told, would go unnoticed. Tasks that existed when the test body began (its async
    fixtures' own) are not the test's; the test's own get `LEAK_GRACE` seconds to end after it returns."""
    test = getattr(item, "obj", None)
    if not inspect.iscoroutinefunction(test):
        return (yield)

    @functools.wraps(test)
    async def checked(*args: Any, **kwargs: Any) -> None:
        before = asyncio.all_tasks()
        await test(*args, **kwargs)

        def tasks_left() -> list[str]:
            return sorted(t.get_name() for t in asyncio.all_tasks() if t not in before and not t.done())

        if not await eventually(lambda: not tasks_left(), LEAK_GRACE, 0.05):
            pytest.fail(f"asyncio tasks left running by the test: {tasks_left()}", pytrace=False)

    item.obj = checked  # type: ignore[attr-defined]
    try:
        return (yield)
    finally:
        item.obj = test  # type: ignore[attr-defined]


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
def postgres() -> Iterator[PostgreSQL]:
    """A fresh PostgreSQL cluster per test (initdb in a temp dir, free loopback port); tests stop/start it."""
    server = PostgreSQL()
    try:
        server.start()
        yield server
    finally:
        server.remove()


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
