"""Webhook delivery against a real HTTP server: retried after a 500 and during an outage, refused 4xx
quarantined, flood summaries, headers and token, all through the dispatcher's durable outbox."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alarms.dispatcher import Dispatcher
from alarms.model import Kind, Priority, State, Transition
from alarms.notifiers.base import Notice, NotifierContext
from config.alarms import AlarmConfig, Route, SiteAlarms
from config.notify import FloodSettings, NotifierConfig, NotifierKind, NotifySection, WebhookNotify
from drivers.backoff import Backoff
from tests.notify_servers import HttpReceiver

T0 = 1_700_000_000.0
FAST = Backoff(initial=0.05, maximum=0.2, jitter=0.0)


def tr(seq: int, *, alarm: str = "acme/ph/ph_high", kind: Kind = Kind.RAISE) -> Transition:
    return Transition(time=T0 + seq, alarm_id=alarm, kind=kind, from_state=State.NORMAL,
                      to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH, who="system", why="pH above limit",
                      value=11.2, limit=10.5, citation="Southeast § 112-5A(1)(c)", seq=seq)


def dispatcher(tmp_path: Path, url: str, *, token_file: Path | None = None,
               flood: FloodSettings | None = None) -> Dispatcher:
    hook = NotifierConfig(id="industry-hook", kind=NotifierKind.WEBHOOK, settings=WebhookNotify(
        url=url, headers=(("X-Source", "pretreat-test"),), token_file=token_file, timeout=2.0))
    cfg = AlarmConfig(
        notify=NotifySection(channels=(hook,), state_dir=tmp_path / "notify", flood=flood or FloodSettings()),
        sites={"acme": SiteAlarms(site="acme", routes=(Route(name="industry", site="acme",
                                                             notify="industry-hook"),))})
    return Dispatcher(config=cfg, backoff=FAST, context=NotifierContext(units={("acme", "ph"): "pH"}))


async def run(d: Dispatcher, transitions: Sequence[Transition], limit: float = 10.0) -> bool:
    await d.start()
    try:
        d.submit(transitions)
        return await d.wait_idle(limit)
    finally:
        await d.stop(drain_timeout=0)


async def test_retried_after_a_500_then_delivered_once(tmp_path: Path, http_receiver: HttpReceiver) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    http_receiver.statuses.extend([500, 503])
    d = dispatcher(tmp_path, http_receiver.url, token_file=token)
    assert await run(d, [tr(1)])
    reqs = http_receiver.received()
    assert len(reqs) == 3  # 500, 503, then 200
    assert {r.headers["Idempotency-Key"] for r in reqs} == {"1"}  # the same notice each time
    last = reqs[-1]
    assert last.path == "/hook"
    assert last.headers["Content-Type"] == "application/json"
    assert last.headers["Authorization"] == "Bearer t0ken" and last.headers["X-Source"] == "pretreat-test"
    body = last.json()
    assert body["type"] == "alarm"
    assert {k: body[k] for k in ("seq", "alarm", "site", "channel", "rule", "kind", "state", "priority",
                                 "value", "unit", "limit", "citation", "time", "routes")} == {
        "seq": 1, "alarm": "acme/ph/ph_high", "site": "acme", "channel": "ph", "rule": "ph_high",
        "kind": "raise", "state": "active-unacknowledged", "priority": "high", "value": 11.2, "unit": "pH",
        "limit": 10.5, "citation": "Southeast § 112-5A(1)(c)", "time": T0 + 1, "routes": ["industry"]}


async def test_refused_4xx_is_quarantined_408_and_429_are_retried(tmp_path: Path,
                                                                 http_receiver: HttpReceiver) -> None:
    http_receiver.statuses.extend([408, 429, 422])
    d = dispatcher(tmp_path, http_receiver.url)
    await d.start()
    try:
        d.submit([tr(1), tr(2)])
        assert await d.wait_idle(10)
        health = d.health()["industry-hook"]
        quarantined = d.outbox("industry-hook").quarantined()
    finally:
        await d.stop()
    seqs = [r.json()["seq"] for r in http_receiver.received()]
    assert seqs == [1, 1, 1, 2]  # 408 and 429 retried; the 422 refusal quarantined; the next one delivered
    assert health["quarantined"] == 1 and health["delivered"] == 1
    assert len(quarantined) == 1 and Notice.from_json(quarantined[0].payload).seq == 1
    assert quarantined[0].reason.startswith("HTTP 422")
    assert "rejected by the test receiver" in quarantined[0].reason


async def test_receiver_down_then_back_gets_everything_in_order(tmp_path: Path,
                                                                http_receiver: HttpReceiver) -> None:
    http_receiver.stop()
    d = dispatcher(tmp_path, http_receiver.url)
    await d.start()
    try:
        d.submit([tr(i) for i in range(1, 6)])
        assert not await d.wait_idle(0.5)
        health = d.health()["industry-hook"]
        assert health["failures"] >= 1 and not health["up"] and health["depth"] == 5
        assert "refused" in health["last_error"].lower()
        http_receiver.start()
        assert await d.wait_idle(10)
    finally:
        await d.stop()
    assert [r.json()["seq"] for r in http_receiver.received()] == [1, 2, 3, 4, 5]


async def test_a_flood_is_posted_as_one_summary(tmp_path: Path, http_receiver: HttpReceiver) -> None:
    d = dispatcher(tmp_path, http_receiver.url, flood=FloodSettings(threshold=3, window=600, hold=0))
    assert await run(d, [tr(i, alarm=f"acme/ch{i}/ph_high") for i in range(1, 8)])
    bodies = [r.json() for r in http_receiver.received()]
    assert [b["type"] for b in bodies] == ["alarm", "alarm", "alarm", "summary"]
    summary = bodies[-1]
    assert summary["count"] == 4 and [n["seq"] for n in summary["notices"]] == [4, 5, 6, 7]
    assert "acme/ch4/ph_high" in summary["text"]
    assert http_receiver.received()[-1].headers["Idempotency-Key"] == "4-7x4"
