"""MQTT payload fuzzing through the real broker into a running daemon (hypothesis): random bytes, random text,
random JSON (NaN, huge integers, nesting, wrong types, device timestamps from anywhere) published with QoS 1 on
a channel's topic. The daemon never crashes; every message becomes exactly one sample per channel on its topic,
good only when an independent reading of the payload says the value is a usable number, bad with a reason
otherwise; and every one of those samples is in the historian.

Examples are derandomized (the same ones every run) and replayed one at a time: publish, then wait for the
daemon to take the message's samples, so a failure names the payload that caused it.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paho.mqtt.enums import CallbackAPIVersion

from config.loader import load_config
from drivers.mqtt.dedupe import CONFLICT
from monitor.sample import Quality, Sample
from tests.faults.harness import (
    InProcessDaemon,
    LoopThread,
    by_channel,
    channel,
    mqtt_instrument,
    recorded,
    site_file,
)
from tests.support import PATIENCE, Mosquitto, wait_until

JSON_TOPIC, NUMBER_TOPIC = "fz/mh1/json", "fz/mh1/number"
# channel id -> (topic, JSON path or None for a plain-number payload, scale, offset, valid_min, valid_max)
CHANNELS: dict[str, tuple[str, tuple[str, ...] | None, float, float, float, float]] = {
    "lel": (JSON_TOPIC, ("lel_pct",), 1.0, 0.0, 0.0, 100.0),
    "probe_temp": (JSON_TOPIC, ("probe", "temp"), 0.1, 0.0, -10.0, 100.0),
    "level": (NUMBER_TOPIC, None, 0.01, 1.0, 0.0, 50.0),
}
MAX_PAYLOAD = 64 * 1024
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def fuzz_site(tmp_path: Path, port: int) -> Path:
    channels = [
        channel("lel", instrument="meter", kind="lel", unit="%LEL", topic=JSON_TOPIC, field="lel_pct",
                valid_min=0, valid_max=100),
        channel("probe_temp", instrument="meter", kind="other", unit="degC", topic=JSON_TOPIC, field="probe.temp",
                scale=0.1, valid_min=-10, valid_max=100),
        channel("level", instrument="meter", kind="other", unit="m", topic=NUMBER_TOPIC, scale=0.01,
                valid_min=0, valid_max=50).replace('unit = "m"', 'unit = "m"\npayload = "number"\noffset = 1.0'),
    ]
    return site_file(tmp_path, instruments=[mqtt_instrument("meter", port=port)], channels=channels)


# -- an independent reading of a payload: which channels must come out good, with what value ---------------
class _Duplicate(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Duplicate
    return dict(pairs)


def expected_value(cid: str, payload: bytes) -> float | None:
    """The engineering value channel ``cid`` must record for ``payload``, or None: a bad sample."""
    value = _scaled(cid, payload)
    _topic, _path, _scale, _offset, lo, hi = CHANNELS[cid]
    return value if value is not None and lo <= value <= hi else None


def expected_over_range(cid: str, payload: bytes) -> float | None:
    """The number an LEL channel keeps as an ``over_range`` sample (above its span, at most one span more)."""
    value = _scaled(cid, payload)
    _topic, _path, _scale, _offset, lo, hi = CHANNELS[cid]
    return value if cid == "lel" and value is not None and hi < value <= hi + (hi - lo) else None


def _scaled(cid: str, payload: bytes) -> float | None:
    """The finite engineering value the payload carries for ``cid`` (range not judged), or None."""
    _topic, path, scale, offset, _lo, _hi = CHANNELS[cid]
    if len(payload) > MAX_PAYLOAD:
        return None
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    raw: Any
    if path is None:
        if not _PLAIN_NUMBER.fullmatch(text.strip()):
            return None
        raw = float(text.strip())
    else:
        try:
            node: Any = json.loads(text, object_pairs_hook=_no_duplicates)
        except (ValueError, RecursionError, _Duplicate):
            return None
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        if isinstance(node, bool) or not isinstance(node, int | float):
            return None
        try:
            raw = float(node)
        except OverflowError:
            return None
    if not math.isfinite(raw):
        return None
    value = raw * scale + offset
    return value if math.isfinite(value) else None


# -- payloads --------------------------------------------------------------------------------------------
_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
            | st.sampled_from([10**400, -(10**309), 1e308, 5e-324, "7.2", "NaN"]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
_timestamps = (_values | st.floats(min_value=9e8, max_value=2e9) | st.integers(min_value=0, max_value=2 * 10**12)
               | st.sampled_from(["2026-11-30T14:05:00Z", "2026-11-30T14:05:00", "yesterday"]))
_objects = st.fixed_dictionaries({}, optional={
    "lel_pct": _values | st.floats(min_value=-1, max_value=101),
    "probe": _values | st.fixed_dictionaries({}, optional={"temp": _values | st.integers(-150, 1050)}),
    "ts": _timestamps,
    "extra": _values,
})
_json_payloads = _objects.map(lambda o: json.dumps(o, allow_nan=True).encode())
_near_json = _json_payloads.flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n]))
_number_texts = (st.floats().map(repr) | st.integers().map(str) | st.from_regex(r"\s*[+-]?\d{0,4}\.?\d{0,3}\s*",
                                                                                fullmatch=True)
                 | st.sampled_from(["nan", "-Infinity", "1_000", "0x1F", "", " 12.5 ", "1e999"]))
_payloads = st.one_of(
    st.tuples(st.just(JSON_TOPIC), _json_payloads),
    st.tuples(st.just(JSON_TOPIC), _near_json),
    st.tuples(st.sampled_from([JSON_TOPIC, NUMBER_TOPIC]), st.binary(max_size=200)),
    st.tuples(st.just(NUMBER_TOPIC), _number_texts.map(str.encode)),
    st.tuples(st.sampled_from([JSON_TOPIC, NUMBER_TOPIC]),
              st.sampled_from([b"", b"{" * 5000, b'{"lel_pct": 1' + b" " * MAX_PAYLOAD + b"}",
                               b'{"lel_pct": 3, "lel_pct": 4}', b"\xff\xfe", b"[1, 2]", b'"7"'])),
)


class Tap:
    """Wraps the daemon's sample sink (our own seam): records what each message produced, then passes it on."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.samples: list[Sample] = []
        self.lock = threading.Lock()

    def __call__(self, samples: Sequence[Sample]) -> None:
        with self.lock:
            self.samples.extend(samples)
        self.sink(samples)

    def messages(self) -> list[Sample]:
        """What the MQTT messages produced (the clock tick's STALE samples pass through the sink too)."""
        with self.lock:
            return [s for s in self.samples if s.quality is not Quality.STALE]


def test_random_payloads_never_crash_the_daemon_and_each_becomes_samples(tmp_path: Path,
                                                                        mosquitto: Mosquitto) -> None:
    config = load_config(fuzz_site(tmp_path, mosquitto.port))
    on_topic = {t: [c for c, spec in CHANNELS.items() if spec[0] == t] for t in (JSON_TOPIC, NUMBER_TOPIC)}
    publisher = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="fuzz-publisher")
    publisher.connect("127.0.0.1", mosquitto.port)
    publisher.loop_start()
    with LoopThread("fuzz-daemon") as loop:
        runner = loop.call(lambda: InProcessDaemon(config))
        daemon = runner.daemon
        tap = Tap(daemon.ingest)
        daemon.ingest = tap  # type: ignore[method-assign]
        loop.run(runner.__aenter__())
        driver = daemon.streaming[0]
        try:
            assert wait_until(lambda: driver.counters.subscribed)
            published = 0
            sent: set[tuple[str, bytes]] = set()
            taken: set[tuple[str, float]] = set()  # (channel, time) of the readings recorded

            @settings(max_examples=150, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                             HealthCheck.data_too_large])
            @given(_payloads)
            def one_message(message: tuple[str, bytes]) -> None:
                nonlocal published
                topic, payload = message
                before, repeats = len(tap.messages()), driver.counters.repeats
                publisher.publish(topic, payload, qos=1).wait_for_publish(5)
                expected = on_topic[topic]
                assert wait_until(lambda: len(tap.messages()) > before or driver.counters.repeats > repeats,
                                  PATIENCE, 0.002), \
                    f"no samples for {payload[:60]!r} on {topic}"
                if driver.counters.repeats > repeats:  # readings already taken (channel, device time, value)
                    assert b'"ts"' in payload and tap.messages()[before:] == [], message
                    return
                sent.add(message)
                published += 1
                got = tap.messages()[before:]  # (one message's samples reach the sink in one call)
                if [s.channel for s in got] != expected:  # a channel's reading at this instant was taken already
                    assert [c for c in expected if c in {s.channel for s in got}] == [s.channel for s in got]
                    assert all((c, got[0].time) in taken for c in expected if c not in {s.channel for s in got}), \
                        (payload[:60], got)
                for s in got:
                    if s.reason.startswith(CONFLICT):  # another value for an instant already recorded
                        assert s.quality is Quality.BAD_VALUE and (s.channel, s.time) in taken, (payload[:80], s)
                        continue
                    taken.add((s.channel, s.time))
                    want = expected_value(s.channel, payload)
                    over = expected_over_range(s.channel, payload)
                    if over is not None:  # the worst case, not silence: kept with its number
                        assert s.quality is Quality.OVER_RANGE and s.value is not None, (payload[:80], s)
                        assert math.isclose(s.value, over, rel_tol=1e-12) and s.reason
                        continue
                    assert (s.value is None) == (not s.good)
                    if want is None:
                        assert not s.good and s.reason, (payload[:80], s)
                    else:
                        assert s.good and s.value is not None and math.isclose(s.value, want, rel_tol=1e-12), \
                            (payload[:80], s, want)
                    assert math.isfinite(s.time)

            one_message()
            assert not loop.call(lambda: runner._task.done())  # type: ignore[union-attr]  # still running
        finally:
            loop.run(runner.__aexit__(None, None, None))
            publisher.loop_stop()
            publisher.disconnect()
    counters = driver.counters
    assert counters.messages == published and counters.connects == 1
    # everything the daemon took in is in the historian, in the order it arrived
    rows = by_channel(recorded(config.daemon.historian))
    for cid in CHANNELS:
        taken = [(s.value, s.quality.value) for s in tap.messages() if s.channel == cid]
        assert [(r.value, r.quality) for r in rows.get(cid, []) if r.quality != "stale"] == taken
    for cid in CHANNELS:  # the examples reached both outcomes on every channel
        assert {s.good for s in tap.messages() if s.channel == cid} == {True, False}, cid
