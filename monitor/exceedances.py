"""`pretreat exceedances`: the exceedance history enforcement staff pull, one row per episode.

    pretreat exceedances (--config FILE | --db PATH | --database URL) [--site S] [--rule R] [--channel C]
                         [--from T] [--to T]
                         [--format table|csv|json] [--evidence] [--data-quality] [--limit N]

The arguments and the output only: what an episode is, its columns, the selection and its cost are
`monitor.read.episodes`.

``--database postgresql://…`` reads the county hub's database instead of the daemon's file: every edge's
sites, with the same answers as the edge's own file for each (`monitor.read.source`); ``--config`` then names
the site file that states the sites (completeness, units and limits need it).

Output: ``table`` for people; ``csv`` (RFC 4180, header row); ``json`` (JSON Lines, one object per episode).
``--evidence`` adds the raw readings (good and bad, with quality and reason) from 1 hour before the start to
1 hour after the end: nested under ``evidence`` in json, one CSV row per reading (the episode's columns
repeated, then ``evidence_*`` columns), indented under each episode in the table. Formats are written by
`monitor.exceedances_render`. The table shows the latest ``--limit`` episodes (default 500, and says how
many it left out); csv and json write every episode unless ``--limit`` is given.

Slug findings on composite-sample lab results (where the ordinance measures a slug in the laboratory:
Vestal-Endicott, `monitor.checks.slug_labs`) follow the episodes, apart from them: under their own heading in the
table, as CSV rows with ``status`` ``lab result`` and channel ``lab:<parameter>``, as JSON objects with
``"record": "lab_slug"``. They need the site file (``--config``) and are selected by ``--site``, ``--rule slug``,
``--channel lab:<parameter>`` and the sample's local day overlapping ``--from``/``--to``.

Exit codes: 0 done (also when nothing matched), 1 the file cannot be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import time
from datetime import datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from config.schema import SiteConfig
from monitor.checks.slug_labs import LabSlug, screen
from monitor.cli_render import Render, add_utc_option
from monitor.exceedances_render import write_csv, write_json, write_lab_slugs_json, write_lab_slugs_table, write_table
from monitor.read.episodes import history
from monitor.read.source import open_source
from monitor.read.times import UsageError, time_range
from monitor.reports.labs import read_results
from monitor.stores.readonly import connect_record, has_table, record_errors

TABLE_LIMIT = 500


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="site file (TOML); its [daemon].historian is read")
    p.add_argument("--db", metavar="PATH", help="the daemon's SQLite file (default: from --config)")
    p.add_argument("--database", metavar="URL",
                   help="the county hub's PostgreSQL database (postgresql://…) instead of the daemon's file")
    p.add_argument("--site", help="only this site")
    p.add_argument("--rule", help="only this rule (e.g. ph_high)")
    p.add_argument("--channel", help="only this channel")
    p.add_argument("--from", dest="start", metavar="T", help="episodes overlapping from T (ISO 8601 with Z/offset)")
    p.add_argument("--to", dest="end", metavar="T", help="episodes overlapping until T, exclusive")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="default table")
    p.add_argument("--evidence", action="store_true", help="add the readings from 1 h before to 1 h after")
    p.add_argument("--data-quality", action="store_true", help="include data-quality episodes (stale ...)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help=f"only the latest N episodes (table default {TABLE_LIMIT}; csv/json: all; 0: all)")
    add_utc_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, *, out: TextIO | None = None, now: float | None = None) -> int:
    out = sys.stdout if out is None else out
    try:
        config, db = open_source(args.config, args.db, getattr(args, "database", None))
        start, end = time_range(args.start, args.end)
        conn = connect_record(db)
    except UsageError as exc:
        print(f"pretreat exceedances: {exc}", file=sys.stderr)
        return 2
    except record_errors() as exc:
        where = args.db or ("the hub's database" if args.database else args.config)
        print(f"pretreat exceedances: cannot read {where}: {exc}", file=sys.stderr)
        return 1
    try:
        report(conn, out, config=config, args=args, start=start, end=end,
               now=time.time() if now is None else now)
    except record_errors() as exc:
        where = "the hub's database" if isinstance(db, str) else db  # a URL may carry a password
        print(f"pretreat exceedances: cannot read {where}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        with contextlib.suppress(OSError):  # `| head` has what it wanted: silence the flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        conn.close()
    return 0


def report(conn: Any, out: TextIO, *, config: SiteConfig | None, args: argparse.Namespace,
           start: float | None, end: float | None, now: float) -> int:
    """Find, annotate and write the episodes; returns how many matched (before ``--limit``)."""
    limit = args.limit if args.limit is not None else (TABLE_LIMIT if args.format == "table" else 0)
    found = history(conn, config=config, now=now, sites=(args.site,), rule=args.rule, channel=args.channel,
                    start=start, end=end, data_quality=args.data_quality, evidence=args.evidence, limit=limit)
    numbered = found.numbered()
    slugs = lab_slugs(conn, config, args=args, start=start, end=end)
    first = found.first + len(numbered)
    if args.format == "csv":
        write_csv(out, numbered, evidence=args.evidence, labs=slugs, first_lab=first)
    elif args.format == "json":
        write_json(out, numbered, evidence=args.evidence)
        write_lab_slugs_json(out, slugs, first=first)
    else:
        write_table(out, numbered, total=found.total, evidence=args.evidence,
                    render=Render(config, utc=getattr(args, "utc", False)))
        write_lab_slugs_table(out, slugs)
    out.flush()
    return found.total


def lab_slugs(conn: sqlite3.Connection, config: SiteConfig | None, *, args: argparse.Namespace,
              start: float | None, end: float | None) -> list[LabSlug]:
    """Slug findings on lab results (`monitor.checks.slug_labs`) of the sites selected whose sample day (the
    site's local calendar day) overlaps [start, end); none without the site file (the limits come from it), for
    ``--rule`` other than slug, ``--channel`` other than ``lab:<parameter>``, or a file with no lab results."""
    if config is None or (args.rule not in (None, "slug")) or not has_table(conn, "lab_results"):
        return []
    out: list[LabSlug] = []
    for site in config.sites:
        if args.site not in (None, site.id):
            continue
        zone = ZoneInfo(site.timezone)
        first = None if start is None else datetime.fromtimestamp(start, zone).date()
        last = None if end is None else datetime.fromtimestamp(end - 1e-6, zone).date()
        found = screen(read_results(conn, site=site.id, first=first, last=last), site)
        out += [f for f in found if args.channel in (None, f.channel)]
    return out
