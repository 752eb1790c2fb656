"""The ``[notify]`` table of a site file: the notification channels alarms are delivered through.

```toml
[notify]
state_dir = "var/notify"     # one durable outbox per channel; default: "<historian stem>.notify/" beside it
queue_budget_mb = 64         # per channel; past it the oldest queued notifications are dropped and counted
max_backoff = 60.0           # s: cap of the jittered retry delay while a channel is down

[notify.flood]               # ISA-18.2 flood: ≥ threshold notifications to one recipient within window
threshold = 10
window = 600.0               # s
hold = 60.0                  # s a flood summary waits to collect the rest of the burst
exempt = ["critical"]        # priorities never folded into a summary

[[notify.channel]]           # the plant's SCADA: every transition, retained state, QoS 1 event stream
id = "plant-scada"
kind = "mqtt"
host = "127.0.0.1"
port = 1883
client_id = "pretreat-alarms"
topic_prefix = "pretreat"
qos = 1
username = ""
password_file = ""           # read at start, never logged

[[notify.channel]]
id = "smtp"
kind = "email"
host = "smtp.example.org"
port = 587
starttls = true              # STARTTLS on a plain connection (587); ssl = true for implicit TLS (465)
username = "alarms@example.org"
password_file = "/etc/pretreat/smtp.password"
from = "Pretreatment alarms <alarms@example.org>"
ca_file = ""                 # extra CA bundle (a private CA); the system store otherwise

[[notify.channel]]
id = "acme-webhook"
kind = "webhook"
url = "https://hooks.acme.example/pretreat"
headers = { "X-Source" = "pretreat-monitor" }
token_file = ""              # if set: "Authorization: Bearer <token>"
timeout = 10.0

[[notify.channel]]
id = "daemon-log"
kind = "log"                 # the daemon's own log (journald): every transition
```

``every_transition`` (default true for ``mqtt`` and ``log``, false otherwise) gives a channel every transition
of every site; other channels get only what the sites' ``[[site.route]]`` entries send them
(`config.alarms`). Relative paths are resolved against the site file's folder. Secrets (passwords, tokens)
are never read here: the notifiers read their files when they start, so no configuration dump carries them;
the loader only checks that the files are readable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from alarms.model import Priority
from config.errors import MISSING
from config.reader import Reader

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ID_EXPECTED = "an id of letters, digits, '_', '-' or '.' (at most 64 characters)"
_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_TOPIC_PREFIX = re.compile(r"^[^#+\x00\s]+$")
_ADDRESS = re.compile(r"[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+")


class NotifierKind(StrEnum):
    MQTT = "mqtt"
    EMAIL = "email"
    WEBHOOK = "webhook"
    LOG = "log"


@dataclass(frozen=True, slots=True)
class MqttNotify:
    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str = "pretreat-alarms"
    topic_prefix: str = "pretreat"
    qos: int = 1  # events and retained states; the command subscription uses it too
    username: str = ""
    password_file: Path | None = None
    keepalive: int = 30  # s


@dataclass(frozen=True, slots=True)
class EmailNotify:
    host: str
    sender: str  # the From: header (``from`` in the file)
    port: int = 587
    starttls: bool = True
    ssl: bool = False  # implicit TLS (port 465); excludes starttls
    username: str = ""
    password_file: Path | None = None
    ca_file: Path | None = None
    timeout: float = 30.0  # s per SMTP conversation


@dataclass(frozen=True, slots=True)
class WebhookNotify:
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    token_file: Path | None = None
    ca_file: Path | None = None
    timeout: float = 10.0  # s per request


@dataclass(frozen=True, slots=True)
class LogNotify:
    pass


NotifySettings = MqttNotify | EmailNotify | WebhookNotify | LogNotify


@dataclass(frozen=True, slots=True)
class NotifierConfig:
    """One ``[[notify.channel]]``: its id (routes name it), kind, kind-specific settings."""

    id: str
    kind: NotifierKind
    settings: NotifySettings
    every_transition: bool = False


@dataclass(frozen=True, slots=True)
class FloodSettings:
    """Flood grouping per recipient (ISA-18.2: ≥ 10 alarms in 10 minutes per operator is a flood).

    A notification to a recipient who already had ``threshold`` or more notifications within the last
    ``window`` seconds is not sent alone: it waits up to ``hold`` seconds for the rest of the burst and goes
    out in one summary. Priorities in ``exempt`` are always sent alone. ``threshold = 0`` turns grouping off.
    """

    threshold: int = 10
    window: float = 600.0
    hold: float = 60.0
    exempt: frozenset[Priority] = frozenset({Priority.CRITICAL})
    max_group: int = 200  # a summary never lists more notifications than this (the rest follow)


@dataclass(frozen=True, slots=True)
class NotifySection:
    channels: tuple[NotifierConfig, ...]
    state_dir: Path
    flood: FloodSettings = field(default_factory=FloodSettings)
    queue_budget_mb: float = 64.0
    max_backoff: float = 60.0

    @property
    def budget_bytes(self) -> int:
        return max(1, int(self.queue_budget_mb * 1024 * 1024))

    def channel(self, channel_id: str) -> NotifierConfig:
        for c in self.channels:
            if c.id == channel_id:
                return c
        raise KeyError(channel_id)


_SECTION_KEYS = {"state_dir", "queue_budget_mb", "max_backoff", "flood", "channel"}
_FLOOD_KEYS = {"threshold", "window", "hold", "exempt", "max_group"}
_COMMON_KEYS = {"id", "kind", "every_transition", "description"}
_KIND_KEYS = {
    NotifierKind.MQTT: {"host", "port", "client_id", "topic_prefix", "qos", "username", "password_file",
                        "keepalive"},
    NotifierKind.EMAIL: {"host", "port", "starttls", "ssl", "username", "password_file", "from", "ca_file",
                         "timeout"},
    NotifierKind.WEBHOOK: {"url", "headers", "token_file", "ca_file", "timeout"},
    NotifierKind.LOG: set(),
}


def default_state_dir(historian: Path) -> Path:
    """Beside the historian: ``pretreat.sqlite`` → ``pretreat.notify/``."""
    return historian.with_name(f"{historian.stem}.notify")


def parse_notify(doc: dict[str, Any], reader: Reader, base: Path, *,
                 historian: Path | None = None) -> NotifySection | None:
    """Parse the top-level ``[notify]`` table (``doc`` is the whole TOML document); None when absent."""
    if "notify" not in doc:
        return None
    t = reader.table(doc, "notify", "")
    p = "notify"
    reader.unknown_keys(t, p, _SECTION_KEYS)
    state = reader.text(t, "state_dir", p, default="")
    channels: list[NotifierConfig] = []
    seen: set[str] = set()
    for i, raw in enumerate(reader.tables(t, "channel", p)):
        reader.name(f"{p}.channel[{i}]", raw)
        ch = _channel(raw, f"{p}.channel[{i}]", reader, base)
        if ch is None:
            continue
        if ch.id in seen:
            reader.error(f"{p}.channel[{i}].id", ch.id, "a channel id not already used")
            continue
        seen.add(ch.id)
        channels.append(ch)
    return NotifySection(
        channels=tuple(channels),
        state_dir=_path(state, base) if state else default_state_dir(historian or base / "var/pretreat.sqlite"),
        flood=_flood(reader.table(t, "flood", p), f"{p}.flood", reader),
        queue_budget_mb=reader.number(t, "queue_budget_mb", p, default=64.0, minimum=1.0),
        max_backoff=reader.number(t, "max_backoff", p, default=60.0, minimum=0.1, maximum=3600),
    )


def _flood(t: dict[str, Any], p: str, reader: Reader) -> FloodSettings:
    reader.unknown_keys(t, p, _FLOOD_KEYS)
    exempt_raw = t.get("exempt", ["critical"])
    exempt: set[Priority] = set()
    if not isinstance(exempt_raw, list):
        reader.error(f"{p}.exempt", exempt_raw, f"a list of priorities {[x.value for x in Priority]}")
        exempt_raw = []
    for v in exempt_raw:
        try:
            exempt.add(Priority(v))
        except ValueError:
            reader.error(f"{p}.exempt", v, f"one of {[x.value for x in Priority]}")
    return FloodSettings(
        threshold=reader.integer(t, "threshold", p, default=10, minimum=0, maximum=10_000),
        window=reader.number(t, "window", p, default=600.0, minimum=1.0, maximum=86400),
        hold=reader.number(t, "hold", p, default=60.0, minimum=0.0, maximum=3600),
        exempt=frozenset(exempt),
        max_group=reader.integer(t, "max_group", p, default=200, minimum=2, maximum=10_000),
    )


def _channel(raw: dict[str, Any], p: str, reader: Reader, base: Path) -> NotifierConfig | None:
    cid = reader.text(raw, "id", p, check=lambda v: _ID.match(v) is not None, expected=_ID_EXPECTED)
    if raw.get("kind") not in {k.value for k in NotifierKind}:
        reader.error(f"{p}.kind", raw.get("kind", MISSING), f"one of {[k.value for k in NotifierKind]}")
        return None
    kind = NotifierKind(raw["kind"])
    reader.unknown_keys(raw, p, _COMMON_KEYS | _KIND_KEYS[kind])
    every = raw.get("every_transition", kind in (NotifierKind.MQTT, NotifierKind.LOG))
    if not isinstance(every, bool):
        reader.error(f"{p}.every_transition", every, "true or false")
        every = False
    if every and kind is NotifierKind.EMAIL:
        reader.error(f"{p}.every_transition", every, "false for email (routes name the recipients)")
    settings: NotifySettings
    if kind is NotifierKind.MQTT:
        settings = _mqtt(raw, p, reader, base)
    elif kind is NotifierKind.EMAIL:
        settings = _email(raw, p, reader, base)
    elif kind is NotifierKind.WEBHOOK:
        settings = _webhook(raw, p, reader, base)
    else:
        settings = LogNotify()
    return NotifierConfig(id=cid, kind=kind, settings=settings, every_transition=every)


def _mqtt(raw: dict[str, Any], p: str, reader: Reader, base: Path) -> MqttNotify:
    username = reader.text(raw, "username", p, default="")
    password = _secret_file(raw, "password_file", p, reader, base)
    if password is not None and not username:
        reader.error(f"{p}.password_file", str(password), "a username too (MQTT 3.1.1 sends a password only "
                     "with a user name)")
    return MqttNotify(
        host=reader.text(raw, "host", p, default="127.0.0.1", check=bool, expected="a host name or address"),
        port=reader.integer(raw, "port", p, default=1883, minimum=1, maximum=65535),
        client_id=reader.text(raw, "client_id", p, default="pretreat-alarms",
                             check=lambda v: 0 < len(v) <= 128, expected="a client id (1-128 characters)"),
        topic_prefix=reader.text(raw, "topic_prefix", p, default="pretreat",
                                check=lambda v: _TOPIC_PREFIX.match(v) is not None and not v.endswith("/"),
                                expected="a topic prefix without wildcards, spaces or a trailing '/'"),
        qos=reader.integer(raw, "qos", p, default=1, minimum=1, maximum=1),
        username=username, password_file=password,
        keepalive=reader.integer(raw, "keepalive", p, default=30, minimum=5, maximum=3600),
    )


def _email(raw: dict[str, Any], p: str, reader: Reader, base: Path) -> EmailNotify:
    ssl = _bool(raw, "ssl", p, reader, default=False)
    starttls = _bool(raw, "starttls", p, reader, default=not ssl)
    if ssl and starttls:
        reader.error(f"{p}.starttls", starttls, "false when ssl = true (implicit TLS)")
    username = reader.text(raw, "username", p, default="")
    password = _secret_file(raw, "password_file", p, reader, base)
    if password is not None and not username:
        reader.error(f"{p}.password_file", str(password), "a username too")
    if username and not (ssl or starttls):
        reader.error(f"{p}.starttls", starttls, "true (or ssl = true): a password is never sent in clear")
    return EmailNotify(
        host=reader.text(raw, "host", p, check=bool, expected="the SMTP server's host name"),
        sender=reader.text(raw, "from", p, check=lambda v: _ADDRESS.search(v) is not None and "\n" not in v,
                          expected="a From: address, e.g. 'Alarms <alarms@example.org>'"),
        port=reader.integer(raw, "port", p, default=465 if ssl else 587, minimum=1, maximum=65535),
        starttls=starttls, ssl=ssl, username=username, password_file=password,
        ca_file=_secret_file(raw, "ca_file", p, reader, base),
        timeout=reader.number(raw, "timeout", p, default=30.0, minimum=0.1, maximum=600),
    )


def _webhook(raw: dict[str, Any], p: str, reader: Reader, base: Path) -> WebhookNotify:
    headers_raw = reader.table(raw, "headers", p)
    headers: list[tuple[str, str]] = []
    for k, v in headers_raw.items():
        if not isinstance(v, str) or not re.match(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", k) or "\n" in v:
            reader.error(f"{p}.headers.{k}", v, "a header name and a one-line string value")
            continue
        headers.append((k, v))
    return WebhookNotify(
        url=reader.text(raw, "url", p, check=lambda v: _URL.match(v) is not None,
                       expected="an http:// or https:// URL"),
        headers=tuple(headers), token_file=_secret_file(raw, "token_file", p, reader, base),
        ca_file=_secret_file(raw, "ca_file", p, reader, base),
        timeout=reader.number(raw, "timeout", p, default=10.0, minimum=0.1, maximum=300),
    )


def _secret_file(raw: dict[str, Any], key: str, p: str, reader: Reader, base: Path) -> Path | None:
    value = reader.text(raw, key, p, default="")
    if not value:
        return None
    path = _path(value, base)
    if not os.access(path, os.R_OK):
        reader.error(f"{p}.{key}", value, "a readable file")
    return path


def _path(value: str, base: Path) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base / path


def _bool(t: dict[str, Any], key: str, p: str, reader: Reader, *, default: bool) -> bool:
    value = t.get(key, default)
    if not isinstance(value, bool):
        reader.error(f"{p}.{key}", value, "true or false")
        return default
    return value


def is_address(value: str) -> bool:
    """A plain e-mail address (``user@example.org``), as routes list recipients."""
    return _ADDRESS.fullmatch(value) is not None
