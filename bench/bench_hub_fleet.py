"""Benchmark: a county of simulated edge nodes through one `pretreat hub` into PostgreSQL — reading-to-database
latency, hub CPU and RSS, broker CPU — and the drain of one edge's 1-day backlog beside the live edges.

Setup: a real mosquitto and a PostgreSQL cluster made by initdb (default durability), both on loopback; the hub
runs as its own process (`python -m monitor.cli hub`), so its CPU time and RSS are read from /proc. The load
generator (tests/sparkplug_load.py's payloads) speaks the uplink contract: every node's NBIRTH and DBIRTH, then
each second one DDATA per node with ``--channels`` readings stamped with the current time. It is one process
with ``--connections`` MQTT connections shared by the nodes (not 500 daemons, hence not 500 last wills).

Latency of a reading = ``received_at`` (PostgreSQL's ``now()`` in the hub's transaction, i.e. its start; the
commit follows within one batch's write) minus the reading's time; both clocks are this machine's.

Phase 1, live: ``--live`` s of every node at 1 s. Phase 2, backlog: node 0 replays 1 day (86,400 s × channels)
flagged historical at ``--backlog-rate`` readings/s (the edge's ``[uplink] backlog_rate``, 500 readings a
DDATA as the edge's ``batch_size``) while the other nodes stay live; the live latency is measured over the drain.

Usage: ``python bench/bench_hub_fleet.py [--nodes 500] [--channels 10] [--live 60] [--backlog-rate 10000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import psycopg
from paho.mqtt.enums import CallbackAPIVersion

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402
from monitor.uplink import contract as c  # noqa: E402
from tests.sparkplug_load import dbirth_payload, ddata_payload, node_payload  # noqa: E402
from tests.support import Mosquitto, PostgreSQL, wait_until  # noqa: E402

DAY = 86_400
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, s (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Fleet:
    """``nodes`` Sparkplug edge nodes over a few MQTT connections; node i's sites are one device ``site-i``."""

    def __init__(self, port: int, nodes: int, channels: int, connections: int) -> None:
        self.nodes = [f"n{i:03d}" for i in range(nodes)]
        self.channels = [f"ch{k}" for k in range(channels)]
        self.seq = dict.fromkeys(self.nodes, 0)
        self.rseq = dict.fromkeys(self.nodes, 0)
        self.clients = []
        for i in range(connections):
            cl = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fleet-{i}", protocol=mqtt.MQTTv311)
            cl.max_inflight_messages_set(1000)
            cl.max_queued_messages_set(0)
            cl.connect("127.0.0.1", port)
            cl.loop_start()
            self.clients.append(cl)

    def client(self, node: str) -> mqtt.Client:
        return self.clients[self.nodes.index(node) % len(self.clients)]

    def next_seq(self, node: str) -> int:
        self.seq[node] = (self.seq[node] + 1) % 256
        return self.seq[node]

    def births(self) -> None:
        for node in self.nodes:
            cl = self.client(node)
            cl.publish(c.node_topic("pretreat", "NBIRTH", node), node_payload(0, 0, birth=True), qos=1)
            cl.publish(c.device_topic("pretreat", "DBIRTH", node, f"site-{node}"),
                       dbirth_payload(self.next_seq(node), self.channels), qos=1)

    def ddata(self, node: str, t_ms: list[int], *, historical: bool = False) -> mqtt.MQTTMessageInfo:
        rows: list[tuple[str, int, float | None, int]] = []
        for t in t_ms:
            for k, ch in enumerate(self.channels):
                self.rseq[node] += 1
                rows.append((ch, t, 7.0 + k / 10, self.rseq[node]))
        body = ddata_payload(self.next_seq(node), rows, historical=historical)
        return self.client(node).publish(c.device_topic("pretreat", "DDATA", node, f"site-{node}"), body, qos=1)

    def close(self) -> None:
        for cl in self.clients:
            cl.disconnect()
            cl.loop_stop()


def live(fleet: Fleet, stop: threading.Event, skip: str | None = None) -> None:
    """Every node (but ``skip``) one DDATA a second, paced on the wall clock."""
    nxt = time.time()
    while not stop.is_set():
        now_ms = int(time.time() * 1000)
        for node in fleet.nodes:
            if node != skip:
                fleet.ddata(node, [now_ms])
        nxt += 1.0
        stop.wait(max(0.0, nxt - time.time()))


def backlog(fleet: Fleet, node: str, rate: float, start_ms: int, channels: int) -> tuple[int, float]:
    """One day of ``node`` flagged historical, 500 readings a DDATA, at most ``rate`` readings/s."""
    per_msg = max(1, 500 // channels)
    sent, t0 = 0, time.monotonic()
    infos = []
    for s in range(0, DAY, per_msg):
        ts = [start_ms + (s + i) * 1000 for i in range(min(per_msg, DAY - s))]
        infos.append(fleet.ddata(node, ts, historical=True))
        sent += len(ts) * channels
        ahead = sent / rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    for info in infos:
        info.wait_for_publish(120)
    return sent, time.monotonic() - t0


def latencies(db: PostgreSQL, since: float, until: float) -> list[float]:
    """s from each live reading's time to the hub's transaction that stored it, for readings taken in the span."""
    with psycopg.connect(db.url) as conn:
        rows = conn.execute("SELECT extract(epoch FROM received_at - time)::float8 FROM readings WHERE NOT historical "
                            "AND time >= to_timestamp(%s) AND time < to_timestamp(%s)", (since, until)).fetchall()
    return sorted(r[0] for r in rows)


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def count(db: PostgreSQL) -> int:
    with psycopg.connect(db.url) as conn:
        return int(conn.execute("SELECT count(*) FROM readings").fetchone()[0])  # type: ignore[index]


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        work = Path(tmp)
        broker, db = Mosquitto(work), PostgreSQL(durable=True)
        broker.start()
        hub: subprocess.Popen[bytes] | None = None
        fleet: Fleet | None = None
        try:
            db.start()
            cfg = work / "hub.toml"
            cfg.write_text(f'[broker]\nport = {broker.port}\n[hub]\nclient_id = "bench-hub"\ngroup = "bench"\n'
                           f'health_file = "hub.json"\nedge_silence = 30\n[database]\nurl = "{db.url}"\n')
            with (work / "hub.log").open("wb") as log:
                hub = subprocess.Popen([sys.executable, "-m", "monitor.cli", "hub", "--config", str(cfg)],
                                       cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            assert wait_until(lambda: (work / "hub.json").exists() and b'"broker_connected": true'
                              in (work / "hub.json").read_bytes(), 60), "hub never connected"
            fleet = Fleet(broker.port, args.nodes, args.channels, args.connections)
            fleet.births()
            assert broker.proc is not None
            out: dict[str, Any] = {"load_before": os.getloadavg()}
            stop = threading.Event()
            gen = threading.Thread(target=live, args=(fleet, stop), name="fleet-live", daemon=True)
            # phase 1: every node live
            t0, h0, b0 = time.time(), cpu_seconds(hub.pid), cpu_seconds(broker.proc.pid)
            gen.start()
            time.sleep(args.live)
            t1, h1, b1 = time.time(), cpu_seconds(hub.pid), cpu_seconds(broker.proc.pid)
            out["live"] = {"latency": latencies(db, t0 + 5, t1 - 2), "hub_cpu": (h1 - h0) / (t1 - t0),
                           "broker_cpu": (b1 - b0) / (t1 - t0), "hub_rss": rss_mb(hub.pid), "load": os.getloadavg(),
                           "hub_cpu_s": h1 - h0, "inbox": inbox(work)}
            report(args.run, "live", out)
            # phase 2: node 0's day of backlog beside the others, live
            stop.set()
            gen.join()
            stop = threading.Event()
            gen = threading.Thread(target=live, args=(fleet, stop, fleet.nodes[0]), name="fleet-live", daemon=True)
            gen.start()
            before = count(db)
            t2, h2, b2 = time.time(), cpu_seconds(hub.pid), cpu_seconds(broker.proc.pid)
            sent, _ = backlog(fleet, fleet.nodes[0], args.backlog_rate, int((t2 - 2 * DAY) * 1000), args.channels)
            with psycopg.connect(db.url, autocommit=True) as conn:
                hist = "SELECT count(*) FROM readings WHERE historical"
                wait_until(lambda: conn.execute(hist).fetchone()[0] >= sent, args.drain_limit, 0.2)  # type: ignore[index]
                drained = int(conn.execute(hist).fetchone()[0])  # type: ignore[index]
            t3, h3, b3 = time.time(), cpu_seconds(hub.pid), cpu_seconds(broker.proc.pid)
            stop.set()
            gen.join()
            out["drain"] = {"readings": sent, "drained": drained, "seconds": t3 - t2,
                            "latency": latencies(db, t2, t3 - 2),
                            "hub_cpu": (h3 - h2) / (t3 - t2), "broker_cpu": (b3 - b2) / (t3 - t2),
                            "hub_rss": rss_mb(hub.pid), "load": os.getloadavg(), "stored_during": count(db) - before,
                            "hub_cpu_s": h3 - h2, "inbox": inbox(work)}
            report(args.run, "drain", out)
            return out
        finally:
            if fleet is not None:
                fleet.close()
            if hub is not None:
                hub.terminate()
                hub.wait(60)
            db.remove()
            broker.stop()


def inbox(work: Path) -> str:
    """The hub's inbox from its health file: messages queued now / the most at once / the bound, and how often
    the network thread waited for room (backpressure)."""
    try:
        h = json.loads((work / "hub.json").read_text())
    except (OSError, ValueError):
        return "?"
    return f"{h.get('queued')} / {h.get('inbox_peak')} / {h.get('queue_bound')}, waited {h.get('inbox_full')}"


def report(run_no: int, phase: str, r: dict[str, Any]) -> None:
    p = r[phase]
    lat = p["latency"]
    note = (f"{p['drained']:,} of {p['readings']:,} backlog readings stored after {p['seconds']:.0f} s; "
            f"{len(lat):,} live readings" if phase == "drain"
            else f"{len(lat):,} readings; load before {r['load_before'][0]:.1f}")
    load = " / ".join(f"{x:.1f}" for x in p["load"])
    print(f"| {run_no} | {phase} | {load} | {pct(lat, 0.5):.3f} / {pct(lat, 0.99):.3f} / "
          f"{(max(lat) if lat else float('nan')):.3f} | {p['hub_cpu']:.2f} ({p['hub_cpu_s']:.1f} s) | "
          f"{p['hub_rss']:.0f} | {p['broker_cpu']:.2f} | {p['inbox']} | {note} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--channels", type=int, default=10)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--live", type=float, default=60.0, help="s of the live phase")
    ap.add_argument("--backlog-rate", type=float, default=10_000.0, help="readings/s of the 1-day backlog")
    ap.add_argument("--drain-limit", type=float, default=600.0, help="s to wait for the backlog to be stored")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    print(f"machine: {machine()}\n{args.nodes} nodes x {args.channels} channels at 1 s "
          f"({args.nodes * args.channels:,} readings/s live); backlog {DAY:,} x {args.channels} at "
          f"{args.backlog_rate:,.0f} readings/s\n")
    print("| run | phase | load (1/5/15) after | latency p50 / p99 / max s | hub CPU cores (CPU s) | hub RSS MB "
          "| broker CPU (cores) | hub inbox now / peak / bound | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in range(args.runs):
        args.run = i + 1
        run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
