"""One supervised MQTT connection for the alarm notifier: publish with confirmation, last will, subscriptions.

Same binding of paho-mqtt to asyncio as the subscriber driver (`drivers.mqtt.loop_binding`: paho's socket is
watched by the event loop, every paho callback runs on the loop thread; only the blocking connect runs in the
executor) and the same capped, jittered backoff (`drivers.backoff`), in one owned reconnect loop.

Differences from the driver, and why:
- **A new paho client for every connection.** paho re-sends its unacknowledged QoS 1 messages by itself after
  a reconnect (``_messages_reconnect_reset``); the notifier re-sends them from its durable outbox, so with one
  long-lived client each would be published twice. A fresh client starts with nothing in flight; the outbox
  is the only source of what still has to go.
- **Clean session.** Commands published while the daemon is away are not kept for it: the retained status
  (``offline``, set by the last will) tells SCADA nobody is listening, and an acknowledgement should be given
  by someone who sees the alarm now.
- `publish` returns a future resolved by the broker's PUBACK (``on_publish``), failed with `LinkDown` if the
  connection ends first. ``ready`` is set while a connection is up (CONNACK accepted).
- `close` publishes the status ``offline`` itself (a clean DISCONNECT does not fire the will), waits briefly for
  its PUBACK, then disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion

from config.notify import MqttNotify
from drivers.backoff import Backoff
from drivers.mqtt.loop_binding import LoopBinding
from monitor.logtext import duration

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0  # s for TCP connect plus CONNACK
MISC_INTERVAL = 1.0  # s between paho loop_misc() calls (keepalive)
CLOSE_TIMEOUT = 1.0  # s for the final status and DISCONNECT to go out


class LinkDown(ConnectionError):
    """The connection ended before the broker confirmed a message."""


class MqttLink:
    """See the module docstring. ``on_up`` runs on the loop right after each accepted connection (publish
    status and snapshots, subscribe there); ``on_message`` gets every received message."""

    def __init__(self, *, name: str, settings: MqttNotify, password: str, status_topic: str,
                 subscriptions: Sequence[str], on_up: Callable[[], None],
                 on_message: Callable[[mqtt.MQTTMessage], None], backoff: Backoff | None = None) -> None:
        self.name = name
        self.settings = settings
        self._password = password
        self._status = status_topic
        self._subscriptions = tuple(subscriptions)
        self._on_up = on_up
        self._on_message = on_message
        self._backoff = backoff or Backoff()
        self._where = f"{settings.host}:{settings.port}"
        self.ready = asyncio.Event()
        self.counters = {"connects": 0, "connect_failures": 0, "published": 0, "confirmed": 0}
        self._client: mqtt.Client | None = None
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._lost: asyncio.Future[str] | None = None
        self._connack: asyncio.Future[Any] | None = None
        self._stop: asyncio.Future[None] | None = None
        self._connecting: asyncio.Future[Any] | None = None
        self._outage_since: float | None = None

    # ---- API ---------------------------------------------------------------------------------------------

    def publish(self, topic: str, payload: bytes | str, *, retain: bool = False) -> asyncio.Future[None] | None:
        """Queue one message at the configured QoS; the future resolves on the broker's confirmation.
        None when no connection is up (nothing was queued)."""
        client = self._client
        if client is None or not self.ready.is_set():
            return None
        info = client.publish(topic, payload, qos=self.settings.qos, retain=retain)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[info.mid] = fut  # on_publish can only run later, on this loop: no race
        self.counters["published"] += 1
        return fut

    def subscribe_all(self) -> None:
        if self._client is not None and self._subscriptions:
            self._client.subscribe([(t, self.settings.qos) for t in self._subscriptions])

    async def run(self) -> None:
        """Connect and reconnect until `close`."""
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        failures = 0
        try:
            while not self._stop.done():
                uptime, reason = await self._connection(loop)
                if self._stop.done():
                    break
                if uptime is not None and uptime >= self._backoff.stable_after:
                    failures = 0
                self._down(reason, was_up=uptime is not None)
                await asyncio.wait({self._stop}, timeout=self._backoff.delay(failures))
                failures += 1
        finally:
            await self._shutdown()

    async def close(self) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)

    # ---- one connection ----------------------------------------------------------------------------------

    async def _connection(self, loop: asyncio.AbstractEventLoop) -> tuple[float | None, str]:
        assert self._stop is not None
        client = self._client = self._new_client()
        LoopBinding(client=client, loop=loop)
        self._lost, self._connack = loop.create_future(), loop.create_future()
        fut = self._connecting = loop.run_in_executor(None, client.reconnect)
        try:
            rc = await asyncio.shield(fut)
        except OSError as exc:
            return None, f"cannot connect ({exc.strerror or exc})"
        finally:
            if fut.done():
                self._connecting = None
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            self._force_close()
            return None, f"cannot connect ({mqtt.error_string(rc)})"
        first: set[asyncio.Future[Any]] = {self._connack, self._lost, self._stop}
        await asyncio.wait(first, timeout=CONNECT_TIMEOUT,
                           return_when=asyncio.FIRST_COMPLETED)
        if not self._connack.done() or self._connack.result().is_failure:
            why = ("stopping" if self._stop.done() else f"broker refused ({self._connack.result()})"
                   if self._connack.done() else self._lost.result() if self._lost.done()
                   else f"no CONNACK within {CONNECT_TIMEOUT:g} s")
            self._force_close()
            return None, why
        up_at = time.monotonic()
        self._up()
        while not (self._lost.done() or self._stop.done()):
            either: set[asyncio.Future[Any]] = {self._lost, self._stop}
            await asyncio.wait(either, timeout=MISC_INTERVAL,
                               return_when=asyncio.FIRST_COMPLETED)
            if not self._lost.done():
                client.loop_misc()
        if self._lost.done():
            self._ended(self._lost.result())
        return time.monotonic() - up_at, self._lost.result() if self._lost.done() else "stopping"

    def _new_client(self) -> mqtt.Client:
        s = self.settings
        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=s.client_id,
                             clean_session=True, protocol=MQTTProtocolVersion.MQTTv311,
                             reconnect_on_failure=False)
        client.connect_timeout = CONNECT_TIMEOUT
        client.max_inflight_messages_set(1000)  # the dispatcher bounds what is in flight (its batch)
        if s.username:
            client.username_pw_set(s.username, self._password or None)
        client.will_set(self._status, "offline", qos=s.qos, retain=True)
        client.on_connect = self._cb_connect
        client.on_disconnect = self._cb_disconnect
        client.on_publish = self._cb_publish
        client.on_message = lambda _c, _u, msg: self._on_message(msg)
        client.connect_async(s.host, s.port, s.keepalive)
        return client

    def _up(self) -> None:
        self.counters["connects"] += 1
        if self._outage_since is not None:
            outage = time.monotonic() - self._outage_since
            log.info("alarm MQTT %s: link to %s restored after %s", self.name, self._where, duration(outage),
                     extra={"link": self._where, "outage_s": outage})
            self._outage_since = None
        else:
            log.info("alarm MQTT %s: connected to %s as %r", self.name, self._where, self.settings.client_id)
        self.ready.set()
        self.publish(self._status, "online", retain=True)
        self.subscribe_all()
        self._on_up()

    def _ended(self, reason: str) -> None:
        """The connection is gone: nothing in flight will be confirmed on it."""
        self.ready.clear()
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(LinkDown(reason))
                fut.exception()  # retrieved here: a publisher that gave up waiting must not cause a warning

    def _down(self, reason: str, *, was_up: bool) -> None:
        self._ended(reason)
        if not was_up:
            self.counters["connect_failures"] += 1
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("alarm MQTT %s: broker %s %s: %s; reconnecting with backoff", self.name, self._where,
                        "lost" if was_up else "unavailable", reason)
        else:
            log.debug("alarm MQTT %s: broker %s still unavailable: %s", self.name, self._where, reason)

    async def _shutdown(self) -> None:
        fut, self._connecting = self._connecting, None
        if fut is not None:
            await asyncio.wait({fut})
            if not fut.cancelled():
                fut.exception()
        client = self._client
        if client is not None and client.socket() is not None:
            if self.ready.is_set():
                done = self.publish(self._status, "offline", retain=True)
                if done is not None:
                    with contextlib.suppress(LinkDown, TimeoutError):
                        async with asyncio.timeout(CLOSE_TIMEOUT):
                            await done
            client.disconnect()
            if self._lost is not None:
                await asyncio.wait({self._lost}, timeout=CLOSE_TIMEOUT)
            self._force_close()
        self._ended("stopped")

    def _force_close(self) -> None:
        client = self._client
        if client is None or client.socket() is None:
            return
        sock = client.socket()
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _ in range(100_000):  # each loop_read handles one packet; EOF closes and calls on_disconnect
            if client.socket() is None:
                return
            client.loop_read()

    # ---- paho callbacks (loop thread) ----------------------------------------------------------------------

    def _cb_connect(self, _c: mqtt.Client, _u: Any, _flags: Any, reason_code: Any, _p: Any) -> None:
        if self._connack is not None and not self._connack.done():
            self._connack.set_result(reason_code)

    def _cb_disconnect(self, _c: mqtt.Client, _u: Any, flags: Any, reason_code: Any, _p: Any) -> None:
        self.ready.clear()
        if self._lost is not None and not self._lost.done():
            name = str(reason_code)
            self._lost.set_result("connection closed by the broker or the network"
                                  if name == "Unspecified error" else name.lower())

    def _cb_publish(self, _c: mqtt.Client, _u: Any, mid: int, reason_code: Any, _p: Any) -> None:
        fut = self._pending.pop(mid, None)
        if fut is not None and not fut.done():
            self.counters["confirmed"] += 1
            fut.set_result(None)
