"""Every fault test leaves nothing running: no thread it started, no child process (daemons, simulators and
brokers are stopped even when a test fails)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _children() -> set[int]:
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
    return state != "Z"  # a zombie has exited; its parent just has not reaped it yet


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    threads = {t.ident for t in threading.enumerate()}
    children = _children()
    yield
    deadline = time.monotonic() + 5.0
    while True:
        left = [t.name for t in threading.enumerate() if t.ident not in threads and t.is_alive()]
        procs = _children() - children
        if not (left or procs) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"threads left running: {left}"
    assert not procs, f"child processes left running: {sorted(procs)}"
