"""Sparkplug B v1.0 payloads of the uplink, encoded with protobuf classes generated from Eclipse Tahu's
``sparkplug_b.proto`` (`monitor.uplink.sparkplug_b_pb2`).

Why not pysparkplug or mqtt-spb-wrapper: both pin paho-mqtt below 2 (the daemon's MQTT driver needs 2), and
the encoding is the part of them we would use; the Tahu protobuf definition is the standard itself.

A reading travels from the historian to the queue and the broker as a `Reading`: (rseq, site, channel, time
in epoch seconds, value or None, quality word, reason). Times go out as integer milliseconds,
``round(time * 1000)``, the same rounding as the InfluxDB copy, so one reading is one key everywhere.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

from config.schema import Channel
from monitor.uplink import contract as c

_pb: Any = importlib.import_module("monitor.uplink.sparkplug_b_pb2")

# Tahu DataType numbers
INT32, INT64, UINT64, DOUBLE, BOOLEAN, STRING = 3, 4, 8, 10, 11, 12
BOOL_UNITS = frozenset({"bool", "boolean", "on/off"})

Reading = tuple[int, str, str, float, float | None, str, str]


def ms(t: float) -> int:
    return round(t * 1000)


def nbirth(*, bdseq: int, now: float) -> bytes:
    """NBIRTH (seq 0): the session's bdSeq and the rebirth control."""
    p = _pb.Payload(timestamp=ms(now), seq=0)
    _metric(p, c.BDSEQ, INT64, now).long_value = bdseq
    _metric(p, c.REBIRTH, BOOLEAN, now).boolean_value = False
    return bytes(p.SerializeToString())


def ndeath(*, bdseq: int, now: float) -> bytes:
    """NDEATH (the last will; no seq): the bdSeq of the NBIRTH it ends."""
    p = _pb.Payload(timestamp=ms(now))
    _metric(p, c.BDSEQ, INT64, now).long_value = bdseq
    return bytes(p.SerializeToString())


def dbirth(channels: Sequence[Channel], *, seq: int, now: float) -> bytes:
    """DBIRTH of one site: every channel as a metric (no value: the readings follow in DDATA), with its
    unit, kind and span as properties."""
    p = _pb.Payload(timestamp=ms(now), seq=seq)
    for ch in channels:
        m = _metric(p, ch.id, datatype(ch.unit), now)
        m.is_null = True
        props: list[tuple[str, int, Any]] = [(c.ENG_UNIT, STRING, ch.unit), (c.KIND, STRING, str(ch.kind))]
        if ch.valid_min is not None:
            props.append((c.ENG_LOW, DOUBLE, float(ch.valid_min)))
        if ch.valid_max is not None:
            props.append((c.ENG_HIGH, DOUBLE, float(ch.valid_max)))
        _properties(m, props)
    return bytes(p.SerializeToString())


def ddata(readings: Iterable[Reading], *, seq: int, now: float, historical: bool,
          types: dict[tuple[str, str], int]) -> bytes:
    """DDATA of one site's readings: each a metric with the reading's own timestamp, its value (is_null for
    a sample without one), Quality, pretreat_quality, reason (bad samples) and rseq; ``historical`` flags
    the backlog of an outage (metric.is_historical)."""
    p = _pb.Payload(timestamp=ms(now), seq=seq)
    for rseq, site, channel, t, value, quality, reason in readings:
        dt = types.get((site, channel), DOUBLE)
        m = p.metrics.add(name=channel, timestamp=ms(t), datatype=dt)
        if historical:
            m.is_historical = True
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            m.is_null = True
        elif dt == BOOLEAN:
            m.boolean_value = bool(value)
        else:
            m.double_value = float(value)
        props: list[tuple[str, int, Any]] = [(c.QUALITY, INT32, c.quality_code(quality)),
                                             (c.PRETREAT_QUALITY, STRING, quality)]
        if quality != "good" and reason:
            props.append((c.REASON, STRING, reason))
        props.append((c.RSEQ, UINT64, rseq))
        _properties(m, props)
    return bytes(p.SerializeToString())


def rebirth_requested(payload: bytes) -> bool:
    """An NCMD asking for a rebirth (``Node Control/Rebirth`` = true); False for anything else or garbage."""
    p = _pb.Payload()
    try:
        p.ParseFromString(payload)
    except Exception:  # a malformed command is ignored, never fatal
        return False
    return any(m.name == c.REBIRTH and m.WhichOneof("value") == "boolean_value" and m.boolean_value
               for m in p.metrics)


def datatype(unit: str) -> int:
    """Boolean for on/off channels, Double for every measured quantity."""
    return BOOLEAN if unit.lower() in BOOL_UNITS else DOUBLE


def _metric(p: Any, name: str, dt: int, now: float) -> Any:
    return p.metrics.add(name=name, datatype=dt, timestamp=ms(now))


_FIELD = {STRING: "string_value", DOUBLE: "double_value", INT32: "int_value", INT64: "long_value",
          UINT64: "long_value"}


def _properties(m: Any, props: list[tuple[str, int, Any]]) -> None:
    ps = m.properties
    ps.keys.extend([key for key, _, _ in props])
    add = ps.values.add
    for _, dt, value in props:
        if dt == INT32:
            value &= 0xFFFFFFFF  # Tahu: signed ints travel as their unsigned bit pattern
        add(type=dt, **{_FIELD[dt]: value})
