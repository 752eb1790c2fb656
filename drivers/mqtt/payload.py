"""Turn one MQTT message into one `Sample` per channel carried on its topic: a pure function of the bytes.

The decoders are compiled once, at start-up, from the instrument's channels (rule 2: the hot path branches on
nothing it could have decided earlier). Decoding never raises and never drops a channel: every channel on the
topic gets a sample, good or bad, and a bad one says which topic and what was wrong with the payload.

Payload formats (``Channel.payload``):

- ``json``: a JSON object; ``Channel.field`` names the member holding the value, dots descending into
  nested objects (``"probe.lel"`` reads ``{"probe": {"lel": 4.2}}``). The value must be a JSON number.
  ``true``/``false`` are rejected rather than read as 1/0, and numeric strings (``"7.2"``) are rejected rather
  than parsed: a device that changes how it encodes a value should be noticed, not guessed at. An object with
  the same key twice is ambiguous (parsers disagree on which one wins), so the whole payload is a decode
  error. ``NaN``/``Infinity`` (which Python's parser accepts) become BAD_VALUE samples through `judge_value`.
- ``number``: the whole payload is one number in ASCII (``"7.21"``, surrounding whitespace allowed). Only a
  plain decimal or exponent number is accepted (no ``1_000``, no hex); ``nan``/``inf`` become BAD_VALUE.

Payloads larger than `MAX_PAYLOAD_BYTES` are refused unread: a reading is a few dozen bytes, and parsing
megabytes of hostile JSON on the event loop would stall every other instrument.

Time. A sample's time is the device's own timestamp when the instrument has a ``time_field`` and the payload
carries a usable one; otherwise the moment the message was received. Accepted device timestamps:

- a JSON number of seconds since the Unix epoch (int or float). Numbers above `EPOCH_MS_THRESHOLD` (1e11,
  which as seconds would be the year 5138 but as milliseconds is 1973) are read as epoch *milliseconds*, the
  other common convention of embedded firmware;
- an ISO-8601 string *with* a UTC offset or ``Z`` (``2026-11-30T14:05:00Z``, ``...+01:00``).

A timestamp up to `MAX_FUTURE_SKEW` seconds ahead of the receive time is clock drift: the reading is judged at
that time (the check engine judges readings in time order whatever their arrival order, so readings arriving
later with earlier times are judged in their place, not skipped). Timestamps in the past are honoured however
old (instruments that buffer readings through an outage publish them late, with their real times).

A timestamp *further ahead* is a wrong clock. Five minutes, not a day: a message cannot come from the future,
and a whole-hours offset (local time labelled ``Z``) is the commonest firmware bug and would slip under a
one-day limit. Such a message's readings are CLOCK_SKEW samples: bad quality, value ``None``, at the receive
time (the only time known for them), with the rejected timestamp and the number read in the reason
(``device clock more than 300 s fast: device timestamp 'ts' '2026-11-30T15:00:00Z' is 3600 s ahead of the
receive time (read 4.5 %LEL)``). Stamping them with the receive time instead, as good readings, would invent
a time: a buffered burst from a fast clock would be compressed into one moment and judged as successive
readings or a slug duration it never was. A reading of unknown time is no evidence; the sensor_fault episode
a CLOCK_SKEW sample opens (`monitor.checks.base.SENSOR_FAULT_QUALITIES`) alarms, telling the operator to set
the instrument's clock. Only readings that would have been measurements (good or ``over_range``) become
CLOCK_SKEW; a value already bad (undecodable, NaN, out of range) keeps its own quality and reason.

Any other unusable timestamp leaves the reading good at the receive time (what a Modbus poll would record),
its ``reason`` saying which timestamp was rejected and why; `Decoded.time_problem` lets the driver count
these. That covers a missing one (a message without its time field is stamped as it arrives, like any
instrument without a clock), one of the wrong type or unparseable, one without an offset (local time of an
unknown zone: guessing a zone would shift every reading by hours), and one before `MIN_DEVICE_TIME` (a device
whose clock was never set reports 1970). These say nothing about when the reading was taken, whereas a
timestamp ahead of the receive time says a definite wrong time; a device that stamps 1970 publishes its
readings as it takes them, which is what the receive time assumes.

The exception is a *retained* message (one the broker stored and replays on every new subscription, which this
driver makes after every reconnect): without a usable device timestamp (missing, unusable or too far ahead)
its age is unknown, so stamping it "now" would invent a fresh reading and could hide a dead instrument. Such a
message gives STALE samples (value ``None``) whose reason says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from config.schema import Channel, Instrument, PayloadFormat
from monitor.number_text import PLAIN_NUMBER
from monitor.sample import Quality, Sample, judge_value

MAX_PAYLOAD_BYTES = 64 * 1024
"""Largest payload decoded; larger ones give DECODE_ERROR samples without being parsed."""

EPOCH_MS_THRESHOLD = 1e11
"""Numeric device timestamps above this are epoch milliseconds, below it epoch seconds."""

MIN_DEVICE_TIME = 946_684_800.0
"""2000-01-01T00:00:00Z: an earlier device time means the instrument's clock was never set."""

MAX_FUTURE_SKEW = 300.0
"""Seconds a device timestamp may be ahead of the receive time (clock drift); more means a wrong clock."""

_EXCERPT = 40  # characters of an undecodable payload quoted in the reason, enough to recognise it
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


@dataclass(frozen=True, slots=True)
class Decoded:
    """The outcome of decoding one message.

    ``samples`` holds exactly one sample per channel on the topic, in configuration order. ``time_problem`` is
    empty when the device timestamp was used or none is configured, otherwise why it was not (for counting).
    """

    samples: tuple[Sample, ...]
    time_problem: str = ""
    timestamped: bool = False  # the samples carry the device's own timestamp (so an exact copy is a repeat)
    clock_ahead: float = 0.0  # s the device timestamp led the receive time by, beyond MAX_FUTURE_SKEW; else 0


class _DuplicateKey(ValueError):
    pass


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _kind(value: Any) -> str:
    """How a JSON value is named in reasons."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, str):
        shown = value if len(value) <= _EXCERPT else value[:_EXCERPT] + "…"
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _excerpt(payload: bytes) -> str:
    text = payload[:_EXCERPT].decode("utf-8", errors="backslashreplace")
    return repr(text) + ("…" if len(payload) > _EXCERPT else "")


def _lookup(obj: dict[str, Any], path: tuple[str, ...]) -> tuple[Any, str]:
    """The member at a dotted path, or (None, problem). A JSON null is found (and rejected by the caller)."""
    node: Any = obj
    for depth, key in enumerate(path):
        if not isinstance(node, dict):
            where = ".".join(path[:depth])
            return None, f"field {'.'.join(path)!r}: {where!r} is {_kind(node)}, not an object"
        if key not in node:
            return None, f"field {'.'.join(path)!r} missing"
        node = node[key]
    return node, ""


def _as_number(value: Any, name: str) -> tuple[float | None, str]:
    """A JSON value as a float, or (None, problem). Booleans and strings are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"field {name!r} is {_kind(value)}, expected a number"
    try:
        return float(value), ""
    except OverflowError:  # a JSON integer too large for a double
        return None, f"field {name!r} is an integer too large for a number ({len(str(value))} digits)"


def parse_number_text(text: str) -> tuple[float | None, str]:
    """A whole payload of ASCII digits as a float, or (None, problem). Non-finite words give NaN/±inf."""
    stripped = text.strip()
    if PLAIN_NUMBER.fullmatch(stripped):
        value = float(stripped)
        return value, ""
    if stripped.lower() in _NON_FINITE:
        return float(stripped.lower().replace("infinity", "inf")), ""
    if not stripped:
        return None, "payload is empty, expected a number"
    return None, f"payload {stripped[:_EXCERPT]!r} is not a number"


def parse_device_time(raw: Any, *, received: float) -> tuple[float | None, str, float]:
    """A device timestamp as epoch seconds (UTC), or (None, why it is not used), and by how many seconds it led
    the receive time when that is why (beyond `MAX_FUTURE_SKEW`; else 0). See the module docstring."""
    t, problem = read_device_time(raw)
    if t is None or t <= received + MAX_FUTURE_SKEW:
        return t, problem, 0.0
    lead = t - received
    said = f"{lead:.0f}" if lead < 1e9 else f"{lead:.3g}"  # a timestamp of 1e300 is not 300 digits of reason
    return None, f"{raw!r} is {said} s ahead of the receive time", lead


def read_device_time(raw: Any) -> tuple[float | None, str]:
    """A device timestamp as epoch seconds (UTC), or (None, why it cannot be), whatever the receive time."""
    if isinstance(raw, bool) or raw is None or not isinstance(raw, int | float | str):
        return None, f"is {_kind(raw)}, expected epoch seconds or an ISO-8601 string"
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            return None, f"{raw[:_EXCERPT]!r} is not an ISO-8601 date-time"
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            return None, f"{raw!r} has no UTC offset (local time of an unknown zone)"
        t = parsed.timestamp()
    else:
        try:
            t = float(raw)
        except OverflowError:
            return None, "is an integer too large for a time"
        if not math.isfinite(t):
            return None, f"is not finite ({t!r})"
        if t > EPOCH_MS_THRESHOLD:
            t /= 1000.0
    if t < MIN_DEVICE_TIME:
        return None, f"{raw!r} is before 2000-01-01 (device clock not set?)"
    return t, ""


@dataclass(frozen=True, slots=True)
class _ChannelReader:
    channel: Channel
    path: tuple[str, ...]  # JSON member path; empty for payload="number"

    @property
    def is_json(self) -> bool:
        return self.channel.payload is PayloadFormat.JSON


class TopicDecoder:
    """Decodes the messages of one topic into samples of the channels it carries. Immutable once built."""

    def __init__(self, *, topic: str, channels: Sequence[Channel], time_field: str = "") -> None:
        if not channels:
            raise ValueError(f"topic {topic!r}: no channels to decode")
        if len({ch.payload for ch in channels}) > 1:
            # One payload cannot be both a JSON object and a bare number: every message would be bad for
            # some of the channels, so this is a configuration mistake, refused at start-up.
            raise ValueError(f"topic {topic!r}: channels {[ch.id for ch in channels]} mix payload formats")
        readers = []
        for ch in channels:
            if ch.topic != topic:
                raise ValueError(f"channel {ch.id!r} is on topic {ch.topic!r}, not {topic!r}")
            path: tuple[str, ...] = ()
            if ch.payload is PayloadFormat.JSON:
                path = _split_path(ch.field, f"channel {ch.id!r} field")
            readers.append(_ChannelReader(channel=ch, path=path))
        self.topic = topic
        self._readers = tuple(readers)
        self._needs_json = any(r.is_json for r in readers)
        self._time_path = _split_path(time_field, "time_field") if time_field else ()
        self._time_name = time_field

    @property
    def channels(self) -> tuple[Channel, ...]:
        return tuple(r.channel for r in self._readers)

    def failed(self, reason: str, *, received: float, quality: Quality = Quality.DECODE_ERROR) -> Decoded:
        """Every channel of the topic as a bad sample with the same reason (whole-message failures)."""
        return Decoded(tuple(
            Sample.bad(time=received, site=r.channel.site, channel=r.channel.id, unit=r.channel.unit,
                       quality=quality, reason=f"{self.topic}: {reason}")
            for r in self._readers
        ))

    def decode(self, payload: bytes, *, received: float, retained: bool = False) -> Decoded:
        """One sample per channel of this topic. ``received`` is the arrival time, epoch seconds UTC.

        ``retained`` is the MQTT retain flag of the delivered message (set only when the broker replays its
        stored message on a new subscription).
        """
        if len(payload) > MAX_PAYLOAD_BYTES:
            return self.failed(f"payload of {len(payload)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit",
                               received=received)
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self.failed(f"payload is not UTF-8 text (byte {exc.start}): {_excerpt(payload)}",
                               received=received)
        obj: dict[str, Any] | None = None
        if self._needs_json:
            obj, problem = _parse_object(text)
            if obj is None:
                return self.failed(f"{problem}: {_excerpt(payload)}", received=received)
        when, time_problem, lead = self._time(obj, received)
        samples = tuple(self._sample(r, obj, text, when) for r in self._readers)
        if retained and (time_problem or not self._time_path):
            why = time_problem and f"device timestamp {self._time_name!r} {time_problem}"
            why = why or "the instrument has no time_field"
            return Decoded(tuple(self._unknown_age(s, why) for s in samples), time_problem)
        if lead:
            why = (f"{self.topic}: device clock more than {MAX_FUTURE_SKEW:g} s fast: device timestamp "
                   f"{self._time_name!r} {time_problem}")
            return Decoded(tuple(self._skewed(s, why) for s in samples), time_problem, clock_ahead=lead)
        if time_problem:
            note = f"{self.topic}: device timestamp {self._time_name!r} {time_problem}; receive time used"
            samples = tuple(replace(s, reason=note) if s.good else s for s in samples)
        return Decoded(samples, time_problem, timestamped=bool(self._time_path) and not time_problem)

    def _time(self, obj: dict[str, Any] | None, received: float) -> tuple[float, str, float]:
        """The message's time; when a configured device timestamp could not be used, why not; and by how many
        seconds it led the receive time when that is why (0 otherwise)."""
        if not self._time_path:
            return received, "", 0.0
        if obj is None:  # payload="number" channels only: such a payload cannot carry a timestamp
            return received, "cannot be carried by a plain-number payload", 0.0
        raw, missing = _lookup(obj, self._time_path)
        if missing:
            return received, "is missing", 0.0
        t, problem, lead = parse_device_time(raw, received=received)
        return (received, problem, lead) if t is None else (t, "", 0.0)

    def _sample(self, reader: _ChannelReader, obj: dict[str, Any] | None, text: str, when: float) -> Sample:
        ch = reader.channel
        if reader.is_json:
            assert obj is not None
            found, problem = _lookup(obj, reader.path)
            value = None
            if not problem:
                value, problem = _as_number(found, ch.field)
        else:
            value, problem = parse_number_text(text)
        if value is None:
            return Sample.bad(time=when, site=ch.site, channel=ch.id, unit=ch.unit,
                              quality=Quality.DECODE_ERROR, reason=f"{self.topic}: {problem}")
        sample = judge_value(value, time=when, site=ch.site, channel=ch.id, unit=ch.unit, scale=ch.scale,
                             offset=ch.offset, valid_min=ch.valid_min, valid_max=ch.valid_max,
                             over_max=ch.over_range_limit)
        return sample if sample.good else replace(sample, reason=f"{self.topic}: {sample.reason}")

    def _skewed(self, sample: Sample, why: str) -> Sample:
        """A reading stamped too far ahead: CLOCK_SKEW at the receive time, the number read kept in the reason
        (as `drivers.modbus.device_state` keeps it for a reading its instrument disowns)."""
        if sample.quality is not Quality.GOOD and sample.quality is not Quality.OVER_RANGE:
            return sample  # the value itself is bad: its own reason says more
        return Sample.bad(time=sample.time, site=sample.site, channel=sample.channel, unit=sample.unit,
                          quality=Quality.CLOCK_SKEW, reason=f"{why} (read {sample.value:g} {sample.unit})")

    def _unknown_age(self, sample: Sample, why: str) -> Sample:
        if not sample.good:
            return sample
        return Sample.bad(time=sample.time, site=sample.site, channel=sample.channel, unit=sample.unit,
                          quality=Quality.STALE,
                          reason=f"{self.topic}: retained message of unknown age ({why}): not current")


def _split_path(dotted: str, what: str) -> tuple[str, ...]:
    parts = tuple(dotted.split("."))
    if not dotted or any(not p for p in parts):
        raise ValueError(f"{what} {dotted!r}: expected a member name, dots separating nested members")
    return parts


def _parse_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """The payload as a JSON object, or (None, problem)."""
    try:
        obj = json.loads(text, object_pairs_hook=_object_without_duplicates)
    except json.JSONDecodeError as exc:
        return None, f"payload is not JSON ({exc.msg} at character {exc.pos})"
    except _DuplicateKey as exc:
        return None, f"payload is ambiguous JSON ({exc})"
    except RecursionError:
        return None, "payload is not usable JSON (nested too deeply)"
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        return None, f"payload is not usable JSON ({exc})"
    if not isinstance(obj, dict):
        return None, f"payload is {_kind(obj)}, expected a JSON object"
    return obj, ""


class InstrumentDecoder:
    """Every topic of one MQTT instrument, compiled once. Channels of other instruments are refused."""

    def __init__(self, *, instrument: Instrument, channels: Sequence[Channel]) -> None:
        by_topic: dict[str, list[Channel]] = {}
        for ch in channels:
            if (ch.site, ch.instrument) != (instrument.site, instrument.id):
                raise ValueError(f"channel {ch.site}/{ch.id} belongs to instrument {ch.instrument!r}, "
                                 f"not {instrument.site}/{instrument.id}")
            if not ch.topic:
                raise ValueError(f"channel {ch.site}/{ch.id} has no MQTT topic")
            by_topic.setdefault(ch.topic, []).append(ch)
        if not by_topic:
            raise ValueError(f"instrument {instrument.site}/{instrument.id} has no channels")
        self.decoders: dict[str, TopicDecoder] = {
            topic: TopicDecoder(topic=topic, channels=chs, time_field=instrument.time_field)
            for topic, chs in by_topic.items()
        }

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self.decoders)

    def decode(self, topic: str, payload: bytes, *, received: float,
               retained: bool = False) -> Decoded | None:
        """Samples for a message, or ``None`` when no channel listens on ``topic``."""
        decoder = self.decoders.get(topic)
        if decoder is None:
            return None
        return decoder.decode(payload, received=received, retained=retained)
