"""A simulated instrument that publishes its readings to an MQTT broker, as field devices and gateways do.

Payloads (per `config.schema.Channel`):

- ``payload = "json"``: channels of the instrument that share a topic go out together as one JSON object,
  ``{"<field>": value, ..., "<Instrument.time_field>": timestamp}``. A dotted field (``"data.ph"``) becomes
  nested objects, matching the subscriber's "dots descend into objects". Without ``time_field`` no
  timestamp is sent and the subscriber stamps the receive time.
- ``payload = "number"``: the whole payload is the value in ASCII (``"7.23"``), no timestamp.

The timestamp is ISO-8601 UTC with milliseconds and a ``Z`` (``"2026-11-30T01:40:00.123Z"``) by default, or
epoch seconds as a JSON number with ``time_format="epoch"``; both are what the daemon's MQTT driver accepts.
Values are raw device values (before the channel's scale and offset), like a Modbus register; a non-finite
value goes out as the bare token ``NaN``/``Infinity`` (what much firmware emits; not valid strict JSON).

Faults: SILENT publishes nothing (the daemon must notice staleness); GARBAGE cycles through a truncated JSON
object, a non-numeric value (``"ERR"``) and NaN, so each publish exercises a different decode path;
EXCEPTION has no MQTT meaning and is refused.

The client is paho-mqtt 2.x, run in paho's own network thread (``loop_start``); `publish` only queues, so
it is safe to call from the asyncio loop. Messages are QoS from the instrument's broker settings (1 by
default), not retained. The simulator's client id is ``sim-<site>-<instrument>``: it must differ from the
daemon's subscriber id, or the broker would disconnect one for the other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from config.schema import Channel, Instrument, PayloadFormat
from simulators.modbus_server import SimFault  # one fault vocabulary for every simulated device

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Topic:
    """One topic's payload layout, compiled at construction: (channel id, JSON path) pairs."""

    topic: str
    payload: PayloadFormat
    fields: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(slots=True)
class PublisherCounters:
    messages: int = 0  # payloads handed to the client (good and garbage)
    garbage: int = 0  # malformed payloads sent on purpose
    suppressed: int = 0  # payloads not sent because the instrument is SILENT
    connects: int = 0


class MqttSimInstrument:
    """One MQTT instrument: `start`, then `publish` values as the runner produces them, then `stop`."""

    def __init__(self, *, instrument: Instrument, channels: Sequence[Channel], time_format: str = "iso",
                 connect_timeout: float = 5.0) -> None:
        if instrument.mqtt is None:
            raise ValueError(f"instrument '{instrument.id}' has no MQTT broker settings")
        if time_format not in ("iso", "epoch"):
            raise ValueError("time_format is 'iso' or 'epoch'")
        self.instrument = instrument
        self.broker = instrument.mqtt
        self.time_format = time_format
        self.connect_timeout = connect_timeout
        self.client_id = f"sim-{instrument.site}-{instrument.id}"
        self.topics = _compile(instrument, [c for c in channels if c.instrument == instrument.id])
        self.counters = PublisherCounters()
        self._fault = SimFault.NONE
        self._garbage_turn = 0
        self._client: mqtt.Client | None = None
        self._connected = False
        self._pending: list[mqtt.MQTTMessageInfo] = []

    @property
    def fault(self) -> SimFault:
        return self._fault

    @fault.setter
    def fault(self, value: SimFault) -> None:
        if value is SimFault.EXCEPTION:
            raise ValueError("an MQTT instrument has no exception replies; use SILENT or GARBAGE")
        self._fault = value

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def where(self) -> str:
        return f"mqtt://{self.broker.host}:{self.broker.port} as {self.client_id}"

    async def start(self) -> None:
        """Connect; raises `ConnectionError` at once if the broker refuses us (nothing listening, not
        authorised), or if it has not accepted us within ``connect_timeout``. Once connected, paho
        reconnects by itself after a broker restart, as a field device would."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        refused: list[str] = []
        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=self.client_id,
                             clean_session=True, protocol=mqtt.MQTTv311)
        if self.broker.username:
            password = None
            if self.broker.password_file:
                password = (await asyncio.to_thread(Path(self.broker.password_file).read_text)).strip()
            client.username_pw_set(self.broker.username, password)
        client.reconnect_delay_set(min_delay=1, max_delay=4)

        def on_connect(_c: mqtt.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
            if not reason.is_failure:
                self._connected = True
                self.counters.connects += 1
            elif not ready.is_set():
                refused.append(str(reason))
            loop.call_soon_threadsafe(ready.set)

        def on_connect_fail(_c: mqtt.Client, _u: Any) -> None:
            if not self._connected:
                refused.append("connection refused")
                loop.call_soon_threadsafe(ready.set)

        def on_disconnect(_c: mqtt.Client, _u: Any, _f: Any, _reason: Any, _p: Any) -> None:
            self._connected = False

        client.on_connect = on_connect
        client.on_connect_fail = on_connect_fail
        client.on_disconnect = on_disconnect
        client.connect_async(self.broker.host, self.broker.port, keepalive=self.broker.keepalive)
        client.loop_start()
        self._client = client
        try:
            await asyncio.wait_for(ready.wait(), self.connect_timeout)
        except TimeoutError:
            refused.append(f"no answer within {self.connect_timeout:g} s")
        if refused:
            await self.stop()
            raise ConnectionError(f"simulated instrument '{self.instrument.id}': no MQTT broker accepted "
                                  f"{self.where} ({refused[0]})")

    async def stop(self) -> None:
        """Disconnect and join paho's thread (off the event loop: loop_stop blocks)."""
        client, self._client = self._client, None
        if client is None:
            return
        client.disconnect()
        await asyncio.to_thread(client.loop_stop)
        self._connected = False

    async def flush(self, wait: float = 5.0) -> bool:
        """Wait up to ``wait`` s until every QoS 1/2 message handed over so far is acknowledged; False if
        some are still in flight then."""
        deadline = asyncio.get_running_loop().time() + wait
        while self._prune():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def publish(self, values: dict[str, float], t: float) -> None:
        """Publish ``values`` (channel id -> raw device value) stamped ``t`` (epoch seconds, UTC).

        Topics none of whose channels are in ``values`` are skipped. Never raises for a bad value.
        """
        if self._client is None:
            raise RuntimeError("publish() before start()")
        for topic in self.topics:
            present = [(cid, path) for cid, path in topic.fields if cid in values]
            if not present:
                continue
            if self._fault is SimFault.SILENT:
                self.counters.suppressed += 1
                continue
            if topic.payload is PayloadFormat.NUMBER:
                payload = _number(values[present[0][0]])
            else:
                payload = self._json(present, values, t)
            if self._fault is SimFault.GARBAGE:
                payload = self._garbage(topic, present, values, t)
            info = self._client.publish(topic.topic, payload, qos=self.broker.qos, retain=False)
            self.counters.messages += 1
            if self.broker.qos > 0:
                self._pending.append(info)
        if len(self._pending) > 1000:
            self._prune()

    def _json(self, present: list[tuple[str, tuple[str, ...]]], values: dict[str, float], t: float,
              override: Any = None) -> bytes:
        obj: dict[str, Any] = {}
        for cid, path in present:
            _put(obj, path, values[cid] if override is None else override)
        if self.instrument.time_field:
            _put(obj, tuple(self.instrument.time_field.split(".")), self._stamp(t))
        return json.dumps(obj).encode()

    def _stamp(self, t: float) -> str | float:
        if self.time_format == "epoch":
            return round(t, 3)
        return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _garbage(self, topic: _Topic, present: list[tuple[str, tuple[str, ...]]], values: dict[str, float],
                 t: float) -> bytes:
        """The next malformed payload in the cycle: truncated, non-numeric, NaN."""
        turn = self._garbage_turn % 3
        self._garbage_turn += 1
        self.counters.garbage += 1
        if topic.payload is PayloadFormat.NUMBER:
            return (b"12.3.4", b"ERR", b"nan")[turn]
        if turn == 0:
            whole = self._json(present, values, t)
            return whole[: max(1, len(whole) // 2)]
        return self._json(present, values, t, override="ERR" if turn == 1 else math.nan)

    def _prune(self) -> int:
        """Drop acknowledged (or failed) messages from the pending list; how many remain in flight."""
        still: list[mqtt.MQTTMessageInfo] = []
        for info in self._pending:
            try:
                if not info.is_published():
                    still.append(info)
            except (ValueError, RuntimeError):  # queue full or client gone: never will be; not ours to retry
                continue
        self._pending = still
        return len(still)


def _compile(instrument: Instrument, channels: Sequence[Channel]) -> tuple[_Topic, ...]:
    groups: dict[tuple[str, PayloadFormat], list[tuple[str, tuple[str, ...]]]] = {}
    for ch in channels:
        groups.setdefault((ch.topic, ch.payload), []).append((ch.id, tuple(ch.field.split("."))))
    for (topic, payload), fields in groups.items():
        paths = [path for _, path in fields]
        if instrument.time_field and payload is PayloadFormat.JSON:
            paths.append(tuple(instrument.time_field.split(".")))
        if len(set(paths)) != len(paths):
            raise ValueError(f"topic '{topic}': two values (or a value and the time field) share a field")
        for a in paths:
            if any(b != a and b[: len(a)] == a for b in paths):
                raise ValueError(f"topic '{topic}': field '{'.'.join(a)}' is both a value and an object")
    return tuple(_Topic(topic=t, payload=p, fields=tuple(f)) for (t, p), f in groups.items())


def _put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


def _number(value: float) -> bytes:
    return repr(float(value)).encode() if not float(value).is_integer() else str(int(value)).encode()
