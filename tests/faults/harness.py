"""What the fault-injection tests share: small site files, the daemon run in-process or as its own process,
the simulators on a thread of their own, and the record read back for comparison with the ground truth.

The comparisons the suite rests on:

- **what the daemon polled vs. what the historian holds**: each poll of a Modbus instrument yields exactly one
  sample per channel (good or bad), so a channel's non-STALE rows must equal the instrument's poll count in
  the daemon's own counters: one fewer is a lost reading, one more an invented or duplicated one;
- **what the simulators served vs. what was recorded good**: every good value recorded must be a value the
  simulator put on the wire (`SiteSimulator.history`), so a failed read never becomes the last good value;
- **no (channel, time) twice** in the historian, and (elsewhere) journal vs. MQTT capture, journal vs. mails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from config.schema import SiteConfig
from monitor.app import Daemon
from monitor.stores.readonly import connect_readonly
from tests.support import PATIENCE, wait_until

ROOT = Path(__file__).resolve().parents[2]
SITE = "plant"
T = TypeVar("T")


# -- site files ------------------------------------------------------------------------------------------
def site_file(tmp_path: Path, *, instruments: Iterable[str], channels: Iterable[str], top: str = "",
              site_extra: str = "", commit_interval: float = 0.2, tick_interval: float = 0.25,
              jurisdiction: str = "southeast", name: str = "site.toml") -> Path:
    """A site file with one site (``SITE``) in ``tmp_path``; the historian is ``pretreat.sqlite`` beside it.

    ``top`` goes before the site (``[notify]``, ``[influx]`` tables); ``site_extra`` inside it, before the
    instruments (``[[site.route]]``)."""
    text = (f'[daemon]\nhistorian = "pretreat.sqlite"\ncommit_interval = {commit_interval}\n'
            f'tick_interval = {tick_interval}\n\n{top}\n'
            f'[[site]]\nid = "{SITE}"\njurisdiction = "{jurisdiction}"\ntimezone = "America/New_York"\n'
            f'{site_extra}\n' + "\n".join(instruments) + "\n" + "\n".join(channels) + "\n")
    path = tmp_path / name
    path.write_text(text)
    return path


def tcp_instrument(iid: str, *, port: int, rmap: str = "flow_meter", unit: int = 1, poll: float = 0.5,
                   timeout: float = 0.4) -> str:
    return (f'[[site.instrument]]\nid = "{iid}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\nport = {port}\n'
            f'unit_id = {unit}\nregister_map = "{rmap}"\npoll_interval = {poll}\ntimeout = {timeout}\n')


def rtu_instrument(iid: str, *, tty: Path, unit: int, rmap: str = "ph_meter", poll: float = 0.5,
                   timeout: float = 0.3) -> str:
    return (f'[[site.instrument]]\nid = "{iid}"\ndriver = "modbus_rtu"\nserial_port = "{tty}"\n'
            f'baudrate = 115200\nunit_id = {unit}\nregister_map = "{rmap}"\npoll_interval = {poll}\n'
            f'timeout = {timeout}\n')


def mqtt_instrument(iid: str, *, port: int, poll: float = 0.5, client_id: str = "") -> str:
    cid = f'client_id = "{client_id}"\n' if client_id else ""
    return (f'[[site.instrument]]\nid = "{iid}"\ndriver = "mqtt"\nhost = "127.0.0.1"\nport = {port}\n'
            f'poll_interval = {poll}\ntime_field = "ts"\n{cid}')


def channel(cid: str, *, instrument: str, kind: str, unit: str, point: str = "", topic: str = "",
            field: str = "", scale: float | None = None, valid_min: float | None = None,
            valid_max: float | None = None) -> str:
    lines = [f'[[site.channel]]\nid = "{cid}"\ninstrument = "{instrument}"\nkind = "{kind}"\nunit = "{unit}"']
    for key, value in (("point", point), ("topic", topic), ("field", field)):
        if value:
            lines.append(f'{key} = "{value}"')
    for key, number in (("scale", scale), ("valid_min", valid_min), ("valid_max", valid_max)):
        if number is not None:
            lines.append(f"{key} = {number}")
    return "\n".join(lines) + "\n"


def mqtt_notify(port: int, *, prefix: str = "pretreat/faults", client_id: str = "pretreat-alarms-faults",
                max_backoff: float = 1.0) -> str:
    """A ``[notify]`` table: every alarm transition to plant SCADA over MQTT, and to the daemon's log."""
    return (f'[notify]\nstate_dir = "notify"\nmax_backoff = {max_backoff}\n\n'
            f'[[notify.channel]]\nid = "plant-scada"\nkind = "mqtt"\nhost = "127.0.0.1"\nport = {port}\n'
            f'client_id = "{client_id}"\ntopic_prefix = "{prefix}"\n\n'
            '[[notify.channel]]\nid = "daemon-log"\nkind = "log"\n')


# -- the record --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Row:
    """One row of the historian's ``readings``, with its channel and quality spelled out."""

    site: str
    channel: str
    time: float
    seq: int
    value: float | None
    quality: str
    reason: str

    @property
    def good(self) -> bool:
        return self.quality == "good"


def recorded(path: Path) -> list[Row]:
    """Every reading in the historian file, in arrival order (read-only; safe beside a running daemon)."""
    if not path.exists():
        return []
    conn = connect_readonly(path, timeout=10)
    try:
        rows = conn.execute(
            "SELECT c.site, c.channel, r.time, r.seq, r.value, q.name, r.reason FROM readings r "
            "JOIN channels c ON c.id = r.channel_id JOIN qualities q ON q.code = r.quality ORDER BY r.seq")
        return [Row(*r) for r in rows]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()


def by_channel(rows: Iterable[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.channel, []).append(r)
    return out


def duplicates(rows: Iterable[Row]) -> list[tuple[str, str, float]]:
    """(site, channel, time) recorded more than once: a reading stored twice."""
    counts = Counter((r.site, r.channel, r.time) for r in rows)
    return sorted(k for k, n in counts.items() if n > 1)


def polled_rows(rows: Iterable[Row]) -> list[Row]:
    """The rows a poll produced: everything but the STALE samples the clock tick adds."""
    return [r for r in rows if r.quality != "stale"]


def assert_bad_rows_carry_no_value(rows: Iterable[Row]) -> None:
    for r in rows:
        if r.good:
            assert r.value is not None, r
        else:
            assert r.value is None and r.reason, f"a bad reading must carry no number and a reason: {r}"


def assert_good_values_were_served(rows: Iterable[Row], served: dict[tuple[str, str], list[float]],
                                   *, rel: float = 1e-6, abs_: float = 1e-9) -> int:
    """Every good reading is a value the simulator served on that channel (nothing invented, never a
    stale copy of the last good value across a fault). Returns how many were checked."""
    n = 0
    for r in rows:
        if not r.good:
            continue
        assert r.value is not None
        candidates = served[(r.site, r.channel)]
        assert any(abs(r.value - v) <= max(abs_, rel * abs(v)) for v in candidates), \
            f"{r.channel} recorded {r.value!r} at {r.time}, which the simulator never served"
        n += 1
    return n


# -- running the daemon -----------------------------------------------------------------------------------
class InProcessDaemon:
    """``async with InProcessDaemon(config) as d:`` runs `Daemon.run` on this loop until the block ends."""

    def __init__(self, config: SiteConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.daemon = Daemon(config=config, clock=clock)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Daemon:
        self._task = asyncio.create_task(self.daemon.run(self._stop), name="daemon-under-test")
        ready = asyncio.create_task(self.daemon.ready.wait())
        done, _ = await asyncio.wait({self._task, ready}, timeout=3 * PATIENCE, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            await self._finish()
            raise TimeoutError("the daemon did not become ready within 15 s")
        return self.daemon

    async def __aexit__(self, *exc: object) -> None:
        await self._finish()

    async def _finish(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 30)


class DaemonProcess:
    """`pretreat run` as a child process (what systemd runs), its stderr appended to ``log``."""

    def __init__(self, site: Path, log: Path, *, env: dict[str, str] | None = None) -> None:
        """``env``: extra environment variables for the child (test seams)."""
        self.site, self.log = site, log
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._mark = 0

    def start(self) -> DaemonProcess:
        self._mark = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(self.site)],
                                         cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **self.env})
        return self

    def output(self) -> str:
        """What this run (since the last `start`) has logged."""
        with self.log.open("rb") as fh:
            fh.seek(self._mark)
            return fh.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 3 * PATIENCE) -> None:
        """Until the daemon logs that it runs (stores open, polling started). A start imports the whole
        package and opens every store: at load 20 it took over 30 s, so this waits longer than `PATIENCE`
        (only a daemon that never starts waits it out)."""
        assert self.proc is not None
        ok = wait_until(lambda: "daemon running" in self.output() or self.proc.poll() is not None, timeout)
        if not ok or self.proc.poll() is not None:
            raise AssertionError(f"daemon not running (exit {self.proc.poll()}):\n{self.output()[-3000:]}")

    def signal(self, sig: int, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def stop(self) -> int:
        return self.signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


class LoopThread:
    """An event loop on a thread of its own. Hypothesis drives its examples synchronously, and a daemon killed
    as a process needs simulators that outlive it: both run their asyncio side here."""

    def __init__(self, name: str = "fault-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(Exception):  # the executor's threads (paho's blocking connects) end too
                self.run(self.loop.shutdown_default_executor(), timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()

    def run(self, coro: Awaitable[T], timeout: float = 30.0) -> T:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(_wrap(coro), self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the loop (where the state it touches lives) and return its result."""
        async def go() -> T:
            return fn()
        return self.run(go())


class SimThread(LoopThread):
    """A `SiteSimulator` (built by ``factory``) serving from its own thread, its ground truth readable here."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        super().__init__("fault-sim")
        self._factory = factory
        self.sim: Any = None

    def __enter__(self) -> SimThread:
        super().__enter__()
        try:
            self.sim = self.run(self._start())
        except BaseException:
            self.close()
            raise
        return self

    async def _start(self) -> Any:
        sim = self._factory()
        await sim.start()
        return sim

    def __exit__(self, *exc: object) -> None:
        try:
            if self.sim is not None:
                self.run(self.sim.stop())
        finally:
            self.close()


async def _wrap(aw: Awaitable[T]) -> T:
    return await aw


def served_values(sim: Any) -> dict[tuple[str, str], list[float]]:
    """Every value the simulator put on the wire, per (site, channel) (needs ``history`` > 0)."""
    return {key: [s.value for s in hist] for key, hist in sim.history.items()}
