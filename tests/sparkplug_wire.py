"""A second, independent Sparkplug B decoder for the tests: the protobuf wire format read by hand, field by
field, from the numbers of Eclipse Tahu's ``sparkplug_b.proto`` (Payload, Payload.Metric,
Payload.PropertySet, Payload.PropertyValue). It shares no code with the daemon's encoder (protobuf-generated
classes) nor with the protobuf library, so a payload both agree on is Sparkplug as the standard defines it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

# Tahu DataType numbers this decoder knows
DATATYPES = {3: "Int32", 4: "Int64", 8: "UInt64", 9: "Float", 10: "Double", 11: "Boolean", 12: "String"}


@dataclass
class Metric:
    name: str = ""
    timestamp: int | None = None
    datatype: int | None = None
    is_historical: bool = False
    is_null: bool = False
    value: Any = None
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class Payload:
    timestamp: int | None = None
    seq: int | None = None
    metrics: list[Metric] = field(default_factory=list)

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of every field; value: int, bytes (length-delimited) or raw 4/8 bytes."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt} at byte {i}")
        out.append((num, wt, v))
    return out


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def _property_value(buf: bytes) -> Any:
    dt, value = None, None
    for num, _wt, v in _fields(buf):
        if num == 1:
            dt = v
        elif num == 3:
            value = _signed32(v)
        elif num == 4:
            value = v
        elif num == 6:
            value = struct.unpack("<d", v)[0]
        elif num == 7:
            value = bool(v)
        elif num == 8:
            value = v.decode()
    return value if dt is not None else None


def _metric(buf: bytes) -> Metric:
    m = Metric()
    for num, _wt, v in _fields(buf):
        if num == 1:
            m.name = v.decode()
        elif num == 3:
            m.timestamp = v
        elif num == 4:
            m.datatype = v
        elif num == 5:
            m.is_historical = bool(v)
        elif num == 7:
            m.is_null = bool(v)
        elif num == 9:
            keys: list[str] = []
            values: list[Any] = []
            for pn, _pw, pv in _fields(v):
                if pn == 1:
                    keys.append(pv.decode())
                elif pn == 2:
                    values.append(_property_value(pv))
            m.properties = dict(zip(keys, values, strict=True))
        elif num == 10:
            m.value = _signed32(v)
        elif num == 11:
            m.value = v
        elif num == 13:
            m.value = struct.unpack("<d", v)[0]
        elif num == 14:
            m.value = bool(v)
        elif num == 15:
            m.value = v.decode()
    return m


def decode(buf: bytes) -> Payload:
    p = Payload()
    for num, _wt, v in _fields(buf):
        if num == 1:
            p.timestamp = v
        elif num == 2:
            p.metrics.append(_metric(v))
        elif num == 3:
            p.seq = v
    return p


def encode_rebirth_command() -> bytes:
    """An NCMD payload ``Node Control/Rebirth`` = true, as a host application sends it (by hand, too)."""
    name = b"Node Control/Rebirth"
    metric = bytes([0x0A, len(name)]) + name + bytes([0x20, 11, 0x70, 1])  # name, datatype Boolean, boolean true
    return bytes([0x12, len(metric)]) + metric
