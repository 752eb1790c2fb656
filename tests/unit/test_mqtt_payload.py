"""Payload → Sample mapping of the MQTT driver: every payload case, without a broker."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.schema import Channel, ChannelKind, DriverKind, Instrument, MqttBroker, PayloadFormat
from drivers.mqtt.payload import (
    EPOCH_MS_THRESHOLD,
    MAX_FUTURE_SKEW,
    MAX_PAYLOAD_BYTES,
    InstrumentDecoder,
    TopicDecoder,
    parse_device_time,
    parse_number_text,
)
from monitor.sample import Quality, Sample

TOPIC = "acme/mh1/lel"
NOW = datetime(2026, 11, 30, 14, 0, 0, tzinfo=UTC).timestamp()


def instrument(time_field: str = "ts") -> Instrument:
    return Instrument(id="lel-meter", site="acme", driver=DriverKind.MQTT, poll_interval=1.0,
                      mqtt=MqttBroker(host="127.0.0.1", client_id="t"), time_field=time_field)


def channel(cid: str = "lel", *, topic: str = TOPIC, field: str = "lel_pct",
            payload: PayloadFormat = PayloadFormat.JSON, **kw: float) -> Channel:
    return Channel(id=cid, site="acme", instrument="lel-meter", kind=ChannelKind.LEL, unit="%LEL",
                   topic=topic, field=field, payload=payload, **kw)  # type: ignore[arg-type]


def decode_one(payload: bytes | str, *, ch: Channel | None = None, time_field: str = "ts",
               retained: bool = False) -> Sample:
    dec = TopicDecoder(topic=TOPIC, channels=[ch or channel()], time_field=time_field)
    raw = payload.encode() if isinstance(payload, str) else payload
    out = dec.decode(raw, received=NOW, retained=retained)
    assert len(out.samples) == 1
    return out.samples[0]


def assert_decode_error(sample: Sample, *words: str) -> None:
    assert sample.quality is Quality.DECODE_ERROR, sample
    assert sample.value is None
    assert sample.reason.startswith(TOPIC + ": "), sample.reason
    for w in words:
        assert w in sample.reason, (w, sample.reason)


# --- good values ---------------------------------------------------------------------------------------

def test_json_number_with_device_time_in_epoch_seconds() -> None:
    s = decode_one(json.dumps({"lel_pct": 4.5, "ts": NOW - 2}))
    assert (s.quality, s.value, s.time, s.reason) == (Quality.GOOD, 4.5, NOW - 2, "")
    assert (s.site, s.channel, s.unit) == ("acme", "lel", "%LEL")


def test_integer_value_and_scale_offset() -> None:
    s = decode_one('{"lel_pct": 12, "ts": 1796047200}', ch=channel(scale=0.5, offset=1.0))
    assert s.good and s.value == 7.0 and s.time == 1796047200.0


def test_nested_field_path() -> None:
    ch = channel(field="probe.gas.lel")
    s = decode_one('{"probe": {"gas": {"lel": 3.25}}, "ts": 1796047200}', ch=ch)
    assert s.good and s.value == 3.25


def test_nested_time_field() -> None:
    s = decode_one('{"lel_pct": 1, "meta": {"t": "2026-11-30T13:59:00Z"}}', time_field="meta.t")
    assert s.good and s.time == NOW - 60


def test_several_channels_on_one_topic_one_sample_each_in_config_order() -> None:
    chans = [channel("lel", field="lel"), channel("temp", field="temp"), channel("h2s", field="h2s")]
    dec = TopicDecoder(topic=TOPIC, channels=chans, time_field="ts")
    out = dec.decode(b'{"temp": 21.5, "lel": 2, "h2s": "n/a", "ts": 1796047100}', received=NOW)
    assert [s.channel for s in out.samples] == ["lel", "temp", "h2s"]
    assert [s.value for s in out.samples] == [2.0, 21.5, None]
    assert out.samples[2].quality is Quality.DECODE_ERROR
    assert all(s.time == 1796047100.0 for s in out.samples)


def test_number_payload() -> None:
    ch = channel(field="", payload=PayloadFormat.NUMBER)
    for text, value in [("7.21", 7.21), (" -3\n", -3.0), ("1e2", 100.0), (".5", 0.5), ("+4.", 4.0)]:
        s = decode_one(text, ch=ch, time_field="")
        assert s.good and s.value == value and s.time == NOW, text


def test_without_time_field_receive_time_is_used_silently() -> None:
    s = decode_one('{"lel_pct": 4.5, "ts": 1}', time_field="")
    assert s.good and s.time == NOW and s.reason == ""


# --- judged values (range, NaN) ----------------------------------------------------------------------

def test_out_of_range_is_judged_after_scaling() -> None:
    s = decode_one('{"lel_pct": -1, "ts": 1796047200}', ch=channel(valid_min=0, valid_max=100))
    assert s.quality is Quality.OUT_OF_RANGE and s.value is None
    assert s.reason.startswith(TOPIC) and "outside valid range" in s.reason
    assert decode_one('{"lel_pct": 100, "ts": 1796047200}', ch=channel(valid_min=0, valid_max=100)).good
    ph = Channel(id="ph", site="acme", instrument="lel-meter", kind=ChannelKind.PH, unit="pH", topic=TOPIC,
                 field="lel_pct", valid_min=0, valid_max=14)
    assert decode_one('{"lel_pct": 14.5, "ts": 1796047200}', ch=ph).quality is Quality.OUT_OF_RANGE


def test_an_lel_meter_above_its_span_is_over_range_with_its_number_up_to_one_span_more() -> None:
    """A gas detector saturating high is the worst case, not a fault: 120 % LEL keeps its number, quality
    over_range (the checks judge it as 100 %); beyond one span above the top (200 %) it is a fault code."""
    s = decode_one('{"lel_pct": 120, "ts": 1796047200}', ch=channel(valid_min=0, valid_max=100))
    assert s.quality is Quality.OVER_RANGE and s.value == 120.0
    assert s.reason.startswith(TOPIC) and "above the span" in s.reason and "judged as 100" in s.reason
    assert decode_one('{"lel_pct": 200, "ts": 1796047200}',
                      ch=channel(valid_min=0, valid_max=100)).quality is Quality.OVER_RANGE
    far = decode_one('{"lel_pct": 200.01, "ts": 1796047200}', ch=channel(valid_min=0, valid_max=100))
    assert far.quality is Quality.OUT_OF_RANGE and far.value is None


def test_other_kinds_judge_over_range_readings_only_when_the_channel_opts_in() -> None:
    ph = Channel(id="ph", site="acme", instrument="lel-meter", kind=ChannelKind.PH, unit="pH", topic=TOPIC,
                 field="lel_pct", valid_min=0, valid_max=14, judge_over_range=True)
    s = decode_one('{"lel_pct": 14.3, "ts": 1796047200}', ch=ph)
    assert s.quality is Quality.OVER_RANGE and s.value == 14.3


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_json_literals_are_bad_values(literal: str) -> None:
    s = decode_one(f'{{"lel_pct": {literal}, "ts": 1796047200}}')
    assert s.quality is Quality.BAD_VALUE and s.value is None and "non-finite" in s.reason


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-Infinity"])
def test_non_finite_number_payloads_are_bad_values(text: str) -> None:
    s = decode_one(text, ch=channel(field="", payload=PayloadFormat.NUMBER), time_field="")
    assert s.quality is Quality.BAD_VALUE


# --- decode errors ----------------------------------------------------------------------------------

def test_not_json() -> None:
    assert_decode_error(decode_one("lel=4.5"), "not JSON", "'lel=4.5'")


def test_truncated_json() -> None:
    assert_decode_error(decode_one('{"lel_pct": 4.'), "not JSON")


def test_json_but_not_an_object() -> None:
    assert_decode_error(decode_one("[4.5]"), "an array, expected a JSON object")
    assert_decode_error(decode_one("4.5"), "a float, expected a JSON object")


def test_field_missing() -> None:
    assert_decode_error(decode_one('{"lel": 4.5, "ts": 1796047200}'), "'lel_pct' missing")


def test_nested_field_through_a_non_object() -> None:
    s = decode_one('{"probe": [1, 2], "ts": 1796047200}', ch=channel(field="probe.lel"))
    assert_decode_error(s, "'probe' is an array, not an object")


@pytest.mark.parametrize(("value", "words"), [
    ("true", "a boolean (true)"),
    ("false", "a boolean (false)"),
    ('"4.5"', "a string ('4.5')"),
    ("null", "is null"),
    ("[4.5]", "an array"),
    ('{"v": 4.5}', "an object"),
])
def test_value_of_the_wrong_type(value: str, words: str) -> None:
    assert_decode_error(decode_one(f'{{"lel_pct": {value}, "ts": 1796047200}}'), words, "expected a number")


def test_integer_too_large_for_a_double() -> None:
    assert_decode_error(decode_one('{"lel_pct": 1' + "0" * 400 + "}"), "too large")


def test_duplicate_keys_are_ambiguous() -> None:
    assert_decode_error(decode_one('{"lel_pct": 1, "lel_pct": 2}'), "duplicate key 'lel_pct'")


def test_deeply_nested_json_does_not_crash() -> None:
    payload = '{"a":' + "[" * 30000 + "]" * 30000 + "}"
    assert len(payload) < MAX_PAYLOAD_BYTES
    assert_decode_error(decode_one(payload), "nested too deeply")


def test_not_utf8() -> None:
    assert_decode_error(decode_one(b'{"lel_pct": \xff}'), "not UTF-8", "byte 12")


def test_empty_payload() -> None:
    assert_decode_error(decode_one(b""), "not JSON")
    ch = channel(field="", payload=PayloadFormat.NUMBER)
    assert_decode_error(decode_one(b"", ch=ch, time_field=""), "empty")


@pytest.mark.parametrize("text", ["1_000", "0x10", "7,2", "4.5 %", "--1", "1e", "seven"])
def test_number_payload_strictness(text: str) -> None:
    ch = channel(field="", payload=PayloadFormat.NUMBER)
    assert_decode_error(decode_one(text, ch=ch, time_field=""), "not a number")


def test_oversize_payload_is_refused_unread() -> None:
    big = b'{"lel_pct": 1, "pad": "' + b"x" * MAX_PAYLOAD_BYTES + b'"}'
    assert_decode_error(decode_one(big), f"{len(big)} bytes", "limit")
    fits = b'{"lel_pct": 1, "ts": 1796047200, "pad": "' + b"x" * (MAX_PAYLOAD_BYTES - 60) + b'"}'
    assert len(fits) <= MAX_PAYLOAD_BYTES
    assert decode_one(fits).good


def test_whole_payload_failure_gives_every_channel_a_bad_sample() -> None:
    chans = [channel("lel", field="lel"), channel("temp", field="temp")]
    out = TopicDecoder(topic=TOPIC, channels=chans, time_field="ts").decode(b"garbage", received=NOW)
    assert [s.channel for s in out.samples] == ["lel", "temp"]
    assert all(s.quality is Quality.DECODE_ERROR and s.time == NOW for s in out.samples)


# --- device timestamps ----------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (1796047200, 1796047200.0),
    (1796047200.25, 1796047200.25),
    (1796047200123, 1796047200.123),  # epoch milliseconds (> 1e11)
    ("2026-11-30T13:00:00Z", NOW - 3600),
    ("2026-11-30T14:00:00+01:00", NOW - 3600),
    ("2026-11-30T13:59:59.5+00:00", NOW - 0.5),
    ("2026-11-30T14:04:00Z", NOW + 240),  # clock drift within MAX_FUTURE_SKEW
    ("2001-01-01T00:00:00Z", 978307200.0),  # old but plausible: buffered readings are honoured
])
def test_device_time_accepted(raw: object, expected: float) -> None:
    t, problem, _lead = parse_device_time(raw, received=NOW)
    assert problem == "" and t == pytest.approx(expected, abs=1e-6)


def test_millisecond_threshold_is_between_centuries_of_seconds_and_decades_of_ms() -> None:
    assert datetime.fromtimestamp(EPOCH_MS_THRESHOLD, tz=UTC).year > 5000
    assert datetime.fromtimestamp(EPOCH_MS_THRESHOLD / 1000, tz=UTC).year == 1973


@pytest.mark.parametrize(("raw", "words"), [
    ("2026-11-30T14:00:00", "no UTC offset"),
    ("2026-11-30", "no UTC offset"),
    ("yesterday", "not an ISO-8601"),
    ("1796047200", "not an ISO-8601"),  # numeric strings are not guessed at
    (True, "a boolean"),
    (None, "null"),
    ([1], "an array"),
    (0, "before 2000"),
    (12345, "before 2000"),
    (NOW + MAX_FUTURE_SKEW + 10, "310 s ahead"),
    ("2026-11-30T15:00:00Z", "3600 s ahead"),  # local time labelled Z: the classic firmware bug
    (1e300, "is 1e+297 s ahead"),  # (read as epoch ms) said in a few characters, not 297 digits
    (float("nan"), "not finite"),
    (float("inf"), "not finite"),
    (10**400, "too large"),
])
def test_device_time_rejected(raw: object, words: str) -> None:
    t, problem, _lead = parse_device_time(raw, received=NOW)
    assert t is None and words in problem, problem


def test_rejected_device_time_keeps_the_value_with_the_receive_time_and_says_so() -> None:
    dec = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts")
    out = dec.decode(b'{"lel_pct": 4.5, "ts": "2026-11-30T14:00:00"}', received=NOW)
    (s,) = out.samples
    assert s.good and s.value == 4.5 and s.time == NOW
    assert "device timestamp 'ts'" in s.reason and "no UTC offset" in s.reason and "receive time" in s.reason
    assert "no UTC offset" in out.time_problem


def test_a_device_time_within_the_drift_tolerance_is_the_readings_time() -> None:
    out = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts").decode(
        json.dumps({"lel_pct": 4.5, "ts": NOW + MAX_FUTURE_SKEW}).encode(), received=NOW)
    (s,) = out.samples
    assert s.good and s.value == 4.5 and s.time == NOW + MAX_FUTURE_SKEW and s.reason == ""
    assert out.timestamped and out.time_problem == "" and out.clock_ahead == 0.0


@pytest.mark.parametrize(("ts", "shown", "lead"), [
    ("2026-11-30T15:00:00Z", "'2026-11-30T15:00:00Z' is 3600 s ahead", 3600.0),  # local time labelled Z
    (NOW + MAX_FUTURE_SKEW + 10, f"{NOW + MAX_FUTURE_SKEW + 10!r} is 310 s ahead", 310.0),
    (int((NOW + 612) * 1000), f"{int((NOW + 612) * 1000)!r} is 612 s ahead", 612.0),  # epoch milliseconds
])
def test_a_device_time_too_far_ahead_makes_the_reading_clock_skew_at_the_receive_time(
        ts: object, shown: str, lead: float) -> None:
    """Not a good reading at an invented time: a reading of unknown time is no evidence. The number read and the
    timestamp rejected stay in the reason."""
    out = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts").decode(
        json.dumps({"lel_pct": 7.25, "ts": ts}).encode(), received=NOW)
    (s,) = out.samples
    assert s.quality is Quality.CLOCK_SKEW and s.value is None and not s.good and s.time == NOW
    assert s.reason == (f"{TOPIC}: device clock more than 300 s fast: device timestamp 'ts' {shown} of the "
                        "receive time (read 7.25 %LEL)")
    assert out.clock_ahead == pytest.approx(lead) and not out.timestamped and "ahead" in out.time_problem


def test_a_burst_from_a_fast_clock_is_not_compressed_into_good_readings() -> None:
    """A buffered burst stamped a minute apart by a clock an hour fast, all arriving at once: none of it becomes
    a good reading (they would be successive readings one second apart, or a slug duration they never were)."""
    dec = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts")
    samples = [dec.decode(json.dumps({"lel_pct": v, "ts": NOW + 3600 + 60 * i}).encode(), received=NOW + i * 1e-3)
               .samples[0] for i, v in enumerate([3.0, 48.0, 52.0, 4.0])]
    assert [s.quality for s in samples] == [Quality.CLOCK_SKEW] * 4
    assert [s.value for s in samples] == [None] * 4
    assert [s.reason.rsplit("(read ", 1)[1] for s in samples] == ["3 %LEL)", "48 %LEL)", "52 %LEL)", "4 %LEL)"]


def test_clock_skew_applies_to_measurements_a_bad_value_keeps_its_own_quality() -> None:
    chans = [channel("lel", field="lel", valid_min=0, valid_max=100), channel("temp", field="temp"),
             channel("o2", field="o2", valid_min=0, valid_max=25)]
    out = TopicDecoder(topic=TOPIC, channels=chans, time_field="ts").decode(
        b'{"lel": 120, "temp": "hot", "o2": 60, "ts": "2026-11-30T15:00:00Z"}', received=NOW)
    lel, temp, o2 = out.samples
    assert lel.quality is Quality.CLOCK_SKEW and lel.value is None and lel.reason.endswith("(read 120 %LEL)")
    assert temp.quality is Quality.DECODE_ERROR and "expected a number" in temp.reason and temp.time == NOW
    assert o2.quality is Quality.OUT_OF_RANGE and "outside valid range" in o2.reason and o2.time == NOW


def test_a_retained_message_too_far_ahead_stays_stale() -> None:
    s = decode_one('{"lel_pct": 4.5, "ts": "2026-11-30T15:00:00Z"}', retained=True)
    assert s.quality is Quality.STALE and s.value is None and s.time == NOW
    assert "retained message of unknown age" in s.reason and "3600 s ahead" in s.reason


def test_a_device_clock_never_set_keeps_the_value_with_the_receive_time() -> None:
    """A 1970 timestamp says nothing about when the reading was taken (unlike one ahead, which names a time it
    cannot have been): the reading is stamped as it arrives, like a Modbus poll, and the reason says why."""
    out = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts").decode(
        b'{"lel_pct": 4.5, "ts": 12345}', received=NOW)
    (s,) = out.samples
    assert s.good and s.value == 4.5 and s.time == NOW and "before 2000" in s.reason and "receive time" in s.reason
    assert out.clock_ahead == 0.0


def test_missing_device_time_keeps_the_value_with_the_receive_time() -> None:
    out = TopicDecoder(topic=TOPIC, channels=[channel()], time_field="ts").decode(
        b'{"lel_pct": 4.5}', received=NOW)
    assert out.samples[0].good and out.samples[0].time == NOW and out.time_problem == "is missing"


def test_bad_value_keeps_the_device_time() -> None:
    s = decode_one('{"lel_pct": "high", "ts": 1796047100}')
    assert s.quality is Quality.DECODE_ERROR and s.time == 1796047100.0


def test_number_payload_with_time_field_notes_that_no_timestamp_can_be_carried() -> None:
    ch = channel(field="", payload=PayloadFormat.NUMBER)
    out = TopicDecoder(topic=TOPIC, channels=[ch], time_field="ts").decode(b"3", received=NOW)
    assert out.samples[0].good and out.samples[0].time == NOW and "plain-number" in out.time_problem


# --- retained messages ----------------------------------------------------------------------------

def test_retained_message_with_device_time_is_a_real_reading() -> None:
    s = decode_one('{"lel_pct": 4.5, "ts": 1796040000}', retained=True)
    assert s.good and s.value == 4.5 and s.time == 1796040000.0


def test_retained_message_of_unknown_age_is_not_a_current_reading() -> None:
    s = decode_one('{"lel_pct": 4.5}', retained=True)
    assert s.quality is Quality.STALE and s.value is None
    assert "retained message of unknown age" in s.reason and "'ts' is missing" in s.reason
    s = decode_one('{"lel_pct": 4.5}', retained=True, time_field="")
    assert s.quality is Quality.STALE and "no time_field" in s.reason


def test_retained_garbage_stays_a_decode_error() -> None:
    assert_decode_error(decode_one("garbage", retained=True), "not JSON")


# --- compilation ----------------------------------------------------------------------------------

def test_instrument_decoder_groups_channels_by_topic_and_ignores_other_topics() -> None:
    chans = [channel("lel", field="lel"), channel("temp", field="temp"),
             channel("level", topic="acme/mh1/level", field="", payload=PayloadFormat.NUMBER)]
    dec = InstrumentDecoder(instrument=instrument(), channels=chans)
    assert dec.topics == (TOPIC, "acme/mh1/level")
    out = dec.decode("acme/mh1/level", b"0.42", received=NOW)
    assert out is not None and [(s.channel, s.value) for s in out.samples] == [("level", 0.42)]
    assert dec.decode("acme/other", b"1", received=NOW) is None


@pytest.mark.parametrize(("chans", "words"), [
    ([], "no channels"),
    ([channel(field="")], "field ''"),
    ([channel(field="a..b")], "field 'a..b'"),
    ([channel(topic="")], "no MQTT topic"),
    ([Channel(id="x", site="acme", instrument="other", kind=ChannelKind.LEL, unit="%", topic=TOPIC,
              field="v")], "belongs to instrument 'other'"),
    ([channel("a", field="a"), channel("b", field="", payload=PayloadFormat.NUMBER)], "mix payload formats"),
])
def test_compilation_refuses_bad_channel_sets(chans: list[Channel], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(".", r"\.")):
        InstrumentDecoder(instrument=instrument(), channels=chans)


def test_bad_time_field_is_refused_at_compile_time() -> None:
    with pytest.raises(ValueError, match="time_field"):
        InstrumentDecoder(instrument=instrument(time_field="meta."), channels=[channel()])


def test_parse_number_text_direct() -> None:
    assert parse_number_text("12.5") == (12.5, "")
    value, problem = parse_number_text("-inf")
    assert value is not None and math.isinf(value) and value < 0 and problem == ""


# --- never raises, never drops --------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["lel", "ts", "p"]), inner,
                                                                 max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(payload=st.one_of(st.binary(max_size=200), _JSON.map(lambda v: json.dumps(v).encode())),
       retained=st.booleans())
def test_any_payload_gives_exactly_one_sample_per_channel_and_never_a_bad_number(
        payload: bytes, retained: bool) -> None:
    chans = [channel("a", field="lel"), channel("b", field="p.lel", valid_min=0, valid_max=100)]
    out = TopicDecoder(topic=TOPIC, channels=chans, time_field="ts").decode(
        payload, received=NOW, retained=retained)
    assert [s.channel for s in out.samples] == ["a", "b"]
    for s in out.samples:
        if s.good:
            assert s.value is not None and math.isfinite(s.value)
        elif s.quality is Quality.OVER_RANGE:  # the reading past the span is kept (censored), with its reason
            assert s.value is not None and math.isfinite(s.value) and s.reason.startswith(TOPIC)
        else:
            assert s.value is None and s.reason.startswith(TOPIC)
