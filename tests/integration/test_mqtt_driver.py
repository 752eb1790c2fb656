"""The MQTT driver against a real mosquitto on a free loopback port: no mocks of paho or the broker.

Publishers are real paho clients. Network outages with the broker still up are made with a small TCP relay
(our own seam) between the driver and the broker, which the test can cut and restore on the same port.

Why one module of about 550 lines: every test runs the one driver against a broker fixture with the same
publisher, relay and sink helpers; payload decoding and duplicates have unit tests of their own
(test_mqtt_payload, test_mqtt_dedupe).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import Channel, ChannelKind, DriverKind, Instrument, MqttBroker, PayloadFormat
from drivers.backoff import Backoff
from drivers.mqtt import MqttDriver, build_mqtt_drivers
from monitor.sample import Quality, Sample
from tests.support import PATIENCE, Mosquitto, eventually, free_port, require_binary

SITE = "acme"
GAS = "acme/mh1/gas"
LEVEL = "acme/mh1/level"


def instrument(port: int, *, client_id: str = "pretreat-test", timeout: float = 1.0, username: str = "",
               password_file: str = "") -> Instrument:
    broker = MqttBroker(host="127.0.0.1", port=port, client_id=client_id, qos=1, username=username,
                        password_file=password_file, keepalive=5)
    return Instrument(id="gas-meter", site=SITE, driver=DriverKind.MQTT, poll_interval=1.0, timeout=timeout,
                      mqtt=broker, time_field="ts")


def channels(*, gas_topic: str = GAS) -> list[Channel]:
    def ch(cid: str, topic: str, field: str, **kw: object) -> Channel:
        return Channel(id=cid, site=SITE, instrument="gas-meter", kind=ChannelKind.LEL, unit="%LEL",
                       topic=topic, field=field, valid_min=0, valid_max=100, **kw)  # type: ignore[arg-type]
    return [ch("lel", gas_topic, "gas.lel"), ch("h2s", gas_topic, "gas.h2s"),
            ch("level", LEVEL, "", payload=PayloadFormat.NUMBER, scale=0.01)]


class Recorder:
    """The sink: records samples, and the thread that delivered them."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.threads: set[int] = set()

    def __call__(self, samples: Sequence[Sample]) -> None:
        self.threads.add(threading.get_ident())
        self.samples.extend(samples)

    def of(self, channel: str, quality: Quality | None = None) -> list[Sample]:
        return [s for s in self.samples if s.channel == channel and (quality is None or s.quality is quality)]


async def until(predicate: Callable[[], bool], what: str = "condition") -> float:
    """`eventually`, failing the test with ``what`` if it never holds; returns the seconds it took (for the
    tests that bound the driver's own delays: backoff, keepalive)."""
    start = time.monotonic()
    if not await eventually(predicate, interval=0.005):
        pytest.fail(f"timed out after {PATIENCE} s waiting for {what}")
    return time.monotonic() - start


@contextlib.asynccontextmanager
async def running(driver: MqttDriver, *, wait: bool = True) -> AsyncIterator[Recorder]:
    rec = Recorder()
    task = asyncio.create_task(driver.run(rec), name="mqtt-driver-under-test")
    try:
        if wait:
            await until(lambda: driver.counters.subscribed, what="subscription")
        yield rec
    finally:
        await driver.close()
        await task


@pytest.fixture
def publisher(mosquitto: Mosquitto) -> Iterator[Callable[..., None]]:
    """publish(topic, payload, qos=1, retain=False): a real client; returns once the broker has it."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="test-publisher")
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()

    def publish(topic: str, payload: str | bytes, qos: int = 1, retain: bool = False) -> None:
        info = client.publish(topic, payload, qos=qos, retain=retain)
        info.wait_for_publish(timeout=PATIENCE)
        assert info.is_published()

    try:
        yield publish
    finally:
        client.disconnect()  # first: it wakes paho's thread, which loop_stop() would otherwise wait 1 s for
        client.loop_stop()


T0 = float(int(time.time()) - 3600)  # device times an hour old: honoured (a device clock can't be ahead)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat().replace("+00:00", "Z")


def gas(lel: float, h2s: float, ts: object) -> str:
    return json.dumps({"gas": {"lel": lel, "h2s": h2s}, "ts": ts})


# --- messages become samples --------------------------------------------------------------------

async def test_messages_become_samples_with_values_and_device_times(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver) as rec:
        sent_at = time.time()
        publisher(GAS, gas(4.5, 1.25, T0 + 0.5))
        publisher(GAS, gas(5.0, 1.5, iso(T0 + 1)))
        publisher(LEVEL, "42")
        await until(lambda: len(rec.samples) == 5, what="5 samples")
    assert [(s.channel, s.value, s.time) for s in rec.samples[:4]] == [
        ("lel", 4.5, T0 + 0.5), ("h2s", 1.25, T0 + 0.5), ("lel", 5.0, T0 + 1), ("h2s", 1.5, T0 + 1)]
    level = rec.samples[4]
    assert level.good and level.value == pytest.approx(0.42) and sent_at <= level.time <= time.time()
    assert all(s.good and s.site == SITE and s.unit == "%LEL" for s in rec.samples)
    assert rec.threads == {threading.get_ident()}, "the sink was called from a foreign thread"
    c = driver.counters
    assert (c.messages, c.samples, c.bad_samples, c.connects, c.reconnects) == (3, 5, 0, 1, 0)
    assert c.time_fallbacks == 1  # the plain-number topic cannot carry the configured time field


async def test_malformed_payloads_become_bad_samples_and_the_next_good_message_still_works(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver) as rec:
        publisher(GAS, b"\x00\xffnot json")
        publisher(GAS, json.dumps({"gas": {"lel": True, "h2s": 2}, "ts": T0}))
        publisher(LEVEL, "12,5")
        publisher(GAS, gas(250, 3, T0 + 1))  # beyond one span over the top: a fault, not saturation
        publisher(GAS, gas(6.5, 2.5, T0 + 2))
        await until(lambda: len(rec.samples) == 9, what="9 samples")
    lel = rec.of("lel")
    assert [s.quality for s in lel] == [Quality.DECODE_ERROR, Quality.DECODE_ERROR, Quality.OUT_OF_RANGE,
                                        Quality.GOOD]
    assert "not UTF-8" in lel[0].reason and lel[0].reason.startswith(GAS)
    assert "a boolean (true)" in lel[1].reason
    assert lel[3].value == 6.5
    assert [s.value for s in rec.of("h2s")] == [None, 2.0, 3.0, 2.5]
    (level,) = rec.of("level")
    assert level.quality is Quality.DECODE_ERROR and "'12,5' is not a number" in level.reason
    assert all(s.value is None for s in rec.samples if not s.good)
    assert (driver.counters.decode_errors, driver.counters.bad_samples) == (4, 5)


async def test_retained_message_without_device_time_is_not_taken_as_current(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    publisher(LEVEL, "17", retain=True)  # stored by the broker before the daemon subscribes
    publisher(GAS, gas(1.0, 0.5, T0), retain=True)
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver) as rec:
        await until(lambda: len(rec.samples) == 3, what="3 samples")
    (level,) = rec.of("level")
    assert level.quality is Quality.STALE and "retained message of unknown age" in level.reason
    assert [(s.value, s.time) for s in rec.of("lel")] == [(1.0, T0)]


async def test_a_device_clock_too_far_ahead_gives_clock_skew_readings_until_it_is_set(
        mosquitto: Mosquitto, publisher: Callable[..., None], caplog: pytest.LogCaptureFixture) -> None:
    """Within MAX_FUTURE_SKEW a timestamp ahead is drift: the reading is good at its time, and a later message
    stamped earlier is delivered too (the checks judge it in its place). Beyond it the readings are clock_skew at
    the receive time, the number read in the reason, counted, logged once, and shown until the clock is right."""
    caplog.set_level(logging.INFO, logger="drivers.mqtt.intake")
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver) as rec:
        now = time.time()
        publisher(GAS, gas(4.5, 1.25, now + 100))
        publisher(GAS, gas(4.0, 1.0, now - 1))
        await until(lambda: len(rec.samples) == 4, what="4 samples")
        assert [(s.quality, s.value, s.time) for s in rec.of("lel")] == [
            (Quality.GOOD, 4.5, now + 100), (Quality.GOOD, 4.0, now - 1)]
        sent_at = time.time()
        publisher(GAS, gas(48.0, 2.0, iso(sent_at + 3600)))  # local time labelled Z, an hour east of UTC
        publisher(GAS, gas(52.0, 2.5, iso(sent_at + 3660)))
        await until(lambda: len(rec.samples) == 8, what="8 samples")
        assert driver.counters.clock_skews == 2 and driver.counters.clock_ahead == pytest.approx(3660, abs=60)
        publisher(GAS, gas(5.0, 1.5, time.time()))  # the clock set right
        await until(lambda: len(rec.samples) == 10, what="10 samples")
    skewed = rec.samples[4:8]
    assert [s.quality for s in skewed] == [Quality.CLOCK_SKEW] * 4
    assert all(s.value is None and sent_at <= s.time <= sent_at + PATIENCE for s in skewed)
    assert [s.reason.rsplit("(read ", 1)[1] for s in skewed] == ["48 %LEL)", "2 %LEL)", "52 %LEL)", "2.5 %LEL)"]
    assert skewed[0].reason.startswith(f"{GAS}: device clock more than 300 s fast: device timestamp 'ts' "
                                       f"'{iso(sent_at + 3600)}' is ")
    assert [s.quality for s in rec.samples[8:]] == [Quality.GOOD] * 2
    c = driver.counters
    assert (c.clock_skews, c.clock_ahead, c.bad_samples, c.time_fallbacks) == (2, None, 4, 2)
    fast = [r for r in caplog.records if "device clock" in r.getMessage()]
    assert len(fast) == 1 and "clock_skew" in fast[0].getMessage()
    assert any("usable again" in r.getMessage() for r in caplog.records)


# --- reconnects and the persistent session ------------------------------------------------------------

async def test_broker_restart_resubscribes_within_the_backoff(
        mosquitto: Mosquitto, publisher: Callable[..., None], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="drivers.mqtt")
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver) as rec:
        mosquitto.stop()
        await until(lambda: not driver.counters.connected, what="loss noticed")
        await asyncio.sleep(0.5)
        mosquitto.start()  # same port; persistence is off, so the broker has forgotten the session
        took = await until(lambda: driver.counters.subscribed, what="resubscription")
        # Default backoff 0.25-0.5 s, 0.5-1 s, 1-2 s: the broker is back ~0.5 s into the outage, so the
        # attempt pending then is at most the third (≤ 2 s away). Typically measured: 0.3-0.5 s.
        assert took < 2.5, f"resubscribed {took:.2f} s after the broker came back"
        with paho_client(mosquitto.port) as pub:
            pub.publish(GAS, gas(7.0, 0.5, time.time()), qos=1).wait_for_publish(5)
        await until(lambda: len(rec.of("lel", Quality.GOOD)) == 1, what="message after restart")
    c = driver.counters
    assert (c.connects, c.reconnects) == (2, 1)
    assert c.last_outage is not None and 0.5 <= c.last_outage < 3.5
    failures = rec.of("lel", Quality.COMM_FAILURE)
    assert len(failures) == 1 and "lost" in failures[0].reason, "one COMM_FAILURE per outage"
    assert {s.channel for s in rec.samples if s.quality is Quality.COMM_FAILURE} == {"lel", "h2s", "level"}
    messages = [r.getMessage() for r in caplog.records]
    assert sum(" lost: " in m for m in messages) == 1 and sum(" restored " in m for m in messages) == 1
    assert sum("kept no session" in m for m in messages) == 1
    print(f"\nreconnect after broker restart: {took:.3f} s; outage {c.last_outage:.3f} s")


@contextlib.contextmanager
def paho_client(port: int) -> Iterator[mqtt.Client]:
    """A second real publisher, for brokers other than the `publisher` fixture's."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="test-publisher-2")
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        yield client
    finally:
        client.disconnect()
        client.loop_stop()


class Relay:
    """A TCP relay to the broker that the test can cut (both sides aborted) and restore on the same port, or
    freeze: bytes are dropped and no close is passed on, as when a cellular link dies without a FIN."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.frozen = False

    async def start(self) -> None:
        self.frozen = False
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers.append(up_writer)
        if self._server is None or not self._server.is_serving():  # cut while connecting upstream
            writer.transport.abort()
            up_writer.transport.abort()
            return
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                if not self.frozen:
                    dst.write(data)
                    await dst.drain()
        if not self.frozen:
            dst.transport.abort()


async def test_qos1_messages_published_during_a_network_outage_arrive_on_reconnect(
        mosquitto: Mosquitto, publisher: Callable[..., None], caplog: pytest.LogCaptureFixture) -> None:
    relay = Relay(mosquitto.port)
    await relay.start()
    driver = MqttDriver(instrument=instrument(relay.port), channels=channels())
    try:
        async with running(driver) as rec:
            await relay.cut()  # the broker stays up and keeps the offline session
            await until(lambda: not driver.counters.connected, what="loss noticed")
            for i in range(20):
                publisher(GAS, gas(i, 0, T0 + i))
            await relay.start()
            await until(lambda: len(rec.of("lel", Quality.GOOD)) == 20, what="queued messages")
            await asyncio.sleep(0.1)  # nothing more (no duplicates) should follow
    finally:
        await relay.cut()
    assert [s.value for s in rec.of("lel", Quality.GOOD)] == list(range(20))
    assert driver.counters.reconnects == 1
    assert not any("kept no session" in r.getMessage() for r in caplog.records)


async def test_a_silently_dead_link_is_detected_by_keepalive(mosquitto: Mosquitto) -> None:
    relay = Relay(mosquitto.port)
    await relay.start()
    inst = instrument(relay.port)
    assert inst.mqtt is not None
    inst = dataclasses.replace(inst, mqtt=dataclasses.replace(inst.mqtt, keepalive=1))  # loader minimum is 5
    driver = MqttDriver(instrument=inst, channels=channels())
    try:
        async with running(driver):
            relay.frozen = True  # no FIN, no RST: only the missing PINGRESP can tell
            took = await until(lambda: not driver.counters.connected, what="keepalive timeout")
            await relay.cut()
            await relay.start()
            await until(lambda: driver.counters.subscribed, what="reconnection")
    finally:
        await relay.cut()
    assert 1.0 <= took < 4.0, f"dead link noticed after {took:.2f} s with keepalive 1 s"
    assert driver.counters.reconnects == 1


async def test_qos1_messages_published_while_the_daemon_was_stopped_arrive_on_restart(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    async with running(MqttDriver(instrument=instrument(mosquitto.port), channels=channels())):
        pass  # first run creates the session; close() sends DISCONNECT and the broker keeps it
    for i in range(5):
        publisher(GAS, gas(i, 0, T0 + i))
    publisher(LEVEL, "1", qos=0)  # QoS 0 is not queued for an offline session: by definition lost
    again = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(again, wait=False) as rec:
        await until(lambda: len(rec.of("lel")) == 5, what="queued messages")
        await asyncio.sleep(0.1)
    assert [s.value for s in rec.of("lel")] == [0, 1, 2, 3, 4]
    assert rec.of("level") == []


async def test_broker_down_at_start_is_one_outage_then_connects(mosquitto: Mosquitto) -> None:
    mosquitto.stop()
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    async with running(driver, wait=False) as rec:
        await until(lambda: driver.counters.connect_failures >= 2, what="failed attempts")
        mosquitto.start()
        await until(lambda: driver.counters.subscribed, what="connection")
    failures = [s for s in rec.samples if s.quality is Quality.COMM_FAILURE]
    assert len(failures) == 3 and all("unavailable" in s.reason and "refused" in s.reason for s in failures)
    assert (driver.counters.connects, driver.counters.reconnects) == (1, 0)


async def test_stale_subscription_left_in_the_session_is_dropped(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    old = "acme/mh1/old-gas"
    async with running(MqttDriver(instrument=instrument(mosquitto.port), channels=channels(gas_topic=old))):
        pass
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())  # same client id
    async with running(driver) as rec:
        unsubacks: list[object] = []
        assert driver._run is not None
        driver._run.client.on_unsubscribe = lambda *args: unsubacks.append(args)  # observe the broker's UNSUBACK
        publisher(old, gas(1, 1, T0))
        await until(lambda: driver.counters.unexpected_messages == 1, what="unexpected message")
        await until(lambda: bool(unsubacks), what="the broker acknowledging the UNSUBSCRIBE")
        publisher(old, gas(2, 2, T0 + 1))
        publisher(GAS, gas(3, 3, T0 + 2))
        await until(lambda: len(rec.samples) == 2, what="samples")
    assert driver.counters.unexpected_messages == 1
    assert [(s.channel, s.value) for s in rec.samples] == [("lel", 3.0), ("h2s", 3.0)]


async def test_a_failing_sink_stops_run_and_leaves_the_message_for_redelivery(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    calls: list[Sequence[Sample]] = []

    def broken(samples: Sequence[Sample]) -> None:
        calls.append(samples)
        raise RuntimeError("store is gone")

    task = asyncio.create_task(driver.run(broken))
    await until(lambda: driver.counters.subscribed, what="subscription")
    publisher(GAS, gas(9, 9, T0))
    with pytest.raises(RuntimeError, match="store is gone"):
        await asyncio.wait_for(task, PATIENCE)
    async with running(MqttDriver(instrument=instrument(mosquitto.port), channels=channels()),
                       wait=False) as rec:
        await until(lambda: len(rec.of("lel")) == 1, what="redelivery")
    assert rec.of("lel")[0].value == 9.0 and len(calls) == 1


async def test_broker_that_never_answers_connect_times_out(tmp_path: Path) -> None:
    held: list[asyncio.StreamWriter] = []  # accepted and kept open, never answered
    silent = await asyncio.start_server(lambda _r, w: held.append(w), "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    driver = MqttDriver(instrument=instrument(port, timeout=0.1), channels=channels())
    try:
        async with running(driver, wait=False) as rec:
            await until(lambda: driver.counters.connect_failures >= 1, what="CONNACK timeout")
    finally:
        for w in held:
            w.close()
        silent.close()
        await silent.wait_closed()
    assert "no CONNACK within 3 s" in rec.samples[0].reason


# --- credentials -------------------------------------------------------------------------------

def configured_broker(workdir: Path, extra: str) -> Mosquitto:
    """A broker like the `mosquitto` fixture's, with extra configuration lines replacing anonymous access."""
    workdir.mkdir(exist_ok=True)
    broker = Mosquitto(workdir)
    broker.conf.write_text(broker.conf.read_text().replace("allow_anonymous true\n", extra))
    return broker


@pytest.fixture
def auth_broker(tmp_path: Path) -> Iterator[Mosquitto]:
    passwd = require_binary("mosquitto_passwd")
    pwfile = tmp_path / "broker.passwd"
    subprocess.run([passwd, "-b", "-c", str(pwfile), "meter", "s3cret-Pa55"], check=True,
                   capture_output=True)
    broker = configured_broker(tmp_path / "auth", f"allow_anonymous false\npassword_file {pwfile}\n")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def test_subscription_granted_below_the_configured_qos_is_logged_and_still_delivers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (mosquitto 2.0 grants every MQTT 3.1.1 subscription even where its ACL denies reading, and filters on
    # delivery instead, so a refused subscription (SUBACK 0x80) cannot be produced with it; a downgrade can.)
    broker = configured_broker(tmp_path / "qos0", "allow_anonymous true\nmax_qos 0\n")
    broker.start()
    try:
        driver = MqttDriver(instrument=instrument(broker.port), channels=channels())
        async with running(driver) as rec:
            with paho_client(broker.port) as pub:
                pub.publish(LEVEL, "250", qos=0).wait_for_publish(5)
            await until(lambda: len(rec.samples) == 1, what="sample")
    finally:
        broker.stop()
    assert rec.samples[0].value == 2.5 and driver.counters.subscribe_failures == 0
    assert any("granted less than QoS 1" in r.getMessage() for r in caplog.records)


async def test_password_from_file_is_used_and_never_logged(
        auth_broker: Mosquitto, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    good, bad = tmp_path / "good.pw", tmp_path / "bad.pw"
    good.write_text("s3cret-Pa55\n")
    bad.write_text("wrong-Pa55\n")
    wrong = MqttDriver(instrument=instrument(auth_broker.port, username="meter", password_file=str(bad)),
                       channels=channels())
    async with running(wrong, wait=False) as rec:
        await until(lambda: wrong.counters.connect_failures >= 1, what="refusal")
    assert "refused the connection (Not authorized)" in rec.samples[0].reason
    right = MqttDriver(instrument=instrument(auth_broker.port, username="meter", password_file=str(good)),
                       channels=channels(), )
    async with running(right):
        assert right.counters.connected
    assert not any("Pa55" in r.getMessage() for r in caplog.records)


def test_unreadable_password_file_fails_at_construction(tmp_path: Path) -> None:
    """The loader refuses an unreadable password file and one without a user name
    (tests/faults/test_config_mistakes.py); a file gone between load and start fails with a clear error."""
    with pytest.raises(ValueError, match="cannot read MQTT password_file"):
        MqttDriver(instrument=instrument(1883, username="u", password_file=str(tmp_path / "none")),
                   channels=channels())


# --- building from a site file, and the backoff policy -----------------------------------------------

def test_build_mqtt_drivers_from_the_demo_site() -> None:
    config = load_config(Path(__file__).parents[2] / "config" / "sites" / "demo.toml")
    (driver,) = build_mqtt_drivers(config)
    assert driver.instrument_id == "lel-meter" and driver.client_id == "pretreat-acme-plating-lel-meter"


def test_build_resolves_relative_password_files_and_the_loader_refuses_shared_client_ids(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "mqtt.pw").write_text("pw\n")
    site = tmp_path / "site.toml"
    base = """
[[site]]
id = "s"
timezone = "UTC"
[[site.instrument]]
id = "a"
driver = "mqtt"
username = "u"
password_file = "secrets/mqtt.pw"
client_id = "{cid_a}"
[[site.instrument]]
id = "b"
driver = "mqtt"
client_id = "{cid_b}"
[[site.channel]]
id = "x"
instrument = "a"
topic = "t/x"
payload = "number"
kind = "other"
unit = "u"
[[site.channel]]
id = "y"
instrument = "b"
topic = "t/y"
payload = "number"
kind = "other"
unit = "u"
"""
    site.write_text(base.format(cid_a="one", cid_b="two"))
    assert [d.instrument_id for d in build_mqtt_drivers(load_config(site))] == ["a", "b"]
    site.write_text(base.format(cid_a="same", cid_b="same"))
    with pytest.raises(ConfigErrors, match=r"a client id not already used on 127\.0\.0\.1:1883"):
        load_config(site)  # refused at load (config.links), so no driver ever sees it


def test_backoff_is_capped_exponential_with_jitter() -> None:
    b = Backoff(initial=0.5, maximum=30.0, jitter=0.5)
    assert [b.delay(n, rand=lambda: 0.0) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert [b.delay(n, rand=lambda: 1.0) for n in range(3)] == [0.25, 0.5, 1.0]
    assert b.delay(10_000, rand=lambda: 0.0) == 30.0
    delays = {b.delay(3) for _ in range(50)}
    assert len(delays) > 1 and all(2.0 <= d <= 4.0 for d in delays)
    with pytest.raises(ValueError):
        Backoff(initial=5, maximum=1)


async def test_cancelled_while_the_lost_connection_winds_down_run_ends_and_never_reconnects(
        mosquitto: Mosquitto, publisher: Callable[..., None]) -> None:
    """A daemon stopping at the moment its broker goes away (``make demo``'s clean-up stops both at once) cancels
    the driver while it waits for its acknowledgement task to end. That cancellation once ended there: `run`
    went on reconnecting for ever, so the daemon never stopped and later kicked a new daemon with the same client
    id off the broker. The commit below takes a while to give up when cancelled, which holds the driver in that
    wait long enough for the test to cancel it there."""
    in_commit, giving_up = asyncio.Event(), asyncio.Event()

    async def slow_commit() -> None:
        in_commit.set()
        try:
            await asyncio.Event().wait()  # a commit that never finishes ...
        except asyncio.CancelledError:
            giving_up.set()  # ... and takes a moment to give up (the driver is now waiting for it)
            await asyncio.sleep(0.5)
            raise

    driver = MqttDriver(instrument=instrument(mosquitto.port), channels=channels())
    task = asyncio.create_task(driver.run(Recorder(), committed=slow_commit))
    await until(lambda: driver.counters.subscribed, what="subscription")
    publisher(GAS, gas(1, 1, T0))
    await asyncio.wait_for(in_commit.wait(), PATIENCE)
    mosquitto.stop()  # the connection is lost: the driver cancels its acknowledgements and waits for them
    await asyncio.wait_for(giving_up.wait(), PATIENCE)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, PATIENCE)
    await driver.close()
