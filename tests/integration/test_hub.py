"""The county hub end to end on real servers: mosquitto, PostgreSQL (initdb'd by the fixture), hubs as
`pretreat hub` processes, and edges simulated by the Sparkplug load generator (tests/sparkplug_load.py).

Every test compares PostgreSQL with the generator's ground truth reading by reading: exactly once, nothing lost.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.hub_support import ROOT, HubProcess, alarms, count
from tests.sparkplug_load import EdgeNode
from tests.support import PATIENCE, Mosquitto, PostgreSQL, wait_until

NOV_30_235900 = 1_796_083_140_000
"""2026-11-30 23:59:00 UTC in ms: a run of readings from here crosses into December (two monthly partitions)."""
CHANNELS = ["ph", "temp", "flow"]


@pytest.fixture
def hubs(tmp_path: Path, mosquitto: Mosquitto, postgres: PostgreSQL) -> Any:
    started: list[HubProcess] = []

    def make(name: str, **hub: Any) -> HubProcess:
        h = HubProcess(tmp_path, name, mosquitto, postgres, **hub)
        started.append(h)  # before start: a hub that never connects is stopped all the same
        h.start()
        return h

    yield make
    for h in started:
        h.stop()


@pytest.fixture
def edges(mosquitto: Mosquitto) -> Any:
    made: list[EdgeNode] = []

    def make(node: str, sites: list[str], **kw: Any) -> EdgeNode:
        e = EdgeNode(mosquitto.port, node, sites, CHANNELS, **kw)
        e.connect()
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def stored(db: PostgreSQL) -> list[tuple[Any, ...]]:
    with psycopg.connect(db.url) as conn:
        return conn.execute(
            "SELECT site, channel, (extract(epoch FROM time) * 1000)::bigint, rseq, value FROM readings").fetchall()


def publish(edge: EdgeNode, start: int, n: int, **kw: Any) -> None:
    """``n`` seconds of readings for every site of the edge, from ``start`` (ms), each a DDATA; waits for PUBACKs."""
    infos = [edge.data(site, start + i * 1000, **kw) for i in range(n) for site in edge.sites]
    for info in infos:
        info.wait_for_publish(PATIENCE)


def assert_exactly_once(db: PostgreSQL, sent: list[tuple[Any, ...]]) -> None:
    assert wait_until(lambda: count(db) >= len(set(sent))), f"{count(db)} of {len(set(sent))} readings arrived"
    rows = stored(db)
    assert len(rows) == len(set(rows)), "a reading was stored twice"
    assert sorted(rows, key=str) == sorted(set(sent), key=str)


def test_three_edges_two_hubs_every_reading_exactly_once(hubs: Any, edges: Any, postgres: PostgreSQL) -> None:
    a, b = hubs("hub-a"), hubs("hub-b")
    e1, e2, e3 = edges("e1", ["acme", "bolt"]), edges("e2", ["cast"]), edges("e3", ["dyes"])
    for edge in (e1, e2, e3):
        publish(edge, NOV_30_235900, 120, bad={"flow"} if edge is e2 else set())
        for seq, site in enumerate(edge.sites, start=1):
            edge.event("episode", seq, site, rule="ph_min", start="2026-11-30T23:59:10Z")
            edge.event("episode", seq, site, rule="ph_min", start="2026-11-30T23:59:10Z")  # a replay: no new row
    # an edge's backlog replayed after an outage (same rseq, flagged historical) adds nothing
    e3.rseq -= 3 * 120
    publish(e3, NOV_30_235900, 120, historical=True)
    assert_exactly_once(postgres, e1.sent + e2.sent + e3.sent)
    assert len(set(e3.sent)) == 360 and len(e3.sent) == 720

    assert count(postgres, "SELECT count(*) FROM readings WHERE value IS NULL AND reason = 'timeout'") == 120
    # 4 sites x 3 channels x 60 s on each side of midnight, each month in its own partition
    assert count(postgres, "SELECT count(*) FROM readings_y2026m11") == 720
    assert count(postgres, "SELECT count(*) FROM readings_y2026m12") == 720
    assert count(postgres, "SELECT count(*) FROM readings WHERE historical") == 0
    assert count(postgres, "SELECT count(*) FROM episodes") == 4
    with psycopg.connect(postgres.url) as conn:
        assert conn.execute("SELECT node, sites FROM edges ORDER BY node").fetchall() == [
            ("e1", ["acme", "bolt"]), ("e2", ["cast"]), ("e3", ["dyes"])]
        assert conn.execute("SELECT count(*) FROM channels").fetchone() == (12,)
    # both hubs took a share of the subscription
    assert wait_until(lambda: a.snapshot().get("messages", 0) > 0 and b.snapshot().get("messages", 0) > 0)
    assert wait_until(lambda: not a.snapshot().get("alarms") and a.snapshot().get("edges")), a.snapshot()


def test_a_hub_killed_mid_stream_loses_and_doubles_nothing(hubs: Any, edges: Any, postgres: PostgreSQL) -> None:
    """SIGKILL one of two hubs while readings stream in: what it held unacknowledged stays in its broker
    session and comes back when it restarts; what it committed but had not acknowledged is written as nothing."""
    a, b = hubs("hub-a"), hubs("hub-b")
    e1, e2, e3 = edges("e1", ["acme"]), edges("e2", ["bolt"]), edges("e3", ["cast", "dyes"])
    infos = [e.data(site, NOV_30_235900 + i * 1000) for i in range(400) for e in (e1, e2, e3) for site in e.sites]
    assert wait_until(lambda: a.snapshot().get("batches", 0) >= 1), "hub-a committed nothing"
    a.kill()
    killed_at = count(postgres)
    infos += [e.data(site, NOV_30_235900 + (400 + i) * 1000) for i in range(100) for e in (e1, e2, e3)
              for site in e.sites]
    for info in infos:
        info.wait_for_publish(PATIENCE)
    # the surviving hub keeps storing its share meanwhile
    assert wait_until(lambda: count(postgres) > killed_at)
    a.start()
    assert_exactly_once(postgres, e1.sent + e2.sent + e3.sent)
    assert wait_until(lambda: a.snapshot().get("messages", 0) > 0), "the restarted hub got its session back"
    assert b.snapshot()["messages"] > 0


def test_postgres_restarted_mid_stream(hubs: Any, edges: Any, postgres: PostgreSQL) -> None:
    hub = hubs("hub-a")
    e1 = edges("e1", ["acme", "bolt"])
    publish(e1, NOV_30_235900, 50)
    assert wait_until(lambda: count(postgres) == 300)
    postgres.stop()
    publish(e1, NOV_30_235900 + 50_000, 50)
    assert wait_until(lambda: hub.snapshot().get("database_error")), "the health file never said the database is down"
    status = subprocess.run([sys.executable, "-m", "monitor.cli", "hub", "status", "--config", str(hub.config)],
                            cwd=ROOT, capture_output=True, text=True)
    assert status.returncode == 3 and "database unavailable" in status.stdout, status.stdout
    postgres.start()
    publish(e1, NOV_30_235900 + 100_000, 50)
    assert_exactly_once(postgres, e1.sent)
    assert wait_until(lambda: hub.snapshot().get("database_error") is None)


def test_gap_death_and_silence_raise_alarms_with_the_sites(hubs: Any, edges: Any, postgres: PostgreSQL) -> None:
    hubs("hub-a", edge_silence=3)
    hub = hubs("hub-b", edge_silence=3)
    e1, e2 = edges("e1", ["acme", "bolt"]), edges("e2", ["cast"])
    publish(e1, NOV_30_235900, 3)
    e1.skip()  # a message the hubs never get
    publish(e1, NOV_30_235900 + 3_000, 3)
    # the gap is judged once the edge has sent past it by gap_grace (1 s of the edge's clock): both edges go on
    # sending, one DDATA every 0.1 s of wall time (the scenario's pace), until the alarm is raised
    t, deadline = NOV_30_235900 + 6_000, time.monotonic() + PATIENCE
    while not any(k == "edge_gap" for k, *_ in alarms(postgres)):
        assert time.monotonic() < deadline, f"no edge_gap alarm: {alarms(postgres)}"
        publish(e1, t, 1)
        publish(e2, t, 1)
        t += 1000
        time.sleep(0.1)
    assert [a[:3] for a in alarms(postgres)] == [("edge_gap", "e1", ["acme", "bolt"])]

    e1.close(die=True)  # the broker publishes e1's NDEATH, its last will
    assert wait_until(lambda: [a[:3] for a in alarms(postgres) if a[0] == "edge_offline"] == [
        ("edge_offline", "e1", ["acme", "bolt"])]), alarms(postgres)
    assert "NDEATH" in next(a[3] for a in alarms(postgres) if a[0] == "edge_offline")
    # e2 says nothing for longer than edge_silence (3 s): offline too
    assert wait_until(lambda: ("edge_offline", "e2", ["cast"]) in [a[:3] for a in alarms(postgres)]), alarms(postgres)
    status = subprocess.run([sys.executable, "-m", "monitor.cli", "hub", "status", "--config", str(hub.config)],
                            cwd=ROOT, capture_output=True, text=True)
    assert status.returncode == 3, status.stdout
    assert "edge_offline e1 (sites acme, bolt)" in status.stdout and "edge_gap e1" in status.stdout, status.stdout

    # e1 born again (next bdSeq): its offline and gap alarms clear; the history keeps them
    e1.bdseq += 1
    e1.connect()
    assert wait_until(lambda: [a[:2] for a in alarms(postgres)] == [("edge_offline", "e2")]), alarms(postgres)
    assert len(alarms(postgres, open_only=False)) == 3


def test_bad_messages_are_refused_with_their_reason(hubs: Any, edges: Any, postgres: PostgreSQL,
                                                   mosquitto: Mosquitto) -> None:
    hubs("hub-a")
    e1 = edges("e1", ["acme"])
    assert e1.client is not None
    e1.publish("spBv1.0/pretreat/DDATA/e1/acme", b"\xff\x00 not protobuf").wait_for_publish(PATIENCE)
    e1.publish("pretreat/v1/pretreat/e1/events", b"{not json").wait_for_publish(PATIENCE)
    e1.publish("pretreat/v1/pretreat/e1/events", b'{"type": "verdict", "seq": 1}').wait_for_publish(PATIENCE)
    publish(e1, NOV_30_235900, 5)
    assert_exactly_once(postgres, e1.sent)
    assert wait_until(lambda: count(postgres, "SELECT count(*) FROM hub_rejects") == 3)
    with psycopg.connect(postgres.url) as conn:
        reasons = [r for (r,) in conn.execute("SELECT reason FROM hub_rejects ORDER BY id")]
    assert "not a Sparkplug B payload" in reasons[0] and "not JSON" in reasons[1]
    assert "must be one of episode, revision, alarm, seal" in reasons[2]


def test_the_inbox_stays_within_the_receive_maximum_while_the_database_is_down(hubs: Any, edges: Any,
                                                                              postgres: PostgreSQL) -> None:
    """A hub that cannot commit holds at most ``receive_maximum`` messages (the broker keeps the rest in the
    hub's session, MQTT 5 Receive Maximum), and when the database is back every reading arrives once."""
    hub = hubs("hub-a", receive_maximum=20, max_batch=5)
    e1 = edges("e1", ["acme", "bolt"])
    publish(e1, NOV_30_235900, 10)
    assert wait_until(lambda: count(postgres) == 60)
    postgres.stop()
    publish(e1, NOV_30_235900 + 10_000, 150)  # 300 messages, the broker PUBACKs the edge for each
    assert wait_until(lambda: hub.snapshot().get("database_error") and hub.snapshot().get("queued", 0) >= 10)
    snap = hub.snapshot()  # inbox_peak: the most the inbox ever held (the hub's own count, at each put)
    assert snap["queue_bound"] == 20 and snap["queued"] <= 20 and snap["inbox_peak"] <= 20, snap
    postgres.start()
    assert_exactly_once(postgres, e1.sent)
    assert wait_until(lambda: hub.snapshot().get("batches", 0) >= 300 // 5)
    assert hub.snapshot()["inbox_peak"] <= 20, hub.snapshot()
