"""Benchmark: hub ingest into PostgreSQL (readings/s), beside a bare ``COPY`` of the same rows.

Setup: a real mosquitto and a PostgreSQL 15 cluster made by initdb (default durability: fsync on, synchronous
commit), both on loopback. The hub's broker session is created first, then ``--messages`` DDATA payloads of
``--metrics`` readings each (3 edges, 10 channels, per-metric timestamps, the contract's properties; encoded
before the clock starts) are published and queued in that session. The clock runs from the hub's start until
every reading is committed: decode, COPY into the staging table, the idempotent insert into the monthly
partition, commit, acknowledgements. The bare COPY then writes the same rows, already as database tuples, into
an empty ``readings`` table (same partitioned table and primary key) in one binary COPY and one commit: the
ceiling (the hub cannot be faster than the database taking the same rows with no decoding and no idempotence).

Usage: ``python bench/bench_hub.py [--runs 5] [--messages 2000] [--metrics 100]``; prints a markdown table with
the machine and the load average before each run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402
from monitor.hub.config import HubConfig  # noqa: E402
from monitor.hub.service import Hub  # noqa: E402
from tests.sparkplug_load import EdgeNode, ddata_payload  # noqa: E402
from tests.support import Mosquitto, PostgreSQL, wait_until  # noqa: E402

T0 = 1_796_083_200_000  # 2026-12-01 00:00 UTC, ms
CHANNELS = [f"ch{i}" for i in range(10)]


def hub_config(broker: Mosquitto, db: PostgreSQL, workdir: Path) -> HubConfig:
    return HubConfig(broker_host="127.0.0.1", broker_port=broker.port, client_id="bench-hub", group="bench",
                     sparkplug_group="pretreat", database_url=db.url, health_file=workdir / "hub.health.json",
                     max_batch=500, receive_maximum=1000, health_interval=5.0)


def payloads(messages: int, metrics: int) -> tuple[list[tuple[str, bytes]], list[tuple[object, ...]]]:
    """(topic, payload) of every message and the same readings as ``readings`` tuples for the bare COPY."""
    out, rows = [], []
    rseq = {n: 0 for n in ("e1", "e2", "e3")}
    for m in range(messages):
        node = ("e1", "e2", "e3")[m % 3]
        site = f"site-{node}"
        batch = []
        for k in range(metrics):
            rseq[node] += 1
            t_ms = T0 + (m // 3 * metrics + k) // len(CHANNELS) * 1000
            channel, value = CHANNELS[k % len(CHANNELS)], 7.0 + k / 100
            batch.append((channel, t_ms, value, rseq[node]))
            rows.append((site, channel, dt.datetime.fromtimestamp(t_ms / 1000, dt.UTC), rseq[node], value, 192,
                         "good", None, False, node))
        out.append((f"spBv1.0/pretreat/DDATA/{node}/{site}", ddata_payload((m // 3 + 1) % 256, batch)))
    return out, rows


def hub_run(broker: Mosquitto, db: PostgreSQL, workdir: Path, msgs: list[tuple[str, bytes]], total: int
            ) -> tuple[float, float]:
    """Seconds from the hub's start to its last reading committed (the messages already queued for it), and
    the CPU seconds this process (the hub's threads) spent meanwhile."""
    cfg = hub_config(broker, db, workdir)
    hub = Hub(cfg)
    stop = threading.Event()
    thread = threading.Thread(target=hub.run, args=(stop,))
    thread.start()  # first start: creates the schema and the broker session with its subscription
    assert wait_until(lambda: hub.connected), "hub never connected"
    stop.set()
    thread.join()
    edge = EdgeNode(broker.port, "loadgen", [], [])
    edge.connect()
    infos = [edge.publish(topic, payload) for topic, payload in msgs]
    for info in infos:
        info.wait_for_publish(60)
    edge.close()
    hub, stop = Hub(cfg), threading.Event()
    thread = threading.Thread(target=hub.run, args=(stop,))
    start, cpu = time.perf_counter(), time.process_time()
    thread.start()
    assert wait_until(lambda: hub.counters.readings_inserted >= total, 600, 0.005), hub.counters
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stop.set()
    thread.join()
    return elapsed, cpu


def bare_copy(db: PostgreSQL, rows: list[tuple[object, ...]]) -> tuple[float, float]:
    """Seconds of one binary COPY of ``rows`` and its commit, and this process's CPU seconds meanwhile."""
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("TRUNCATE readings")
        start, cpu = time.perf_counter(), time.process_time()
        with conn.transaction(), conn.cursor() as cur, cur.copy(
                "COPY readings (site, channel, time, rseq, value, quality, pretreat_quality, reason, historical,"
                " node) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "timestamptz", "int8", "float8", "int4", "text", "text", "bool", "text"])
            for row in rows:
                copy.write_row(row)
        return time.perf_counter() - start, time.process_time() - cpu


def one_run(messages: int, metrics: int) -> tuple[float, float, str, float, float]:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    msgs, rows = payloads(messages, metrics)
    with tempfile.TemporaryDirectory(prefix="bench-hub-") as tmp:
        broker, db = Mosquitto(Path(tmp)), PostgreSQL(durable=True)
        broker.start()
        try:
            db.start()
            hub_s, hub_cpu = hub_run(broker, db, Path(tmp), msgs, len(rows))
            with psycopg.connect(db.url) as conn:
                stored = conn.execute("SELECT count(*) FROM readings").fetchone()
            assert stored == (len(rows),), f"{stored} readings stored of {len(rows)}"
            copy_s, copy_cpu = bare_copy(db, rows)
        finally:
            db.remove()
            broker.stop()
    return len(rows) / hub_s, len(rows) / copy_s, load, hub_cpu, copy_cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--metrics", type=int, default=100)
    args = ap.parse_args()
    print(f"machine: {machine()}\n")
    total = args.messages * args.metrics
    print(f"{args.messages} DDATA messages x {args.metrics} readings = {total:,} readings a run\n")
    print("| run | load average before (1/5/15 min) | hub readings/s | hub CPU s (wall s) | bare COPY readings/s "
          "| COPY CPU s (wall s) | ratio |")
    print("|---|---|---|---|---|---|---|")
    hubs, copies, ratios = [], [], []
    for i in range(args.runs):
        hub, copy, load, hub_cpu, copy_cpu = one_run(args.messages, args.metrics)
        hubs.append(hub)
        copies.append(copy)
        ratios.append(hub / copy)
        print(f"| {i + 1} | {load} | {hub:,.0f} | {hub_cpu:.2f} ({total / hub:.2f}) | {copy:,.0f} | "
              f"{copy_cpu:.2f} ({total / copy:.2f}) | {hub / copy:.2f} |", flush=True)
    print(f"| median | | **{statistics.median(hubs):,.0f}** | | {statistics.median(copies):,.0f} | | "
          f"**{statistics.median(ratios):.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
