"""Helpers for the dispatcher tests: a scripted notifier (our own seam, `alarms.notifiers.base.Notifier`),
transitions, alarm configurations and a route."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from alarms.model import Kind, Priority, State, Transition
from alarms.notifiers.base import Delivery, Message, Notice
from config.alarms import AlarmConfig, Route, SiteAlarms
from config.notify import FloodSettings, LogNotify, NotifierConfig, NotifierKind, NotifySection
from drivers.backoff import Backoff

T0 = 1_700_000_000.0


FAST = Backoff(initial=0.01, maximum=0.05, jitter=0.0)


class Scripted:
    """A channel that answers from a script: "ok", ("fail", why), ("refuse", why), or "hang"."""

    kind = "scripted"

    def __init__(self, id: str, *, group_floods: bool = True, max_batch: int = 1,
                 ready: asyncio.Event | None = None) -> None:
        self.id, self.group_floods, self.max_batch, self.ready = id, group_floods, max_batch, ready
        self.script: deque[Any] = deque()
        self.got: list[Message] = []
        self.calls = 0
        self.started = self.closed = False
        self.called = asyncio.Event()  # set at every deliver call

    async def start(self) -> None:
        self.started = True

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        self.calls += 1
        self.called.set()
        step = self.script.popleft() if self.script else "ok"
        if step == "hang":
            await asyncio.Event().wait()
        if isinstance(step, tuple):
            return Delivery(0, step[1], permanent=step[0] == "refuse")
        self.got.extend(messages)
        return Delivery(len(messages))

    async def close(self) -> None:
        self.closed = True

    def health(self) -> dict[str, Any]:
        return {"calls": self.calls}

    @property
    def notices(self) -> list[Notice]:
        return [n for m in self.got for n in m.notices]

    async def until(self, check: Callable[[], bool], limit: float = 5.0) -> None:
        """Wait (event-driven) until ``check()`` holds after some deliver call."""
        async with asyncio.timeout(limit):
            while not check():
                self.called.clear()
                await self.called.wait()


def tr(seq: int, kind: Kind = Kind.RAISE, *, alarm: str = "acme/ph/ph_high", priority: Priority = Priority.HIGH,
       level: int = 1, to: State = State.ACTIVE_UNACKED, t: float | None = None) -> Transition:
    return Transition(time=T0 + seq if t is None else t, alarm_id=alarm, kind=kind, from_state=State.NORMAL,
                      to_state=to, priority=priority, who="system", why="test", value=11.2, limit=10.5,
                      citation="§ 1", level=level, seq=seq)


def config(routes: Sequence[Route] = (), *, flood: FloodSettings | None = None,
           every: Sequence[str] = ("scada",), channels: Sequence[str] = ("scada", "mail", "hook")) -> AlarmConfig:
    notify = NotifySection(
        channels=tuple(NotifierConfig(id=c, kind=NotifierKind.LOG, settings=LogNotify(),
                                      every_transition=c in every) for c in channels),
        state_dir=Path("/nonexistent"), flood=flood or FloodSettings())
    return AlarmConfig(notify=notify, sites={"acme": SiteAlarms(site="acme", routes=tuple(routes))})


OPERATOR = Route(name="operator", site="acme", notify="mail", recipients=("op@plant.example",),
                 min_priority=Priority.LOW)
