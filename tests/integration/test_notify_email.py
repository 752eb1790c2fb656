"""E-mail delivery against a real SMTP server (aiosmtpd on loopback) requiring STARTTLS and AUTH."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from alarms.dispatcher import Dispatcher
from alarms.model import Kind, Priority, State, Transition
from alarms.notifiers.base import Delivery, Message, Notice, NotifierContext
from alarms.notifiers.email import EmailNotifier, compose
from config.alarms import AlarmConfig, Route, SiteAlarms
from config.notify import EmailNotify, FloodSettings, NotifierConfig, NotifierKind, NotifySection
from drivers.backoff import Backoff
from tests.notify_servers import SmtpServer
from tests.support import free_port

T0 = 1_764_529_392.0  # 2025-11-30 19:03:12 UTC
FAST = Backoff(initial=0.05, maximum=0.2, jitter=0.0)
OPERATOR = "operator@pawling-wwtp.example"
INDUSTRY = "ehs@acme.example"
CONTEXT = NotifierContext(units={("acme", "ph"): "pH"}, site_names={"acme": "ACME Plating Co. — MH-1"},
                          timezones={"acme": "America/New_York"})


def tr(seq: int, *, kind: Kind = Kind.RAISE, priority: Priority = Priority.HIGH, alarm: str = "acme/ph/ph_high",
       to: State = State.ACTIVE_UNACKED) -> Transition:
    return Transition(time=T0 + seq, alarm_id=alarm, kind=kind, from_state=State.NORMAL, to_state=to,
                      priority=priority, who="system", why="condition started", value=11.2, limit=10.5,
                      citation="Southeast § 112-5A(1)(c)", seq=seq)


def settings(smtp: SmtpServer, tmp_path: Path, *, password: str | None = None, trust: bool = True,
             port: int | None = None) -> EmailNotify:
    pw = tmp_path / "smtp.password"
    pw.write_text((smtp.password if password is None else password) + "\n")
    return EmailNotify(host="127.0.0.1", port=port or smtp.port, sender="Pretreat alarms <alarms@example.org>",
                       starttls=True, username=smtp.user, password_file=pw,
                       ca_file=smtp.cert if trust else None, timeout=5.0)


def dispatcher(tmp_path: Path, s: EmailNotify, flood: FloodSettings | None = None) -> Dispatcher:
    mail = NotifierConfig(id="smtp", kind=NotifierKind.EMAIL, settings=s)
    routes = (Route(name="industry", site="acme", notify="smtp", recipients=(INDUSTRY,),
                    min_priority=Priority.HIGH),
              Route(name="plant-operator", site="acme", notify="smtp", recipients=(OPERATOR,),
                    min_priority=Priority.LOW))
    cfg = AlarmConfig(notify=NotifySection(channels=(mail,), state_dir=tmp_path / "notify",
                                           flood=flood or FloodSettings()),
                      sites={"acme": SiteAlarms(site="acme", routes=routes)})
    return Dispatcher(config=cfg, backoff=FAST, context=CONTEXT)


async def test_alarm_mail_arrives_over_starttls_and_auth_with_what_an_operator_needs(
        tmp_path: Path, smtp_server: SmtpServer) -> None:
    d = dispatcher(tmp_path, settings(smtp_server, tmp_path))
    await d.start()
    try:
        d.submit([tr(1), tr(2, priority=Priority.LOW, alarm="acme/ph/stale")])
        assert await d.wait_idle(10)
    finally:
        await d.stop()
    msgs = smtp_server.messages
    # the industry gets the high-priority pH alarm; the operator gets it and the low-priority stale alarm
    assert sorted((m["To"], m["X-Pretreat-Alarm"]) for m in msgs) == [
        (INDUSTRY, "acme/ph/ph_high"), (OPERATOR, "acme/ph/ph_high"), (OPERATOR, "acme/ph/stale")]
    assert all(env == ("alarms@example.org", [m["To"]]) for env, m in zip(smtp_server.box.envelopes, msgs,
                                                                           strict=True))
    assert smtp_server.box.auth and all(login == smtp_server.user for _, login in smtp_server.box.auth)
    ph = next(m for m in msgs if m["To"] == OPERATOR and m["X-Pretreat-Alarm"] == "acme/ph/ph_high")
    assert ph["Subject"] == "[HIGH] ALARM: ACME Plating Co. — MH-1 — ph ph_high: 11.2 pH (limit 10.5 pH)"
    assert ph["From"] == "Pretreat alarms <alarms@example.org>"
    assert ph["Auto-Submitted"] == "auto-generated"
    assert ph["Message-ID"].startswith("<pretreat.1.") and ph["Message-ID"].endswith("@example.org>")
    body = ph.get_content()
    for line in ("ALARM — high priority",
                 "Site:       ACME Plating Co. — MH-1 (acme)",
                 "What:       ph_high on channel ph",
                 "Reading:    11.2 pH (limit 10.5 pH)",
                 "Ordinance:  Southeast § 112-5A(1)(c)",
                 "Since:      2025-11-30 14:03:13 EST (2025-11-30T19:03:13Z)",
                 "State:      normal → active-unacknowledged",
                 "To acknowledge: pretreat alarms ack acme/ph/ph_high --user YOUR-NAME",
                 "journal record 1 · route plant-operator"):
        assert line in body, f"{line!r} not in:\n{body}"


async def test_a_flood_arrives_as_one_summary_mail(tmp_path: Path, smtp_server: SmtpServer) -> None:
    d = dispatcher(tmp_path, settings(smtp_server, tmp_path), FloodSettings(threshold=2, window=600, hold=0))
    await d.start()
    try:
        d.submit([tr(i, priority=Priority.LOW, alarm=f"acme/ch{i}/stale") for i in range(1, 7)])
        assert await d.wait_idle(10)
    finally:
        await d.stop()
    msgs = smtp_server.messages
    assert [m["X-Pretreat-Alarm"] for m in msgs] == ["acme/ch1/stale", "acme/ch2/stale", "summary"]
    summary = msgs[-1]
    assert summary["Subject"] == "[LOW] FLOOD: 4 alarm notifications at ACME Plating Co. — MH-1 (4 raised or " \
        "reminded)"
    body = summary.get_content()
    assert "4 alarm notifications for you between 2025-11-30 14:03:15 EST and 2025-11-30 14:03:18 EST" in body
    for i in range(3, 7):
        assert f"acme/ch{i}/stale" in body
    assert "pretreat alarms ack acme/ch6/stale --user YOUR-NAME" in body


async def test_untrusted_certificate_or_wrong_password_keeps_the_mail_queued(
        tmp_path: Path, smtp_server: SmtpServer) -> None:
    untrusted = await _deliver(settings(smtp_server, tmp_path, trust=False))
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.error
    wrong = await _deliver(settings(smtp_server, tmp_path, password="wrong"))
    assert "authentication" in wrong.error and "wrong" not in wrong.error
    for result in (untrusted, wrong):  # an outage to retry, never a refusal that would drop the alarm
        assert result.delivered == 0 and not result.permanent
    assert smtp_server.messages == []


async def _deliver(s: EmailNotify) -> Delivery:
    n = EmailNotifier(id="smtp", settings=s)
    await n.start()
    return await n.deliver([Message(target=OPERATOR, notices=(Notice.of(tr(1), target=OPERATOR),))])


async def test_refused_recipient_is_quarantined_a_4xx_is_retried(tmp_path: Path,
                                                                smtp_server: SmtpServer) -> None:
    smtp_server.box.reject_rcpt[INDUSTRY] = "550 5.1.1 no such mailbox"
    smtp_server.box.data_replies.append("451 4.3.0 try again later")
    d = dispatcher(tmp_path, settings(smtp_server, tmp_path))
    await d.start()
    try:
        d.submit([tr(1)])
        assert await d.wait_idle(10)
        health = d.health()["smtp"]
        quarantined = d.outbox("smtp").quarantined()
    finally:
        await d.stop()
    assert [m["To"] for m in smtp_server.messages] == [OPERATOR]  # after one 451, delivered
    assert health["quarantined"] == 1 and health["failures"] == 1
    assert [Notice.from_json(q.payload).target for q in quarantined] == [INDUSTRY]
    assert "550" in quarantined[0].reason


async def test_a_server_without_starttls_gets_nothing_in_clear(tmp_path: Path, smtp_server: SmtpServer) -> None:
    plain = Controller(object(), hostname="127.0.0.1", port=free_port())
    plain.start()
    try:
        result = await _deliver(settings(smtp_server, tmp_path, port=plain.port))
    finally:
        plain.stop()
    assert "does not offer STARTTLS" in result.error and not result.permanent


def test_compose_escalation_and_latched_texts() -> None:
    esc = Notice.of(replace(tr(5, kind=Kind.ESCALATE), level=2), target=OPERATOR)
    body = compose(Message(OPERATOR, (esc,)), sender="a@example.org").get_content()
    assert "Escalation: level 2 (not acknowledged in time)" in body
    latched = Notice.of(tr(6, kind=Kind.LATCH, priority=Priority.CRITICAL, alarm="acme/lel/lel_single",
                           to=State.LATCHED_UNACKED), target=OPERATOR)
    mail = compose(Message(OPERATOR, (latched,)), sender="a@example.org")
    assert mail["Subject"].startswith("[CRITICAL] CONDITION GONE (latched: reset required)")
    assert "pretreat alarms reset acme/lel/lel_single --user YOUR-NAME" in mail.get_content()


@pytest.fixture(autouse=True)
def _quiet_aiosmtpd(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="mail.log")
