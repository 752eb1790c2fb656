"""The hub process: an MQTT 5 shared subscription in, one PostgreSQL transaction per batch out.

Messages are acknowledged (paho's manual ack) only after the transaction holding them commits, so a hub killed
mid-batch loses nothing: its broker session (kept ``session_expiry`` s) holds the unacknowledged messages and
redelivers them when the hub is back; every write is idempotent, so what was committed but not yet acknowledged
is written again as nothing. Mosquitto 2.0 keeps a dead member's share of a shared subscription queued in its
session (it does not hand it to the surviving hub), so the hub must be restarted (systemd ``Restart=always``) —
until then that share waits; EMQX and HiveMQ can redispatch it to the surviving members.

A PostgreSQL outage stops the batch where it is: the hub reconnects every second and retries the same messages,
acknowledging none until they commit, and the broker's Receive Maximum (``receive_maximum``) stops the flow.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import paho.mqtt.client as mqtt
import psycopg
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from monitor.hub import edges, sparkplug
from monitor.hub.config import HubConfig
from monitor.hub.store import Batch, Store, event_row
from monitor.uplink import contract

log = logging.getLogger("pretreat.hub")
SEQUENCED = {"NBIRTH", "DBIRTH", "DDATA", "DDEATH", "NDATA"}
"""Sparkplug messages that carry the edge's seq (NDEATH does not: it is the will, composed at connect)."""


@dataclass
class Counters:
    messages: int = 0
    readings_inserted: int = 0
    readings_received: int = 0
    rejected: int = 0
    batches: int = 0
    database_errors: int = 0
    inbox_full: int = 0
    """Times the network thread found the inbox full and waited (backpressure: it stops reading the socket)."""
    inbox_peak: int = 0
    """The most messages the inbox held at once (bounded by `Hub.inbox`'s maxsize)."""


class Hub:
    def __init__(self, cfg: HubConfig) -> None:
        self.cfg = cfg
        # an edge's last_seen at most every 2 s (a tenth of `edge_silence` if less): silence is judged to that
        self.store = Store(cfg.database_url, seen_every=min(2.0, cfg.edge_silence / 10))
        # Bounded: a conforming broker never has more than `receive_maximum` messages unacknowledged with this
        # hub (MQTT 5 Receive Maximum; mosquitto 2.0 honours it, checked), so the inbox cannot hold more. Should
        # a broker send more, the network thread waits for room instead of growing the inbox: it stops reading
        # the socket, TCP pushes back to the broker, which keeps the messages in the hub's session (nothing lost).
        self.inbox: queue.Queue[tuple[int, mqtt.MQTTMessage, Batch]] = queue.Queue(maxsize=cfg.receive_maximum)
        self.counters = Counters()
        self.connected = False
        self.database_error: str | None = None
        self._generation = 0
        self._stopping = False
        self._gaps = edges.GapCounter()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=cfg.client_id, protocol=mqtt.MQTTv5,
                                  manual_ack=True)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(1, 5)

    # -- MQTT (paho's network thread) -----------------------------------------------------------------------
    def _on_connect(self, client: mqtt.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            log.error("broker %s:%s refused the hub: %s", self.cfg.broker_host, self.cfg.broker_port, reason)
            return
        self._generation += 1
        self.connected = True
        for topic in self.cfg.subscriptions:
            client.subscribe(topic, qos=1)
        log.info("connected to %s:%s as %s, sharing %s", self.cfg.broker_host, self.cfg.broker_port,
                 self.cfg.client_id, ", ".join(self.cfg.subscriptions))

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        self.connected = False
        log.warning("broker connection lost (%s); reconnecting", reason)

    def _on_message(self, _c: Any, _u: Any, msg: mqtt.MQTTMessage) -> None:
        # decoded here, in the network thread: it overlaps the writer's wait on PostgreSQL
        item = (self._generation, msg, self.decode([msg]))
        try:
            self.inbox.put_nowait(item)
        except queue.Full:
            self.counters.inbox_full += 1
            while not self._stopping:  # backpressure (see __init__): the writer frees room within one batch
                try:
                    self.inbox.put(item, timeout=0.5)
                    break
                except queue.Full:
                    continue  # stopping: left unacknowledged, the broker redelivers it to the next start
        self.counters.inbox_peak = max(self.counters.inbox_peak, self.inbox.qsize())

    # -- the writer (the thread that runs `run`) -----------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: batches in, commits, acknowledgements; the health check and file in a thread
        of their own (`_health_loop`)."""
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = self.cfg.session_expiry
        props.ReceiveMaximum = self.cfg.receive_maximum
        checker = threading.Thread(target=self._health_loop, args=(stop,), name="hub-health", daemon=True)
        checker.start()
        try:
            self._connect_database(stop)
            self.client.connect_async(self.cfg.broker_host, self.cfg.broker_port, keepalive=self.cfg.keepalive,
                                      clean_start=False, properties=props)
            self.client.loop_start()
            while not stop.is_set():
                taken = self._take()
                if taken:
                    self._commit(taken, stop)
        finally:
            self._stopping = True
            stop.set()
            checker.join()
            self.client.disconnect()
            self.client.loop_stop()
            self.store.close()
            self._health(None, stopped=True)

    def _health_loop(self, stop: threading.Event) -> None:
        """Every ``health_interval``: the edges' health evaluated and the health file written, on a connection
        of its own. Not in the writer: at 500 edges one evaluation takes PostgreSQL a good part of a second
        (the seq holes of ~300,000 message rows), which in the writer's thread stalled ingest every time."""
        conn: psycopg.Connection[Any] | None = None
        try:
            while not stop.is_set():
                if conn is None and self.store.conn is not None:  # the writer reached the database: so may we
                    try:
                        conn = psycopg.connect(self.cfg.database_url, connect_timeout=5, autocommit=True)
                    except psycopg.Error as exc:
                        log.warning("health check: database unavailable: %s", str(exc).strip()[:200])
                conn = self._health(conn)
                stop.wait(self.cfg.health_interval)
        finally:
            if conn is not None:
                conn.close()

    def _take(self) -> list[tuple[int, mqtt.MQTTMessage, Batch]]:
        try:
            taken = [self.inbox.get(timeout=0.1)]
        except queue.Empty:
            return []
        while len(taken) < self.cfg.max_batch:
            try:
                taken.append(self.inbox.get_nowait())
            except queue.Empty:
                break
        return taken

    def _connect_database(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.store.connect()
                if self.database_error is not None:
                    log.info("database reachable again")
                self.database_error = None
                return
            except psycopg.Error as exc:
                self._database_down(exc)
                stop.wait(1.0)

    def _database_down(self, exc: Exception) -> None:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self.database_error != text:
            log.error("database unavailable: %s; retrying every second, nothing acknowledged meanwhile", text)
        self.database_error = text
        self.counters.database_errors += 1
        self.store.close()

    def _commit(self, taken: list[tuple[int, mqtt.MQTTMessage, Batch]], stop: threading.Event) -> None:
        batch = Batch()
        for _, _, piece in taken:
            batch.extend(piece)
        while not stop.is_set():
            try:
                if self.store.conn is None:
                    self._connect_database(stop)
                    continue
                self.counters.readings_inserted += self.store.write(batch)
                break
            except psycopg.Error as exc:
                self._database_down(exc)
                stop.wait(1.0)
        else:
            return  # stopping: nothing acknowledged, the broker redelivers it all to the next start
        self.counters.batches += 1
        self.counters.messages += len(taken)
        self.counters.readings_received += len(batch.readings)
        self.counters.rejected += len(batch.rejects)
        for generation, msg, _ in taken:
            # a packet id belongs to its connection: one received before a reconnect is redelivered instead
            if msg.qos > 0 and generation == self._generation:
                self.client.ack(msg.mid, msg.qos)

    def decode(self, messages: list[mqtt.MQTTMessage]) -> Batch:
        batch = Batch()
        for msg in messages:
            try:
                self._decode_one(msg, batch)
            except (sparkplug.BadMessage, ValueError) as exc:
                log.error("message refused: %s", exc)
                batch.rejects.append((msg.topic, str(exc), bytes(msg.payload)))
            except Exception as exc:  # a payload that trips the decoder itself: kept, never fatal to the hub
                log.exception("message refused: %s: cannot decode", msg.topic)
                batch.rejects.append((msg.topic, f"cannot decode: {exc!r}", bytes(msg.payload)))
        return batch

    def _decode_one(self, msg: mqtt.MQTTMessage, b: Batch) -> None:
        topic = contract.parse_topic(msg.topic, self.cfg.sparkplug_group)
        b.seen.add(topic.node)
        if topic.kind == "events":
            b.events.append(event_row(topic.node, bytes(msg.payload), msg.topic))
            return
        if topic.kind in ("NCMD", "DCMD", "STATE"):
            return
        payload = sparkplug.decode(bytes(msg.payload), msg.topic)
        if topic.kind in SEQUENCED:
            b.seqs.append((topic.node, payload.seq, payload.timestamp))
        if topic.kind == "NBIRTH":
            b.births.append((topic.node, sparkplug.bd_seq(payload, msg.topic), payload.timestamp))
        elif topic.kind == "NDEATH":
            b.deaths.append((topic.node, sparkplug.bd_seq(payload, msg.topic)))
        elif topic.kind == "DBIRTH" and topic.device:
            b.device_births.append((topic.node, topic.device))
            b.channels.extend(sparkplug.channels(payload, topic.node, topic.device))
        elif topic.kind == "DDATA" and topic.device:
            rows, refused = sparkplug.readings(payload, topic.node, topic.device, msg.topic, b.months)
            b.readings.extend(rows)
            b.rejects.extend((msg.topic, reason, None) for reason in refused)

    # -- health ------------------------------------------------------------------------------------------
    def _health(self, conn: psycopg.Connection[Any] | None, *, stopped: bool = False
                ) -> psycopg.Connection[Any] | None:
        """Evaluate the edges on ``conn`` (if any) and write the health file; returns the connection, or None
        when it failed (it is then closed, and the health loop makes a new one)."""
        states: list[edges.EdgeState] = []
        alarms: list[dict[str, Any]] = []
        if conn is not None and not stopped:
            try:
                states = edges.evaluate(conn, edge_silence=self.cfg.edge_silence, gap_grace=self.cfg.gap_grace,
                                        counter=self._gaps)
                alarms = edges.open_alarms(conn)
            except psycopg.Error as exc:
                log.warning("health check failed: %s", str(exc).strip()[:200])
                conn.close()
                conn = None
        snapshot = {
            "state": "stopped" if stopped else "running", "hub": self.cfg.client_id, "group": self.cfg.group,
            "pid": os.getpid(), "at": time.time(), "broker_connected": self.connected,
            "database_error": self.database_error, "queued": self.inbox.qsize(),
            "queue_bound": self.inbox.maxsize, **asdict(self.counters),
            "edges": [_edge_json(e) for e in states], "alarms": alarms,
        }
        path = self.cfg.health_file
        tmp = path.with_name(path.name + ".tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(snapshot, indent=1))
        tmp.replace(path)
        return conn


def _edge_json(e: edges.EdgeState) -> dict[str, Any]:
    def iso(t: Any) -> str | None:
        return None if t is None else t.isoformat()

    return {"node": e.node, "sites": e.sites, "bdseq": e.bdseq, "born_at": iso(e.born_at),
            "died_at": iso(e.died_at), "last_seen": iso(e.last_seen), "missing": e.missing}
