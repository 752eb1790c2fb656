"""Load and validate site files and register maps, once, at start-up.

Every mistake is collected (`config.errors.ConfigErrors`) with its key path, the value found and what was
expected; nothing is repaired or dropped silently. Register maps are reusable data files: a site names a map
shipped in ``config/maps/`` by its bare name (``register_map = "ph_meter"``) or a file path relative to the
site file.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from alarms.gateway import parse_gateway
from config.alarms import check_ph_notification, parse_alarms
from config.errors import ConfigError, ConfigErrors
from config.influx import parse_influx
from config.limits import parse_permit
from config.links import MISSING_POINT, check_mqtt_client_ids, check_mqtt_topics, check_shared_links
from config.paths import historian_problem
from config.reader import Reader, did_you_mean
from config.rules import select_rules
from config.schema import (
    MIN_RETENTION_DAYS,
    ByteOrder,
    Channel,
    ChannelKind,
    DaemonSettings,
    DataType,
    DriverKind,
    Instrument,
    MeasuringPoint,
    MqttBroker,
    PayloadFormat,
    RegisterMap,
    RegisterPoint,
    SerialSettings,
    Site,
    SiteConfig,
    Table,
)
from monitor.checks.coverage import MAX_MAX_GAP, MIN_MAX_GAP, default_max_gap

MAPS_DIR = Path(__file__).parent / "maps"
SITES_DIR = Path(__file__).parent / "sites"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ID_EXPECTED = "an id of letters, digits, '_', '-' or '.' (at most 64 characters)"

_DAEMON_KEYS = {"historian", "commit_interval", "tick_interval", "stale_after_polls", "retention_days"}
_SITE_KEYS = {"id", "name", "kind", "jurisdiction", "company", "timezone", "instrument", "channel", "permit",
              "rules", "route", "alarm"}
_SITE_KINDS = ("industry", "plant")
_INSTRUMENT_KEYS = {
    "id", "driver", "poll_interval", "timeout", "unit_id", "host", "port", "register_map",
    "serial_port", "baudrate", "bytesize", "parity", "stopbits", "inter_frame_delay",
    "client_id", "qos", "username", "password_file", "keepalive", "time_field", "description",
}
_CHANNEL_KEYS = {
    "id", "instrument", "kind", "unit", "scale", "offset", "valid_min", "valid_max",
    "point", "topic", "field", "payload", "stale_after", "description", "location", "resolution",
    "max_gap", "judge_over_range",
}
_POINT_KEYS = {"name", "table", "address", "type", "byte_order", "word_order", "description"}


def _read_toml(path: Path, reader: Reader) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        reader.error("(file)", str(path), "an existing TOML file")
    except OSError as exc:
        reader.error("(file)", str(path), f"a readable file ({exc.strerror})")
    except tomllib.TOMLDecodeError as exc:
        reader.error("(syntax)", str(exc), "valid TOML")
    return None


def load_register_map(path: Path) -> RegisterMap:
    """Load one register map file; raises `ConfigErrors` listing every mistake in it."""
    reader = Reader(str(path))
    rmap = _register_map(path, reader)
    if reader.errors or rmap is None:
        raise ConfigErrors(reader.errors)
    return rmap


def _register_map(path: Path, reader: Reader) -> RegisterMap | None:
    data = _read_toml(path, reader)
    if data is None:
        return None
    reader.unknown_keys(data, "", {"name", "description", "point"})
    points: dict[str, RegisterPoint] = {}
    for i, raw in enumerate(reader.tables(data, "point", "")):
        p = f"point[{i}]"
        reader.unknown_keys(raw, p, _POINT_KEYS)
        name = reader.str(raw, "name", p, check=_ID.match, expected=_ID_EXPECTED)  # type: ignore[arg-type]
        table = reader.enum(raw, "table", p, Table)
        dtype = reader.enum(raw, "type", p, DataType, default="bool" if table.is_bits else "uint16")
        address = reader.integer(raw, "address", p, minimum=0, maximum=65535)
        if table.is_bits != (dtype is DataType.BOOL):
            reader.error(f"{p}.type", dtype.value,
                         "'bool' for coil/discrete tables" if table.is_bits else "a numeric type for registers")
        if address + dtype.registers > 65536:
            reader.error(f"{p}.address", address, f"room for {dtype.registers} registers below 65536")
        point = RegisterPoint(
            name=name, table=table, address=address, dtype=dtype,
            byte_order=reader.enum(raw, "byte_order", p, ByteOrder, default="big"),
            word_order=reader.enum(raw, "word_order", p, ByteOrder, default="big"),
            description=reader.str(raw, "description", p, default=""),
        )
        if name in points:
            reader.error(f"{p}.name", name, "a name not already used in this map")
        points[name] = point
    if not points:
        reader.error("point", [], "at least one [[point]]")
    name = data.get("name", path.stem)
    return RegisterMap(name=str(name), points=points, source=path)


def shipped_maps() -> list[str]:
    """The names of the register maps shipped in ``config/maps/``."""
    return sorted(p.stem for p in MAPS_DIR.glob("*.toml"))


def _map_expected(ref: str, path: Path) -> str:
    """What a register_map that names no file should have been: the shipped maps, and the nearest one."""
    shipped = shipped_maps()
    if "/" not in ref and not ref.endswith(".toml"):
        return f"one of the shipped register maps {shipped}{did_you_mean(ref, shipped)}, or a map file's path"
    return f"an existing register map file ({path} not found), or one of the shipped maps {shipped}"


def resolve_map_path(ref: str, base: Path) -> Path:
    """A bare name is a shipped map; anything with a slash or a .toml suffix is a path from the site file."""
    if "/" in ref or ref.endswith(".toml"):
        p = Path(ref)
        return p if p.is_absolute() else base / p
    return MAPS_DIR / f"{ref}.toml"


def load_config_or_report(path: str | Path, *, outcome: str = "", for_daemon: bool = False) -> SiteConfig | None:
    """`load_config` for a command: on mistakes, print each (key path, value, expectation) and their count to
    stderr, with ``outcome`` ("nothing started"), and return None; the command then exits non-zero."""
    try:
        return load_config(path, for_daemon=for_daemon)
    except ConfigErrors as exc:
        for e in exc.errors:
            print(e, file=sys.stderr)
        print(f"{len(exc.errors)} error(s) in the configuration{'; ' + outcome if outcome else ''}", file=sys.stderr)
        return None


def load_config(path: str | Path, *, for_daemon: bool = False) -> SiteConfig:
    """Load a site file; raises `ConfigErrors` with every mistake found (in it and its register maps).

    ``for_daemon``: also check what only the daemon needs, the historian's path being writable by this user
    (`config.paths`); commands that only read the record leave it False."""
    path = Path(path).resolve()
    reader = Reader(str(path))
    data = _read_toml(path, reader)
    if data is None:
        raise ConfigErrors(reader.errors)
    reader.unknown_keys(data, "", {"daemon", "site", "influx", "gateway", "notify"})
    daemon = _daemon(reader.table(data, "daemon", ""), reader, path.parent)
    if for_daemon and (problem := historian_problem(daemon.historian)) is not None:
        reader.error("daemon.historian", str(daemon.historian),
                     f"a SQLite file the daemon can create and write: {problem}")
    influx = parse_influx(data, reader, path.parent, historian=daemon.historian)
    gateway = parse_gateway(data, reader, path.parent)
    maps: dict[Path, RegisterMap | None] = {}
    sites: list[Site] = []
    site_ids: set[str] = set()
    raw_sites = reader.tables(data, "site", "")
    if not raw_sites:
        reader.error("site", MISSING_SITES, "at least one [[site]]")
    for i, raw in enumerate(raw_sites):
        reader.name(f"site[{i}]", raw)
        site = _site(raw, f"site[{i}]", reader, path.parent, maps)
        if site.id in site_ids:
            reader.error(f"site[{i}].id", site.id, "a site id not already used")
        site_ids.add(site.id)
        sites.append(site)
    check_shared_links(sites, reader)
    alarms = parse_alarms(data, reader, path.parent, sites=sites, historian=daemon.historian)
    check_mqtt_client_ids(sites, alarms.notify if alarms is not None else None, reader)
    check_ph_notification(sites, alarms, reader)
    if reader.errors:
        raise ConfigErrors(reader.labelled())
    by_id = {(i.site, i.id): i for s in sites for i in s.instruments}
    return SiteConfig(daemon=daemon, sites=tuple(sites), source=path, instruments_by_id=by_id, influx=influx,
                      gateway=gateway, alarms=alarms)


MISSING_SITES: list[Any] = []


def _daemon(raw: dict[str, Any], reader: Reader, base: Path) -> DaemonSettings:
    reader.unknown_keys(raw, "daemon", _DAEMON_KEYS)
    historian = Path(reader.str(raw, "historian", "daemon", default="var/pretreat.sqlite"))
    return DaemonSettings(
        historian=historian if historian.is_absolute() else base / historian,
        commit_interval=reader.number(raw, "commit_interval", "daemon", default=0.5, minimum=0.01, maximum=60),
        tick_interval=reader.number(raw, "tick_interval", "daemon", default=1.0, minimum=0.05, maximum=60),
        stale_after_polls=reader.number(raw, "stale_after_polls", "daemon", default=3.0, minimum=1.0),
        retention_days=_retention_days(raw, reader),
    )


def _retention_days(raw: dict[str, Any], reader: Reader) -> int | None:
    """Off unless set; never below three years (see `monitor.stores.retention`)."""
    value = raw.get("retention_days")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RETENTION_DAYS:
        reader.error("daemon.retention_days", value,
                     f"a whole number of days >= {MIN_RETENTION_DAYS}: monitoring records are kept at least 3 years "
                     "(40 CFR 403.12(o)); leave it out to keep every reading")
        return None
    return value


def _site(raw: dict[str, Any], p: str, reader: Reader, base: Path,
          maps: dict[Path, RegisterMap | None]) -> Site:
    reader.unknown_keys(raw, p, _SITE_KEYS)
    site_id = reader.str(raw, "id", p, check=_ID.match, expected=_ID_EXPECTED)  # type: ignore[arg-type]
    # Required, never defaulted: days, calendar months (40 CFR 401.17(a)(1)) and the slug baseline's days are
    # the site's local ones; a silent UTC would end a New York month at 19:00 local.
    tz = reader.str(raw, "timezone", p, check=_valid_tz,
                    expected="the site's IANA time zone, e.g. 'America/New_York' (required: days and months are "
                             "local)")
    kind = reader.str(raw, "kind", p, default="industry", check=_SITE_KINDS.__contains__,
                      expected="'industry' (a user's discharge, the default) or 'plant' (the treatment plant's "
                               "influent)")
    instruments: dict[str, Instrument] = {}
    for i, ri in enumerate(reader.tables(raw, "instrument", p)):
        reader.name(f"{p}.instrument[{i}]", ri)
        inst = _instrument(ri, f"{p}.instrument[{i}]", site_id, reader, base, maps)
        if inst.id in instruments:  # the first keeps the id: its channels are checked against it, not the copy
            reader.error(f"{p}.instrument[{i}].id", inst.id, "an instrument id not already used in this site")
            continue
        instruments[inst.id] = inst
    channels: dict[str, Channel] = {}
    for i, rc in enumerate(reader.tables(raw, "channel", p)):
        reader.name(f"{p}.channel[{i}]", rc)
        ch = _channel(rc, f"{p}.channel[{i}]", site_id, instruments, reader)
        if ch.id in channels:
            reader.error(f"{p}.channel[{i}].id", ch.id, "a channel id not already used in this site")
        channels[ch.id] = ch
    if not channels:
        reader.error(f"{p}.channel", [], "at least one [[site.channel]]")
    check_mqtt_topics(list(channels.values()), instruments, p, reader)
    jurisdiction = reader.str(raw, "jurisdiction", p, default="")
    permit = parse_permit(reader.table(raw, "permit", p), f"{p}.permit", reader)
    checks = select_rules(site=site_id, jurisdiction=jurisdiction, timezone=tz or "UTC", kind=kind,
                          channels=list(channels.values()), permit=permit,
                          raw_rules=reader.table(raw, "rules", p), p=p, reader=reader)
    return Site(id=site_id, name=reader.str(raw, "name", p, default=site_id), timezone=tz, kind=kind,
                jurisdiction=jurisdiction, company=reader.str(raw, "company", p, default=""),
                instruments=tuple(instruments.values()),
                channels=tuple(channels.values()), permit=permit, checks=checks)


def _valid_tz(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _instrument(raw: dict[str, Any], p: str, site: str, reader: Reader, base: Path,
                maps: dict[Path, RegisterMap | None]) -> Instrument:
    reader.unknown_keys(raw, p, _INSTRUMENT_KEYS)
    inst_id = reader.str(raw, "id", p, check=_ID.match, expected=_ID_EXPECTED)  # type: ignore[arg-type]
    driver = reader.enum(raw, "driver", p, DriverKind)
    common = dict(
        id=inst_id, site=site, driver=driver,
        poll_interval=reader.number(raw, "poll_interval", p, default=1.0, minimum=0.001, maximum=86400),
        timeout=reader.number(raw, "timeout", p, default=1.0, minimum=0.01, maximum=60),
    )
    if driver is DriverKind.MQTT:
        host = reader.str(raw, "host", p, default="127.0.0.1")
        _check_mqtt_secret(raw, p, reader, base)
        broker = MqttBroker(
            host=host, port=reader.integer(raw, "port", p, default=1883, minimum=1, maximum=65535),
            client_id=reader.str(raw, "client_id", p, default=f"pretreat-{site}-{inst_id}"),
            qos=reader.integer(raw, "qos", p, default=1, minimum=0, maximum=2),
            username=reader.str(raw, "username", p, default=""),
            password_file=reader.str(raw, "password_file", p, default=""),
            keepalive=reader.integer(raw, "keepalive", p, default=30, minimum=5, maximum=3600),
        )
        return Instrument(**common, mqtt=broker,  # type: ignore[arg-type]
                          time_field=reader.str(raw, "time_field", p, default=""))
    rmap = None
    ref = reader.str(raw, "register_map", p, expected="a register map name or path")
    map_path = resolve_map_path(ref, base) if ref else None
    if map_path is not None and not map_path.is_file():
        reader.error(f"{p}.register_map", ref, _map_expected(ref, map_path))
    elif map_path is not None:
        if map_path not in maps:
            sub = Reader(str(map_path))
            maps[map_path] = _register_map(map_path, sub)
            reader.errors.extend(sub.errors)
            if sub.errors:
                maps[map_path] = None
        rmap = maps[map_path]
        if rmap is None:
            reader.error(f"{p}.register_map", ref, "a valid register map (see the errors for that file)")
    serial = None
    host = ""
    if driver is DriverKind.MODBUS_RTU:
        port = reader.str(raw, "serial_port", p, expected="a serial device path, e.g. /dev/ttyUSB0")
        serial = SerialSettings(
            port=port if not port or Path(port).is_absolute() else str(base / port),
            baudrate=reader.integer(raw, "baudrate", p, default=9600, minimum=300, maximum=921600),
            bytesize=reader.integer(raw, "bytesize", p, default=8, minimum=7, maximum=8),
            parity=reader.str(raw, "parity", p, default="N", check=lambda v: v in ("N", "E", "O"),
                              expected="'N', 'E' or 'O'"),
            stopbits=reader.integer(raw, "stopbits", p, default=1, minimum=1, maximum=2),
            inter_frame_delay=reader.number(raw, "inter_frame_delay", p, default=0.0, minimum=0, maximum=1),
        )
    else:
        host = reader.str(raw, "host", p, expected="a host name or address")
    return Instrument(
        **common,  # type: ignore[arg-type]
        unit_id=reader.integer(raw, "unit_id", p, default=1, minimum=0, maximum=247),
        host=host, port=reader.integer(raw, "port", p, default=502, minimum=1, maximum=65535),
        serial=serial, register_map=rmap,
    )


def _channel(raw: dict[str, Any], p: str, site: str, instruments: dict[str, Instrument],
             reader: Reader) -> Channel:
    reader.unknown_keys(raw, p, _CHANNEL_KEYS)
    inst_id = reader.str(raw, "instrument", p, expected="the id of an instrument of this site")
    inst = instruments.get(inst_id)
    if inst_id and inst is None:
        reader.error(f"{p}.instrument", inst_id, f"one of this site's instruments {sorted(instruments)}")
    point = reader.str(raw, "point", p, default="")
    topic = reader.str(raw, "topic", p, default="")
    if inst is not None and inst.driver.is_modbus:
        if not point:
            reader.error(f"{p}.point", MISSING_POINT, "the name of a point in the instrument's register map")
        elif inst.register_map is not None and point not in inst.register_map.points:
            reader.error(f"{p}.point", point,
                         f"a point of register map '{inst.register_map.name}': {sorted(inst.register_map.points)}")
    if inst is not None and inst.driver is DriverKind.MQTT and not _valid_topic(topic):
        reader.error(f"{p}.topic", topic or MISSING_POINT, "an MQTT topic (no wildcards)")
    valid_min = reader.number(raw, "valid_min", p, default=None)
    valid_max = reader.number(raw, "valid_max", p, default=None)
    if valid_min is not None and valid_max is not None and valid_min >= valid_max:
        reader.error(f"{p}.valid_max", valid_max, f"a number greater than valid_min ({valid_min:g})")
    scale = reader.number(raw, "scale", p, default=1.0)
    if scale == 0:
        reader.error(f"{p}.scale", 0, "a non-zero number")
    return Channel(
        id=reader.str(raw, "id", p, check=_ID.match, expected=_ID_EXPECTED),  # type: ignore[arg-type]
        site=site, instrument=inst_id,
        kind=reader.enum(raw, "kind", p, ChannelKind),
        unit=reader.str(raw, "unit", p, expected="the engineering unit, e.g. 'gpm', 'pH', 'degC', '%LEL'"),
        scale=scale, offset=reader.number(raw, "offset", p, default=0.0),
        valid_min=valid_min, valid_max=valid_max, point=point, topic=topic,
        field=reader.str(raw, "field", p, default=""),
        payload=reader.enum(raw, "payload", p, PayloadFormat, default="json"),
        stale_after=reader.number(raw, "stale_after", p, default=0.0, minimum=0.0),
        location=reader.enum(raw, "location", p, MeasuringPoint) if "location" in raw else None,
        resolution=_resolution(raw, p, reader, scale, inst),
        max_gap=_max_gap(raw, p, inst, reader),
        judge_over_range=_flag(raw, "judge_over_range", p, reader),
    )


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
    interval, at least 5 s (`monitor.checks.coverage`)."""
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


def check_config(path: str | Path) -> list[ConfigError]:
    """Every error in a site file (empty when valid): what `pretreat check-config` prints."""
    try:
        load_config(path, for_daemon=True)
    except ConfigErrors as exc:
        return exc.errors
    return []
