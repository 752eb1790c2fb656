"""`pretreat calibration add|list`: the calibration log of each channel (`monitor.stores.calibration`).

    pretreat calibration add --config FILE --site S --channel C --date T --who NAME --method M
                             --found REF:READING [--found ...] --left REF:READING [--left ...]
                             [--next-due T] [--note TEXT]
    pretreat calibration list --config FILE [--site S] [--channel C] [--at T] [--format table|json]

``add`` records one entry in the site's SQLite record (the historian file named by the site file), journaled in
the hash chain; a running daemon reads it within a minute and clears the channel's ``calibration_overdue``
alarm if the entry brings the instrument in date. ``list`` prints each channel's status (in date, overdue since
when, no calibration recorded, or "no calibration interval stated") and then the entries, with when each
was entered; its times are the site's local time with the zone (``--format json``: ISO 8601 UTC). A date
alone (``--date 2026-03-02``) is midnight in the site's time zone. Exit 0 done, 2 bad
usage (unknown site or channel, a method the channel does not take, missing points, a bad time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from config.loader import load_config_or_report
from config.schema import SiteConfig
from monitor.calibration import logs, statuses
from monitor.checks.events import iso_utc
from monitor.logtext import local_time
from monitor.read.times import UsageError, parse_time
from monitor.stores.calibration import METHODS, Calibration, CalibrationError, Point, add

_POINT_HELP = "REFERENCE:READING, e.g. 7.00:7.04 (buffer pH : the probe's reading; reference flow : the meter's)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="calibration_command", required=True)
    a = sub.add_parser("add", help="record a calibration of one channel (journaled)")
    a.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    a.add_argument("--site", required=True)
    a.add_argument("--channel", required=True)
    a.add_argument("--date", required=True, metavar="T", help="when it was calibrated: ISO 8601 with Z or an "
                   "offset, or a date alone (YYYY-MM-DD), taken as midnight in the site's time zone")
    a.add_argument("--who", required=True, help="who calibrated (name, company)")
    a.add_argument("--method", required=True, choices=sorted(METHODS), help="; ".join(
        f"{k}: {v}" for k, v in METHODS.items()))
    a.add_argument("--found", action="append", default=[], metavar="REF:READING", help=f"as found: {_POINT_HELP}")
    a.add_argument("--left", action="append", default=[], metavar="REF:READING", help=f"as left: {_POINT_HELP}")
    a.add_argument("--next-due", metavar="T", help="the technician's next due date (a date alone: midnight in the "
                                                   "site's time zone; the permit's interval, if shorter, still binds)")
    a.add_argument("--note", default="")
    a.set_defaults(func=_add)
    ls = sub.add_parser("list", help="each channel's calibration status and its log")
    ls.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    ls.add_argument("--site")
    ls.add_argument("--channel")
    ls.add_argument("--at", metavar="T", help="status at this time (default: now; a date alone: midnight UTC)")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    ls.set_defaults(func=_list)


def parse_point(text: str) -> Point:
    ref, sep, reading = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(ref), float(reading)
    except ValueError:
        raise UsageError(f"point {text!r}: expected {_POINT_HELP}") from None


def entry_from(config: SiteConfig, *, site: str, channel: str, date: str, who: str, method: str,
               found: list[str], left: list[str], next_due: str | None, note: str,
               now: float) -> tuple[Calibration, str]:
    """The entry the arguments describe and the channel's kind; `UsageError` for unknown names or bad text.
    Shared with the console's form."""
    sites = {s.id: s for s in config.sites}
    if site not in sites:
        raise UsageError(f"no site {site!r}; known: {sorted(sites)}")
    kinds = {c.id: c.kind.value for c in sites[site].channels}
    if channel not in kinds:
        raise UsageError(f"no channel {channel!r} in site {site}; known: {sorted(kinds)}")
    zone = ZoneInfo(sites[site].timezone)  # a date alone is that day at the site, not in UTC
    t = parse_time(date, zone)
    if t > now + 300:
        raise UsageError(f"calibration date {date} is in the future")
    entry = Calibration(site=site, channel=channel, time=t, who=who.strip(), method=method,
                        as_found=tuple(parse_point(x) for x in found), as_left=tuple(parse_point(x) for x in left),
                        next_due=parse_time(next_due, zone) if next_due else None, note=note.strip(), entered=now)
    return entry, kinds[channel]


def _config(path: str) -> SiteConfig | None:
    return load_config_or_report(path, outcome="nothing recorded")


def _add(args: argparse.Namespace) -> int:
    config = _config(args.config)
    if config is None:
        return 2
    try:
        entry, kind = entry_from(config, site=args.site, channel=args.channel, date=args.date, who=args.who,
                                 method=args.method, found=args.found, left=args.left, next_due=args.next_due,
                                 note=args.note, now=time.time())
        seq = add(Path(config.daemon.historian), entry, kind)
    except (UsageError, CalibrationError) as exc:
        print(f"pretreat calibration add: {exc}", file=sys.stderr)
        return 2
    zone = ZoneInfo(next(s.timezone for s in config.sites if s.id == entry.site))
    print(f"recorded: {entry.site}/{entry.channel} calibrated {local_time(entry.time, zone)} "
          f"({iso_utc(entry.time)}) by {entry.who} "
          f"({METHODS[entry.method]}); journal record {seq}")
    return 0


def _list(args: argparse.Namespace) -> int:
    config = _config(args.config)
    if config is None:
        return 2
    try:
        at = parse_time(args.at) if args.at else time.time()
    except UsageError as exc:
        print(f"pretreat calibration list: {exc}", file=sys.stderr)
        return 2
    if args.site is not None and args.site not in {s.id for s in config.sites}:
        print(f"pretreat calibration list: no site {args.site!r}", file=sys.stderr)
        return 2
    rows = [r for r in statuses(config, at, site=args.site) if args.channel in (None, r[1])]
    found = logs(Path(config.daemon.historian), args.site)
    if args.format == "json":
        for site, channel, st in rows:
            print(json.dumps({"site": site, "channel": channel, "status": st.state, "overdue": st.overdue,
                              "due": None if st.due is None else iso_utc(st.due), "text": st.text(),
                              "entries": [c.to_dict() for c in found.get((site, channel), [])]}))
        return 0
    zones = {s.id: ZoneInfo(s.timezone) for s in config.sites}
    shown = {z.key for sid, z in zones.items() if args.site in (None, sid)}
    print(f"calibration status at {local_time(at, ZoneInfo(shown.pop() if len(shown) == 1 else 'UTC'))}")
    for site, channel, st in rows:
        zone = zones[site]

        def when(t: float, zone: ZoneInfo = zone) -> str:
            return local_time(t, zone)

        print(f"{site}/{channel}: {st.text(when)}")
        for c in found.get((site, channel), []):
            pts = "; ".join(f"{name} " + ", ".join(f"{r:g} read {v:g}" for r, v in pts)
                            for name, pts in (("as found", c.as_found), ("as left", c.as_left)))
            due = f"; next due {when(c.next_due)}" if c.next_due is not None else ""
            note = f"; {c.note}" if c.note else ""
            print(f"  {when(c.time)} {c.who}: {METHODS[c.method]}: {pts}{due}{note} (entered {when(c.entered)})")
    return 0
