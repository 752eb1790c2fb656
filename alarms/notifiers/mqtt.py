"""The ``mqtt`` channel: alarms to the plant's SCADA over MQTT, and acknowledgements back from it.

Topic layout (``<prefix>`` is ``topic_prefix``, default ``pretreat``; use one prefix per daemon):

``<prefix>/status``
    retained, ``online`` while the daemon is connected, ``offline`` otherwise (the last will covers a crash
    or a lost link; a clean stop publishes it itself).
``<prefix>/events``
    QoS 1, not retained: one JSON object per alarm transition, every transition of every alarm, in journal
    order (``seq`` increases; a repeat after a lost PUBACK carries the same ``seq``, so drop ``seq`` ≤ the
    last one seen)::

        {"seq": 1234, "alarm": "acme-plating/ph/ph_high", "site": "acme-plating", "site_name": "ACME …",
         "channel": "ph", "rule": "ph_high", "kind": "raise", "from": "normal",
         "state": "active-unacknowledged", "priority": "high", "value": 11.2, "unit": "pH", "limit": 10.5,
         "citation": "…", "time": 1764529392.0, "time_utc": "2026-11-30T19:03:12Z",
         "since": 1764529392.0, "since_utc": "…", "level": 1, "who": "system", "why": "…"}

    ``kind`` is one of raise, clear, latch, ack, reset, shelve, unshelve, shelve-expired, out-of-service,
    in-service, realarm, escalate; ``state`` one of the ISA-18.2 states of `alarms.model.State`; times are
    epoch seconds UTC (``since``: when the current activation was raised, null if unknown).
``<prefix>/alarm/<site>/<channel>/<rule>/state``
    retained, QoS 1: the alarm's current state, the same fields as an event without ``from``/``who``/``why``
    and with ``changed`` (time of the last transition). When the link comes up, every configured alarm's
    state is published (``"snapshot": true``, ``seq`` null), so SCADA has a state for every alarm.
``<prefix>/command/ack``
    subscribed: SCADA acknowledges an alarm by publishing (not retained) ``{"alarm": "site/channel/rule",
    "user": "operator name", "note": "optional", "id": "optional correlation id"}``. The broker's ACL decides
    who may publish here; the daemon validates the payload (UTF-8 JSON object of at most 4 KiB, exactly those
    keys, a configured alarm, a user name other than ``system``), refuses anything else with a logged reason,
    and hands a valid command to the daemon, which journals the acknowledging user.
``<prefix>/command/result``
    QoS 1, not retained: the answer to each command: ``{"id", "alarm", "action": "ack", "user", "ok": bool,
    "reason": "…"}`` (``reason``: why it was refused, or what was done).

Delivery: no flood grouping (SCADA needs every event). A notice is confirmed when the broker has PUBACKed both
its event and its retained state; many are pipelined per batch, and only the confirmed head of a batch is
removed from the outbox, so order holds across reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Any

import paho.mqtt.client as mqtt

from alarms.model import SYSTEM, AlarmKey, AlarmState, Refusal
from alarms.notifiers.base import CommandResult, Delivery, Message, Notice, NotifierContext, iso_utc
from alarms.notifiers.mqtt_link import LinkDown, MqttLink
from config.notify import MqttNotify, NotifierConfig
from drivers.backoff import Backoff

log = logging.getLogger(__name__)

READY_WAIT = 2.0  # s a delivery waits for the link before reporting the broker unavailable
CONFIRM_TIMEOUT = 10.0  # s to wait for the PUBACKs of one batch before calling the link unusable
MAX_COMMAND_BYTES = 4096
_COMMAND_KEYS = frozenset({"alarm", "user", "note", "id"})


class MqttNotifier:
    kind = "mqtt"
    group_floods = False
    max_batch = 200

    def __init__(self, *, id: str, settings: MqttNotify, context: NotifierContext | None = None,
                 backoff: Backoff | None = None) -> None:
        self.id = id
        self.settings = settings
        self.context = context or NotifierContext()
        p = settings.topic_prefix
        self.status_topic, self.events_topic = f"{p}/status", f"{p}/events"
        self.command_topic, self.result_topic = f"{p}/command/ack", f"{p}/command/result"
        self._backoff = backoff
        self._link: MqttLink | None = None
        self._task: asyncio.Task[None] | None = None
        self._replies: set[asyncio.Task[None]] = set()
        self._journal_head: bytes | None = None  # the last head given, re-published on every connect
        self.ready: asyncio.Event = asyncio.Event()  # replaced by the link's in start()
        self.counters = {"notices": 0, "commands": 0, "commands_ok": 0, "commands_refused": 0, "snapshots": 0}

    def state_topic(self, alarm: str) -> str:
        return f"{self.settings.topic_prefix}/alarm/{alarm}/state"

    async def start(self) -> None:
        password = ""
        if self.settings.password_file is not None:
            try:
                password = self.settings.password_file.read_text(encoding="utf-8").rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"mqtt {self.id}: cannot read password_file {self.settings.password_file} "
                                 f"({exc})") from None
        self._link = MqttLink(name=self.id, settings=self.settings, password=password,
                              status_topic=self.status_topic, subscriptions=[self.command_topic],
                              on_up=self._snapshot, on_message=self._on_message, backoff=self._backoff)
        self.ready = self._link.ready
        self._task = asyncio.create_task(self._link.run(), name=f"mqtt-link:{self.id}")

    async def close(self) -> None:
        if self._link is not None:
            await self._link.close()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for t in list(self._replies):
            t.cancel()
        await asyncio.gather(*self._replies, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        link = self._link.counters if self._link is not None else {}
        return {**self.counters, **link, "connected": self.ready.is_set()}

    # ---- delivery ----------------------------------------------------------------------------------------

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        link = self._link
        if link is None:
            return Delivery(0, "not started")
        if not link.ready.is_set():  # e.g. just started: give the first connection a moment before failing
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(READY_WAIT):
                    await link.ready.wait()
        if not link.ready.is_set():
            return Delivery(0, f"broker {self.settings.host}:{self.settings.port} unavailable")
        waits: list[list[asyncio.Future[None]]] = []
        for m in messages:
            futs: list[asyncio.Future[None]] = []
            for n in m.notices:
                for topic, body, retain in ((self.events_topic, _dumps(n.payload()), False),
                                            (self.state_topic(n.alarm), _dumps(state_of_notice(n)), True)):
                    f = link.publish(topic, body, retain=retain)
                    if f is None:
                        break
                    futs.append(f)
                else:
                    continue
                futs = []  # the link went down while publishing: this message is not confirmed
                break
            if not futs:
                break
            waits.append(futs)
        done = 0
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT):
                for futs in waits:
                    for f in futs:
                        await f
                    done += 1
        except LinkDown as exc:
            return Delivery(done, f"link lost before the broker confirmed: {exc}")
        except TimeoutError:
            return Delivery(done, f"no PUBACK within {CONFIRM_TIMEOUT:g} s")
        self.counters["notices"] += sum(len(m.notices) for m in messages[:done])
        if done < len(messages):
            return Delivery(done, "link lost while publishing")
        return Delivery(done)

    def publish_journal_head(self, head: bytes | None = None) -> bool:
        """Retain the journal's chain head (an anchor, see `monitor.stores.seals`) on ``<prefix>/journal/head``
        where the daemon cannot rewrite history: a later head replaces it, but a subscriber logging the topic
        (or the broker's persistence) keeps every one. Re-published on every connect. False if the link is
        down (it goes out on the next connect)."""
        if head is not None:
            self._journal_head = head
        if self._journal_head is None or self._link is None:
            return False
        return self._link.publish(f"{self.settings.topic_prefix}/journal/head", self._journal_head,
                                  retain=True) is not None

    def _snapshot(self) -> None:
        """On every connect: the retained state of every alarm the daemon knows (if it offered them)."""
        self.publish_journal_head()
        if self.context.alarm_states is None or self._link is None:
            return
        for st in self.context.alarm_states():
            self._link.publish(self.state_topic(st.id), _dumps(self.state_of_alarm(st)), retain=True)
            self.counters["snapshots"] += 1

    def state_of_alarm(self, st: AlarmState) -> dict[str, Any]:
        k = st.key
        since = st.unacked_since if st.phase.unacknowledged else None
        return {"alarm": st.id, "site": k.site, "site_name": self.context.site_names.get(k.site, k.site),
                "channel": k.channel, "rule": k.rule, "state": st.state.value,
                "priority": st.settings.priority.value, "value": st.value,
                "unit": self.context.units.get((k.site, k.channel), ""), "limit": st.limit,
                "citation": st.citation, "changed": st.changed,
                "changed_utc": iso_utc(st.changed) if st.changed is not None else None, "since": since,
                "since_utc": iso_utc(since) if since is not None else None, "level": st.level, "kind": None,
                "seq": None, "snapshot": True}

    # ---- commands ----------------------------------------------------------------------------------------

    def _on_message(self, msg: mqtt.MQTTMessage) -> None:
        if msg.topic != self.command_topic:
            return
        self.counters["commands"] += 1
        parsed = parse_command(bytes(msg.payload), retained=bool(msg.retain),
                               known=self.context.known_alarms)
        if isinstance(parsed, str):
            self._reply({}, ok=False, reason=parsed)
            return
        handler = self.context.on_command
        if handler is None:
            self._reply(parsed, ok=False, reason="this daemon accepts no commands (no handler configured)")
            return
        try:
            result = handler(parsed["alarm"], "ack", parsed["user"], parsed["note"])
        except Exception as exc:  # the daemon's handler failed: answer, log, keep the link
            log.exception("alarm MQTT %s: command handler failed", self.id)
            self._reply(parsed, ok=False, reason=f"internal error: {exc!r}")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(parsed, result))
            self._replies.add(task)
            task.add_done_callback(self._replies.discard)
        else:
            self._answer(parsed, result)

    async def _finish(self, cmd: dict[str, Any], pending: Any) -> None:
        try:
            result = await pending
        except Exception as exc:
            log.exception("alarm MQTT %s: command handler failed", self.id)
            self._reply(cmd, ok=False, reason=f"internal error: {exc!r}")
            return
        self._answer(cmd, result)

    def _answer(self, cmd: dict[str, Any], result: CommandResult) -> None:
        if isinstance(result, Refusal):
            self._reply(cmd, ok=False, reason=result.reason)
        else:
            n = len(result) if result is not None else 0
            self._reply(cmd, ok=True, reason=f"acknowledged ({n} transition{'s' * (n != 1)})")

    def _reply(self, cmd: dict[str, Any], *, ok: bool, reason: str) -> None:
        self.counters["commands_ok" if ok else "commands_refused"] += 1
        if not ok:
            log.warning("alarm MQTT %s: command on %s refused: %s (alarm %r, user %r)", self.id,
                        self.command_topic, reason, cmd.get("alarm"), cmd.get("user"))
        body = {"id": cmd.get("id"), "alarm": cmd.get("alarm"), "action": "ack", "user": cmd.get("user"),
                "ok": ok, "reason": reason}
        if self._link is not None:
            self._link.publish(self.result_topic, _dumps(body))


def parse_command(raw: bytes, *, retained: bool = False,
                  known: frozenset[str] | None = None) -> dict[str, Any] | str:
    """A valid acknowledgement command as ``{"alarm", "user", "note", "id"}``, or why it is refused."""
    if retained:
        return "retained command ignored: publish commands without the retain flag (it would replay)"
    if len(raw) > MAX_COMMAND_BYTES:
        return f"payload of {len(raw)} bytes exceeds {MAX_COMMAND_BYTES}"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return f"payload is not UTF-8 JSON ({exc})"
    if not isinstance(doc, dict):
        return "payload must be a JSON object"
    extra = sorted(set(doc) - _COMMAND_KEYS)
    if extra:
        return f"unknown keys {extra}; expected {sorted(_COMMAND_KEYS)}"
    alarm, user, note, cid = doc.get("alarm"), doc.get("user"), doc.get("note", ""), doc.get("id")
    if not isinstance(alarm, str):
        return "'alarm' must be a string 'site/channel/rule'"
    try:
        AlarmKey.parse(alarm)
    except ValueError as exc:
        return str(exc)
    if known is not None and alarm not in known:
        return f"no such alarm {alarm!r}"
    if not isinstance(user, str) or not user.strip() or len(user) > 64 or user == SYSTEM:
        return "'user' must name the operator (1-64 characters, not 'system')"
    if not isinstance(note, str) or len(note) > 1000:
        return "'note' must be a string of at most 1000 characters"
    if cid is not None and not isinstance(cid, str | int):
        return "'id' must be a string or an integer"
    return {"alarm": alarm, "user": user.strip(), "note": note, "id": cid}


def state_of_notice(n: Notice) -> dict[str, Any]:
    """The retained state after a transition (see the module docstring)."""
    p = n.payload()
    for k in ("from", "who", "why", "time", "time_utc"):
        p.pop(k)
    return {**p, "changed": n.time, "changed_utc": iso_utc(n.time), "snapshot": False}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def build(config: NotifierConfig, context: NotifierContext) -> MqttNotifier:
    assert isinstance(config.settings, MqttNotify)
    return MqttNotifier(id=config.id, settings=config.settings, context=context)
