"""Sparkplug B v1.0 payloads as the edges publish them, decoded into the rows the hub stores. Topic names, metric
and property names come from the uplink contract (`monitor.uplink.contract`, SPARKPLUG.md), shared with the edge.

The payload schema is Eclipse Tahu's ``sparkplug_b.proto`` (``org.eclipse.tahu.protobuf.Payload``), loaded from
its compiled descriptor (``sparkplug_b.desc``, the same descriptor pysparkplug 0.6.1 ships) into a private
descriptor pool: pysparkplug itself pins paho-mqtt < 2, which the daemon's MQTT driver cannot use, and a private
pool cannot clash with another copy of the same ``.proto`` registered in protobuf's default pool.
"""

from __future__ import annotations

import datetime as dt
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from monitor.uplink import contract as c

READING_COLUMNS = ("site", "channel", "time", "rseq", "value", "quality", "pretreat_quality", "reason", "historical",
                   "node")
"""A reading row as the hub decodes it, in the order of the ``readings`` table's columns (its COPY order)."""
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _payload_class() -> Any:
    fdp = descriptor_pb2.FileDescriptorProto.FromString(
        resources.files("monitor.hub").joinpath("sparkplug_b.desc").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("org.eclipse.tahu.protobuf.Payload"))


Payload = _payload_class()
"""The Sparkplug B protobuf message class (``Payload.FromString(bytes)``, ``Payload()`` to build one)."""
DOUBLE, BOOLEAN, STRING, INT32, UINT64 = 10, 11, 12, 3, 8
"""Sparkplug B DataType codes used by the contract."""


class BadMessage(ValueError):
    """A message the hub cannot store; the text says which part and why (it is kept in ``hub_rejects``)."""


def decode(raw: bytes, topic: str) -> Any:
    try:
        return Payload.FromString(raw)
    except Exception as exc:  # protobuf raises DecodeError and, on some bytes, RuntimeWarning-like errors
        raise BadMessage(f"{topic}: not a Sparkplug B payload ({exc})") from exc


def metric_value(metric: Any) -> Any:
    """The metric's value (None when ``is_null`` or unset)."""
    if metric.is_null:
        return None
    which = metric.WhichOneof("value")
    return None if which is None else getattr(metric, which)


def properties(metric: Any) -> dict[str, Any]:
    props = metric.properties
    return {k: (None if v.is_null else getattr(v, v.WhichOneof("value") or "is_null"))
            for k, v in zip(props.keys, props.values, strict=False)}


def bd_seq(payload: Any, topic: str) -> int:
    """The NBIRTH/NDEATH "bdSeq" metric that pairs a death with its birth."""
    for m in payload.metrics:
        if m.name == c.BDSEQ:
            return int(metric_value(m) or 0)
    raise BadMessage(f"{topic}: no bdSeq metric")


GOOD_KEYS = [c.QUALITY, c.PRETREAT_QUALITY, c.RSEQ]
BAD_KEYS = [c.QUALITY, c.PRETREAT_QUALITY, c.REASON, c.RSEQ]
"""The property names of a good and of a bad reading in the order the edge writes them
(`monitor.uplink.payloads`): read by position when a metric's keys are exactly these."""


def month_start(t: dt.datetime) -> dt.datetime:
    """The first instant of ``t``'s month, UTC (the ``readings`` partition it belongs to)."""
    t = t.astimezone(dt.UTC)
    return dt.datetime(t.year, t.month, 1, tzinfo=dt.UTC)


def readings(payload: Any, node: str, site: str, topic: str, months: set[dt.datetime] | None = None
             ) -> tuple[list[tuple[Any, ...]], list[str]]:
    """DDATA metrics as rows in `READING_COLUMNS` order, and the reasons of the metrics refused; the month
    starts of the rows' times are added to ``months`` (the partitions the rows need).

    A bad-quality sample arrives as ``is_null`` with its "reason": stored with a NULL value, never a number.
    The hot path of the hub (one pass a reading; each protobuf attribute read costs ~0.3 µs here): the
    properties are read by position when their names are the edge's (`GOOD_KEYS`, `BAD_KEYS`), by name
    otherwise, and one datetime is made per distinct timestamp of the message (the channels of one poll share
    it), which together took the decoding from ~13 to ~6 µs a reading (bench/bench_hub.py)."""
    rows: list[tuple[Any, ...]] = []
    refused: list[str] = []
    times: dict[int, dt.datetime] = {}
    for m in payload.metrics:
        props = m.properties
        keys = props.keys
        if keys == GOOD_KEYS:
            pq_v, rs_v = props.values[1:3]
            quality, pq, reason, rseq = props.values[0].int_value, pq_v.string_value, None, rs_v.long_value
        elif keys == BAD_KEYS:
            q_v, pq_v, re_v, rs_v = props.values
            quality, pq, reason, rseq = q_v.int_value, pq_v.string_value, re_v.string_value, rs_v.long_value
        else:
            quality, pq, reason, rseq = _by_name(props)
        name, t_ms = m.name, m.timestamp
        if not name or rseq is None or not t_ms:
            refused.append(f"{topic}: metric {name or m.alias!r} lacks a name, a timestamp or its rseq property")
            continue
        if m.is_null:
            value = None
        elif m.datatype == DOUBLE:
            value = m.double_value
        else:
            value = metric_value(m)
            if isinstance(value, bool):
                value = float(value)
            elif value is not None and not isinstance(value, float | int):
                refused.append(f"{topic}: metric {name!r} has a non-numeric value {value!r}")
                continue
        t = times.get(t_ms)
        if t is None:
            t = times[t_ms] = EPOCH + dt.timedelta(milliseconds=t_ms)
            if months is not None:
                months.add(month_start(t))
        rows.append((site, name, t, rseq, value, quality, pq, reason, m.is_historical, node))
    return rows, refused


def _by_name(props: Any) -> tuple[int | None, str | None, str | None, int | None]:
    """(Quality, pretreat_quality, reason, rseq) of a property set in any order, None where absent."""
    rseq = quality = pq = reason = None
    for key, v in zip(props.keys, props.values, strict=False):
        if key == c.RSEQ:
            rseq = v.long_value
        elif key == c.QUALITY:
            quality = v.int_value
        elif key == c.PRETREAT_QUALITY:
            pq = v.string_value
        elif key == c.REASON:
            reason = v.string_value
    return quality, pq, reason, rseq


def channels(payload: Any, node: str, site: str) -> list[tuple[Any, ...]]:
    """DBIRTH metrics as (node, site, channel, unit, kind, eng_low, eng_high) rows."""
    out = []
    for m in payload.metrics:
        p = properties(m)
        out.append((node, site, m.name, p.get(c.ENG_UNIT), p.get(c.KIND), p.get(c.ENG_LOW), p.get(c.ENG_HIGH)))
    return out
