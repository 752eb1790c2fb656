"""The ``email`` channel: plain-text alarm mail an operator can act on, over SMTP with STARTTLS and AUTH.

One message per recipient (routes list addresses; the industry never sees the plant's distribution list).
A single notification reads::

    Subject: [HIGH] ALARM: ACME Plating Co. — ph ph_high: 11.2 pH (limit 10.5 pH)

    ALARM — high priority
    Site:       ACME Plating Co. — control manhole MH-1 (acme-plating)
    What:       ph_high on channel ph
    Reading:    11.2 pH (limit 10.5 pH)
    Ordinance:  Southeast § 112-5A(1)(c)
    Since:      2026-11-30 14:03:12 EST (2026-11-30T19:03:12Z)
    …
    To acknowledge: pretreat alarms ack acme-plating/ph/ph_high --user YOUR-NAME --note "what was done"

A flood summary lists every grouped notification, one line each. Headers: ``Message-ID`` derived from the
notice seq and the recipient (a repeat after a lost confirmation carries the same id, so mail clients can
fold it), ``Auto-Submitted: auto-generated``, ``X-Pretreat-Alarm`` / ``X-Pretreat-Seq``.

Transport: smtplib in a worker thread, one SMTP session per `deliver` batch (connect, EHLO, STARTTLS with
certificate verification against the system store or ``ca_file``, EHLO, AUTH, MAIL/RCPT/DATA per message,
QUIT). A server that does not offer STARTTLS when it is configured is treated as unavailable: nothing is
sent in clear. A 250 after DATA is the confirmation. Outcomes: a 5xx refusal of the recipient, sender or
content is permanent (quarantined); 4xx, connection, TLS and authentication failures are retried with backoff
(an authentication failure is logged by the dispatcher as an outage: alarms wait for the password to be
fixed rather than being dropped). The password file is read at start and never logged.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any

from alarms.model import Kind, State
from alarms.notifiers.base import (
    KIND_WORDS,
    Delivery,
    Message,
    Notice,
    NotifierContext,
    iso_utc,
    local_time,
    value_vs_limit,
)
from config.notify import EmailNotify, NotifierConfig

MAX_BATCH = 20  # messages per SMTP session
_NEEDS_ACK = (State.ACTIVE_UNACKED, State.RTN_UNACKED, State.LATCHED_UNACKED)


class EmailNotifier:
    kind = "email"
    group_floods = True
    max_batch = MAX_BATCH
    ready = None

    def __init__(self, *, id: str, settings: EmailNotify) -> None:
        self.id = id
        self.settings = settings
        self._password = ""
        self._context: ssl.SSLContext | None = None
        self.counters = {"sessions": 0, "sent": 0, "failed": 0, "refused": 0}

    async def start(self) -> None:
        """Read the password and prepare TLS; an unreadable password file stops the daemon's start."""
        s = self.settings
        if s.password_file is not None:
            try:
                self._password = s.password_file.read_text(encoding="utf-8").rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"email {self.id}: cannot read password_file {s.password_file} "
                                 f"({exc})") from None
        self._context = ssl.create_default_context(cafile=str(s.ca_file) if s.ca_file else None)

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        mails = [compose(m, sender=self.settings.sender) for m in messages]
        return await asyncio.to_thread(self._session, mails)

    def _session(self, mails: Sequence[EmailMessage]) -> Delivery:
        """One SMTP conversation (in a worker thread)."""
        s = self.settings
        sent = 0
        self.counters["sessions"] += 1
        try:
            smtp = (smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=self._context) if s.ssl
                    else smtplib.SMTP(s.host, s.port, timeout=s.timeout))
        except (OSError, smtplib.SMTPException) as exc:
            self.counters["failed"] += 1
            return Delivery(0, f"cannot connect to SMTP server {s.host}:{s.port}: {exc}")
        try:
            smtp.ehlo()
            if s.starttls:
                if not smtp.has_extn("starttls"):
                    self.counters["failed"] += 1
                    return Delivery(0, f"SMTP server {s.host}:{s.port} does not offer STARTTLS; not sending in "
                                    "clear")
                smtp.starttls(context=self._context)
                smtp.ehlo()
            if s.username:
                smtp.login(s.username, self._password)
            for mail in mails:
                smtp.send_message(mail)
                sent += 1
                self.counters["sent"] += 1
            return Delivery(sent)
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()), (0, b""))
            return self._refusal(sent, code, f"recipient refused: {code} {_text(text)}")
        except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as exc:
            return self._refusal(sent, exc.smtp_code, f"{type(exc).__name__}: {exc.smtp_code} "
                                 f"{_text(exc.smtp_error)}")
        except smtplib.SMTPAuthenticationError as exc:
            self.counters["failed"] += 1
            return Delivery(sent, f"SMTP authentication as {s.username!r} refused: {exc.smtp_code} "
                            f"{_text(exc.smtp_error)}")
        except (smtplib.SMTPException, OSError) as exc:  # disconnects, timeouts, TLS errors, 4xx replies
            self.counters["failed"] += 1
            return Delivery(sent, f"SMTP session with {s.host}:{s.port} failed: {exc}")
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()

    def _refusal(self, sent: int, code: int, error: str) -> Delivery:
        permanent = 500 <= code < 600
        self.counters["refused" if permanent else "failed"] += 1
        return Delivery(sent, error, permanent)

    async def close(self) -> None:
        return None

    def health(self) -> dict[str, Any]:
        return dict(self.counters)


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def compose(m: Message, *, sender: str) -> EmailMessage:
    """The e-mail for one message to its recipient (``m.target``)."""
    mail = EmailMessage()
    first = m.notices[0]
    mail["From"] = sender
    mail["To"] = m.target
    mail["Subject"] = summary_subject(m) if m.grouped else subject(first)
    mail["Date"] = email.utils.formatdate()  # when sent (the event's own time is in the body)
    domain = sender.rsplit("@", 1)[-1].strip(" >") or "pretreat.invalid"
    who = hashlib.sha256(m.target.encode()).hexdigest()[:12]
    mail["Message-ID"] = f"<pretreat.{m.key}.{who}@{domain}>"
    mail["Auto-Submitted"] = "auto-generated"
    mail["X-Pretreat-Alarm"] = first.alarm if not m.grouped else "summary"
    mail["X-Pretreat-Seq"] = m.key
    mail.set_content(summary_body(m) if m.grouped else body(first))
    return mail


def _site(n: Notice) -> str:
    return n.site_name or n.site


def subject(n: Notice) -> str:
    word = KIND_WORDS.get(n.kind, n.kind.value.upper())
    return f"[{n.priority.value.upper()}] {word}: {_site(n)} — {n.channel} {n.rule}: {value_vs_limit(n)}"


def body(n: Notice) -> str:
    """The plain-text body of a single notification: everything needed to act, nothing to look up."""
    word = KIND_WORDS.get(n.kind, n.kind.value.upper())
    site = f"{n.site_name} ({n.site})" if n.site_name and n.site_name != n.site else n.site
    rows = [
        ("Site", site), ("What", f"{n.rule} on channel {n.channel}"), ("Reading", value_vs_limit(n)),
        ("Ordinance", n.citation or "(none cited)"),
    ]
    if n.since is not None:
        rows.append(("Since", f"{local_time(n.since, n.timezone)} ({iso_utc(n.since)})"))
    rows += [
        ("This event", f"{local_time(n.time, n.timezone)} ({iso_utc(n.time)})"),
        ("State", f"{n.from_state.value} → {n.state.value}"),
        ("By", f"{n.who}" + (f": {n.why}" if n.why else "")),
    ]
    if n.level > 1 or n.kind is Kind.ESCALATE:
        rows.append(("Escalation", f"level {n.level} (not acknowledged in time)"))
    lines = [f"{word} — {n.priority.value} priority", ""]
    lines += [f"{k + ':':<12}{v}" for k, v in rows]
    lines += ["", *_actions(n), "", f"Alarm {n.alarm} · journal record {n.seq}"
              + (f" · route {', '.join(n.routes)}" if n.routes else ""), "-- ", "pretreat-monitor"]
    return "\n".join(lines) + "\n"


def _actions(n: Notice) -> list[str]:
    out = []
    if n.state in _NEEDS_ACK:
        out.append(f"To acknowledge: pretreat alarms ack {n.alarm} --user YOUR-NAME --note \"what was done\"")
    if n.state in (State.LATCHED_UNACKED, State.LATCHED_ACKED):
        out.append(f"Latched: once the cause is fixed, release it with: pretreat alarms reset {n.alarm} "
                   "--user YOUR-NAME")
    if not out:
        out.append("No action needed for this notice; `pretreat alarms list` shows every alarm's state.")
    return out


def summary_subject(m: Message) -> str:
    sites = sorted({_site(n) for n in m.notices})
    where = sites[0] if len(sites) == 1 else f"{len(sites)} sites"
    raised = sum(n.kind in (Kind.RAISE, Kind.REALARM, Kind.ESCALATE) for n in m.notices)
    top = max(m.notices, key=lambda n: _RANK[n.priority.value]).priority.value.upper()
    return f"[{top}] FLOOD: {len(m.notices)} alarm notifications at {where} ({raised} raised or reminded)"


_RANK = {"diagnostic": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}


def summary_body(m: Message) -> str:
    """A flood summary: one line per grouped notification, oldest first."""
    first, last = m.notices[0], m.notices[-1]
    tz = first.timezone
    lines = [f"{len(m.notices)} alarm notifications for you between {local_time(first.time, tz)} and "
             f"{local_time(last.time, tz)} were grouped into this one message (alarm flood: too many "
             "notifications in a short time).", "",
             "time (site zone)     event                 priority  alarm — reading — ordinance"]
    for n in m.notices:
        word = KIND_WORDS.get(n.kind, n.kind.value.upper()).split(" (")[0]
        lines.append(f"{local_time(n.time, n.timezone)[:19]}  {word:<21} {n.priority.value:<9} {n.alarm} — "
                     f"{value_vs_limit(n)} — {n.citation or '(none cited)'}")
    unacked = sorted({n.alarm for n in m.notices if n.state in _NEEDS_ACK})
    lines += ["", "Alarms left unacknowledged by these events:" if unacked else "Nothing here awaits "
              "acknowledgement.", *(f"  pretreat alarms ack {a} --user YOUR-NAME --note \"...\"" for a in unacked),
              "", "`pretreat alarms list --state unacked` shows the current state of every alarm.",
              f"Journal records {first.seq}–{last.seq}.", "-- ", "pretreat-monitor"]
    return "\n".join(lines) + "\n"


def build(config: NotifierConfig, context: NotifierContext) -> EmailNotifier:
    assert isinstance(config.settings, EmailNotify)
    return EmailNotifier(id=config.id, settings=config.settings)
