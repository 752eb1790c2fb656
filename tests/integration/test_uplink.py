"""The Sparkplug B uplink end to end: `pretreat run` with an ``[uplink]`` table, Modbus TCP instruments from
our simulator, a real mosquitto as the county's broker, and a plain subscriber that decodes every payload with
an independent decoder (`tests.sparkplug_wire`) and compares what a hub would store with the historian,
reading by reading. The edge reaches the broker through a TCP link the tests cut (`tests.uplink_support`)."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from config.uplink import UplinkSettings
from monitor.cli import main
from monitor.stores.readonly import connect_readonly
from monitor.uplink.events import seal_event
from monitor.uplink.publisher import MARK, UplinkPublisher
from simulators.runner import SiteSimulator
from tests.faults.harness import SITE, DaemonProcess, Row, SimThread, recorded
from tests.support import Mosquitto, eventually, wait_until
from tests.uplink_support import NODE, Capture, LinkProxy, Metric, uplink_site


def hub_view(metrics: list[Metric]) -> dict[tuple[str, str, int, int], Metric]:
    """What a hub keyed by (site, channel, time, rseq) keeps: one row per key."""
    out: dict[tuple[str, str, int, int], Metric] = {}
    for m in metrics:
        key = (m.site, m.channel, m.ms, m.rseq)
        seen = out.setdefault(key, m)
        assert (seen.value, seen.pretreat_quality) == (m.value, m.pretreat_quality), f"one key, two readings: {m}"
    return out


def compare(rows: list[Row], metrics: list[Metric]) -> list[str]:
    """Differences between the historian and what the broker delivered (empty: identical)."""
    view = hub_view(metrics)
    expected = {(r.site, r.channel, round(r.time * 1000), r.seq): r for r in rows}
    problems = [f"missing: {k}" for k in sorted(expected.keys() - view.keys())]
    problems += [f"not in the historian: {k}" for k in sorted(view.keys() - expected.keys())]
    for key, r in expected.items():
        m = view.get(key)
        if m is None:
            continue
        if m.pretreat_quality != r.quality or m.value != r.value:
            problems.append(f"{key}: historian {r.value!r} {r.quality}, broker {m.value!r} {m.pretreat_quality}")
        if (m.quality == 192) != r.good or (not r.good and m.reason != r.reason):
            problems.append(f"{key}: Quality {m.quality} reason {m.reason!r} for {r.quality} {r.reason!r}")
    return problems


def all_delivered(capture: Capture, config: SiteConfig) -> bool:
    return not compare(recorded(config.daemon.historian), capture.readings())


def test_birth_data_seq_wrap_and_death_then_every_reading_once(tmp_path: Path, mosquitto: Mosquitto) -> None:
    path, sim = uplink_site(tmp_path, mosquitto.port, batch_size=1)  # one DDATA a reading: the seq wraps soon
    config = load_config(path)
    daemon = DaemonProcess(path, tmp_path / "daemon.log")
    try:
        with SimThread(lambda: SiteSimulator(config=sim)), Capture(mosquitto.port) as cap:
            daemon.start()
            daemon.wait_ready()
            assert cap.wait_for(lambda: len(cap.of("DDATA")) > 300), daemon.output()[-2000:]
            assert daemon.stop() == 0
            assert cap.wait_for(lambda: cap.of("NDEATH"))
            assert cap.wait_for(lambda: all_delivered(cap, config), 30), compare(
                recorded(config.daemon.historian), cap.readings())[:5]
            messages = cap.snapshot()
    finally:
        daemon.kill()
    spb = [m for m in messages if m.payload is not None]
    assert spb[0].kind == "NBIRTH" and spb[0].topic == f"spBv1.0/pretreat/NBIRTH/{NODE}"
    birth = spb[0].payload
    assert birth is not None and birth.seq == 0
    bdseq = birth.metric("bdSeq").value
    assert birth.metric("Node Control/Rebirth").value is False
    dbirth = spb[1]
    assert dbirth.topic == f"spBv1.0/pretreat/DBIRTH/{NODE}/{SITE}" and dbirth.payload is not None
    assert dbirth.payload.seq == 1
    metrics = {m.name: m for m in dbirth.payload.metrics}
    assert set(metrics) == {"ph", "flow", "ph2"}
    assert metrics["ph"].datatype == 10 and metrics["ph"].properties == {
        "engUnit": "pH", "kind": "ph", "engLow": 0.0, "engHigh": 14.0}
    assert metrics["ph2"].properties == {"engUnit": "pH", "kind": "ph"}  # no span configured: no limits
    # every message after NBIRTH takes the next seq, 255 wrapping to 0
    seqs = [m.payload.seq for m in spb[1:] if m.kind in ("DBIRTH", "DDATA")]  # type: ignore[union-attr]
    assert seqs == [(1 + i) % 256 for i in range(len(seqs))]
    assert 0 in seqs[1:], "the seq never wrapped"
    death = spb[-1]
    assert death.kind == "NDEATH" and death.payload is not None and death.payload.metric("bdSeq").value == bdseq
    got = cap.readings()
    assert not any(m.historical for m in got), "nothing was queued across an outage: nothing is history"
    assert len(got) == len(hub_view(got)), "a reading was published twice without any outage"
    bad = [m for m in got if m.pretreat_quality != "good"]
    opc = {"stale": 500}  # OPC/Ignition: stale 500, every other bad quality 0
    wrong = [m for m in bad if not (m.value is None and m.quality == opc.get(m.pretreat_quality, 0) and m.reason)]
    assert bad and not wrong, wrong[:3]
    assert {m.pretreat_quality for m in bad} >= {"comm_failure", "stale"}
    # the record's events beside it: every stored episode event once, every alarm transition, keyed by seq
    events = [m.event for m in messages if m.event is not None]
    assert all(m.topic == f"pretreat/v1/pretreat/{NODE}/events" for m in messages if m.event is not None)
    conn = connect_readonly(config.daemon.historian)
    try:
        stored = conn.execute("SELECT id, site, channel, rule, event, time FROM episode_events ORDER BY id").fetchall()
        journaled = [r[0] for r in conn.execute("SELECT seq FROM journal WHERE kind = 'transition' ORDER BY seq")]
    finally:
        conn.close()
    episodes = [(e["seq"], e["site"], e["channel"], e["rule"], e["event"], e["time"]) for e in events
                if e["type"] == "episode"]
    assert stored and episodes == [tuple(r) for r in stored]
    alarms = [e["seq"] for e in events if e["type"] == "alarm"]
    assert alarms and alarms == sorted(set(alarms)) and set(alarms) <= set(journaled)
    assert all(m.quality == 192 and m.value is not None for m in got if m.pretreat_quality == "good")


def test_rebirth_on_command(tmp_path: Path, mosquitto: Mosquitto) -> None:
    path, sim = uplink_site(tmp_path, mosquitto.port, dead_meter=False)
    daemon = DaemonProcess(path, tmp_path / "daemon.log")
    try:
        with SimThread(lambda: SiteSimulator(config=sim)), Capture(mosquitto.port) as cap:
            daemon.start()
            daemon.wait_ready()
            assert cap.wait_for(lambda: len(cap.of("DDATA")) > 5)
            before = len(cap.snapshot())
            cap.rebirth(NODE)
            assert cap.wait_for(lambda: len(cap.of("NBIRTH")) == 2 and len(cap.of("DDATA")) > 20)
            assert daemon.stop() == 0
            messages = cap.snapshot()
    finally:
        daemon.kill()
    births = [m for m in messages if m.kind == "NBIRTH"]
    first, second = (b.payload for b in births)
    assert first is not None and second is not None
    assert second.seq == 0 and second.metric("bdSeq").value == first.metric("bdSeq").value  # same session
    after = [m for m in messages[messages.index(births[1]):] if m.payload is not None and m.kind != "NDEATH"]
    assert after[1].kind == "DBIRTH" and after[1].payload is not None and after[1].payload.seq == 1
    assert [m.payload.seq for m in after] == [i % 256 for i in range(len(after))]  # type: ignore[union-attr]
    assert before < messages.index(births[1])


def test_link_down_then_back_backlog_is_history_in_order_and_live_is_not_delayed(
        tmp_path: Path, mosquitto: Mosquitto, capsys: pytest.CaptureFixture[str]) -> None:
    with LinkProxy(mosquitto.port) as link:
        # backlog at 40 readings/s: the ~20 readings/s recorded during the outage take a while to drain
        path, sim = uplink_site(tmp_path, link.port, backlog_rate=40, batch_size=20, dead_meter=False)
        config = load_config(path)
        daemon = DaemonProcess(path, tmp_path / "daemon.log")
        try:
            with SimThread(lambda: SiteSimulator(config=sim)), Capture(mosquitto.port) as cap:
                daemon.start()
                daemon.wait_ready()
                assert cap.wait_for(lambda: len(cap.readings()) > 20)
                link.cut()
                assert cap.wait_for(lambda: cap.of("NDEATH")), "the broker did not publish the last will"
                cut_at = time.time()
                assert wait_until(lambda: len(recorded(config.daemon.historian)) > 400, 60, 0.2)
                main(["status", "--config", str(path)])  # the health snapshot says what is going on
                status = capsys.readouterr().out
                link.restore()
                back_at = time.time()
                assert cap.wait_for(lambda: len(cap.of("NBIRTH")) == 2)
                assert cap.wait_for(lambda: all_delivered(cap, config), 90), compare(
                    recorded(config.daemon.historian), cap.readings())[:5]
                assert daemon.stop() == 0
                assert "Traceback" not in daemon.output()
        finally:
            daemon.kill()
    assert re.search(r"uplink +bdSeq 0, broker down, queue [1-9]\d* \(oldest ", status), status
    births = [m.payload for m in cap.of("NBIRTH")]
    assert births[1] is not None and births[0] is not None
    assert births[1].metric("bdSeq").value == (births[0].metric("bdSeq").value + 1) % 256
    will = cap.of("NDEATH")[0].payload
    assert will is not None and will.metric("bdSeq").value == births[0].metric("bdSeq").value
    got = cap.readings()
    history = [m for m in got if m.historical]
    recorded_in_outage = [m for m in got if cut_at + 1 < m.ms / 1000 < back_at - 1]
    assert recorded_in_outage and all(m.historical for m in recorded_in_outage)
    # the backlog in order: historical readings arrive in rseq order (a repeat of one in flight at the cut aside)
    rseqs = [m.rseq for m in history]
    firsts = [q for i, q in enumerate(rseqs) if q not in rseqs[:i]]
    assert firsts == sorted(firsts)
    # nothing doubled beyond what was in flight when the link dropped, and each repeat is the same reading
    repeats = Counter((m.site, m.channel, m.ms, m.rseq) for m in got)
    assert sum(n - 1 for n in repeats.values()) <= 20 * 4 + 20
    # live not delayed: readings taken after the reconnect arrived while the backlog was still draining
    last_history = max(m.arrived for m in history)
    live_during = [m for m in got if not m.historical and m.ms / 1000 > back_at and m.arrived < last_history - 1]
    assert live_during, f"no live reading arrived during the {last_history - back_at:.1f} s drain"
    lags = sorted(m.arrived - m.ms / 1000 for m in live_during)
    assert lags[len(lags) // 2] < 3.0, lags


def test_sigkill_mid_backlog_loses_nothing_and_the_last_will_says_so(tmp_path: Path, mosquitto: Mosquitto) -> None:
    with LinkProxy(mosquitto.port) as link:
        # readings wait up to three seconds in memory before they are queued: the window a kill used to lose
        # (at one second, a kill on a machine at load 5 once found nothing in memory and the test proved less)
        path, sim = uplink_site(tmp_path, link.port, backlog_rate=40, batch_size=20, dead_meter=False,
                                flush_interval=3.0)
        config = load_config(path)
        daemon = DaemonProcess(path, tmp_path / "daemon.log")
        try:
            with SimThread(lambda: SiteSimulator(config=sim)), Capture(mosquitto.port) as cap:
                daemon.start()
                daemon.wait_ready()
                assert cap.wait_for(lambda: len(cap.readings()) > 20)
                link.cut()
                assert wait_until(lambda: len(recorded(config.daemon.historian)) > 500, 60, 0.2)
                link.restore()
                assert cap.wait_for(lambda: len([m for m in cap.readings() if m.historical]) > 40)
                deaths = len(cap.of("NDEATH"))
                # kill at a moment the historian holds readings the uplink has not yet queued on disk (they are
                # only in its memory): a spool that happens to follow a commit empties it for a moment
                assert wait_until(lambda: unqueued(config) >= 5, 30, 0.01), "every committed reading queued"
                daemon.signal(signal.SIGKILL)  # mid-backlog, and with readings only in memory
                assert cap.wait_for(lambda: len(cap.of("NDEATH")) > deaths), "no last will after SIGKILL"
                will = cap.of("NDEATH")[-1].payload
                daemon.start()
                daemon.wait_ready()
                assert cap.wait_for(lambda: all_delivered(cap, config), 120), compare(
                    recorded(config.daemon.historian), cap.readings())[:5]
                assert daemon.stop() == 0
                log = daemon.log.read_text()
        finally:
            daemon.kill()
    births = [m.payload for m in cap.of("NBIRTH")]
    assert will is not None and births[-2] is not None and births[-1] is not None
    assert will.metric("bdSeq").value == births[-2].metric("bdSeq").value  # the will of the killed session
    assert births[-1].metric("bdSeq").value == (births[-2].metric("bdSeq").value + 1) % 256
    assert "Traceback" not in log
    assert "re-queuing the readings" in log, "the kill left nothing in memory to re-queue: the test proved less"


def unqueued(config: SiteConfig) -> int:
    """Readings the historian has committed and the uplink has not yet queued on disk: after its mark (every
    reading with a lower seq is queued, `monitor.uplink.publisher.MARK`); 0 while either file is not there."""
    assert config.uplink is not None
    if not config.daemon.historian.exists() or not config.uplink.queue_path.exists():
        return 0
    with contextlib.closing(connect_readonly(config.daemon.historian)) as h, \
            contextlib.closing(connect_readonly(config.uplink.queue_path)) as q:
        top = h.execute("SELECT max(seq) FROM readings").fetchone()[0]
        row = q.execute("SELECT value FROM marks WHERE key = ?", (MARK,)).fetchone()
    return 0 if top is None or row is None else int(top) + 1 - int(row[0])


async def test_seal_events_queue_through_an_outage_and_arrive_once_in_order(tmp_path: Path,
                                                                          mosquitto: Mosquitto) -> None:
    """The events topic on its own (in process): seal events submitted while the broker is unreachable wait in
    the queue file and arrive, in order, once it is reachable; the JSON is the contract's."""
    with LinkProxy(mosquitto.port) as link:
        link.cut()
        settings = UplinkSettings(host="127.0.0.1", port=link.port, node=NODE, flush_interval=0.05,
                                  max_backoff=0.2, queue_path=tmp_path / "q.sqlite")
        pub = UplinkPublisher(settings=settings, channels=[])
        await pub.start()
        try:
            pub.submit_events([seal_event((seq, f"{seq:064x}"), 1_700_000_000.0 + seq, [SITE])
                               for seq in range(1, 6)])
            assert await eventually(lambda: pub.counters.queue_depth == 5)
            with Capture(mosquitto.port) as cap:
                link.restore()
                assert await eventually(lambda: pub.counters.queue_depth == 0 and len(cap.of("events")) == 5)
                events = [m.event for m in cap.of("events")]
        finally:
            await pub.close()
    assert [e["seq"] for e in events if e is not None] == [1, 2, 3, 4, 5]
    assert events[0] == {"type": "seal", "seq": 1, "site": SITE, "sites": [SITE], "hash": f"{1:064x}",
                         "time": 1_700_000_001.0}


def test_an_episode_found_at_warm_up_reaches_the_hub(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """The daemon stopped after committing an excursion's readings and before recording its episode (evidence
    before verdict: readings first). At the next start the warm-up finds the episode and records it; it must then
    go to the hub as a live one does. Before, only the edge's file had it: the warm-up's new rows were never sent."""
    import asyncio

    from monitor.sample import Sample
    from monitor.stores.historian import Historian

    path, _sim = uplink_site(tmp_path, mosquitto.port, dead_meter=False)
    config = load_config(path)
    t0 = time.time() - 60

    async def commit_readings() -> None:  # what the killed daemon left: the readings, no episode
        historian = Historian(path=config.daemon.historian, commit_interval=0.05)
        await historian.start()
        historian.submit([Sample(t0 + k, SITE, "ph", 3.0 if 10 <= k < 20 else 7.0, "pH") for k in range(40)])
        await historian.flush()
        await historian.close()

    asyncio.run(commit_readings())
    daemon = DaemonProcess(path, tmp_path / "daemon.log")
    try:
        with Capture(mosquitto.port) as cap:
            daemon.start()
            daemon.wait_ready()

            def found() -> list[dict[str, object]]:
                return [m.event for m in cap.of("events") if m.event is not None and m.event["type"] == "episode"
                        and m.event["rule"] == "ph_low"]

            assert cap.wait_for(lambda: len(found()) == 2, 30), daemon.output()[-2000:]
            assert daemon.stop() == 0
    finally:
        daemon.kill()
    conn = connect_readonly(config.daemon.historian)
    try:
        stored = conn.execute("SELECT id, event, time FROM episode_events WHERE rule = 'ph_low' ORDER BY id").fetchall()
    finally:
        conn.close()
    assert [(e["seq"], e["event"], e["time"]) for e in found()] == [tuple(r) for r in stored]
    assert [r[1:] for r in stored] == [("start", t0 + 10), ("end", t0 + 20)]
    assert "not recorded; recorded now" in daemon.output()
