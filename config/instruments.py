"""Instruments and channels of a site: the ``[[site.instrument]]`` and ``[[site.channel]]`` tables.

Each instrument is checked for its driver's keys (Modbus: a register map and its link; MQTT: the broker, its
client id defaulted here to ``pretreat-<site>-<id>``, and a password file that must be readable and come with a
user name; a relative path is resolved against the site file's folder). Each channel is checked against its
instrument (a point of its register map, or an MQTT topic) and gets its resolution and ``max_gap``.

The gap defaults live here because they are decided when the file is loaded; the checks
(`monitor.checks.coverage`) take each channel's ``max_gap`` as given.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.limits import temperature_unit
from config.links import MISSING_POINT
from config.maps import (
    fixed_unit_expects,
    map_expected,
    parse_register_map,
    resolve_map_path,
    unit_register_expects,
    with_word_order,
)
from config.reader import ID, ID_EXPECTED, Reader
from config.schema import (
    ByteOrder,
    Channel,
    ChannelKind,
    DataType,
    DriverKind,
    Instrument,
    MeasuringPoint,
    MqttBroker,
    PayloadFormat,
    RegisterMap,
    SerialSettings,
)

DEFAULT_GAP_INTERVALS = 3.0  # poll (or publishing) intervals without a good reading that make a gap
MIN_MAX_GAP = 5.0  # s: never shorter, so scheduling jitter of a fast poll is never a gap
MAX_MAX_GAP = 31 * 86400.0  # s: the longest stated max_gap the loader accepts (a calendar month)

_INSTRUMENT_KEYS = {
    "id", "driver", "poll_interval", "timeout", "unit_id", "host", "port", "register_map",
    "serial_port", "baudrate", "bytesize", "parity", "stopbits", "inter_frame_delay",
    "client_id", "qos", "username", "password_file", "keepalive", "time_field", "description", "word_order",
    "units_check_interval",
}
DEFAULT_UNITS_CHECK = 30.0  # s between reads of a catalogue map's units registers while the link stands
_CHANNEL_KEYS = {
    "id", "instrument", "kind", "unit", "scale", "offset", "valid_min", "valid_max",
    "point", "topic", "field", "payload", "stale_after", "description", "location", "resolution",
    "max_gap", "judge_over_range",
}


def default_max_gap(poll_interval: float) -> float:
    """The ``max_gap`` of a channel that does not state one: 3 × its instrument's interval, at least 5 s."""
    return max(MIN_MAX_GAP, DEFAULT_GAP_INTERVALS * poll_interval)


def instrument(raw: dict[str, Any], p: str, site: str, reader: Reader, base: Path,
                maps: dict[Path, RegisterMap | None]) -> Instrument:
    reader.unknown_keys(raw, p, _INSTRUMENT_KEYS)
    inst_id = reader.text(raw, "id", p, check=ID.match, expected=ID_EXPECTED)  # type: ignore[arg-type]
    driver = reader.enum(raw, "driver", p, DriverKind)
    common = dict(
        id=inst_id, site=site, driver=driver,
        poll_interval=reader.number(raw, "poll_interval", p, default=1.0, minimum=0.001, maximum=86400),
        timeout=reader.number(raw, "timeout", p, default=1.0, minimum=0.01, maximum=60),
    )
    if driver is DriverKind.MQTT:
        if "word_order" in raw:
            reader.error(f"{p}.word_order", raw["word_order"], "no word_order: it applies to Modbus instruments")
        host = reader.text(raw, "host", p, default="127.0.0.1")
        _check_mqtt_secret(raw, p, reader, base)
        broker = MqttBroker(
            host=host, port=reader.integer(raw, "port", p, default=1883, minimum=1, maximum=65535),
            client_id=reader.text(raw, "client_id", p, default=f"pretreat-{site}-{inst_id}"),
            qos=reader.integer(raw, "qos", p, default=1, minimum=0, maximum=2),
            username=reader.text(raw, "username", p, default=""),
            password_file=_secret_path(reader.text(raw, "password_file", p, default=""), base),
            keepalive=reader.integer(raw, "keepalive", p, default=30, minimum=5, maximum=3600),
        )
        if "units_check_interval" in raw:
            reader.error(f"{p}.units_check_interval", raw["units_check_interval"],
                         "no units_check_interval: it applies to Modbus instruments")
        return Instrument(**common, mqtt=broker,  # type: ignore[arg-type]
                          time_field=reader.text(raw, "time_field", p, default=""))
    rmap = None
    ref = reader.text(raw, "register_map", p, expected="a register map name or path")
    map_path = resolve_map_path(ref, base) if ref else None
    if map_path is not None and not map_path.is_file():
        reader.error(f"{p}.register_map", ref, map_expected(ref, map_path))
    elif map_path is not None:
        if map_path not in maps:
            sub = Reader(str(map_path))
            maps[map_path] = parse_register_map(map_path, sub)
            reader.errors.extend(sub.errors)
            if sub.errors:
                maps[map_path] = None
        rmap = maps[map_path]
        if rmap is None:
            reader.error(f"{p}.register_map", ref, "a valid register map (see the errors for that file)")
    if "word_order" in raw:  # the device's own setting (or what the site found): overrides the map's order
        order = reader.enum(raw, "word_order", p, ByteOrder)
        rmap = with_word_order(rmap, order) if rmap is not None else None
    serial = None
    host = ""
    if driver is DriverKind.MODBUS_RTU:
        port = reader.text(raw, "serial_port", p, expected="a serial device path, e.g. /dev/ttyUSB0")
        serial = SerialSettings(
            port=port if not port or Path(port).is_absolute() else str(base / port),
            baudrate=reader.integer(raw, "baudrate", p, default=9600, minimum=300, maximum=921600),
            bytesize=reader.integer(raw, "bytesize", p, default=8, minimum=7, maximum=8),
            parity=reader.text(raw, "parity", p, default="N", check=lambda v: v in ("N", "E", "O"),
                              expected="'N', 'E' or 'O'"),
            stopbits=reader.integer(raw, "stopbits", p, default=1, minimum=1, maximum=2),
            inter_frame_delay=reader.number(raw, "inter_frame_delay", p, default=0.0, minimum=0, maximum=1),
        )
    else:
        host = reader.text(raw, "host", p, expected="a host name or address")
    return Instrument(
        **common,  # type: ignore[arg-type]
        unit_id=reader.integer(raw, "unit_id", p, default=1, minimum=0, maximum=247),
        host=host, port=reader.integer(raw, "port", p, default=502, minimum=1, maximum=65535),
        serial=serial, register_map=rmap,
        units_check_interval=reader.number(raw, "units_check_interval", p, default=DEFAULT_UNITS_CHECK,
                                           minimum=0, maximum=86400),
    )


def channel(raw: dict[str, Any], p: str, site: str, instruments: dict[str, Instrument],
             reader: Reader) -> Channel:
    reader.unknown_keys(raw, p, _CHANNEL_KEYS)
    inst_id = reader.text(raw, "instrument", p, expected="the id of an instrument of this site")
    inst = instruments.get(inst_id)
    if inst_id and inst is None:
        reader.error(f"{p}.instrument", inst_id, f"one of this site's instruments {sorted(instruments)}")
    point = reader.text(raw, "point", p, default="")
    topic = reader.text(raw, "topic", p, default="")
    if inst is not None and inst.driver.is_modbus:
        if not point:
            reader.error(f"{p}.point", MISSING_POINT, "the name of a point in the instrument's register map")
        elif inst.register_map is not None and point not in inst.register_map.points:
            reader.error(f"{p}.point", point,
                         f"a point of register map '{inst.register_map.name}': {sorted(inst.register_map.points)}")
        elif inst.register_map is not None and isinstance(raw.get("unit"), str):
            expected = (unit_register_expects(inst.register_map, point, raw["unit"])
                        or fixed_unit_expects(inst.register_map, point, raw["unit"], instrument=inst_id,
                                              channel=str(raw.get("id", ""))))
            if expected:
                reader.error(f"{p}.unit", raw["unit"], expected)
    if inst is not None and inst.driver is DriverKind.MQTT and not _valid_topic(topic):
        reader.error(f"{p}.topic", topic or MISSING_POINT, "an MQTT topic (no wildcards)")
    valid_min = reader.number(raw, "valid_min", p, default=None)
    valid_max = reader.number(raw, "valid_max", p, default=None)
    if valid_min is not None and valid_max is not None and valid_min >= valid_max:
        reader.error(f"{p}.valid_max", valid_max, f"a number greater than valid_min ({valid_min:g})")
    scale = reader.number(raw, "scale", p, default=1.0)
    if scale == 0:
        reader.error(f"{p}.scale", 0, "a non-zero number")
    _check_kind_unit(raw, p, reader)
    return Channel(
        id=reader.text(raw, "id", p, check=ID.match, expected=ID_EXPECTED),  # type: ignore[arg-type]
        site=site, instrument=inst_id,
        kind=reader.enum(raw, "kind", p, ChannelKind),
        unit=reader.text(raw, "unit", p, expected="the engineering unit, e.g. 'gpm', 'pH', 'degC', '%LEL'"),
        scale=scale, offset=reader.number(raw, "offset", p, default=0.0),
        valid_min=valid_min, valid_max=valid_max, point=point, topic=topic,
        field=reader.text(raw, "field", p, default=""),
        payload=reader.enum(raw, "payload", p, PayloadFormat, default="json"),
        stale_after=reader.number(raw, "stale_after", p, default=0.0, minimum=0.0),
        location=reader.enum(raw, "location", p, MeasuringPoint) if "location" in raw else None,
        resolution=_resolution(raw, p, reader, scale, inst),
        max_gap=_max_gap(raw, p, inst, reader),
        judge_over_range=_flag(raw, "judge_over_range", p, reader),
    )


_PH_UNITS = {"ph", "phunits", "phunit", "su", "s.u.", "standardunits"}  # compared without case or spaces
_LEL_UNITS = {"%lel", "lel%", "%oflel", "percentlel", "lel", "%lfl"}
_KIND_UNITS: dict[str, tuple[Callable[[str], bool], str]] = {
    "ph": (lambda u: _squeezed(u) in _PH_UNITS,
           "'pH' (or 'pH units'): an ORP (mV) reading cannot be judged as pH; a pH/ORP probe set to ORP is "
           "kind = 'other'"),
    "temperature": (lambda u: temperature_unit(u) != "", "a temperature unit: 'degC' or 'degF'"),
    "sampler_temperature": (lambda u: temperature_unit(u) != "", "a temperature unit: 'degC' or 'degF'"),
    "lel": (lambda u: _squeezed(u) in _LEL_UNITS, "'%LEL' (percent of the lower explosive limit)"),
}


def _squeezed(unit: str) -> str:
    return unit.replace(" ", "").casefold()


def _check_kind_unit(raw: dict[str, Any], p: str, reader: Reader) -> None:
    """A channel whose checks judge it against limits of one unit (pH, temperature, %LEL) must read in that unit:
    a pH/ORP probe's ORP (mV) judged against pH limits would say "a reading < 5 mV" and alarm on nonsense."""
    kind, unit = raw.get("kind"), raw.get("unit")
    if not isinstance(kind, str) or not isinstance(unit, str) or not unit or kind not in _KIND_UNITS:
        return
    accepts, expected = _KIND_UNITS[kind]
    if not accepts(unit):
        reader.error(f"{p}.unit", unit, f"for channel '{raw.get('id', '')}' (kind = '{kind}'), {expected}")


def _resolution(raw: dict[str, Any], p: str, reader: Reader, scale: float, inst: Instrument | None) -> float | None:
    """The configured ``resolution``, else the ``scale`` of a scaled point, else 1 for an unscaled integer
    register; None (unknown) for a float register or an MQTT value."""
    configured = reader.number(raw, "resolution", p, default=None, minimum=0, exclusive_min=True)
    if configured is not None or "resolution" in raw:
        return configured
    if scale not in (0, 1):
        return abs(scale)
    rmap = inst.register_map if inst is not None else None
    point = rmap.points.get(str(raw.get("point", ""))) if rmap is not None else None
    if point is not None and point.dtype not in (DataType.FLOAT32, DataType.FLOAT64):
        return 1.0
    return None


def _max_gap(raw: dict[str, Any], p: str, inst: Instrument | None, reader: Reader) -> float:
    """The channel's stated ``max_gap`` (s, 5 s to 31 days), else 3 × its instrument's poll (MQTT: publishing)
    interval, at least 5 s (`default_max_gap`)."""
    if "max_gap" in raw:
        value = reader.number(raw, "max_gap", p, default=None, minimum=MIN_MAX_GAP, maximum=MAX_MAX_GAP)
        if value is not None and math.isfinite(value):
            return float(value)
    return default_max_gap(inst.poll_interval if inst is not None else 1.0)


def _flag(raw: dict[str, Any], key: str, p: str, reader: Reader) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        reader.error(f"{p}.{key}", value, "true or false")
        return False
    return value


def _valid_topic(topic: str) -> bool:
    return bool(topic) and "+" not in topic and "#" not in topic and "\x00" not in topic


def _check_mqtt_secret(raw: dict[str, Any], p: str, reader: Reader, base: Path) -> None:
    """The broker password file must be readable and come with a user name. Checked here, not read (the
    driver reads it at start), so that `pretreat check-config` catches what would otherwise stop
    `pretreat run` with a traceback (tests/faults/test_config_mistakes.py)."""
    secret = raw.get("password_file", "")
    if not isinstance(secret, str) or not secret:
        return
    path = Path(secret) if Path(secret).is_absolute() else base / secret
    if not os.access(path, os.R_OK):
        reader.error(f"{p}.password_file", secret, "a readable file holding the broker password")
    if not raw.get("username"):
        reader.error(f"{p}.username", MISSING_POINT, "a user name with password_file (MQTT 3.1.1 sends a "
                     "password only with a user name)")


def _secret_path(secret: str, base: Path) -> str:
    """A relative ``password_file`` is relative to the site file's folder (as serial ports are)."""
    return str(base / secret) if secret and not Path(secret).is_absolute() else secret
