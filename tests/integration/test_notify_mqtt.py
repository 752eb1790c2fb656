"""MQTT delivery to the plant's SCADA through a real mosquitto: retained state per alarm, an ordered QoS 1
event stream, the online/offline status, acknowledgements from SCADA reaching the engine (and bad ones
refused), and a broker outage after which every event arrives once, in order."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.dispatcher import Dispatcher
from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, AlarmSettings, Kind, Priority, State, Transition
from alarms.notifiers.base import NotifierContext
from alarms.notifiers.mqtt import MqttNotifier, parse_command
from config.alarms import AlarmConfig
from config.notify import MqttNotify, NotifierConfig, NotifierKind, NotifySection
from drivers.backoff import Backoff
from tests.notify_servers import MqttProbe
from tests.support import PATIENCE, Mosquitto, eventually

T0 = 1_700_000_000.0
PREFIX = "pretreat/test"
PH, LEL = "acme/ph/ph_high", "acme/lel/lel_single"
QUICK = Backoff(initial=0.1, maximum=0.5, jitter=0.0, stable_after=0.5)


def tr(seq: int, alarm: str = PH, kind: Kind = Kind.RAISE, to: State = State.ACTIVE_UNACKED) -> Transition:
    return Transition(time=T0 + seq, alarm_id=alarm, kind=kind, from_state=State.NORMAL, to_state=to,
                      priority=Priority.HIGH, who="system", why=f"step {seq}", value=float(seq), limit=10.5,
                      citation="§ 1", seq=seq)


def make(tmp_path: Path, port: int, context: NotifierContext | None = None) -> Dispatcher:
    settings = MqttNotify(host="127.0.0.1", port=port, client_id=f"pretreat-alarms-{port}",
                          topic_prefix=PREFIX)
    cfg = AlarmConfig(notify=NotifySection(channels=(NotifierConfig(
        id="scada", kind=NotifierKind.MQTT, settings=settings, every_transition=True),),
        state_dir=tmp_path / "notify"))
    notifier = MqttNotifier(id="scada", settings=settings, context=context, backoff=QUICK)
    return Dispatcher(config=cfg, notifiers={"scada": notifier}, context=context)


def seqs(probe: MqttProbe) -> list[int]:
    return [m.json()["seq"] for m in probe.messages(f"{PREFIX}/events")]


def first_deliveries(probe: MqttProbe) -> list[int]:
    """`seqs` without the broker's re-deliveries to the probe (flagged DUP): a broker stopped before it had the
    probe's PUBACKs sends those messages again on its return, which is the subscriber leg's at-least-once, not
    the daemon's (SCADA drops them by seq). A duplicate the daemon sent is no re-delivery and still counts."""
    return [m.json()["seq"] for m in probe.messages(f"{PREFIX}/events") if not m.dup]


async def test_events_in_order_retained_state_and_status(tmp_path: Path, mosquitto: Mosquitto) -> None:
    probe = MqttProbe(mosquitto.port, [f"{PREFIX}/#"]).start()
    d = make(tmp_path, mosquitto.port, NotifierContext(units={("acme", "ph"): "pH"}))
    await d.start()
    try:
        d.submit([tr(i, PH if i % 2 else LEL) for i in range(1, 41)]
                 + [tr(41, PH, Kind.ACK, State.ACTIVE_ACKED)])
        assert await d.wait_idle(10)
        assert await eventually(lambda: len(seqs(probe)) == 41)
        assert seqs(probe) == list(range(1, 42))  # every transition, once, in journal order
        first = probe.messages(f"{PREFIX}/events")[0].json()
        assert {k: first[k] for k in ("alarm", "site", "channel", "rule", "kind", "from", "state", "priority",
                                      "value", "unit", "limit", "citation", "time", "level", "who", "why")} == {
            "alarm": PH, "site": "acme", "channel": "ph", "rule": "ph_high", "kind": "raise", "from": "normal",
            "state": "active-unacknowledged", "priority": "high", "value": 1.0, "unit": "pH", "limit": 10.5,
            "citation": "§ 1", "time": T0 + 1, "level": 1, "who": "system", "why": "step 1"}
        # a SCADA client connecting now gets the current state of each alarm, retained, and the status
        late = MqttProbe(mosquitto.port, [f"{PREFIX}/status", f"{PREFIX}/alarm/#"]).start()
        assert await eventually(lambda: len(late.messages()) >= 3)
        retained = {m.topic: m for m in late.messages() if m.retain}
        assert retained[f"{PREFIX}/status"].payload == b"online"
        ph_state = retained[f"{PREFIX}/alarm/{PH}/state"].json()
        assert (ph_state["state"], ph_state["seq"], ph_state["changed"]) == ("active-acknowledged", 41, T0 + 41)
        assert retained[f"{PREFIX}/alarm/{LEL}/state"].json()["seq"] == 40
        late.stop()
    finally:
        await d.stop()
    assert await eventually(lambda: probe.messages(f"{PREFIX}/status")[-1].payload == b"offline")
    probe.stop()


async def test_scada_acknowledgement_reaches_the_engine_and_bad_commands_are_refused(
        tmp_path: Path, mosquitto: Mosquitto) -> None:
    engine = AlarmEngine(path=tmp_path / "alarms.sqlite", now=T0,
                         alarms=[("acme", "ph", "ph_high", AlarmSettings(priority=Priority.HIGH))])
    raised = engine.apply(AlarmInput(time=T0, site="acme", channel="ph", rule="ph_high", active=True,
                                     value=11.0, limit=10.5), T0)
    d: Dispatcher | None = None

    def on_command(alarm: str, action: str, user: str, note: str) -> object:
        assert action == "ack"
        result = engine.ack(alarm, user=user, note=note, now=time.time())
        if isinstance(result, list) and d is not None:
            d.submit(result)
        return result

    ctx = NotifierContext(on_command=on_command, known_alarms=frozenset({PH}), alarm_states=engine.states)
    d = make(tmp_path, mosquitto.port, ctx)
    probe = MqttProbe(mosquitto.port, [f"{PREFIX}/command/result", f"{PREFIX}/events",
                                       f"{PREFIX}/alarm/#"]).start()
    publish = probe.client.publish
    command = f"{PREFIX}/command/ack"
    # a command left retained on the broker would be replayed at every (re)subscription: refused
    publish(command, json.dumps({"alarm": PH, "user": "ann"}), qos=1, retain=True).wait_for_publish(5)
    await d.start()
    try:
        d.submit(raised)
        assert await eventually(lambda: len(seqs(probe)) == 1)
        assert await eventually(lambda: len(probe.messages(f"{PREFIX}/command/result")) == 1)
        # on connect, every alarm's state is published from the engine (SCADA has a state for each alarm)
        snapshot = probe.messages(f"{PREFIX}/alarm/{PH}/state")[0].json()
        assert (snapshot["snapshot"], snapshot["state"], snapshot["value"]) == (True, "active-unacknowledged",
                                                                                11.0)
        publish(command, b"{not json", qos=1).wait_for_publish(5)
        publish(command, json.dumps({"alarm": "acme/ph/ph_low", "user": "ann"}), qos=1).wait_for_publish(5)
        publish(command, json.dumps({"alarm": PH, "user": "ann", "note": "valve closed", "id": 7}),
                qos=1).wait_for_publish(5)
        publish(command, json.dumps({"alarm": PH, "user": "bob"}), qos=1).wait_for_publish(5)
        assert await eventually(lambda: len(probe.messages(f"{PREFIX}/command/result")) == 5)
        results = [m.json() for m in probe.messages(f"{PREFIX}/command/result")]
        assert await eventually(lambda: len(seqs(probe)) == 2)
        events = [m.json() for m in probe.messages(f"{PREFIX}/events")]
    finally:
        publish(f"{PREFIX}/command/ack", b"", qos=1, retain=True).wait_for_publish(5)  # clear the retained one
        await d.stop()
        probe.stop()
    assert [(r["ok"], r["reason"].split(" (")[0].split(":")[0]) for r in results] == [
        (False, "retained command ignored"), (False, "payload is not UTF-8 JSON"),
        (False, "no such alarm 'acme/ph/ph_low'"), (True, "acknowledged"),
        (False, "alarm is active-acknowledged")]
    assert results[3]["id"] == 7 and results[3]["user"] == "ann"
    # the acknowledgement is journaled with the user SCADA named, and announced like any transition
    actions = [r.payload for r in engine.journal.records(kinds=["action"])]
    assert [(a["action"], a["user"], a["note"]) for a in actions] == [("ack", "ann", "valve closed")]
    assert (events[1]["kind"], events[1]["who"], events[1]["why"]) == ("ack", "ann", "valve closed")
    engine.close()


def test_command_validation() -> None:
    ok = parse_command(b'{"alarm": "a/b/c", "user": " ann ", "note": "n"}', known=frozenset({"a/b/c"}))
    assert ok == {"alarm": "a/b/c", "user": "ann", "note": "n", "id": None}
    for raw, why in [(b"[]", "JSON object"), (b'{"alarm": "a/b", "user": "x"}', "site/channel/rule"),
                     (b'{"alarm": "a/b/c", "user": "system"}', "'user'"),
                     (b'{"alarm": "a/b/c", "user": ""}', "'user'"),
                     (b'{"alarm": "a/b/c", "user": "x", "action": "reset"}', "unknown keys ['action']"),
                     (b'{"alarm": "a/b/c", "user": "x", "note": 5}', "'note'"),
                     (b"\xff\xfe", "UTF-8"), (b"x" * 5000, "exceeds")]:
        result = parse_command(raw)
        assert isinstance(result, str) and why in result, (raw, result)


@pytest.fixture
def persistent_broker(tmp_path: Path) -> Iterator[Mosquitto]:
    """A broker that keeps sessions and retained messages across its own restart (as a plant's would)."""
    broker = Mosquitto(tmp_path)
    store = tmp_path / "mosquitto-store"
    store.mkdir()
    broker.conf.write_text(broker.conf.read_text().replace(
        "persistence false\n", f"persistence true\npersistence_location {store}/\n"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def outage(tmp_path: Path, broker: Mosquitto, seconds: float) -> None:
    probe = MqttProbe(broker.port, [f"{PREFIX}/events"], client_id="scada-historian",
                      clean_session=False).start()
    d = make(tmp_path, broker.port)
    await d.start()
    try:
        d.submit([tr(i) for i in range(1, 6)])
        assert await eventually(lambda: len(seqs(probe)) == 5)
        broker.stop()
        deadline = time.monotonic() + seconds
        seq = 6
        while time.monotonic() < deadline:  # alarms keep coming while the broker is away
            d.submit([tr(seq), tr(seq + 1)])
            seq += 2
            assert d.health()["scada"]["depth"] > 0
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        assert not d.health()["scada"]["up"]
        broker.start()
        assert await eventually(lambda: len(first_deliveries(probe)) >= seq - 1)
        assert await d.wait_idle(PATIENCE)
        await asyncio.sleep(0.3)  # anything duplicated would have arrived by now
        assert first_deliveries(probe) == list(range(1, seq))  # every event once, in order
    finally:
        await d.stop()
        probe.stop()


async def test_broker_down_a_few_seconds_every_event_arrives_once_in_order(
        tmp_path: Path, persistent_broker: Mosquitto) -> None:
    await outage(tmp_path, persistent_broker, 3.0)


@pytest.mark.slow
async def test_broker_down_30_seconds_every_event_arrives_once_in_order(
        tmp_path: Path, persistent_broker: Mosquitto) -> None:
    await outage(tmp_path, persistent_broker, 30.0)
