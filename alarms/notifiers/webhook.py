"""The ``webhook`` channel: each notification as one HTTP POST of JSON.

Body of a single notification (``Content-Type: application/json``)::

    {"type": "alarm", "seq": 1234, "alarm": "acme-plating/ph/ph_high", "site": "acme-plating",
     "site_name": "...", "channel": "ph", "rule": "ph_high", "kind": "raise", "from": "normal",
     "state": "active-unacknowledged", "priority": "high", "value": 11.2, "unit": "pH", "limit": 10.5,
     "citation": "...", "time": 1764529392.0, "time_utc": "2026-11-30T19:03:12Z", "since": ..., "since_utc": ...,
     "level": 1, "who": "system", "why": "...", "routes": ["industry"]}

and of a flood summary::

    {"type": "summary", "count": 14, "text": "14 alarm notifications grouped: ...", "notices": [{...}, ...]}

Headers: ``Idempotency-Key`` (the notice seq, or ``first-lastxN`` for a summary; stable across retries and
restarts, so a receiver can drop a repeat), ``User-Agent: pretreat-monitor``, the configured ``headers``,
and ``Authorization: Bearer <token>`` when ``token_file`` is set (read once at start, never logged).

Outcomes: 2xx delivered. 408, 429, 5xx, a timeout, or a connection or TLS error: the receiver is unavailable
and the dispatcher retries with backoff. Any other status (4xx, or a redirect, which is not followed for a
POST): refused for good, the notification is quarantined with the status and the start of the reply.
urllib in a worker thread: one request at a time per webhook, which is all an alarm rate needs.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from alarms.notifiers.base import Delivery, Message, NotifierContext, value_vs_limit
from config.notify import NotifierConfig, WebhookNotify

_RETRY_STATUS = frozenset({408, 425, 429})
_REPLY_EXCERPT = 200  # characters of a refusing reply kept in the quarantine reason


class WebhookNotifier:
    kind = "webhook"
    group_floods = True
    max_batch = 1
    ready = None

    def __init__(self, *, id: str, settings: WebhookNotify) -> None:
        self.id = id
        self.settings = settings
        self._headers: dict[str, str] = {}
        self._opener: urllib.request.OpenerDirector | None = None
        self.counters = {"requests": 0, "delivered": 0, "failed": 0, "refused": 0}
        self.last_status: int | None = None

    async def start(self) -> None:
        """Read the token and build the HTTP opener; an unreadable token file stops the daemon's start."""
        s = self.settings
        headers = {"Content-Type": "application/json", "User-Agent": "pretreat-monitor", **dict(s.headers)}
        if s.token_file is not None:
            try:
                token = s.token_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"webhook {self.id}: cannot read token_file {s.token_file} ({exc})") from None
            headers["Authorization"] = f"Bearer {token}"
        self._headers = headers
        context = ssl.create_default_context(cafile=str(s.ca_file) if s.ca_file else None)
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                                   _NoRedirect())

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        for i, m in enumerate(messages):
            ok, error, permanent = await asyncio.to_thread(self._post, m)
            if not ok:
                return Delivery(i, error, permanent)
        return Delivery(len(messages))

    def _post(self, m: Message) -> tuple[bool, str, bool]:
        """One POST (in a worker thread): (delivered, why not, refused for good)."""
        assert self._opener is not None, "start() first"
        body = json.dumps(body_of(m), separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
        req = urllib.request.Request(self.settings.url, data=body, method="POST",
                                     headers={**self._headers, "Idempotency-Key": m.key})
        self.counters["requests"] += 1
        try:
            with self._opener.open(req, timeout=self.settings.timeout) as reply:
                self.last_status = reply.status
                reply.read()
        except urllib.error.HTTPError as exc:
            self.last_status = exc.code
            excerpt = _excerpt(exc)
            if exc.code in _RETRY_STATUS or exc.code >= 500:
                self.counters["failed"] += 1
                return False, f"HTTP {exc.code} {exc.reason}", False
            self.counters["refused"] += 1
            return False, f"HTTP {exc.code} {exc.reason}: {excerpt}".rstrip(": "), True
        except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, reset, timeout, TLS
            self.counters["failed"] += 1
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return False, f"POST to the webhook failed: {reason}", False
        self.counters["delivered"] += 1
        return True, "", False

    async def close(self) -> None:
        return None

    def health(self) -> dict[str, Any]:
        return {**self.counters, "last_status": self.last_status}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error for a webhook (the URL is wrong); urllib would otherwise turn a 301/302 POST
    into a GET that drops the body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(_REPLY_EXCERPT * 4).decode("utf-8", "replace")
    except OSError:
        return ""
    return " ".join(text.split())[:_REPLY_EXCERPT]


def body_of(m: Message) -> dict[str, Any]:
    """The JSON body posted for a message (see the module docstring)."""
    if not m.grouped:
        n = m.notices[0]
        return {"type": "alarm", **n.payload(), "routes": list(n.routes)}
    lines = [f"{n.kind.value} {n.alarm} [{n.priority.value}] {value_vs_limit(n)}" for n in m.notices]
    return {"type": "summary", "count": len(m.notices),
            "text": f"{len(m.notices)} alarm notifications grouped (flood): " + "; ".join(lines),
            "notices": [n.payload() for n in m.notices]}


def build(config: NotifierConfig, context: NotifierContext) -> WebhookNotifier:
    assert isinstance(config.settings, WebhookNotify)
    return WebhookNotifier(id=config.id, settings=config.settings)
