"""What a notifier is given and what it answers: the seam between the dispatcher and each channel.

A `Notice` is one committed alarm transition (`alarms.model.Transition`, with its journal ``seq``) addressed
to one recipient of one channel, with the context a person needs to act on it (site name, unit, since when).
It is what the dispatcher stores in a channel's durable outbox, as JSON (`Notice.to_json`), so it must be
self-contained: a restarted daemon delivers it from the outbox alone.

A `Message` is what a channel sends: one notice, or a flood summary of several notices for one recipient
(`grouped`). A notifier answers every `deliver` call with a `Delivery`: how many messages at the head of the
batch the channel confirmed (MQTT PUBACK, SMTP 250, HTTP 2xx) and, if it stopped short, why and whether the
next message was refused for good (quarantined, never retried) or the channel is merely unavailable (kept
and retried with backoff). A notifier never raises for a channel problem.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from alarms.model import AlarmState, Kind, Priority, Refusal, State, Transition

NOTICE_VERSION = 1

# What the dispatcher says a transition means, in words an operator reads at 3 a.m.
KIND_WORDS: dict[Kind, str] = {
    Kind.RAISE: "ALARM", Kind.REALARM: "REMINDER (still unacknowledged)", Kind.ESCALATE: "ESCALATED",
    Kind.CLEAR: "CLEARED (condition gone)", Kind.LATCH: "CONDITION GONE (latched: reset required)",
    Kind.ACK: "ACKNOWLEDGED", Kind.RESET: "RESET", Kind.SHELVE: "SHELVED", Kind.UNSHELVE: "UNSHELVED",
    Kind.SHELVE_EXPIRED: "SHELVE EXPIRED", Kind.OUT_OF_SERVICE: "OUT OF SERVICE",
    Kind.IN_SERVICE: "BACK IN SERVICE",
}


@dataclass(frozen=True, slots=True)
class Notice:
    """One transition for one recipient. Times are epoch seconds UTC; ``since`` is when the alarm's current
    activation was raised (None when the dispatcher has not seen that raise, e.g. before a restart).
    ``target`` is an e-mail address, or ``"*"`` when the channel itself is the recipient."""

    seq: int
    alarm: str
    kind: Kind
    from_state: State
    state: State
    priority: Priority
    time: float
    who: str
    why: str
    value: float | None
    limit: float | None
    citation: str
    level: int
    target: str = "*"
    unit: str = ""
    since: float | None = None
    site_name: str = ""
    timezone: str = "UTC"
    routes: tuple[str, ...] = ()

    @property
    def site(self) -> str:
        return self.alarm.split("/")[0]

    @property
    def channel(self) -> str:
        return self.alarm.split("/")[1]

    @property
    def rule(self) -> str:
        return self.alarm.split("/")[2]

    @classmethod
    def of(cls, t: Transition, *, target: str = "*", unit: str = "", since: float | None = None,
           site_name: str = "", timezone: str = "UTC", routes: Iterable[str] = ()) -> Notice:
        if t.seq is None:
            raise ValueError(f"transition of {t.alarm_id} has no journal seq: only committed transitions are "
                             "delivered")
        return cls(seq=t.seq, alarm=t.alarm_id, kind=t.kind, from_state=t.from_state, state=t.to_state,
                   priority=t.priority, time=t.time, who=t.who, why=t.why, value=t.value, limit=t.limit,
                   citation=t.citation, level=t.level, target=target, unit=unit, since=since,
                   site_name=site_name, timezone=timezone, routes=tuple(routes))

    def payload(self) -> dict[str, Any]:
        """The documented public JSON of a notice (MQTT event stream, webhook body): see alarms.notifiers.mqtt."""
        return {
            "seq": self.seq, "alarm": self.alarm, "site": self.site, "site_name": self.site_name or self.site,
            "channel": self.channel, "rule": self.rule, "kind": self.kind.value, "from": self.from_state.value,
            "state": self.state.value, "priority": self.priority.value, "value": self.value,
            "unit": self.unit, "limit": self.limit, "citation": self.citation, "time": self.time,
            "time_utc": iso_utc(self.time), "since": self.since,
            "since_utc": iso_utc(self.since) if self.since is not None else None, "level": self.level,
            "who": self.who, "why": self.why,
        }

    def to_json(self) -> bytes:
        """The outbox form: the public payload plus routing fields, versioned."""
        body = {**self.payload(), "v": NOTICE_VERSION, "target": self.target, "routes": list(self.routes),
                "timezone": self.timezone}
        return json.dumps(body, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Notice:
        """Parse an outbox record; ValueError/KeyError/TypeError on anything malformed (it is quarantined)."""
        d = json.loads(data)
        if d.get("v") != NOTICE_VERSION:
            raise ValueError(f"notice version {d.get('v')!r}, expected {NOTICE_VERSION}")
        return cls(seq=int(d["seq"]), alarm=str(d["alarm"]), kind=Kind(d["kind"]), from_state=State(d["from"]),
                   state=State(d["state"]), priority=Priority(d["priority"]), time=float(d["time"]),
                   who=str(d["who"]), why=str(d["why"]), value=_num(d["value"]), limit=_num(d["limit"]),
                   citation=str(d["citation"]), level=int(d["level"]), target=str(d["target"]),
                   unit=str(d["unit"]), since=_num(d["since"]), site_name=str(d["site_name"]),
                   timezone=str(d["timezone"]), routes=tuple(str(r) for r in d["routes"]))

    def headline(self) -> str:
        """One line: ``ALARM [high] acme-plating ph ph_high: 11.2 pH (limit 10.5 pH)``."""
        return (f"{KIND_WORDS.get(self.kind, self.kind.value.upper())} [{self.priority.value}] {self.site} "
                f"{self.channel} {self.rule}: {value_vs_limit(self)}")


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"not a finite number: {v!r}")
    return f


NO_INSTRUMENT_RULES = frozenset({"obligation_overdue"})  # config.obligations.OBLIGATION_OVERDUE: no reading


def value_vs_limit(n: Notice) -> str:
    """The reading against its limit; for an alarm about no instrument (an overdue obligation) its text, which
    names what is overdue, its due time and citation, rather than "no reading"."""
    if n.rule in NO_INSTRUMENT_RULES and n.value is None:
        return n.citation or "(no text)"
    unit = f" {n.unit}" if n.unit else ""
    value = "no reading" if n.value is None else f"{n.value:g}{unit}"
    if n.limit is None:
        return value
    from config.rule_catalogue import counted_limit  # imported here: the notifiers start without the catalogue

    counted = counted_limit(n.rule, n.limit)  # a tamper sign's count, not a limit in the channel's unit
    return f"{value} (after {counted})" if counted is not None else f"{value} (limit {n.limit:g}{unit})"


def iso_utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def local_time(t: float, timezone: str) -> str:
    """``2026-11-30 14:03:12 EST`` in the site's zone (an unknown zone falls back to UTC)."""
    try:
        tz: dt.tzinfo = ZoneInfo(timezone)
    except (KeyError, ValueError):  # ZoneInfoNotFoundError is a KeyError
        tz = dt.UTC
    return dt.datetime.fromtimestamp(t, tz).strftime("%Y-%m-%d %H:%M:%S %Z")


@dataclass(frozen=True, slots=True)
class Message:
    """What one channel sends to one recipient: a single notice, or a flood summary (``grouped``)."""

    target: str
    notices: tuple[Notice, ...]
    grouped: bool = False

    @property
    def key(self) -> str:
        """Stable across retries and restarts (receivers can de-duplicate on it)."""
        seqs = [n.seq for n in self.notices]
        tail = f"-{seqs[-1]}x{len(seqs)}" if len(seqs) > 1 else ""
        return f"{seqs[0]}{tail}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of `Notifier.deliver`: the first ``delivered`` messages were confirmed by the channel.
    If that is fewer than were given, ``error`` says why the next was not, and ``permanent`` whether it was
    refused for good (quarantine it) rather than the channel being unavailable (retry it later)."""

    delivered: int
    error: str = ""
    permanent: bool = False


# on_command(alarm_id, action, user, note): carry out an operator command received from a channel (the MQTT
# command topic); returns what AlarmEngine.act returns (transitions or a Refusal), possibly awaitable.
CommandResult = Sequence[Transition] | Refusal | None
CommandHandler = Callable[[str, str, str, str], CommandResult | Awaitable[CommandResult]]


@dataclass(frozen=True, slots=True)
class NotifierContext:
    """What the daemon offers notifiers besides their settings.

    ``on_command``: operator commands (MQTT acknowledgements) go there; None refuses them all.
    ``known_alarms``: alarm ids that exist (a command for another id is refused before reaching the engine).
    ``alarm_states``: a snapshot of every alarm, published as retained state when the MQTT link comes up.
    ``units``/``site_names``/``timezones`` describe alarms in messages.
    """

    on_command: CommandHandler | None = None
    known_alarms: frozenset[str] | None = None
    alarm_states: Callable[[], Iterable[AlarmState]] | None = None
    units: dict[tuple[str, str], str] = field(default_factory=dict)
    site_names: dict[str, str] = field(default_factory=dict)
    timezones: dict[str, str] = field(default_factory=dict)


class Notifier(Protocol):
    """One notification channel. ``group_floods``: the dispatcher folds flood bursts into summaries for
    it (not for a machine feed like MQTT, where SCADA needs every event). ``max_batch``: messages per
    `deliver` call (a pipelining channel takes many). ``ready``: set while the channel is known to be up
    (None if it cannot know without trying): the dispatcher retries at once when it is set."""

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def group_floods(self) -> bool: ...

    @property
    def max_batch(self) -> int: ...

    @property
    def ready(self) -> asyncio.Event | None: ...

    async def start(self) -> None:
        """Begin (connect in the background); must not fail because the far end is down."""

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        """Send ``messages`` in order and report how many were confirmed; never raises for channel trouble."""

    async def close(self) -> None:
        """Stop; idempotent."""

    def health(self) -> dict[str, Any]:
        """Counters and state for the daemon's health snapshot (no secrets)."""
