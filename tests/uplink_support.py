"""What the uplink tests and bench/bench_uplink.py share: a capture of everything the broker delivers on the
Sparkplug and events topics (decoded by the independent decoder, `tests.sparkplug_wire`), and a TCP link
between the edge daemon and the broker that a test can cut and restore, as a cellular router's link drops
(the broker and the capture stay up, as they would in the county's data centre)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from config.loader import load_config
from config.schema import SiteConfig
from tests.faults.harness import channel, site_file, tcp_instrument
from tests.sparkplug_wire import Payload, decode, encode_rebirth_command
from tests.support import free_port, wait_until


@dataclass(frozen=True)
class Message:
    topic: str
    arrived: float  # wall clock, s
    payload: Payload | None  # Sparkplug messages
    event: dict[str, Any] | None  # JSON events

    @property
    def kind(self) -> str:
        parts = self.topic.split("/")
        return parts[2] if parts[0] == "spBv1.0" else "events"


@dataclass(frozen=True)
class Metric:
    """One reading as a hub sees it."""

    site: str
    channel: str
    ms: int
    rseq: int
    value: Any
    quality: int
    pretreat_quality: str
    reason: str | None
    historical: bool
    arrived: float


class Capture:
    """A plain MQTT subscriber (QoS 1) on spBv1.0/<group>/# and pretreat/v1/<group>/#."""

    def __init__(self, port: int, group: str = "pretreat") -> None:
        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.port, self.group = port, group
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"capture-{time.monotonic_ns()}")
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_a: self._ready.set()

    def __enter__(self) -> Capture:
        self.client.connect("127.0.0.1", self.port)
        self.client.loop_start()
        assert self._ready.wait(10), "the capture did not subscribe"
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client: mqtt.Client, *_a: object) -> None:
        client.subscribe([(f"spBv1.0/{self.group}/#", 1), (f"pretreat/v1/{self.group}/#", 1)])

    def _on_message(self, _c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
        now = time.time()
        if msg.topic.startswith("spBv1.0/"):
            m = Message(msg.topic, now, decode(bytes(msg.payload)), None)
        else:
            m = Message(msg.topic, now, None, json.loads(msg.payload))
        with self._lock:
            self.messages.append(m)

    def snapshot(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def of(self, kind: str) -> list[Message]:
        return [m for m in self.snapshot() if m.kind == kind]

    def readings(self) -> list[Metric]:
        out = []
        for m in self.of("DDATA"):
            assert m.payload is not None
            site = m.topic.split("/")[4]
            for x in m.payload.metrics:
                p = x.properties
                assert x.timestamp is not None
                out.append(Metric(site, x.name, x.timestamp, p["rseq"], None if x.is_null else x.value,
                                  p["Quality"], p["pretreat_quality"], p.get("reason"), x.is_historical,
                                  m.arrived))
        return out

    def rebirth(self, node: str) -> None:
        """A host application's rebirth command (NCMD Node Control/Rebirth = true)."""
        self.client.publish(f"spBv1.0/{self.group}/NCMD/{node}", encode_rebirth_command(), qos=1)

    def wait_for(self, check: Any, within: float = 60.0) -> bool:
        return wait_until(check, within, 0.05)


class LinkProxy:
    """A TCP forwarder on a free loopback port to the broker; `cut` drops every connection and refuses new
    ones (the link is down), `restore` accepts again on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> LinkProxy:
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        for t in self._threads:
            t.join(5)

    def restore(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(16)
        self._server = srv
        t = threading.Thread(target=self._accept, args=(srv,), name="link-proxy", daemon=True)
        t.start()
        self._threads.append(t)

    def cut(self) -> None:
        srv, self._server = self._server, None
        if srv is not None:
            with contextlib.suppress(OSError):
                srv.shutdown(socket.SHUT_RDWR)
            srv.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                a, _ = srv.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                a.close()
                continue
            with self._lock:
                self._conns += [a, b]
            for src, dst in ((a, b), (b, a)):
                t = threading.Thread(target=_pipe, args=(src, dst), daemon=True)
                t.start()
                self._threads.append(t)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


NODE = "edge-1"


def uplink_site(tmp_path: Path, broker_port: int, *, batch_size: int = 50, backlog_rate: float = 5000.0,
                dead_meter: bool = True, flush_interval: float = 0.05) -> tuple[Path, SiteConfig]:
    """A pH and a flow meter the simulator serves at 0.1 s, and (for the daemon only) a pH meter nobody serves:
    its readings are bad (comm_failure, with the reason) and must go out as null metrics with the reason."""
    ph, flow = free_port(), free_port()
    served = [tcp_instrument("ph-meter", port=ph, rmap="ph_meter", poll=0.1, timeout=0.3),
              tcp_instrument("flow-meter", port=flow, poll=0.1, timeout=0.3)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14),
                channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000)]
    sim = load_config(site_file(tmp_path, instruments=served, channels=channels, name="sim.toml"))
    dead = [tcp_instrument("dead-meter", port=free_port(), rmap="ph_meter", poll=0.2, timeout=0.2)]
    dead_ch = [channel("ph2", instrument="dead-meter", kind="ph", unit="pH", point="ph", scale=0.01)]
    top = (f'[uplink]\nhost = "127.0.0.1"\nport = {broker_port}\nnode = "{NODE}"\nkeepalive = 5\n'
           f"batch_size = {batch_size}\nflush_interval = {flush_interval}\nbacklog_rate = {backlog_rate}\n"
           "max_backoff = 0.5\n")
    path = site_file(tmp_path, instruments=served + (dead if dead_meter else []),
                     channels=channels + (dead_ch if dead_meter else []), top=top)
    return path, sim
