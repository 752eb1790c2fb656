"""The daemon's own health: per-instrument counters, store counters and stale channels, as a JSON snapshot.

Per-poll facts are counted, not logged (style rule 11). The snapshot is written atomically next to the
historian (``<historian>.health.json``) so that an operator, `make demo` or a monitoring agent can read
it without talking to the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from monitor import memory

log = logging.getLogger(__name__)
_BLOCK = 4096  # snapshots are padded to a multiple of this (see HealthWriter.write)


def health_path(historian: Path) -> Path:
    return historian.with_name(historian.name + ".health.json")


CountersProvider = Callable[[], dict[str, Any]]
"""What the snapshot reports of the daemon: its per-instrument, per-link and store counters, a JSON-ready dict
(`monitor.app.Daemon.health_counters`). Called on the event loop, where those counters change."""


class HealthWriter:
    """Writes the snapshot: the provider's counters, with what the writer itself knows (the time, the process,
    its state, its uptime, the event loop's lag and the process's memory).

    It takes a provider rather than the daemon, so this module knows nothing of how the daemon is built."""

    def __init__(self, *, path: Path, counters: CountersProvider) -> None:
        self.counters = counters
        self.path = path
        self.started = time.time()
        self.state = "running"  # "stopped" on the final write, after the flush
        self.lag = LoopLag()
        self.failing: str | None = None  # why the snapshot cannot be written now (logged once an outage)

    def snapshot(self) -> dict[str, Any]:
        return {
            "time": time.time(),
            "pid": os.getpid(),
            "state": self.state,
            "uptime_s": round(time.time() - self.started, 1),
            **self.counters(),
            "loop_lag": self.lag.snapshot(),
            "memory": memory.snapshot(),
        }

    async def write_async(self) -> None:
        """The scheduled job: runs on the event loop, where the counters it reads are changed.

        Taking the snapshot and encoding it are two turns of the loop: at 1,000 instruments each is ~10 ms of
        CPU, and done in one go they were one of the stalls behind the event-loop lag (bench/bench_peers.py).
        The counters are copied when the snapshot is taken (`plain`, each section's own dict); a section that
        hands out a live structure shows it as of one turn later, still one consistent moment of it."""
        snap = self.snapshot()
        await asyncio.sleep(0)
        self._write(snap)

    def write(self) -> None:
        """Replace the snapshot atomically (see `_write`): the daemon's last one, at its stop."""
        self._write(self.snapshot())

    def _write(self, snap: dict[str, Any]) -> None:
        """Replace the snapshot atomically (write a temporary file, rename it over).

        On a full disk that cannot work (a new file needs new blocks): the snapshot is then rewritten in
        place, into the blocks the last one already holds (snapshots are padded with spaces to a multiple of
        `_BLOCK`, which JSON readers ignore), so `pretreat status` keeps seeing fresh counters, the failing
        historian among them. The failure is logged once per outage and its end once, not every second."""
        # compact: with ``indent`` the json module encodes in Python, not C; at 100 instruments that, and
        # `dataclasses.asdict`, were a fifth of the daemon's CPU at 1 s polling (bench/bench_peers.py)
        data = json.dumps(snap, separators=(",", ":"), default=str).encode()
        data += b" " * (-len(data) % _BLOCK)
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            in_place = self._rewrite_in_place(data)
            if self.failing is None:
                log.error("health snapshot: cannot write %s (%s); %s until it can", self.path, exc,
                          "rewriting it in place" if in_place else "it stays as it was")
            self.failing = str(exc)
            return
        if self.failing is not None:
            log.warning("health snapshot: writing %s again", self.path)
            self.failing = None

    def _rewrite_in_place(self, data: bytes) -> bool:
        try:
            size = self.path.stat().st_size
            if len(data) > size:
                return False
            with open(self.path, "r+b") as f:
                f.write(data + b" " * (size - len(data)))
            return True
        except OSError:
            return False


def devices_of(polled: Iterable[object]) -> dict[str, Any]:
    """What catalogue instruments say about their readings (`drivers.modbus.device_state`), by instrument."""
    out: dict[str, Any] = {}
    for p in polled:
        dev = getattr(p, "device", None)
        if dev is not None and dev.active:
            inst = p.instrument  # type: ignore[attr-defined]
            out[f"{inst.site}/{inst.id}"] = dev.health()
    return out


def counters_of(obj: object) -> dict[str, Any]:
    """The counters of a link or a streaming driver (its ``stats`` or ``counters``), as plain values."""
    stats = getattr(obj, "stats", None) or getattr(obj, "counters", None)
    if stats is None:
        return {}
    try:
        return plain(stats)
    except TypeError:
        return {k: v for k, v in vars(stats).items() if isinstance(v, int | float | str | bool)}


_SCALAR = (int, float, str, bool, type(None))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def plain(counters: Any) -> dict[str, Any]:
    """`dataclasses.asdict` of a dataclass of counters, without its recursive deep copy (a tenth of the cost,
    once a second for every instrument); a field that is not a plain value gets asdict's own treatment."""
    out = {name: getattr(counters, name) for name in _field_names(type(counters))}
    if all(isinstance(v, _SCALAR) for v in out.values()):
        return out
    return asdict(counters)


class LoopLag:
    """Event-loop lag: how late a short sleep on the daemon's loop wakes up. Everything the daemon does runs on
    that loop (polls, MQTT callbacks, checks, the tick), so a lag of L ms delays every reading's timestamp and
    every alarm by up to L ms; a blocking call on the loop shows here first.

    ``run`` samples every ``interval`` seconds; `snapshot` gives p50/p99/max in ms over the last ``window``
    samples (5 minutes by default) and the largest lag since start.
    """

    def __init__(self, *, interval: float = 0.1, window: int = 3000) -> None:
        self.interval = interval
        self._lags: deque[float] = deque(maxlen=window)
        self.worst = 0.0  # s, since start

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            t = time.monotonic()
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.monotonic() - t - self.interval)
            self._lags.append(lag)
            self.worst = max(self.worst, lag)

    def snapshot(self) -> dict[str, float | int]:
        lags = sorted(self._lags)
        # the last 30 s alone: a load measured now, without the start-up's connects (bench/bench_peers.py)
        recent = sorted(list(self._lags)[-round(30 / self.interval):])
        return {"samples": len(lags), "p50_ms": round(_pct(lags, 50) * 1000, 2),
                "p99_ms": round(_pct(lags, 99) * 1000, 2), "max_ms": round(self.worst * 1000, 2),
                "p99_ms_30s": round(_pct(recent, 99) * 1000, 2)}


def _pct(ordered: list[float], p: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]
