"""`pretreat obligations`: what the episodes oblige the industry to do, and recording that it was done.

    pretreat obligations list --config FILE [--site S] [--status open|overdue|done|all] [--utc] [--json]
    pretreat obligations done --config FILE ID --how HOW --to WHOM --user NAME [--password-stdin]
                              [--users FILE] [--when T] [--note N] [--report FILE.pdf]

``list`` prints each obligation with its episode, due time (the site's local time with its zone; ``--utc`` for
UTC), status judged now (``open``, ``overdue``, ``done``, ``done late``), citation and fulfilment; for a site
whose ordinance states none it says so. ``done`` records a fulfilment through the journal exactly as the
console does (`monitor.stores.casefile`); a written report obligation needs ``--report`` (a PDF, stored
content-addressed). ``--user`` is a console user of the industry role for the obligation's site, authenticated
by password as the alarm actions are (`monitor.cli_auth`); a second fulfilment of one obligation is refused.
Exit codes: 0, 1 (the record cannot be read or written, or the user is not authenticated), 2 (bad usage).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from config.loader import load_config
from config.obligations import obligations_of, silence_note
from config.schema import SiteConfig
from monitor import clock
from monitor.cli_auth import AuthError, acting_person, add_auth_options
from monitor.console.queries import connect
from monitor.stores.casefile import CaseFile, CaseFileError, Obligation, obligations

STATUSES = ("open", "outstanding", "overdue", "done", "all")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="obligations of the recorded episodes, with due time and status")
    ls.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    ls.add_argument("--site", help="one site only")
    ls.add_argument("--status", choices=STATUSES, default="all",
                    help="open (not done, due time not passed), outstanding (an 'immediately' duty not yet met), "
                         "overdue, done (on time or late), or all")
    ls.add_argument("--utc", action="store_true", help="times in UTC instead of the site's local time")
    ls.add_argument("--json", action="store_true", help="one JSON object a line")
    ls.set_defaults(func=_list)
    done = sub.add_parser("done", help="record that an obligation was met (how, to whom, when)")
    done.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    done.add_argument("id", type=int, help="the obligation's id (from `obligations list`)")
    done.add_argument("--how", required=True, help="telephone, e-mail, letter, written report ...")
    done.add_argument("--to", required=True, help="to whom (a person or office)")
    done.add_argument("--when", help="when it was done: ISO 8601 (no offset: the site's local time); default now")
    done.add_argument("--note", default="")
    done.add_argument("--report", type=Path, help="the written report (PDF) where the obligation is one")
    add_auth_options(done)
    done.set_defaults(func=_done)


def _list(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    sites = [s for s in config.sites if args.site in (None, s.id)]
    if not sites:
        print(f"no site {args.site!r} in {args.config}", file=sys.stderr)
        return 2
    try:
        conn = connect(config.daemon.historian)
        found = obligations(conn, sites=[s.id for s in sites]) if conn is not None else []
    except sqlite3.Error as exc:
        print(f"cannot read {config.daemon.historian}: {exc}", file=sys.stderr)
        return 1
    now = clock.wall()
    shown = [o for o in found if _wanted(o, args.status, now)]
    if args.json:
        for o in shown:
            print(json.dumps(o.to_json(now), ensure_ascii=False))
        return 0
    for site in sites:
        note = silence_note(site.jurisdiction)
        if not obligations_of(site):
            print(f"{site.id}: no obligations (a plant's own monitoring obliges no industry notice)")
        elif note:
            print(f"{site.id}: {note}")
    if not shown:
        print(f"no obligations ({args.status})")
        return 0
    zones = {s.id: ZoneInfo("UTC") if args.utc else ZoneInfo(s.timezone) for s in config.sites}
    for o in shown:
        _print(o, zones[o.site], now)
    return 0


def _wanted(o: Obligation, status: str, now: float) -> bool:
    st = o.status(now)
    return status == "all" or st == status or (status == "done" and st.startswith("done"))


def _at(t: float, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(t, zone).strftime("%Y-%m-%d %H:%M %Z")


def _print(o: Obligation, zone: ZoneInfo, now: float) -> None:
    print(f"#{o.id} {o.status(now).upper()}  {o.episode}")
    print(f"    {o.action}, to {o.recipient}")
    print(f"    due {_at(o.due, zone)} ({o.due_text}); {o.citation}")
    if o.done is not None:
        d = o.done
        print(f"    done {_at(d.done_at, zone)} by {d.how} to {d.recipient}"
              + (f", report {d.report[:12]}" if d.report else "") + (f"; {d.note}" if d.note else "")
              + f" (entered by {d.user}, {_at(d.recorded, zone)})")
    for d in o.later:  # recorded before a second fulfilment was refused: shown, never hidden
        print(f"    also recorded: done {_at(d.done_at, zone)} by {d.how} to {d.recipient}"
              + (f"; {d.note}" if d.note else "") + f" (entered by {d.user}, {_at(d.recorded, zone)})")
    if o.closed is not None and o.done is None:
        print(f"    {o.closed}")


def _when(text: str | None, config: SiteConfig, site: str, now: float) -> float:
    if not text:
        return now
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=ZoneInfo(config.site(site).timezone))).timestamp()


def _done(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    db = config.daemon.historian
    if not db.is_file():
        print(f"no record at {db}: the daemon has not run", file=sys.stderr)
        return 1
    now = clock.wall()
    cf = CaseFile.open(db, {s.id: s.timezone for s in config.sites})
    try:
        found = obligations(cf.journal.connection, ids=[args.id])
        if not found:
            print(f"no obligation {args.id} (pretreat obligations list --config {args.config})", file=sys.stderr)
            return 2
        user = acting_person(args, config, found[0].site, "industry", "record that an obligation was met")
        report = None
        if args.report is not None:
            report = cf.store_file(args.report.read_bytes(), name=args.report.name, user=user, now=now).sha256
        f = cf.fulfil(args.id, done_at=_when(args.when, config, found[0].site, now), how=args.how,
                      recipient=args.to, note=args.note, report=report, user=user, now=now)
    except AuthError as exc:
        print(f"obligation {args.id}: {exc}", file=sys.stderr)
        return 1
    except (CaseFileError, ValueError, OSError) as exc:
        print(f"obligation {args.id}: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        print(f"cannot write {db}: {exc}", file=sys.stderr)
        return 1
    finally:
        cf.close()
    zone = ZoneInfo(config.site(found[0].site).timezone)
    late = "" if f.done_at <= found[0].due else " (after the due time)"
    print(f"obligation {args.id} recorded as done {_at(f.done_at, zone)}{late}: {found[0].action}")
    return 0
