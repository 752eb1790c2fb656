"""One MQTT session of the uplink with the central broker: the Sparkplug edge node's life from NBIRTH to
NDEATH (`monitor.uplink.publisher` drives it from its thread).

Why a fresh paho client per session: the NDEATH last will carries the session's bdSeq, and a will is fixed
at CONNECT, so every reconnect is a new session with bdSeq + 1, a new will and a new NBIRTH; a client that
reconnected on its own would come back with the old will, and would re-send its own queue of unacknowledged
messages, which the durable queue already holds (it re-sends them itself, flagged historical).

Sequence numbers: NBIRTH is seq 0; every later message of the session (DBIRTH, DDATA) takes the next seq,
255 wrapping to 0. A rebirth (NCMD) starts again at 0 with the same bdSeq (the will cannot change within the
session). Everything is published with QoS 1: the broker's PUBACK is what lets a reading leave the queue.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Mapping, Sequence

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from config.schema import Channel
from config.uplink import UplinkSettings
from monitor.uplink import contract as c
from monitor.uplink import payloads

log = logging.getLogger(__name__)

CONNECT_WAIT = 10.0  # s for the broker's CONNACK
MAX_INFLIGHT = 100  # QoS 1 messages paho keeps unacknowledged on the wire


class SessionError(Exception):
    """The broker could not be reached or refused the connection (the message says which)."""


class Session:
    """Connect with the NDEATH will, publish NBIRTH and every DBIRTH, then publish messages with their seq."""

    def __init__(self, *, settings: UplinkSettings, bdseq: int, sites: Mapping[str, Sequence[Channel]],
                 now: float, password: str | None, wake: threading.Event | None = None) -> None:
        s = self.settings = settings
        self.bdseq = bdseq
        self.sites = sites
        self.seq = 0
        self.rebirths = 0
        self.rebirth_wanted = threading.Event()
        self._up = threading.Event()
        self._refused: str | None = None
        self.lost = threading.Event()
        self.published = wake or threading.Event()  # set by paho's thread at every PUBACK and command
        cl = self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=s.mqtt_client_id,
                                       protocol=mqtt.MQTTv311, clean_session=True)
        cl.max_inflight_messages_set(MAX_INFLIGHT)
        if s.username:
            cl.username_pw_set(s.username, password)
        if s.tls:
            cl.tls_set_context(ssl.create_default_context())
        cl.will_set(c.node_topic(s.group, "NDEATH", s.node), payloads.ndeath(bdseq=bdseq, now=now), qos=1)
        cl.on_connect = self._on_connect
        cl.on_disconnect = self._on_disconnect
        cl.on_message = self._on_message
        cl.on_publish = self._on_publish

    # -- paho's network thread -----------------------------------------------------------------------------
    def _on_connect(self, client: mqtt.Client, _u: object, _f: object, rc: mqtt.ReasonCode, _p: object) -> None:
        if rc.is_failure:
            self._refused = str(rc)
            self.lost.set()
            return
        client.subscribe(c.node_topic(self.settings.group, "NCMD", self.settings.node), qos=1)
        self._up.set()

    def _on_disconnect(self, _c: mqtt.Client, _u: object, _f: object, rc: mqtt.ReasonCode, _p: object) -> None:
        self.lost.set()
        self.published.set()

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        if payloads.rebirth_requested(bytes(msg.payload)):
            self.rebirth_wanted.set()
            self.published.set()  # wakes the uplink thread

    def _on_publish(self, *_args: object) -> None:
        self.published.set()

    # -- the uplink thread ---------------------------------------------------------------------------------
    def open(self, now: float, stop: threading.Event) -> None:
        """Connect and wait for CONNACK, then birth. Raises `SessionError`."""
        s = self.settings
        try:
            self.client.connect(s.host, s.port, keepalive=s.keepalive)
        except (OSError, ValueError) as exc:
            raise SessionError(f"cannot connect to {s.host}:{s.port}: {exc}") from None
        self.client.loop_start()
        waited = 0.0
        while not self._up.is_set() and not self.lost.is_set() and not stop.is_set() and waited < CONNECT_WAIT:
            self._up.wait(0.1)
            waited += 0.1
        if not self._up.is_set():
            self.close()
            raise SessionError(f"{s.host}:{s.port} refused the connection ({self._refused})" if self._refused
                               else f"no answer from {s.host}:{s.port} within {CONNECT_WAIT:g} s")
        self.birth(now)

    @property
    def connected(self) -> bool:
        return self._up.is_set() and not self.lost.is_set()

    def birth(self, now: float) -> None:
        """NBIRTH (seq 0) and one DBIRTH per site: at connect and for every rebirth command."""
        s = self.settings
        self.seq = 0
        self.client.publish(c.node_topic(s.group, "NBIRTH", s.node), payloads.nbirth(bdseq=self.bdseq, now=now),
                            qos=1)
        for site, channels in self.sites.items():
            self.client.publish(c.device_topic(s.group, "DBIRTH", s.node, site),
                                payloads.dbirth(channels, seq=self.next_seq(), now=now), qos=1)

    def next_seq(self) -> int:
        self.seq = (self.seq + 1) % 256
        return self.seq

    def publish(self, topic: str, payload: bytes) -> mqtt.MQTTMessageInfo:
        return self.client.publish(topic, payload, qos=1)

    def goodbye(self, now: float, wait: float = 2.0) -> None:
        """A clean stop: NDEATH published by us (the will is discarded at DISCONNECT), then disconnect."""
        s = self.settings
        if self.connected:
            info = self.client.publish(c.node_topic(s.group, "NDEATH", s.node),
                                       payloads.ndeath(bdseq=self.bdseq, now=now), qos=1)
            try:
                info.wait_for_publish(wait)
            except (RuntimeError, ValueError):
                pass
        self.close()

    def close(self) -> None:
        self.client.disconnect()  # (an error code, never an exception, when the link is already gone)
        self.client.loop_stop()
