"""The InfluxDB line-protocol schema of pretreat-monitor, and the code that writes it.

Readings — one measurement per channel kind (``flow``, ``flow_total``, ``ph``, ``temperature``, ``lel``,
``sampler_temperature`` …, the values of `config.schema.ChannelKind`)::

    ph,channel=ph,instrument=ph-meter,site=acme,unit=pH value=7.12,quality="good" 1764460800000
    ph,channel=ph,instrument=ph-meter,site=acme,unit=pH quality="comm_failure",reason="timeout" 1764460801000

- tags: ``site``, ``channel``, ``instrument``, ``unit`` (sorted by key; an empty value is left out, as line
  protocol has no empty tags);
- fields: ``value`` (float, engineering unit; **absent** for a bad sample: a failed read is never a number;
  present for ``over_range``, the number an instrument reported above its span), ``quality`` (string: ``good``,
  ``comm_failure``, ``device_exception``, ``decode_error``, ``bad_value``, ``out_of_range``, ``stale``,
  ``device_fault``, ``over_range``, ``maintenance``, ``unit_mismatch``, ``clock_skew``) and, for bad samples only,
  ``reason`` (string);
- timestamp: the sample time in **milliseconds** since the epoch (UTC), written with ``precision=ms``.
  Milliseconds are what VictoriaMetrics stores and what Grafana resolves; polls are ≥ 10 ms apart. The
  conversion is ``round(time * 1000)``, a pure function of the historian's float, so a backfill writes
  byte-identical lines: same measurement, tags and timestamp overwrite in InfluxDB instead of duplicating.

Annotations and health, each its own measurement:

- ``pretreat_episode`` — tags ``site``, ``channel``, ``rule``, ``event`` (``start``/``end``); fields
  ``value``, ``limit`` (float, when known), ``citation`` (string). Time = the episode event time.
- ``pretreat_alarm`` — tags ``site``, ``channel``, ``rule``, ``priority``; fields ``from_state``,
  ``to_state``, ``user``, ``note`` (strings), ``value``, ``limit`` (float). Time = the transition time.
- ``pretreat_health`` — tag ``component`` (``influx``, ``historian``, an instrument id …); one float field
  per counter (integers and booleans are written as floats so a field's type never changes).

Escaping follows influxdb-client's own serializer: string fields escape ``"`` and ``\\``; tag keys and values
escape ``,`` ``=`` and space (measurements ``,`` and space) and keep a backslash literal; a line break, which
line protocol cannot carry, is written as the two characters ``\\n`` (``\\r``, ``\\t``). A tag value ending
in a backslash is invalid line protocol: the server rejects it and the sink quarantines that point.

On VictoriaMetrics, which stores numbers only, string fields arrive as series named
``<measurement>_<field>`` with value 0 (their presence at a timestamp still shows a bad sample); numeric
fields are ``<measurement>_<field>`` (``ph_value``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from monitor.sample import Quality, Sample

MEASUREMENT_EPISODE = "pretreat_episode"
MEASUREMENT_ALARM = "pretreat_alarm"
MEASUREMENT_HEALTH = "pretreat_health"
UNKNOWN_KIND = "other"

FieldValue = float | int | bool | str


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A generic point: alarm transitions, episodes, health, or anything a later component needs to chart.

    ``time`` is epoch seconds (UTC), like `Sample.time`. Field values: float/int → float (an int gets no
    ``i`` suffix, so a field never changes type), bool → ``true``/``false``, str → string. A None value is
    left out.
    """

    measurement: str
    tags: Mapping[str, str]
    fields: Mapping[str, FieldValue | None]
    time: float


def to_ms(t: float) -> int:
    """Epoch seconds → integer milliseconds, the timestamp precision of every line we write."""
    return round(t * 1000)


# The escaping of influxdb-client's own Point serializer (client/write/point.py): a backslash is literal in
# names and tag values (InfluxDB does not unescape a doubled backslash there), so only the separators are
# escaped, and line breaks, which line protocol cannot carry at all, become a backslash and a letter.
_ESCAPE_MEASUREMENT = str.maketrans({",": r"\,", " ": r"\ ", "\n": r"\n", "\r": r"\r", "\t": r"\t"})
_ESCAPE_KEY = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ ", "\n": r"\n", "\r": r"\r", "\t": r"\t"})
_ESCAPE_STRING = str.maketrans({"\\": r"\\", '"': r'\"', "\n": r"\n", "\r": r"\r"})


def _escape_key(s: str) -> str:
    """Tag keys, tag values and field keys."""
    return s.translate(_ESCAPE_KEY)


def _escape_measurement(s: str) -> str:
    return s.translate(_ESCAPE_MEASUREMENT)


def _escape_str(s: str) -> str:
    """A string field value, without the surrounding quotes (in strings a backslash *is* escaped)."""
    return s.translate(_ESCAPE_STRING)


def _field(value: FieldValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    return f'"{_escape_str(str(value))}"'


def _tags(tags: Mapping[str, str]) -> str:
    return "".join(f",{_escape_key(k)}={_escape_key(v)}" for k, v in sorted(tags.items()) if v != "")


def event_line(rec: EventRecord) -> str:
    """One line for a generic record. Non-finite numbers are left out (line protocol cannot carry them)."""
    fields = ",".join(
        f"{_escape_key(k)}={_field(v)}" for k, v in rec.fields.items()
        if v is not None and not (isinstance(v, float) and not math.isfinite(v)))
    if not fields:
        raise ValueError(f"record for {rec.measurement!r} has no writable field")
    return f"{_escape_measurement(rec.measurement)}{_tags(rec.tags)} {fields} {to_ms(rec.time)}"


class SampleFormatter:
    """Turns Samples into lines. The tag prefix of each (site, channel, unit) is built once and cached.

    ``instruments`` maps (site, channel) → (instrument id, channel kind). A sample of a channel missing from
    it is still written (measurement ``other``, no instrument tag) and counted in ``unknown_channels``:
    dropping it would lose data, guessing an instrument would invent it.
    """

    def __init__(self, *, instruments: Mapping[tuple[str, str], tuple[str, str]]) -> None:
        # a `ChannelKind` is a StrEnum: str() of it is its value
        self._instruments = {k: (inst, str(kind)) for k, (inst, kind) in instruments.items()}
        self._prefix: dict[tuple[str, str, str], str] = {}
        self.unknown_channels = 0
        self.invalid_values = 0  # "good" samples whose value could not be written as a number

    def _prefix_for(self, s: Sample) -> str:
        key = (s.site, s.channel, s.unit)
        prefix = self._prefix.get(key)
        if prefix is None:
            inst, kind = self._instruments.get((s.site, s.channel), ("", UNKNOWN_KIND))
            tags = {"site": s.site, "channel": s.channel, "instrument": inst, "unit": s.unit}
            prefix = f"{_escape_measurement(kind)}{_tags(tags)} "
            self._prefix[key] = prefix
        return prefix

    def line(self, s: Sample) -> str:
        if (s.site, s.channel) not in self._instruments:
            self.unknown_channels += 1
        prefix = self._prefix_for(s)
        value = s.value
        if s.quality is Quality.GOOD:
            if value is not None and math.isfinite(value):
                return f'{prefix}value={float(value)!r},quality="good" {round(s.time * 1000)}'
            self.invalid_values += 1
            return (f'{prefix}quality="{Quality.BAD_VALUE.value}",reason="good sample without a finite value '
                    f'({value!r})" {round(s.time * 1000)}')
        reason = f',reason="{_escape_str(s.reason)}"' if s.reason else ""
        if s.quality is Quality.OVER_RANGE and value is not None and math.isfinite(value):
            reason = f"{reason},value={float(value)!r}"
        return f'{prefix}quality="{s.quality.value}"{reason} {round(s.time * 1000)}'

    def lines(self, samples: Iterable[Sample]) -> list[str]:
        line = self.line
        return [line(s) for s in samples]

    def batches(self, samples: Iterable[Sample], size: int) -> Iterator[list[bytes]]:
        """Lines of recorded readings, ``size`` at a time (encoded), streaming: what `pretreat influx
        backfill` sends and what the sink re-queues after a crash, both exactly the lines sent live."""
        line = self.line
        batch: list[bytes] = []
        for s in samples:
            batch.append(line(s).encode())
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch


class EpisodeLike(Protocol):
    """What the check engine's EpisodeEvent carries (duck-typed so this module does not depend on it)."""

    @property
    def time(self) -> float: ...
    @property
    def site(self) -> str: ...
    @property
    def channel(self) -> str: ...
    @property
    def rule(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def value(self) -> float | None: ...
    @property
    def limit(self) -> float | None: ...
    @property
    def citation(self) -> str: ...


def episode_record(e: EpisodeLike) -> EventRecord:
    return EventRecord(
        measurement=MEASUREMENT_EPISODE,
        tags={"site": e.site, "channel": e.channel, "rule": e.rule, "event": e.event},
        fields={"value": _num(e.value), "limit": _num(e.limit), "citation": e.citation or ""},
        time=e.time)


def alarm_record(*, time: float, site: str, channel: str, rule: str, priority: str, from_state: str,
                 to_state: str, user: str = "system", note: str = "", value: float | None = None,
                 limit: float | None = None) -> EventRecord:
    """An alarm state transition (the alarm engine's Transition maps onto these keywords)."""
    return EventRecord(
        measurement=MEASUREMENT_ALARM,
        tags={"site": site, "channel": channel, "rule": rule, "priority": priority},
        fields={"from_state": from_state, "to_state": to_state, "user": user, "note": note,
                "value": _num(value), "limit": _num(limit)},
        time=time)


def health_record(*, component: str, counters: Mapping[str, Any], time: float) -> EventRecord:
    """Numeric and boolean counters as float fields; other values (strings, nested dicts) are skipped."""
    fields: dict[str, FieldValue | None] = {
        k: float(v) for k, v in counters.items()
        if isinstance(v, int | float) and math.isfinite(float(v))}
    return EventRecord(measurement=MEASUREMENT_HEALTH, tags={"component": component}, fields=fields,
                       time=time)


def _num(v: float | None) -> float | None:
    return None if v is None else float(v)
