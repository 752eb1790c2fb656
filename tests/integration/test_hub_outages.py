"""The county hub against what goes wrong in the field, end to end with real edge daemons: `pretreat run`
with an ``[uplink]`` (each its own Modbus TCP simulator and SQLite historian), one mosquitto, two `pretreat hub`
processes and a PostgreSQL cluster made by the fixture.

After each scenario PostgreSQL is compared with every edge's SQLite historian reading by reading (site, channel,
time in ms, rseq, value, quality, reason): exactly once, nothing lost, nothing invented.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from config.loader import load_config
from config.schema import SiteConfig
from simulators.runner import SiteSimulator
from tests.faults.harness import DaemonProcess, SimThread, channel, recorded, site_file, tcp_instrument
from tests.hub_support import HubProcess, alarms, count
from tests.support import PATIENCE, Mosquitto, PostgreSQL, free_port, wait_until
from tests.uplink_support import LinkProxy

OUTAGE = 20.0
"""s the broker is out of reach. The issue's scenario is 5 min; nothing in the edge or the hub depends on the
length (the edge queues on disk and retries every `max_backoff` s at most, the hub every 1..5 s; the broker keeps
the hubs' sessions), so the test uses 20 s: longer than ``edge_silence`` (the hubs say the edges are silent)
and than the edges' keepalive.

The broker is cut off the network (every client's link dropped, new connections refused), not restarted:
mosquitto 2.0.11 restores a persistent session's plain subscriptions from its persistence file but not its
shared ones (``$share/…``), so after a broker restart whatever the edges publish before the hubs have
re-subscribed has no subscriber and is dropped (README "Hub", known limits)."""


class Edge:
    """One edge daemon with its simulator: a pH and a flow meter polled every 0.2 s, one site."""

    def __init__(self, tmp: Path, node: str, site: str, broker_port: int) -> None:
        self.node, self.site = node, site
        work = tmp / node
        work.mkdir()
        ph, flow = free_port(), free_port()
        served = [tcp_instrument("ph-meter", port=ph, rmap="ph_meter", poll=0.2, timeout=0.3),
                  tcp_instrument("flow-meter", port=flow, poll=0.2, timeout=0.3)]
        channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                            valid_max=14),
                    channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate")]
        top = (f'[uplink]\nhost = "127.0.0.1"\nport = {broker_port}\nnode = "{node}"\nkeepalive = 5\n'
               "batch_size = 50\nflush_interval = 0.1\nbacklog_rate = 2000\nmax_backoff = 0.5\n")
        self.sim_config = load_config(self._named(site_file(work, instruments=served, channels=channels,
                                                            name="sim.toml")))
        self.path = self._named(site_file(work, instruments=served, channels=channels, top=top))
        self.config: SiteConfig = load_config(self.path)
        self.daemon = DaemonProcess(self.path, work / "daemon.log")

    def _named(self, path: Path) -> Path:
        path.write_text(path.read_text().replace('id = "plant"', f'id = "{self.site}"', 1))
        return path

    def recorded(self) -> dict[tuple[str, str, int, int], tuple[Any, ...]]:
        """The historian, keyed as the hub keys readings: (site, channel, ms, rseq) → (value, quality, reason)."""
        return {(r.site, r.channel, round(r.time * 1000), r.seq): (r.value, r.quality, r.reason or None)
                for r in recorded(self.config.daemon.historian)}


def stored(db: PostgreSQL, node: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db.url) as conn:
        return conn.execute("SELECT site, channel, time, rseq, value, pretreat_quality, reason FROM readings "
                            "WHERE node = %s", (node,)).fetchall()


def differences(db: PostgreSQL, edge: Edge) -> list[str]:
    """What PostgreSQL holds for the edge against its historian, reading by reading (empty: identical)."""
    rows = stored(db, edge.node)
    got: dict[tuple[str, str, int, int], tuple[Any, ...]] = {}
    problems = []
    for site, ch, t, rseq, value, quality, reason in rows:
        key = (site, ch, round((t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).total_seconds() * 1000), rseq)
        if key in got:
            problems.append(f"stored twice: {key}")
        got[key] = (value, quality, reason)
    want = edge.recorded()
    problems += [f"{edge.node} missing: {k}" for k in sorted(want.keys() - got.keys())][:5]
    problems += [f"{edge.node} not in the historian: {k}" for k in sorted(got.keys() - want.keys())][:5]
    problems += [f"{k}: historian {want[k]}, hub {got[k]}" for k in sorted(want.keys() & got.keys())
                 if want[k] != got[k]][:5]
    return problems


@pytest.fixture
def link(mosquitto: Mosquitto) -> Iterator[LinkProxy]:
    """Every edge and hub reaches the broker through this link (a test cuts it: the broker is out of reach)."""
    with LinkProxy(mosquitto.port) as proxy:
        yield proxy


@pytest.fixture
def county(tmp_path: Path, mosquitto: Mosquitto, link: LinkProxy,
           postgres: PostgreSQL) -> Iterator[dict[str, Any]]:
    """Two hubs (edges silent for more than 3 s are offline, the default 5 s of grace for a missing seq) and two
    edges, each with its simulator running."""
    hubs = [HubProcess(tmp_path, name, mosquitto, postgres, port=link.port, edge_silence=3, gap_grace=5)
            for name in ("hub-a", "hub-b")]
    edges = [Edge(tmp_path, "e1", "acme", link.port), Edge(tmp_path, "e2", "bolt", link.port)]
    with contextlib.ExitStack() as stack:
        for h in hubs:
            stack.callback(h.stop)
            h.start()
        for e in edges:
            stack.enter_context(SimThread(lambda e=e: SiteSimulator(config=e.sim_config)))
        for e in edges:
            stack.callback(e.daemon.kill)
            e.daemon.start()
        for e in edges:
            e.daemon.wait_ready()
        yield {"hubs": hubs, "edges": edges}


def stop_edges_and_compare(db: PostgreSQL, edges: list[Edge]) -> None:
    """Stop the edges (each publishes its NDEATH), then compare; once everything is stored no seq is missing:
    a gap the hubs saw while one of them lagged behind the other (more than ``gap_grace`` of the edge's time)
    was cleared when the lagging hub committed."""
    for e in edges:
        assert e.daemon.stop() == 0, e.daemon.output()[-2000:]
        assert "Traceback" not in e.daemon.output()
    for e in edges:
        assert wait_until(lambda e=e: not differences(db, e), PATIENCE * 2, 0.5), differences(db, e)
    assert wait_until(lambda: not [a for a in alarms(db) if a[0] == "edge_gap"]), alarms(db)


def test_broker_out_of_reach_then_back_every_reading_once_and_the_health_views_said_so(
        county: dict[str, Any], link: LinkProxy, postgres: PostgreSQL) -> None:
    hub_a, _ = county["hubs"]
    e1, e2 = county["edges"]
    assert wait_until(lambda: min(count(postgres, "SELECT count(*) FROM readings WHERE node = %s", (e.node,))
                                  for e in (e1, e2)) > 10), "no reading reached PostgreSQL"
    link.cut()
    down_at = time.time()
    # while it is out of reach: every hub says so, and the edges it can no longer hear are silent (edge_offline)
    assert wait_until(lambda: hub_a.snapshot().get("broker_connected") is False)
    assert wait_until(lambda: {a[1] for a in alarms(postgres) if a[0] == "edge_offline"} == {"e1", "e2"}), \
        alarms(postgres)
    # the alarms in PostgreSQL may be the other hub's: hub A's status says so once its own snapshot has them
    said = {"status": hub_a.status()}

    def status_says_offline() -> bool:
        said["status"] = hub_a.status()
        return "edge_offline e1 (sites acme)" in said["status"].stdout

    assert wait_until(status_says_offline), said["status"].stdout
    status = said["status"]
    assert status.returncode == 3 and "broker NOT connected" in status.stdout, status.stdout
    held = len(e1.recorded())
    time.sleep(max(0.0, OUTAGE - (time.time() - down_at)))  # the outage itself: the length is the scenario
    assert len(e1.recorded()) > held, "the edge stopped recording while the broker was down"
    link.restore()
    # back: the hubs reconnect, the edges are born again (bdSeq + 1) and their backlog arrives as history
    assert wait_until(lambda: hub_a.snapshot().get("broker_connected") is True)
    assert wait_until(lambda: not alarms(postgres)), alarms(postgres)
    outage = "SELECT count(*) FROM readings WHERE historical AND time BETWEEN to_timestamp(%s) AND to_timestamp(%s)"
    assert wait_until(lambda: count(postgres, outage, (down_at + 1, down_at + OUTAGE - 1)) > 0), \
        "nothing recorded during the outage arrived flagged historical"
    with psycopg.connect(postgres.url) as conn:
        assert conn.execute("SELECT node, bdseq FROM edges ORDER BY node").fetchall() == [("e1", 1), ("e2", 1)]
        history = conn.execute("SELECT node, cleared_at IS NOT NULL FROM hub_alarms WHERE kind = 'edge_offline' "
                               "ORDER BY node").fetchall()
    # kept, every one cleared (an edge may have two: silent while cut off, then its NDEATH delivered late)
    assert set(history) == {("e1", True), ("e2", True)}, history
    stop_edges_and_compare(postgres, [e1, e2])


def test_an_edge_killed_and_restarted_is_born_again_and_doubles_nothing(
        county: dict[str, Any], postgres: PostgreSQL) -> None:
    """SIGKILL an edge mid-stream: the broker publishes its NDEATH (the hubs raise edge_offline with its site);
    restarted, it is born with the next bdSeq, its seq starts again at 0 (no edge_gap), and the readings whose
    PUBACK the kill lost come again with the same key: stored once."""
    hub_a, _ = county["hubs"]
    e1, e2 = county["edges"]
    assert wait_until(lambda: count(postgres, "SELECT count(*) FROM readings WHERE node = 'e1'") > 20)
    e1.daemon.signal(signal.SIGKILL)
    assert wait_until(lambda: [a[:3] for a in alarms(postgres)] == [("edge_offline", "e1", ["acme"])]), \
        alarms(postgres)
    assert "NDEATH (bdSeq 0)" in alarms(postgres)[0][3]
    assert wait_until(lambda: any(a["kind"] == "edge_offline" for a in hub_a.snapshot().get("alarms", [])))
    assert hub_a.status().returncode == 3
    e1.daemon.start()
    e1.daemon.wait_ready()
    assert wait_until(lambda: not alarms(postgres)), alarms(postgres)
    with psycopg.connect(postgres.url) as conn:
        assert conn.execute("SELECT bdseq, died_at FROM edges WHERE node = 'e1'").fetchone() == (1, None)
    stop_edges_and_compare(postgres, [e1, e2])
