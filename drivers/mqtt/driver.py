"""The MQTT subscriber: one persistent-session connection per MQTT instrument, delivering `Sample`s to a sink.

How paho-mqtt is driven, and why. paho's own network thread (``loop_start``) reconnects by itself inside
``loop_forever``; with it the driver would have two reconnect loops with different backoffs fighting over one
socket. Instead the paho client runs *on the asyncio loop* through its external-event-loop API (the approach
aiomqtt takes): the socket is watched with ``add_reader``/``add_writer``, ``loop_misc`` runs once a second for
keepalive, and every paho callback therefore runs on the loop thread, so the sink is never called from a
foreign thread and the counters need no locks. The only blocking paho call, ``reconnect()`` (DNS, TCP
connect, sending CONNECT), runs in the default executor; its socket callbacks hop back to the loop with
``call_soon_threadsafe`` (`drivers.mqtt.loop_binding`). ``reconnect_on_failure=False`` keeps paho from
reconnecting on its own (it would also retry a refused protocol version with a blocking connect inside a read
callback).

Delivery guarantees. The session is persistent (MQTT 3.1.1, ``clean_session=False``, client id
`MqttBroker.client_id`), so QoS ≥ 1 messages published while the daemon was away are kept by the broker and
delivered on reconnect. Messages are acknowledged manually, *after* the sink has taken their samples, so a
message the daemon never delivered (stopped between receipt and sink) is delivered again: at least once.
Duplicates are therefore possible after a reconnect: an exact copy of a message carrying its device timestamp
is the same reading and is acknowledged without being recorded again (`drivers.mqtt.dedupe`, counted in
``repeats``); without a device timestamp a copy is stamped anew, so it cannot collide with the original.
Every channel topic is subscribed again after every connect, because a broker restarted without persistence
has forgotten the session (``session present`` = 0 is logged as a warning: what it queued is lost).

Outages. One reconnect loop (`MqttDriver._supervise`) with `Backoff`. An outage is logged once when it
starts, with one COMM_FAILURE sample per channel as evidence in the historian, and once when it ends; the
attempts in between are counted (`MqttCounters`) and logged at DEBUG (`drivers.mqtt.outage`). The broker
password (read once from ``password_file``) is never logged.

Time: samples carry the device timestamp when usable (see `drivers.mqtt.payload`), else the receive time.

Why one module of about 430 lines: it is one state machine around one paho client. The reconnect loop, the
connection attempt and the paho callbacks share the run state (`_Run`), and paho calls back into all of them;
the parts with a concept of their own live apart (what a message becomes: `drivers.mqtt.intake`; the outage
log: `drivers.mqtt.outage`; payload decoding, duplicates, commit-paced acknowledgements, the loop binding,
the counters).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion

from config.schema import Channel, DriverKind, Instrument, MqttBroker, SiteConfig
from drivers.backoff import Backoff
from drivers.base import Committed, SampleSink
from drivers.mqtt.acks import CommitAcks
from drivers.mqtt.counters import MqttCounters
from drivers.mqtt.intake import MessageIntake
from drivers.mqtt.loop_binding import LoopBinding
from drivers.mqtt.outage import LinkLog
from monitor import clock
from monitor.sample import Quality, Sample

log = logging.getLogger(__name__)

MIN_CONNECT_TIMEOUT = 3.0
"""Floor (s) on the TCP-connect and CONNACK wait. `Instrument.timeout` defaults to a Modbus-style 1 s, too
short for a TCP handshake plus broker authentication over a cellular link."""
MISC_INTERVAL = 1.0  # s between paho loop_misc() calls (keepalive pings, dead-link detection)
CLOSE_TIMEOUT = 1.0  # s allowed for the DISCONNECT packet to go out when stopping


class _Session:
    """The futures of one connection attempt, resolved by paho callbacks on the loop thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.connack: asyncio.Future[tuple[Any, bool]] = loop.create_future()
        self.lost: asyncio.Future[str] = loop.create_future()
        self.subscribe_mid: int | None = None


@dataclasses.dataclass(slots=True)
class _Run:
    """What exists only while `MqttDriver.run` runs, created together at its start: the loop, the paho client
    and its binding to the loop, the sink, the stop future (its exception: a sink failure), the commit-paced
    acknowledgements (None: acknowledge once the sink took the samples). ``session`` is the current
    connection attempt's futures, ``connecting`` paho's blocking connect while it runs in the executor."""

    loop: asyncio.AbstractEventLoop
    client: mqtt.Client
    binding: LoopBinding
    sink: SampleSink
    stop: asyncio.Future[None]
    acks: CommitAcks | None
    session: _Session | None = None
    connecting: asyncio.Future[MQTTErrorCode] | None = None


class MqttDriver:
    """A `drivers.base.StreamingDriver` for one MQTT instrument: ``await run(sink)`` until cancelled."""

    def __init__(self, *, instrument: Instrument, channels: Sequence[Channel],
                 backoff: Backoff | None = None) -> None:
        if instrument.driver is not DriverKind.MQTT or instrument.mqtt is None:
            raise ValueError(f"instrument {instrument.site}/{instrument.id} is not an MQTT instrument")
        self.instrument = instrument
        self.instrument_id = instrument.id
        self.counters = MqttCounters()
        self._name = f"{instrument.site}/{instrument.id}"
        self._broker: MqttBroker = instrument.mqtt
        self._channels = tuple(channels)
        self._intake = MessageIntake(instrument=instrument, channels=channels, counters=self.counters,
                                     name=self._name, unsubscribe=self._unsubscribe)
        self._password = _read_password(self._broker, self._name)
        self.client_id = self._broker.client_id  # the loader sets the default and refuses one used twice
        self._connect_timeout = max(instrument.timeout, MIN_CONNECT_TIMEOUT)
        self._backoff = backoff or Backoff()
        self._where = f"{self._broker.host}:{self._broker.port}"
        self._link = LinkLog(name=self._name, where=self._where, client_id=self.client_id, counters=self.counters)
        self._run: _Run | None = None  # while running (and after: a driver runs once)
        self._finished = asyncio.Event()
        self._closed = False

    # --- public API -------------------------------------------------------------------------------

    async def run(self, sink: SampleSink, *, committed: Committed | None = None) -> None:
        """Connect, subscribe and deliver samples to ``sink`` until cancelled or `close`d.

        Raises only what the sink raises (a daemon bug: the message stays unacknowledged, so it is delivered
        again after a restart); broker and network trouble is retried forever. With ``committed`` (returns
        once everything the sink took is durable), a message is acknowledged only after that
        (`drivers.mqtt.acks`); without it, as soon as the sink took its samples.
        """
        if self._closed or self._run is not None:
            raise RuntimeError(f"MQTT driver {self._name} is closed or already running")
        loop = asyncio.get_running_loop()
        client = self._new_client()
        self._run = _Run(loop=loop, client=client, binding=LoopBinding(client=client, loop=loop), sink=sink,
                         stop=loop.create_future(),
                         acks=CommitAcks(committed=committed, name=self._name) if committed is not None else None)
        try:
            await self._supervise()
        finally:
            await self._shutdown()
            self._finished.set()

    def seed_recent(self, samples: Sequence[Sample]) -> None:
        """The channels' last stored readings, at start: a message delivered again after a restart (killed
        between commit and acknowledgement) is then recognised as a repeat (`drivers.mqtt.dedupe`)."""
        self._intake.seed(samples)

    async def close(self) -> None:
        """Stop `run` (sending DISCONNECT; the broker keeps the session) and wait until it has. Idempotent."""
        self._closed = True
        if self._run is not None:
            if not self._run.stop.done():
                self._run.stop.set_result(None)
            await self._finished.wait()

    # --- the one reconnect loop -------------------------------------------------------------------

    @property
    def _r(self) -> _Run:
        """The run state, for the methods that only ever run inside `run`."""
        if self._run is None:
            raise RuntimeError(f"MQTT driver {self._name} is not running")
        return self._run

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping():
            uptime, reason = await self._connection()
            if self._stopping():
                return
            if uptime is not None and uptime >= self._backoff.stable_after:
                failures = 0
            self._link_lost(reason, was_up=uptime is not None)
            delay = self._backoff.delay(failures)
            failures += 1
            await asyncio.wait({self._r.stop}, timeout=delay)

    async def _connection(self) -> tuple[float | None, str]:
        """One connection, from attempt to loss: (seconds it was up, or None if never; why it ended)."""
        r = self._r
        session = r.session = _Session(r.loop)
        try:
            rc = await self._open_socket()
        except OSError as exc:
            return None, f"cannot connect ({exc.strerror or exc})"
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            self._force_close()
            return None, f"cannot connect ({mqtt.error_string(rc)})"
        first: set[asyncio.Future[Any]] = {session.connack, session.lost, r.stop}
        await asyncio.wait(first, timeout=self._connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        if self._stopping():
            return None, "stopping"
        if not session.connack.done():
            reason = (session.lost.result() if session.lost.done()
                      else f"no CONNACK within {self._connect_timeout:g} s")
            self._force_close()  # (its own on_disconnect must not replace the reason)
            return None, reason
        reason_code, session_present = session.connack.result()
        if reason_code.is_failure:
            self._force_close()
            return None, f"broker refused the connection ({reason_code})"
        up_at = time.monotonic()
        self._link.up(session_present)
        self._subscribe(session)
        acking = self._start_acks(session_present)
        try:
            while not (session.lost.done() or self._stopping()):
                either: set[asyncio.Future[Any]] = {session.lost, r.stop}
                await asyncio.wait(either, timeout=MISC_INTERVAL, return_when=asyncio.FIRST_COMPLETED)
                if not session.lost.done():
                    r.client.loop_misc()
        finally:
            if acking is not None:
                acking.cancel()
                try:
                    await acking
                except asyncio.CancelledError:
                    # acking's own cancellation ends here; one aimed at this task (it is being cancelled) must
                    # go on, or `run` would reconnect after its owner asked it to stop
                    if (me := asyncio.current_task()) is not None and me.cancelling():
                        raise
        uptime = time.monotonic() - up_at
        return uptime, session.lost.result() if session.lost.done() else "stopping"

    def _start_acks(self, session_present: bool) -> asyncio.Task[None] | None:
        r = self._r
        if r.acks is None:
            return None
        if not session_present:
            r.acks.session_lost()
        return asyncio.create_task(r.acks.run(r.client), name=f"mqtt-acks:{self._name}")

    async def _open_socket(self) -> MQTTErrorCode:
        """paho's blocking connect, in the executor. Awaited through `shield` so that a cancellation never
        abandons a half-open socket: `_shutdown` waits for it instead."""
        r = self._r
        fut = r.connecting = r.loop.run_in_executor(None, r.client.reconnect)
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                r.connecting = None

    def _stopping(self) -> bool:
        """True once `close` was called; re-raises a sink failure recorded by `_on_message`."""
        stop = self._r.stop
        if stop.done():
            stop.result()
            return True
        return False

    async def _shutdown(self) -> None:
        """Leave cleanly whatever state `run` ended in: no socket, no executor job, no watched fd left."""
        r = self._r
        fut, r.connecting = r.connecting, None
        if fut is not None:  # a connect still running in the executor: it may yet open a socket
            await asyncio.wait({fut})  # bounded by the connect timeout; a blocking connect can't be stopped
            if not fut.cancelled():
                fut.exception()  # retrieved: its OSError needs no report while stopping
        if r.client.socket() is not None:
            if r.acks is not None and self.counters.connected:
                await r.acks.drain(r.client)  # what was committed is acknowledged before DISCONNECT
            session = r.session = _Session(r.loop)
            r.client.disconnect()  # queued; written by the writer callback, then paho closes the socket
            try:
                await asyncio.wait({session.lost}, timeout=CLOSE_TIMEOUT)
            finally:  # also when cancelled a second time while waiting
                self._force_close()
        self.counters.connected = self.counters.subscribed = False

    def _force_close(self) -> None:
        """Close the socket now, through paho (so its state and our fd watches stay consistent)."""
        client = self._r.client
        sock = client.socket()
        if sock is None:
            return
        if isinstance(sock, socket.socket):  # plain TCP (paho's SocketLike protocol has no shutdown())
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        # Each loop_read handles one packet; bytes already received are still read (and delivered) before
        # paho reaches EOF, closes the socket and calls on_disconnect.
        for _ in range(100_000):
            if client.socket() is None:
                return
            client.loop_read()
        log.error("%s: MQTT socket to %s did not close", self._name, self._where)  # pragma: no cover

    # --- state changes: logged once ----------------------------------------------------------------

    def _link_lost(self, reason: str, *, was_up: bool) -> None:
        if (acks := self._r.acks) is not None:
            acks.link_lost()
        if (evidence := self._link.lost(reason, was_up=was_up)) is not None:
            self._emit_failure(self._channels, evidence)

    def _emit_failure(self, channels: Sequence[Channel], reason: str) -> None:
        """Evidence of a link failure in the historian: one COMM_FAILURE sample per affected channel."""
        now = clock.wall()
        self._deliver([Sample.bad(time=now, site=ch.site, channel=ch.id, unit=ch.unit,
                                  quality=Quality.COMM_FAILURE, reason=reason) for ch in channels])

    def _deliver(self, samples: Sequence[Sample]) -> bool:
        """Hand samples to the sink. A sink that raises is a daemon bug: `run` stops with its exception
        (re-raised by `_stopping`) rather than the exception vanishing inside a paho callback."""
        r = self._r
        try:
            r.sink(samples)
        except Exception as exc:
            if r.stop.done():  # already stopping (samples read while closing): can only be logged
                log.exception("%s: the sample sink failed while the MQTT driver was stopping", self._name)
            else:
                r.stop.set_exception(exc)
            return False
        return True

    def _subscribe(self, session: _Session) -> None:
        topics = [(t, self._broker.qos) for t in self._intake.topics]
        rc, mid = self._r.client.subscribe(topics)
        if rc == MQTTErrorCode.MQTT_ERR_SUCCESS:
            session.subscribe_mid = mid
        # otherwise the link is already gone: on_disconnect ends the session and the next one subscribes

    # --- paho callbacks (all on the loop thread, except the socket ones, which may come from the executor)

    def _new_client(self) -> mqtt.Client:
        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=self.client_id,
                             clean_session=False, protocol=MQTTProtocolVersion.MQTTv311,
                             reconnect_on_failure=False, manual_ack=True)
        client.connect_timeout = self._connect_timeout
        if self._broker.username:
            client.username_pw_set(self._broker.username, self._password or None)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        client.connect_async(self._broker.host, self._broker.port, self._broker.keepalive)  # no I/O yet
        return client

    def _on_connect(self, _c: mqtt.Client, _u: Any, flags: Any, reason_code: Any, _p: Any) -> None:
        s = self._r.session
        if s is not None and not s.connack.done():
            s.connack.set_result((reason_code, bool(flags.session_present)))

    def _on_disconnect(self, _c: mqtt.Client, _u: Any, flags: Any, reason_code: Any, _p: Any) -> None:
        self.counters.connected = self.counters.subscribed = False
        s = self._r.session
        if s is not None and not s.lost.done():
            # paho reports a closed or reset socket as "Unspecified error"; say what it means.
            name = str(reason_code)
            if flags.is_disconnect_packet_from_server:
                why = f"broker sent DISCONNECT ({name})"
            elif name == "Unspecified error":
                why = "connection closed by the broker or the network"
            else:
                why = name.lower()
            s.lost.set_result(why)

    def _on_subscribe(self, _c: mqtt.Client, _u: Any, mid: int, reason_codes: list[Any], _p: Any) -> None:
        s = self._r.session
        if s is None or mid != s.subscribe_mid:
            return
        refused = [t for t, rc in zip(self._intake.topics, reason_codes, strict=False) if rc.is_failure]
        downgraded = [t for t, rc in zip(self._intake.topics, reason_codes, strict=False)
                      if not rc.is_failure and rc.value < self._broker.qos]
        if downgraded:
            log.warning("%s: broker %s granted less than QoS %d on %s", self._name, self._where,
                        self._broker.qos, downgraded)
        self.counters.subscribed = not refused
        if refused:
            self.counters.subscribe_failures += len(refused)
            log.error("%s: broker %s refused the subscription to %s (check its ACL)", self._name,
                      self._where, refused)
            lost = [ch for ch in self._channels if ch.topic in refused]
            self._emit_failure(lost, f"MQTT broker {self._where} refused the subscription")

    def _on_message(self, client: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        acks = self._r.acks
        if acks is not None and msg.qos > 0 and acks.carried_over(msg.mid, bool(msg.dup)):
            self.counters.repeats += 1  # re-sent after a reconnect; its samples were taken before
            acks.hold(msg.mid, msg.qos)
            return
        decoded = self._intake.decode(msg, clock.wall())
        if decoded is not None and not self._deliver(decoded.samples):
            return  # not acknowledged: the broker delivers it again to the next session
        if msg.qos > 0:
            if acks is None:
                client.ack(msg.mid, msg.qos)
            else:
                acks.hold(msg.mid, msg.qos)

    def _unsubscribe(self, topic: str) -> None:
        if self._run is not None:
            self._run.client.unsubscribe(topic)



def _read_password(broker: MqttBroker, name: str) -> str:
    """The broker password from ``password_file`` (trailing newline stripped), read once at start-up. The
    loader checked that the file is readable and comes with a user name (`config.loader`); this reads it."""
    if not broker.password_file:
        return ""
    path = Path(broker.password_file)
    try:
        secret = path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"instrument {name}: cannot read MQTT password_file {path} ({detail})") from None
    return secret


def build_mqtt_drivers(config: SiteConfig) -> list[MqttDriver]:
    """One `MqttDriver` per MQTT instrument of every site that has channels.

    The loader validated what the drivers take as given: every client id is set (``pretreat-<site>-<id>`` by
    default) and unique per broker (`config.links.check_mqtt_client_ids`, with the alarm channels'), a
    ``password_file`` is an absolute path (a relative one resolved against the site file's folder), readable,
    and comes with a user name.
    """
    drivers: list[MqttDriver] = []
    for site in config.sites:
        for inst in site.instruments:
            if inst.driver is not DriverKind.MQTT or inst.mqtt is None:
                continue
            channels = [ch for ch in site.channels if ch.instrument == inst.id]
            if not channels:
                log.warning("%s/%s: MQTT instrument has no channels; not subscribing", site.id, inst.id)
                continue
            drivers.append(MqttDriver(instrument=inst, channels=channels))
    return drivers
