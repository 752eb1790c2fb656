"""The dispatcher: routing per priority/recipient/level, durable per-channel queues, order, retries,
quarantine, restarts, catch-up from the journal, and a dead channel never holding up the others.

The channel here is a scripted notifier (our own seam, `alarms.notifiers.base.Notifier`); the outbox files,
the journal and the engine are the real ones. Real channels are tested at the wire in tests/integration.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from alarms.dispatcher import Dispatcher
from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, AlarmSettings, Kind, Priority, State, Transition
from alarms.notifiers.base import Notice, NotifierContext
from config.alarms import DEFAULT_KINDS, AlarmConfig, Route
from drivers.backoff import Backoff
from tests.unit.dispatch_helpers import FAST, OPERATOR, T0, Scripted, config, tr

INDUSTRY = Route(name="industry", site="acme", notify="mail", recipients=("ehs@acme.example",),
                 min_priority=Priority.HIGH)
HOOK = Route(name="hook", site="acme", notify="hook", min_priority=Priority.CRITICAL)


def make(tmp_path: Path, cfg: AlarmConfig, **channels: Scripted) -> Dispatcher:
    return Dispatcher(config=cfg, state_dir=tmp_path / "notify", notifiers=channels, backoff=FAST,
                      context=NotifierContext(units={("acme", "ph"): "pH"}, site_names={"acme": "ACME Plating"},
                                              timezones={"acme": "America/New_York"}))


def chans(group_floods: bool = True) -> dict[str, Scripted]:
    return {"scada": Scripted("scada", group_floods=False, max_batch=50), "mail": Scripted("mail"),
            "hook": Scripted("hook")}


async def test_routes_by_priority_recipient_and_kind(tmp_path: Path) -> None:
    ch = chans()
    d = make(tmp_path, config([INDUSTRY, OPERATOR, HOOK]), **ch)
    await d.start()
    try:
        d.submit([tr(1, priority=Priority.HIGH, alarm="acme/ph/ph_high"),
                  tr(2, priority=Priority.LOW, alarm="acme/ph/stale"),
                  tr(3, Kind.ACK, priority=Priority.HIGH, to=State.ACTIVE_ACKED),
                  tr(4, priority=Priority.CRITICAL, alarm="acme/lel/lel_single"),
                  tr(5, priority=Priority.HIGH, alarm="other-site/ph/ph_high")])
        assert await d.wait_idle(5)
    finally:
        await d.stop()
    # the SCADA feed gets every transition of every site, in order
    assert [n.seq for n in ch["scada"].notices] == [1, 2, 3, 4, 5]
    mail = [(n.seq, n.target) for n in ch["mail"].notices]
    assert sorted(mail) == [(1, "ehs@acme.example"), (1, "op@plant.example"), (2, "op@plant.example"),
                            (4, "ehs@acme.example"), (4, "op@plant.example")]  # no ack (default kinds)
    assert [(n.seq, n.target) for n in ch["hook"].notices] == [(4, "*")]
    first = ch["mail"].notices[0]
    assert (first.unit, first.site_name, first.timezone, first.routes) == ("pH", "ACME Plating",
                                                                           "America/New_York", ("industry",))
    assert ch["scada"].started and ch["scada"].closed


async def test_one_recipient_on_two_routes_is_told_once(tmp_path: Path) -> None:
    both = Route(name="oncall", site="acme", notify="mail", recipients=("op@plant.example",))
    ch = chans()
    d = make(tmp_path, config([OPERATOR, both]), **ch)
    await d.start()
    try:
        assert d.submit([tr(1)]) == 2  # one for SCADA, one for the operator
        assert await d.wait_idle(5)
    finally:
        await d.stop()
    assert [(n.target, n.routes) for n in ch["mail"].notices] == [("op@plant.example", ("operator", "oncall"))]


async def test_escalation_list_hears_from_the_escalation_on(tmp_path: Path) -> None:
    boss = Route(name="boss", site="acme", notify="mail", recipients=("boss@plant.example",), level=2,
                 kinds=DEFAULT_KINDS | {Kind.ACK})
    ch = chans()
    d = make(tmp_path, config([OPERATOR, boss]), **ch)
    await d.start()
    try:
        d.submit([tr(1), tr(2, Kind.REALARM), tr(3, Kind.ESCALATE, level=2),
                  tr(4, Kind.ACK, level=2, to=State.ACTIVE_ACKED), tr(5, Kind.CLEAR, to=State.NORMAL)])
        assert await d.wait_idle(5)
    finally:
        await d.stop()
    boss_got = [n.kind for n in ch["mail"].notices if n.target == "boss@plant.example"]
    assert boss_got == [Kind.ESCALATE, Kind.ACK]
    op_got = [n.kind for n in ch["mail"].notices if n.target == "op@plant.example"]
    assert op_got == [Kind.RAISE, Kind.ESCALATE, Kind.CLEAR]


async def test_since_is_the_raise_time_until_the_alarm_ends(tmp_path: Path) -> None:
    ch = chans()
    d = make(tmp_path, config([OPERATOR]), **ch)
    await d.start()
    try:
        d.submit([tr(1, t=T0 + 10), tr(2, Kind.CLEAR, to=State.RTN_UNACKED, t=T0 + 70),
                  tr(3, Kind.ACK, to=State.NORMAL, t=T0 + 80), tr(4, t=T0 + 100)])
        assert await d.wait_idle(5)
    finally:
        await d.stop()
    assert [n.since for n in ch["scada"].notices] == [T0 + 10, T0 + 10, T0 + 10, T0 + 100]


async def test_submit_is_idempotent_and_needs_committed_transitions(tmp_path: Path) -> None:
    d = make(tmp_path, config([OPERATOR]), **chans())
    try:
        assert d.submit([tr(1), tr(2)]) == 4
        assert d.submit([tr(1), tr(2)]) == 0
        assert d.health()["mail"]["skipped_duplicates"] == 2
        with pytest.raises(ValueError, match="no journal seq"):
            d.submit([Transition(time=T0, alarm_id="acme/ph/ph_high", kind=Kind.RAISE, from_state=State.NORMAL,
                                 to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH, who="system", why="",
                                 value=None, limit=None, citation="")])
    finally:
        await d.stop()


async def test_outage_retries_with_backoff_and_keeps_order(tmp_path: Path) -> None:
    ch = chans()
    ch["mail"].script.extend([("fail", "connection refused")] * 3)
    d = make(tmp_path, config([OPERATOR]), **ch)
    await d.start()
    try:
        d.submit([tr(i) for i in range(1, 6)])
        assert await d.wait_idle(5)
        health = d.health()["mail"]
    finally:
        await d.stop()
    assert [n.seq for n in ch["mail"].notices] == [1, 2, 3, 4, 5]
    assert health["failures"] == 3 and health["delivered"] == 5 and health["up"] and health["depth"] == 0


async def test_permanent_refusal_is_quarantined_and_the_queue_moves_on(tmp_path: Path) -> None:
    ch = chans()
    ch["mail"].script.extend(["ok", ("refuse", "550 no such user")])
    d = make(tmp_path, config([OPERATOR]), **ch)
    await d.start()
    try:
        d.submit([tr(1), tr(2), tr(3)])
        assert await d.wait_idle(5)
        health = d.health()["mail"]
        quarantined = d.outbox("mail").quarantined()
    finally:
        await d.stop()
    assert [n.seq for n in ch["mail"].notices] == [1, 3]
    assert health["quarantined"] == 1
    assert [(Notice.from_json(q.payload).seq, q.reason) for q in quarantined] == [(2, "550 no such user")]


async def test_a_hung_channel_never_holds_up_the_others_or_submit(tmp_path: Path) -> None:
    ch = chans()
    ch["mail"].script.append("hang")
    d = make(tmp_path, config([OPERATOR, HOOK]), **ch)
    await d.start()
    try:
        started = time.perf_counter()
        d.submit([tr(i, priority=Priority.CRITICAL) for i in range(1, 51)])
        elapsed = time.perf_counter() - started
        await ch["hook"].until(lambda: len(ch["hook"].notices) == 50)
    finally:
        await d.stop(drain_timeout=0)
    assert elapsed < 2.0  # three SQLite commits, no network (waiting on the hung channel would never return)
    assert len(ch["hook"].notices) == 50 and len(ch["scada"].notices) == 50
    assert ch["mail"].notices == []


async def test_undelivered_notices_survive_a_restart_and_are_not_repeated(tmp_path: Path) -> None:
    first = chans()
    first["mail"].script.extend([("fail", "down")] * 1000)
    d = make(tmp_path, config([OPERATOR]), **first)
    await d.start()
    d.submit([tr(1), tr(2), tr(3)])
    assert await d.wait_idle(0.3) is False
    await d.stop(drain_timeout=0)
    assert first["mail"].notices == []
    second = chans()
    d2 = make(tmp_path, config([OPERATOR]), **second)
    await d2.start()
    try:
        assert await d2.wait_idle(5)
        assert d2.submit([tr(3)]) == 0  # already queued by the first run: not announced twice
    finally:
        await d2.stop()
    assert [n.seq for n in second["mail"].notices] == [1, 2, 3]
    assert second["scada"].notices == []  # SCADA had its copies delivered by the first run
    assert [n.seq for n in first["scada"].notices] == [1, 2, 3]


async def test_catch_up_queues_what_the_journal_committed_after_the_last_submit(tmp_path: Path) -> None:
    db = tmp_path / "alarms.sqlite"
    specs = [("acme", "ph", "ph_high", AlarmSettings(priority=Priority.HIGH))]
    engine = AlarmEngine(path=db, alarms=specs, now=T0)
    ph = AlarmInput(time=T0 + 1, site="acme", channel="ph", rule="ph_high", active=True, value=11.0, limit=10.5)
    history = engine.apply(ph, T0 + 1) + engine.ack("acme/ph/ph_high", user="ann", now=T0 + 2)
    ch = chans()
    d = make(tmp_path, config([OPERATOR]), **ch)
    try:
        # a channel seen for the first time starts at the journal's head: old history is not replayed
        assert d.catch_up(engine.journal) == 0
        raised = engine.apply(AlarmInput(time=T0 + 3, site="acme", channel="ph", rule="ph_high", active=False,
                                         value=10.0, limit=10.5), T0 + 3)
        d.submit(raised)
        lost = engine.apply(AlarmInput(time=T0 + 4, site="acme", channel="ph", rule="ph_high", active=True,
                                       value=11.5, limit=10.5), T0 + 4)  # committed, then the daemon died
    finally:
        await d.stop(drain_timeout=0)
    ch2 = chans()
    d2 = make(tmp_path, config([OPERATOR]), **ch2)
    await d2.start()
    try:
        assert d2.catch_up(engine.journal) == 2  # the lost raise, for SCADA and for the operator
        assert await d2.wait_idle(5)
    finally:
        await d2.stop()
        engine.close()
    assert [h.kind for h in history] == [Kind.RAISE, Kind.ACK]
    # the clear was queued by the first run (never started): delivered from its outbox; the raise by catch-up
    assert [n.seq for n in ch2["scada"].notices] == [raised[0].seq, lost[0].seq]
    assert [(n.kind, n.value) for n in ch2["mail"].notices] == [(Kind.CLEAR, 10.0), (Kind.RAISE, 11.5)]


async def test_ready_event_ends_the_backoff_early(tmp_path: Path) -> None:
    ready = asyncio.Event()
    ch = {"scada": Scripted("scada", group_floods=False, ready=ready)}
    ch["scada"].script.append(("fail", "broker down"))
    d = Dispatcher(config=config(channels=("scada",)), state_dir=tmp_path / "n", notifiers=ch,
                   backoff=Backoff(initial=30.0, maximum=30.0, jitter=0.0))
    await d.start()
    try:
        d.submit([tr(1)])
        await ch["scada"].until(lambda: ch["scada"].calls >= 1)
        await asyncio.sleep(0.05)
        assert ch["scada"].notices == []
        ready.set()  # the link is back: delivery resumes now, not after 30 s
        assert await d.wait_idle(10)  # a third of the backoff: room for a loaded machine
    finally:
        await d.stop()
    assert [n.seq for n in ch["scada"].notices] == [1]


async def test_unreadable_outbox_record_is_quarantined(tmp_path: Path) -> None:
    ch = chans()
    d = make(tmp_path, config([OPERATOR]), **ch)
    d.outbox("mail").append(b'{"v": 99}')
    await d.start()
    try:
        d.submit([tr(1)])
        assert await d.wait_idle(5)
        assert d.health()["mail"]["quarantined"] == 1
    finally:
        await d.stop()
    assert [n.seq for n in ch["mail"].notices] == [1]


def test_notice_json_round_trip() -> None:
    n = Notice.of(tr(7), target="op@plant.example", unit="pH", since=T0, site_name="ACME", routes=["a", "b"])
    assert Notice.from_json(n.to_json()) == n
    p = n.payload()
    assert (p["site"], p["channel"], p["rule"], p["state"], p["time_utc"]) == (
        "acme", "ph", "ph_high", "active-unacknowledged", "2023-11-14T22:13:27Z")


async def test_a_failing_queue_file_keeps_the_notices_in_memory_and_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ch = chans()
    d = make(tmp_path, config([OPERATOR]), **ch)
    outbox = d.outbox("mail")
    real = outbox.append_many
    calls = {"n": 0}

    def flaky(items: Any) -> list[int]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(items)

    monkeypatch.setattr(outbox, "append_many", flaky)
    await d.start()
    try:
        assert d.submit([tr(1)]) == 1  # SCADA's queue took it; the mail queue failed
        assert d.health()["mail"]["queue_errors"] == 1 and d.marks()["mail"] == -1
        d.submit([tr(2)])  # the kept notice goes first, in order
        assert await d.wait_idle(5)
    finally:
        await d.stop()
    assert [n.seq for n in ch["mail"].notices] == [1, 2]


async def test_marks_advance_for_channels_that_get_nothing(tmp_path: Path) -> None:
    d = make(tmp_path, config([HOOK]), **chans())
    try:
        d.submit([tr(1, priority=Priority.LOW), tr(2, priority=Priority.LOW)])  # the hook only takes critical
        assert d.marks() == {"scada": 2, "mail": 2, "hook": 2}
    finally:
        await d.stop(drain_timeout=0)
    d2 = make(tmp_path, config([HOOK]), **chans())
    try:
        assert d2.marks() == {"scada": 2, "mail": 2, "hook": 2}
    finally:
        await d2.stop(drain_timeout=0)
