"""Load and validate site files and register maps, once, at start-up.

Every mistake is collected (`config.errors.ConfigErrors`) with its key path, the value found and what was
expected; nothing is repaired or dropped silently. Register maps are reusable data files: a site names a map
shipped in ``config/maps/`` by its bare name (``register_map = "ph_meter"``) or a file path relative to the
site file.

The parts live with their tables: register maps in `config.maps`, instruments and channels in
`config.instruments`, ``[gateway]`` in `config.gateway`, ``[influx]`` in `config.influx`, ``[uplink]`` in
`config.uplink`, ``[alarms]`` and ``[notify]`` in `config.alarms` and `config.notify`, permits in
`config.limits`, rules in `config.rules`.
This module reads the file, the ``[daemon]`` table and the sites, and runs the checks across them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from config.alarms import check_ph_notification, parse_alarms
from config.calibration import parse_calibration
from config.errors import ConfigError, ConfigErrors
from config.gateway import parse_gateway
from config.influx import parse_influx
from config.instruments import channel, instrument
from config.limits import parse_permit
from config.links import check_mqtt_client_ids, check_mqtt_topics, check_shared_links
from config.maps import MAPS_DIR, load_register_map, maintenance_bindings, read_toml
from config.paths import historian_problem
from config.reader import ID, ID_EXPECTED, Reader
from config.rule_model import Skipped
from config.rules import select_rules
from config.schema import MIN_RETENTION_DAYS, Channel, DaemonSettings, Instrument, RegisterMap, Site, SiteConfig
from config.uplink import parse_uplink

__all__ = ["MAPS_DIR", "SITES_DIR", "check_config", "checked_config", "load_config", "load_config_or_report",
           "load_register_map"]

SITES_DIR = Path(__file__).parent / "sites"
_DAEMON_KEYS = {"historian", "commit_interval", "tick_interval", "stale_after_polls", "retention_days"}
_SITE_KEYS = {"id", "name", "kind", "jurisdiction", "company", "address", "timezone", "instrument", "channel", "permit",
              "rules", "route", "alarm", "calibration"}
_SITE_KINDS = ("industry", "plant")


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
    data = read_toml(path, reader)
    if data is None:
        raise ConfigErrors(reader.errors)
    reader.unknown_keys(data, "", {"daemon", "site", "influx", "gateway", "notify", "uplink"})
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
    uplink = parse_uplink(data, reader, path.parent, historian=daemon.historian,
                          first_site=sites[0].id if sites else "edge")
    check_mqtt_client_ids(sites, alarms.notify if alarms is not None else None, reader, uplink=uplink)
    check_ph_notification(sites, alarms, reader)
    if reader.errors:
        raise ConfigErrors(reader.labelled())
    by_id = {(i.site, i.id): i for s in sites for i in s.instruments}
    return SiteConfig(daemon=daemon, sites=tuple(sites), source=path, instruments_by_id=by_id, influx=influx,
                      gateway=gateway, alarms=alarms, uplink=uplink)


MISSING_SITES: list[Any] = []


def _daemon(raw: dict[str, Any], reader: Reader, base: Path) -> DaemonSettings:
    reader.unknown_keys(raw, "daemon", _DAEMON_KEYS)
    historian = Path(reader.text(raw, "historian", "daemon", default="var/pretreat.sqlite"))
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
    site_id = reader.text(raw, "id", p, check=ID.match, expected=ID_EXPECTED)  # type: ignore[arg-type]
    # Required, never defaulted: days, calendar months (40 CFR 401.17(a)(1)) and the slug baseline's days are
    # the site's local ones; a silent UTC would end a New York month at 19:00 local.
    tz = reader.text(raw, "timezone", p, check=_valid_tz,
                    expected="the site's IANA time zone, e.g. 'America/New_York' (required: days and months are "
                             "local)")
    kind = reader.text(raw, "kind", p, default="industry", check=_SITE_KINDS.__contains__,
                      expected="'industry' (a user's discharge, the default) or 'plant' (the treatment plant's "
                               "influent)")
    instruments: dict[str, Instrument] = {}
    for i, ri in enumerate(reader.tables(raw, "instrument", p)):
        reader.name(f"{p}.instrument[{i}]", ri)
        inst = instrument(ri, f"{p}.instrument[{i}]", site_id, reader, base, maps)
        if inst.id in instruments:  # the first keeps the id: its channels are checked against it, not the copy
            reader.error(f"{p}.instrument[{i}].id", inst.id, "an instrument id not already used in this site")
            continue
        instruments[inst.id] = inst
    channels: dict[str, Channel] = {}
    for i, rc in enumerate(reader.tables(raw, "channel", p)):
        reader.name(f"{p}.channel[{i}]", rc)
        ch = channel(rc, f"{p}.channel[{i}]", site_id, instruments, reader)
        if ch.id in channels:
            reader.error(f"{p}.channel[{i}].id", ch.id, "a channel id not already used in this site")
        channels[ch.id] = ch
    if not channels:
        reader.error(f"{p}.channel", [], "at least one [[site.channel]]")
    check_mqtt_topics(list(channels.values()), instruments, p, reader)
    jurisdiction = reader.text(raw, "jurisdiction", p, default="")
    permit = parse_permit(reader.table(raw, "permit", p), f"{p}.permit", reader)
    skipped: list[Skipped] = []
    checks = select_rules(site=site_id, jurisdiction=jurisdiction, timezone=tz or "UTC", kind=kind,
                          channels=list(channels.values()), permit=permit,
                          raw_rules=reader.table(raw, "rules", p), p=p, reader=reader, skipped=skipped)
    checks += maintenance_bindings(site_id, channels.values(), instruments)
    calibration = parse_calibration(raw, reader.table(raw, "permit", p), permit.id if permit else "", p, reader,
                                    list(channels.values()), timezone=tz if tz and _valid_tz(tz) else "UTC")
    return Site(id=site_id, name=reader.text(raw, "name", p, default=site_id), timezone=tz, kind=kind,
                jurisdiction=jurisdiction, company=reader.text(raw, "company", p, default=""),
                address=reader.text(raw, "address", p, default=""),
                instruments=tuple(instruments.values()),
                channels=tuple(channels.values()), permit=permit, checks=checks, calibration=calibration,
                skipped=tuple(skipped))


def _valid_tz(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def check_config(path: str | Path) -> list[ConfigError]:
    """Every error in a site file (empty when valid): what `pretreat check-config` prints."""
    return checked_config(path)[1]


def checked_config(path: str | Path) -> tuple[SiteConfig | None, list[ConfigError]]:
    """The site file loaded as the daemon would load it, or None with every error in it. Why both: `pretreat
    check-config` goes on to list the unjudged channels of a valid file, and loading a large site twice was most
    of its start (a 100-device site: ~0.2 s a load)."""
    try:
        return load_config(path, for_daemon=True), []
    except ConfigErrors as exc:
        return None, exc.errors
