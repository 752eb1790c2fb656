"""A Sparkplug B load generator that speaks exactly the uplink contract (SPARKPLUG.md): edge nodes with their
NBIRTH/DBIRTH, DDATA with per-metric timestamps and the quality/rseq properties, NDEATH as the last will, and
the JSON events topic. Used by the hub's tests and by bench/bench_hub.py (not 500 daemons, one process).

Every reading it publishes is remembered in ``sent`` as (site, channel, t_ms, rseq, value), the ground truth a
test compares PostgreSQL with."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from monitor.hub.sparkplug import BOOLEAN, DOUBLE, INT32, STRING, UINT64, Payload
from monitor.uplink import contract as c

GOOD, BAD = c.QUALITY_GOOD, c.QUALITY_BAD


def _prop(props: Any, key: str, kind: int, value: Any) -> None:
    props.keys.append(key)
    v = props.values.add()
    v.type = kind
    if kind == STRING:
        v.string_value = value
    elif kind == INT32:
        v.int_value = value
    elif kind == UINT64:
        v.long_value = value
    else:
        v.double_value = value


def ddata_payload(seq: int, rows: list[tuple[str, int, float | None, int]], *, historical: bool = False) -> bytes:
    """A DDATA payload: rows of (channel, t_ms, value or None for a bad sample, rseq)."""
    p = Payload()
    p.timestamp = int(time.time() * 1000)
    p.seq = seq
    for channel, t_ms, value, rseq in rows:
        m = p.metrics.add()
        m.name, m.timestamp, m.datatype = channel, t_ms, DOUBLE
        m.is_historical = historical
        if value is None:
            m.is_null = True
            _prop(m.properties, c.QUALITY, INT32, BAD)
            _prop(m.properties, c.PRETREAT_QUALITY, STRING, "bad")
            _prop(m.properties, c.REASON, STRING, "timeout")
        else:
            m.double_value = value
            _prop(m.properties, c.QUALITY, INT32, GOOD)
            _prop(m.properties, c.PRETREAT_QUALITY, STRING, "good")
        _prop(m.properties, c.RSEQ, UINT64, rseq)
    return bytes(p.SerializeToString())


def node_payload(seq: int | None, bdseq: int, *, birth: bool) -> bytes:
    p = Payload()
    p.timestamp = int(time.time() * 1000)
    if seq is not None:
        p.seq = seq
    m = p.metrics.add()
    m.name, m.datatype, m.long_value = c.BDSEQ, UINT64, bdseq
    if birth:
        r = p.metrics.add()
        r.name, r.datatype, r.boolean_value = c.REBIRTH, BOOLEAN, False
    return bytes(p.SerializeToString())


def dbirth_payload(seq: int, channels: list[str]) -> bytes:
    p = Payload()
    p.timestamp = int(time.time() * 1000)
    p.seq = seq
    for channel in channels:
        m = p.metrics.add()
        m.name, m.datatype, m.double_value = channel, DOUBLE, 0.0
        _prop(m.properties, c.ENG_UNIT, STRING, "pH")
        _prop(m.properties, c.KIND, STRING, "ph")
        _prop(m.properties, c.ENG_LOW, DOUBLE, 0.0)
        _prop(m.properties, c.ENG_HIGH, DOUBLE, 14.0)
    return bytes(p.SerializeToString())


@dataclass
class EdgeNode:
    """One simulated edge daemon: a node with its sites (Sparkplug devices), each with the same channels."""

    port: int
    node: str
    sites: list[str]
    channels: list[str]
    group: str = "pretreat"
    bdseq: int = 0
    seq: int = 0
    rseq: int = 0
    sent: list[tuple[str, str, int, int, float | None]] = field(default_factory=list)
    client: mqtt.Client | None = None

    def topic(self, kind: str, device: str | None = None) -> str:
        if device:
            return c.device_topic(self.group, kind, self.node, device)
        return c.node_topic(self.group, kind, self.node)

    def connect(self) -> None:
        """Connect with NDEATH as the will, then NBIRTH and a DBIRTH per site (seq restarts at 0)."""
        cl = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"edge-{self.node}", protocol=mqtt.MQTTv311)
        cl.max_inflight_messages_set(1000)
        cl.max_queued_messages_set(0)
        cl.will_set(self.topic("NDEATH"), node_payload(None, self.bdseq, birth=False), qos=1)
        cl.connect("127.0.0.1", self.port)
        cl.loop_start()
        self.client, self.seq = cl, 0
        self.publish(self.topic("NBIRTH"), node_payload(0, self.bdseq, birth=True))
        for site in self.sites:
            self.publish(self.topic("DBIRTH", site), dbirth_payload(self.next_seq(), self.channels))

    def next_seq(self) -> int:
        self.seq = (self.seq + 1) % 256
        return self.seq

    def publish(self, topic: str, payload: bytes) -> mqtt.MQTTMessageInfo:
        assert self.client is not None
        info = self.client.publish(topic, payload, qos=1)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise RuntimeError(f"publish to {topic} failed: {info.rc}")
        return info

    def data(self, site: str, t_ms: int, *, bad: set[str] = frozenset(),  # type: ignore[assignment]
             historical: bool = False) -> mqtt.MQTTMessageInfo:
        """One DDATA for ``site``: every channel at ``t_ms`` (the ``bad`` ones as bad samples)."""
        rows = []
        for i, channel in enumerate(self.channels):
            self.rseq += 1
            value = None if channel in bad else round(7.0 + (t_ms % 1000) / 1000 + i, 3)
            rows.append((channel, t_ms, value, self.rseq))
            self.sent.append((site, channel, t_ms, self.rseq, value))
        return self.publish(self.topic("DDATA", site), ddata_payload(self.next_seq(), rows, historical=historical))

    def event(self, kind: str, seq: int, site: str, **fields: Any) -> mqtt.MQTTMessageInfo:
        body = {"type": kind, "seq": seq, "site": site, **fields}
        return self.publish(c.events_topic(self.group, self.node), json.dumps(body).encode())

    def skip(self) -> None:
        """Lose one message on purpose: its seq is used, nothing is sent (the hub must see a gap)."""
        self.next_seq()

    def close(self, *, die: bool = False) -> None:
        """Disconnect; with ``die`` the connection is dropped without DISCONNECT, so the broker sends NDEATH."""
        if self.client is None:
            return
        if die:
            self.client.loop_stop()
            sock = self.client.socket()
            if sock is not None:
                sock.close()
        else:
            self.client.disconnect()
            self.client.loop_stop()
        self.client = None
