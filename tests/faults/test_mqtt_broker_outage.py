"""The MQTT broker goes down while alarms are raised and cleared, then comes back: the QoS 1 alarm events queued
meanwhile reach plant SCADA once each, in journal order; the MQTT instrument's readings published around the
outage are all recorded, none twice; and the outage itself is in the record as bad samples, not as a gap.

The broker keeps its sessions across the restart (``persistence true``, as a production broker would), so
what a subscriber missed while away is queued for it rather than lost by the broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.journal import Journal
from config.loader import load_config
from simulators.playback import Hold
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    assert_bad_rows_carry_no_value,
    by_channel,
    channel,
    duplicates,
    mqtt_instrument,
    mqtt_notify,
    polled_rows,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.notify_servers import MqttProbe
from tests.support import Mosquitto, eventually, free_port

EVENTS = "pretreat/faults/events"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    """A broker that saves its sessions and queued messages when stopped, and restores them at start."""
    b = Mosquitto(tmp_path)
    (tmp_path / "mqtt-db").mkdir()
    b.conf.write_text(b.conf.read_text().replace(
        "persistence false\n", f"persistence true\npersistence_location {tmp_path / 'mqtt-db'}/\n"))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def outage_site(tmp_path: Path, port: int) -> Path:
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.5, timeout=0.3),
                   mqtt_instrument("lel-meter", port=port, poll=0.5)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14),
                channel("lel", instrument="lel-meter", kind="lel", unit="%LEL", topic="plant/mh1/lel",
                        field="lel_pct", valid_min=0, valid_max=100)]
    return site_file(tmp_path, instruments=instruments, channels=channels, top=mqtt_notify(port))


def event_seqs(probe: MqttProbe) -> list[int]:
    return [int(m.json()["seq"]) for m in probe.messages(EVENTS)]


async def test_broker_down_and_back_queued_alarm_events_arrive_once_in_order(
        tmp_path: Path, broker: Mosquitto) -> None:
    config = load_config(outage_site(tmp_path, broker.port))
    probe = MqttProbe(broker.port, [EVENTS], client_id="scada-probe", clean_session=False).start()
    journal = Journal(path=config.daemon.historian)
    overrides = None
    try:
        sim = SiteSimulator(config=config, history=5000, mqtt_time_format="epoch")  # ts to the millisecond
        async with sim, InProcessDaemon(config) as daemon:
            overrides = sim.playback.overrides.setdefault(SITE, {})
            lel_driver = daemon.streaming[0]
            assert await eventually(lambda: lel_driver.counters.subscribed)
            t_subscribed = time.time()  # from here on the broker keeps what the daemon has not yet taken
            await asyncio.sleep(1.0)
            t_down = time.time()
            broker.stop()
            for low in (True, False, True):  # raise, clear, raise again: all queued while the broker is down
                if low:
                    overrides["ph"] = Hold(4.4)
                else:
                    overrides.pop("ph", None)
                await asyncio.sleep(1.2)
            t_up = time.time()
            broker.start()
            overrides.pop("ph", None)
            # every transition journaled so far reaches SCADA once the broker is back
            assert await eventually(lambda: set(_journal_seqs(journal)) <= set(event_seqs(probe)), 30), \
                (_journal_seqs(journal), event_seqs(probe))
            assert await eventually(lambda: lel_driver.counters.connected)
            await asyncio.sleep(1.0)
            t_stop = time.time()  # what is published from here on waits in the broker for the next run
        served_lel = [s for s in sim.history[(SITE, "lel")] if t_subscribed < s.wall_time < t_stop]
    finally:
        probe.stop()
    transitions = list(journal.records(kinds=["transition"]))
    assert journal.verify().ok
    journal.close()
    # queued while the broker was down: at least the raise, the clear and the second raise of ph_low
    during = [r for r in transitions if t_down < r.time < t_up]
    kinds = [(r.payload["alarm"], r.payload["kind"]) for r in during]
    assert kinds.count((f"{SITE}/ph/ph_low", "raise")) == 2 and (f"{SITE}/ph/ph_low", "clear") in kinds, kinds

    seqs = event_seqs(probe)
    assert set(seqs) == {r.seq for r in transitions}  # every transition announced, nothing invented
    first_seen = list(dict.fromkeys(seqs))
    assert first_seen == sorted(first_seen)  # in journal order
    by_seq: dict[int, bytes] = {}
    for m in probe.messages(EVENTS):  # a repeat after a lost PUBACK is the same event (same seq, same body)
        assert by_seq.setdefault(int(m.json()["seq"]), m.payload) == m.payload

    rows = recorded(config.daemon.historian)
    assert duplicates(rows) == []
    assert_bad_rows_carry_no_value(rows)
    lel = by_channel(rows)["lel"]
    good_times = {round(r.time, 3): r.value for r in lel if r.good}
    # matched by the device timestamp (epoch seconds, to the millisecond) and the value
    missing = [s for s in served_lel if good_times.get(round(s.wall_time, 3)) != s.value]
    assert missing == [], f"{len(missing)} published readings not recorded, first {missing[:3]}"
    assert any(r.quality == "comm_failure" and t_down <= r.time <= t_up + 30 for r in lel)  # the outage
    ph_polls = daemon.stats[f"{SITE}/ph-meter"].polls
    assert len(polled_rows(by_channel(rows)["ph"])) == ph_polls


def _journal_seqs(journal: Journal) -> list[int]:
    return [r.seq for r in journal.records(kinds=["transition"])]


async def test_a_reading_delivered_twice_is_recorded_once(tmp_path: Path, broker: Mosquitto) -> None:
    """QoS 1 is at-least-once: a publisher whose PUBACK was lost (the broker went down) sends the message again,
    and the broker forwards the copy as a new message. A timestamped reading is the same reading: once in the
    record. A bare number repeated is a new reading (stamped when received): kept."""
    import paho.mqtt.publish as publish

    instruments = [mqtt_instrument("meter", port=broker.port, poll=60)]
    channels = [channel("lel", instrument="meter", kind="lel", unit="%LEL", topic="plant/mh1/lel",
                        field="lel_pct", valid_min=0, valid_max=100),
                channel("level", instrument="meter", kind="other", unit="m", topic="plant/mh1/level")
                .replace('unit = "m"', 'unit = "m"\npayload = "number"')]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels))
    now = time.time()
    reading = f'{{"lel_pct": 2.5, "ts": {now - 1:.3f}}}'.encode()
    async with InProcessDaemon(config) as daemon:
        driver = daemon.streaming[0]
        assert await eventually(lambda: driver.counters.subscribed)
        for payload, topic in ((reading, "plant/mh1/lel"), (reading, "plant/mh1/lel"), (b"3.5", "plant/mh1/level"),
                               (f'{{"lel_pct": 2.5, "ts": {now:.3f}}}'.encode(), "plant/mh1/lel"),
                               (b"3.5", "plant/mh1/level")):
            publish.single(topic, payload, qos=1, hostname="127.0.0.1", port=broker.port)
        assert await eventually(lambda: driver.counters.messages + driver.counters.repeats == 5)
    rows = by_channel(recorded(config.daemon.historian))
    assert [(r.time, r.value) for r in rows["lel"]] == [(round(now - 1, 3), 2.5), (round(now, 3), 2.5)]
    assert [r.value for r in rows["level"]] == [3.5, 3.5]  # a value repeated by the device: two readings
    assert driver.counters.repeats == 1 and driver.counters.messages == 4


async def test_a_message_is_acknowledged_only_once_its_samples_are_committed(tmp_path: Path,
                                                                          broker: Mosquitto) -> None:
    """A daemon that dies (here: whose record cannot be committed) before its samples reach the disk leaves
    the message with the broker, which gives it to the next run; once committed, it is gone from the broker."""
    import paho.mqtt.publish as publish

    from drivers.mqtt.driver import MqttDriver

    instruments = [mqtt_instrument("meter", port=broker.port, poll=60, client_id="pretreat-acks")]
    channels = [channel("lel", instrument="meter", kind="lel", unit="%LEL", topic="plant/mh1/lel",
                        field="lel_pct", valid_min=0, valid_max=100)]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels))
    inst, chans = config.instruments[0], config.channels

    async def run_once(committed) -> list[float]:  # type: ignore[no-untyped-def]
        taken: list[float] = []
        driver = MqttDriver(instrument=inst, channels=chans)
        task = asyncio.create_task(driver.run(lambda ss: taken.extend(s.time for s in ss if s.good),
                                              committed=committed))
        assert await eventually(lambda: driver.counters.subscribed)
        await asyncio.sleep(0.5)
        await driver.close()
        await task
        return taken

    async def never() -> None:
        raise RuntimeError("the record cannot be written")

    async def at_once() -> None:
        return None

    now = time.time()
    assert await run_once(at_once) == []  # creates the persistent session
    for i in range(3):
        publish.single("plant/mh1/lel", f'{{"lel_pct": 1.5, "ts": {now + i:.3f}}}', qos=1, hostname="127.0.0.1",
                       port=broker.port)
    first = await run_once(never)
    assert sorted(first) == [round(now + i, 3) for i in range(3)]
    assert sorted(await run_once(at_once)) == sorted(first)  # not acknowledged: the broker kept them
    assert await run_once(at_once) == []  # acknowledged after the commit: gone
