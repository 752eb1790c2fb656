"""Flood grouping: ≥ 10 notifications in 10 minutes to one recipient → the rest of the burst in one summary."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from alarms.dispatcher import Dispatcher
from alarms.flood import FloodGrouper, Pending, Planned
from alarms.model import Kind, Priority, State, Transition
from alarms.notifiers.base import Notice
from alarms.routing import Router
from config.alarms import Route
from config.notify import FloodSettings
from tests.support import PATIENCE
from tests.unit.dispatch_helpers import FAST, OPERATOR, T0, Scripted, config, tr

SETTINGS = FloodSettings(threshold=10, window=600.0, hold=60.0)


def pending(i: int, created: float, *, target: str = "op@plant.example",
            priority: Priority = Priority.HIGH) -> Pending:
    t = Transition(time=created, alarm_id=f"acme/ch{i}/ph_high", kind=Kind.RAISE, from_state=State.NORMAL,
                   to_state=State.ACTIVE_UNACKED, priority=priority, who="system", why="", value=1.0, limit=0.5,
                   citation="", seq=i)
    return Pending(i, created, Notice.of(t, target=target))


def run(g: FloodGrouper, queue: list[Pending], now: float) -> tuple[list[Planned], float | None]:
    """Plan, 'deliver' everything ready (commit + remove from the queue), like the dispatcher does."""
    ready, due = g.plan(queue, now)
    for p in ready:
        g.commit(p)
        for m in p.members:
            queue.remove(m)
    return ready, due


def test_the_first_ten_go_alone_the_rest_of_the_burst_waits_for_one_summary() -> None:
    g = FloodGrouper(settings=SETTINGS)
    queue: list[Pending] = []
    sent: list[Planned] = []
    for i in range(1, 16):  # 15 alarms, one every 2 s
        queue.append(pending(i, T0 + 2 * i))
        ready, due = run(g, queue, T0 + 2 * i)
        sent += ready
    assert [len(p.members) for p in sent] == [1] * 10
    assert [p.id for p in queue] == [11, 12, 13, 14, 15]  # held: the burst continues
    assert due == T0 + 22 + 60  # the group's first notice + hold
    ready, due = run(g, queue, T0 + 81.9)
    assert ready == [] and due == T0 + 82
    ready, due = run(g, queue, T0 + 82)
    assert len(ready) == 1 and ready[0].message.grouped and [n.seq for n in ready[0].message.notices] == [
        11, 12, 13, 14, 15]
    assert due is None and queue == []
    assert g.recent("op@plant.example", T0 + 82) == 15


def test_the_flood_ends_when_the_rate_drops_below_threshold() -> None:
    g = FloodGrouper(settings=SETTINGS)
    queue = [pending(i, T0 + i) for i in range(1, 13)]
    ready, _ = run(g, queue, T0 + 100)
    assert [len(p.members) for p in ready] == [1] * 10 + [2]  # the backlog: held long enough already
    late = [pending(20, T0 + 12 + 600)]  # 10 minutes after the burst: alone again
    ready, due = run(g, late, T0 + 612)
    assert [len(p.members) for p in ready] == [1] and not ready[0].message.grouped and due is None


def test_recipients_are_counted_separately_and_critical_is_never_grouped() -> None:
    g = FloodGrouper(settings=SETTINGS)
    queue = [pending(i, T0 + i) for i in range(1, 12)]
    queue.append(pending(12, T0 + 12, target="ehs@acme.example"))
    queue.append(pending(13, T0 + 13, priority=Priority.CRITICAL))
    queue.append(pending(14, T0 + 14))
    ready, due = run(g, queue, T0 + 14)
    assert [p.members[0].id for p in ready] == [*range(1, 11), 12, 13]
    assert [p.id for p in queue] == [11, 14]  # one group for the operator, after the critical one
    assert due == T0 + 11 + 60


def test_a_held_group_of_one_is_sent_as_an_ordinary_message_and_max_group_splits() -> None:
    g = FloodGrouper(settings=FloodSettings(threshold=2, window=600, hold=60, max_group=3))
    queue = [pending(i, T0 + i) for i in range(1, 4)]
    ready, _ = run(g, queue, T0 + 3)
    assert len(ready) == 2 and queue[0].id == 3
    ready, _ = run(g, queue, T0 + 63)
    assert len(ready) == 1 and not ready[0].message.grouped
    queue = [pending(i, T0 + 100 + i) for i in range(10, 17)]  # 7 more while flooding
    ready, due = run(g, queue, T0 + 117)
    assert [len(p.members) for p in ready] == [3, 3] and [p.id for p in queue] == [16]
    assert due == T0 + 116 + 60


def test_plan_without_commit_is_repeatable_and_disabled_grouping_sends_all() -> None:
    g = FloodGrouper(settings=SETTINGS)
    queue = [pending(i, T0 + i) for i in range(1, 31)]
    first = g.plan(queue, T0 + 30)
    assert g.plan(queue, T0 + 30) == first  # a failed delivery is planned the same way again
    machine = FloodGrouper(settings=SETTINGS, enabled=False)
    assert [len(p.members) for p in machine.plan(queue, T0 + 30)[0]] == [1] * 30


def test_router_rejects_a_route_to_an_unknown_channel() -> None:
    with pytest.raises(ValueError, match="pager"):
        Router(config=config([Route(name="x", site="acme", notify="pager")]))


async def test_dispatcher_groups_a_storm_for_email_but_not_for_scada(tmp_path: Path) -> None:
    ch = {"scada": Scripted("scada", group_floods=False, max_batch=100), "mail": Scripted("mail"),
          "hook": Scripted("hook")}
    # the storm's 15 grouped notifications arrive within the hold, even on a loaded machine
    cfg = config([OPERATOR], flood=FloodSettings(threshold=10, window=600, hold=2.0))
    d = Dispatcher(config=cfg, state_dir=tmp_path / "n", notifiers=ch, backoff=FAST)
    await d.start()
    try:
        for i in range(1, 26):
            d.submit([tr(i, alarm=f"acme/ch{i}/ph_high")])
            await asyncio.sleep(0.002)
        assert await d.wait_idle(PATIENCE)
        health = d.health()
    finally:
        await d.stop()
    assert len(ch["scada"].notices) == 25 and not any(m.grouped for m in ch["scada"].got)
    mail = ch["mail"].got
    assert [len(m.notices) for m in mail] == [1] * 10 + [15]
    assert mail[-1].grouped and [n.seq for n in mail[-1].notices] == list(range(11, 26))
    assert health["mail"]["summaries"] == 1 and health["mail"]["delivered"] == 25
    assert health["mail"]["messages"] == 11
