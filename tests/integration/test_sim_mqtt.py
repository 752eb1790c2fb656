"""The MQTT-publishing simulated instrument against a real mosquitto, read back by a plain paho subscriber."""

from __future__ import annotations

import json
import math
import queue
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from config.schema import Channel, ChannelKind, DriverKind, Instrument, MqttBroker, PayloadFormat
from simulators.modbus_server import SimFault
from simulators.mqtt_publisher import MqttSimInstrument
from tests.support import PATIENCE, Mosquitto, eventually, mqtt_only_site


class Subscriber:
    """A paho client collecting (topic, payload) pairs from every topic, in paho's thread."""

    def __init__(self, port: int) -> None:
        self.messages: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="test-reader")
        subscribed = queue.Queue[bool]()
        self.client.on_connect = lambda c, *_: c.subscribe("#", qos=1)
        self.client.on_subscribe = lambda *_: subscribed.put(True)
        self.client.on_message = lambda _c, _u, m: self.messages.put((m.topic, bytes(m.payload)))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        subscribed.get(timeout=PATIENCE)

    def next(self, wait: float = 5.0) -> tuple[str, bytes]:
        return self.messages.get(timeout=wait)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def reader(mosquitto: Mosquitto) -> Iterator[Subscriber]:
    sub = Subscriber(mosquitto.port)
    yield sub
    sub.close()


def _instrument(port: int, time_field: str = "ts") -> tuple[Instrument, list[Channel]]:
    inst = Instrument(id="probe", site="s1", driver=DriverKind.MQTT, poll_interval=1.0,
                      mqtt=MqttBroker(host="127.0.0.1", port=port, client_id="daemon-probe"),
                      time_field=time_field)
    channels = [
        Channel(id="ph", site="s1", instrument="probe", kind=ChannelKind.PH, unit="pH", topic="s1/probe",
                field="data.ph"),
        Channel(id="temp", site="s1", instrument="probe", kind=ChannelKind.TEMPERATURE, unit="degC",
                topic="s1/probe", field="data.temp"),
        Channel(id="lel", site="s1", instrument="probe", kind=ChannelKind.LEL, unit="%LEL", topic="s1/lel",
                payload=PayloadFormat.NUMBER),
        Channel(id="other", site="s1", instrument="elsewhere", kind=ChannelKind.LEL, unit="%LEL",
                topic="s1/other", field="x"),
    ]
    return inst, channels


async def test_channels_sharing_a_topic_go_out_in_one_json_object(mosquitto: Mosquitto,
                                                                 reader: Subscriber) -> None:
    inst, channels = _instrument(mosquitto.port)
    pub = MqttSimInstrument(instrument=inst, channels=channels)
    await pub.start()
    try:
        t = 1_790_000_000.25
        pub.publish({"ph": 7.23, "temp": 21.5, "lel": 1.5}, t)
        assert await pub.flush()
        got = dict(reader.next() for _ in range(2))
        assert set(got) == {"s1/probe", "s1/lel"}  # the other instrument's channel is not ours to publish
        obj = json.loads(got["s1/probe"])
        assert obj["data"] == {"ph": 7.23, "temp": 21.5}
        assert obj["ts"] == "2026-09-21T14:13:20.250Z"
        assert datetime.fromisoformat(obj["ts"]).timestamp() == t
        assert got["s1/lel"] == b"1.5"
    finally:
        await pub.stop()
    assert pub.client_id == "sim-s1-probe"  # never the daemon's client id: the broker would kick one off


async def test_epoch_timestamps_and_partial_values(mosquitto: Mosquitto, reader: Subscriber) -> None:
    inst, channels = _instrument(mosquitto.port)
    pub = MqttSimInstrument(instrument=inst, channels=channels, time_format="epoch")
    await pub.start()
    try:
        pub.publish({"ph": 6.5}, 1_790_000_000.0)
        topic, payload = reader.next()
        assert topic == "s1/probe"
        assert json.loads(payload) == {"data": {"ph": 6.5}, "ts": 1_790_000_000.0}
    finally:
        await pub.stop()


async def test_silent_publishes_nothing_until_cleared(mosquitto: Mosquitto, reader: Subscriber) -> None:
    inst, channels = _instrument(mosquitto.port, time_field="")
    pub = MqttSimInstrument(instrument=inst, channels=channels)
    await pub.start()
    try:
        pub.fault = SimFault.SILENT
        pub.publish({"ph": 7.0, "lel": 1.0}, time.time())
        assert await pub.flush()
        with pytest.raises(queue.Empty):
            reader.next(wait=0.3)
        assert pub.counters.suppressed == 2 and pub.counters.messages == 0
        pub.fault = SimFault.NONE
        pub.publish({"ph": 7.1}, time.time())
        assert reader.next() == ("s1/probe", b'{"data": {"ph": 7.1}}')  # no time_field: no timestamp
    finally:
        await pub.stop()


async def test_garbage_cycles_through_malformed_payloads(mosquitto: Mosquitto, reader: Subscriber) -> None:
    inst, channels = _instrument(mosquitto.port)
    pub = MqttSimInstrument(instrument=inst, channels=channels[:2])
    await pub.start()
    try:
        pub.fault = SimFault.GARBAGE
        for _ in range(3):
            pub.publish({"ph": 7.0}, time.time())
        payloads = [reader.next()[1] for _ in range(3)]
    finally:
        await pub.stop()
    with pytest.raises(json.JSONDecodeError):
        json.loads(payloads[0])  # truncated
    assert json.loads(payloads[1])["data"]["ph"] == "ERR"
    assert math.isnan(json.loads(payloads[2])["data"]["ph"])
    assert b"NaN" in payloads[2]
    assert pub.counters.garbage == 3


async def test_nan_value_and_exception_fault(mosquitto: Mosquitto, reader: Subscriber) -> None:
    inst, channels = _instrument(mosquitto.port)
    pub = MqttSimInstrument(instrument=inst, channels=channels)
    with pytest.raises(ValueError, match="no exception replies"):
        pub.fault = SimFault.EXCEPTION
    await pub.start()
    try:
        pub.publish({"lel": math.nan}, time.time())
        assert reader.next() == ("s1/lel", b"nan")
    finally:
        await pub.stop()


async def test_unreachable_broker_fails_start_clearly() -> None:
    from tests.support import free_port

    inst, channels = _instrument(free_port())
    pub = MqttSimInstrument(instrument=inst, channels=channels, connect_timeout=0.3)
    with pytest.raises(ConnectionError, match="no MQTT broker accepted"):
        await pub.start()
    assert not pub.connected


async def test_the_daemons_decoder_reads_what_the_simulator_publishes(mosquitto: Mosquitto,
                                                                     reader: Subscriber) -> None:
    """Contract between the simulated instrument and drivers.mqtt.payload: good payloads give good samples
    with the device's time; every garbage payload gives bad samples, never numbers."""
    from drivers.mqtt.payload import InstrumentDecoder
    from monitor.sample import Quality, Sample

    inst, channels = _instrument(mosquitto.port)
    mine = [c for c in channels if c.instrument == inst.id]
    decoder = InstrumentDecoder(instrument=inst, channels=mine)
    pub = MqttSimInstrument(instrument=inst, channels=mine)
    await pub.start()
    t = time.time()
    try:
        pub.publish({"ph": 7.25, "temp": 22.5, "lel": 0.5}, t)
        good = [reader.next() for _ in range(2)]
        pub.fault = SimFault.GARBAGE
        for _ in range(3):
            pub.publish({"ph": 7.25, "temp": 22.5, "lel": 0.5}, t)
        bad = [reader.next() for _ in range(6)]
    finally:
        await pub.stop()
    def decode(messages: list[tuple[str, bytes]], received: float) -> list[Sample]:
        out = [decoder.decode(topic, p, received=received) for topic, p in messages]
        return [s for d in out if d is not None for s in d.samples]

    samples = decode(good, t + 0.5)
    assert {s.channel: s.value for s in samples} == {"ph": 7.25, "temp": 22.5, "lel": 0.5}
    assert all(s.good for s in samples)
    assert [s.time for s in samples if s.channel == "ph"] == [pytest.approx(t, abs=1e-3)]
    garbage = decode(bad, t)
    assert len(garbage) == 9 and all(s.value is None for s in garbage)
    assert {s.quality for s in garbage} <= {Quality.DECODE_ERROR, Quality.BAD_VALUE}


async def test_a_restart_step_reconnects_the_publisher(mosquitto: Mosquitto, tmp_path: Path) -> None:
    from config.loader import load_config
    from simulators.runner import SiteSimulator
    from simulators.scenario import load_scenario

    config = load_config(mqtt_only_site(tmp_path, mosquitto.port))
    scenario = tmp_path / "restart.toml"
    scenario.write_text("[[step]]\nat = 5\nkind = 'lel'\nfault = 'restart'\ndown = 0.2\n")
    async with SiteSimulator(config=config, scenario=load_scenario(scenario), clock=False) as sim:
        pub = sim.publishers[("s1", "lel-meter")]
        sim.advance(5.0)
        assert await eventually(lambda: not pub.connected)  # off the wire
        assert await eventually(lambda: pub.connected)  # and back
        assert pub.counters.connects == 2
