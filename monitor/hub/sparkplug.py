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


def readings(payload: Any, node: str, site: str, topic: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    """DDATA metrics as rows in `READING_COLUMNS` order, and the reasons of the metrics refused.

    A bad-quality sample arrives as ``is_null`` with its "reason": stored with a NULL value, never a number.
    The hot path of the hub (one call a reading): the contract's four properties are read by name with their
    contract types, not through the generic `properties`, which costs twice as much."""
    rows: list[tuple[Any, ...]] = []
    refused: list[str] = []
    for m in payload.metrics:
        props = m.properties
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
        rows.append((site, name, EPOCH + dt.timedelta(milliseconds=t_ms), rseq, value, quality, pq, reason,
                     m.is_historical, node))
    return rows, refused


def channels(payload: Any, node: str, site: str) -> list[tuple[Any, ...]]:
    """DBIRTH metrics as (node, site, channel, unit, kind, eng_low, eng_high) rows."""
    out = []
    for m in payload.metrics:
        p = properties(m)
        out.append((node, site, m.name, p.get(c.ENG_UNIT), p.get(c.KIND), p.get(c.ENG_LOW), p.get(c.ENG_HIGH)))
    return out
