"""`pretreat report …`, `pretreat labs …` and `pretreat snc`: the reports from the command line.

    pretreat report --config FILE --site S [--from D --to D] --format pdf|html|csv [--output PATH]
    pretreat report daily --config FILE --site S --day D [--format json|csv]
    pretreat report ph --config FILE --site S --from D --to D
    pretreat report rebuild --config FILE [--site S] --from D --to D
    pretreat report annotate --config FILE --episode ID --cause TEXT --action TEXT --user NAME [--password-stdin]
    pretreat labs import --config FILE RESULTS.csv
    pretreat snc --config FILE [--to D] [--format table|csv|json]

Dates are local calendar days of the site (``YYYY-MM-DD``, both ends included). Without ``--from``/``--to`` the
periodic report covers the jurisdiction's most recent period (`periods`). Exit codes: 0 done, 1 a runtime
failure (nothing written), 2 bad usage, an invalid configuration or a refused import.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from datetime import date, datetime
from pathlib import Path
from typing import Any

from config.loader import load_config_or_report
from config.schema import SiteConfig

FORMATS = ("pdf", "html", "csv")


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from exc


def _config(args: argparse.Namespace) -> SiteConfig | None:
    return load_config_or_report(args.config)


def _common(p: argparse.ArgumentParser, *, site: bool = True, suppress: bool = False) -> None:
    kw = {"default": argparse.SUPPRESS} if suppress else {}
    p.add_argument("--config", metavar="FILE", help="site file (TOML)", **kw)  # type: ignore[arg-type]
    if site:
        p.add_argument("--site", metavar="S", help="site id (default: the only site)", **kw)  # type: ignore[arg-type]


def add_report(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--from", dest="first", type=_day, metavar="D", help="first day (local)")
    p.add_argument("--to", dest="last", type=_day, metavar="D", help="last day (local), included")
    p.add_argument("--format", choices=FORMATS, default="pdf")
    p.add_argument("--output", type=Path, metavar="PATH", help="file to write (default: in the current folder)")
    p.add_argument("--database", metavar="URL", help="the county hub's database (postgresql://…) instead of the "
                   "site file's historian; --config then names the county file (monitor.read.hub_site)")
    p.set_defaults(func=_report)
    sub = p.add_subparsers(dest="report_command", metavar="SUBCOMMAND")
    a = sub.add_parser("annotate", help="enter the cause and corrective action of an episode")
    _common(a, site=False, suppress=True)
    a.add_argument("--episode", required=True, metavar="ID", help="site/channel/rule@start, as the report prints")
    a.add_argument("--cause", required=True)
    a.add_argument("--action", required=True, help="corrective action taken")
    from monitor.cli_auth import add_auth_options

    add_auth_options(a)  # an industry console user, authenticated (monitor.cli_auth.acting_person)
    a.set_defaults(func=_annotate)
    d = sub.add_parser("daily", help="print the daily summary of one day")
    _common(d, suppress=True)
    d.add_argument("--day", type=_day, required=True)
    d.add_argument("--format", dest="daily_format", choices=("json", "csv"), default="json")
    d.set_defaults(func=_daily)
    ph = sub.add_parser("ph", help="monthly 40 CFR 401.17 pH accounting")
    _common(ph, suppress=True)
    ph.add_argument("--from", dest="ph_first", type=_day, required=True)
    ph.add_argument("--to", dest="ph_last", type=_day, required=True)
    ph.set_defaults(func=_ph)
    r = sub.add_parser("rebuild", help="recompute the per-day aggregates of a range from the historian")
    _common(r, suppress=True)  # --site before or after the subcommand: one site (default: every site)
    r.add_argument("--from", dest="rb_first", type=_day, required=True)
    r.add_argument("--to", dest="rb_last", type=_day, required=True)
    r.set_defaults(func=_rebuild)


def _site(args: argparse.Namespace, config: SiteConfig) -> str | None:
    site = getattr(args, "site", None)
    if site is None and len(config.sites) == 1:
        return config.sites[0].id
    if site is None or site not in {s.id for s in config.sites}:
        print(f"pretreat: --site must be one of {[s.id for s in config.sites]}", file=sys.stderr)
        return None
    return str(site)


def _loaded(args: argparse.Namespace, *, need_site: bool = True) -> tuple[SiteConfig, str] | None:
    if getattr(args, "config", None) is None:
        print("pretreat: --config FILE is required", file=sys.stderr)
        return None
    config = _config(args)
    if config is None:
        return None
    site = _site(args, config) if need_site else ""
    return None if site is None else (config, site)


def _report(args: argparse.Namespace) -> int:
    from monitor.progress import Progress
    from monitor.reports.periods import latest_period, period_of_days
    from monitor.reports.schedule import write_periodic

    loaded = _loaded(args)
    if loaded is None:
        return 2
    config, site_id = loaded
    site = config.site(site_id)
    now = time.time()
    if (args.first is None) != (args.last is None):
        print("pretreat: give both --from and --to, or neither (the jurisdiction's latest period)", file=sys.stderr)
        return 2
    if args.first is not None:
        if args.last < args.first:
            print("pretreat: --to is before --from", file=sys.stderr)
            return 2
        period = period_of_days(site, args.first, args.last)
    else:
        period = latest_period(site, datetime.now().date())
    tmp_dir = Path(args.output).parent if args.output else Path.cwd()
    database = getattr(args, "database", None)
    if database is not None:
        from monitor.stores.hub_record import is_database_url

        if not is_database_url(database):
            print(f"pretreat: --database {database!r}: expected a postgresql:// URL (the hub's database)",
                  file=sys.stderr)
            return 2
    with Progress(f"report {period.label}", unit="step", total=2) as bar:
        if database is not None:
            from monitor.stores.readonly import record_errors

            try:
                paths = _hub_report(database, config, site_id, period, tmp_dir / ".pretreat-report", now,
                                    args.format, bar)
            except record_errors() as exc:
                print(f"pretreat: cannot read the hub's database: {exc}", file=sys.stderr)
                return 1
        else:
            paths = write_periodic(config, site, period, tmp_dir / ".pretreat-report", now=now,
                                   formats=(args.format,), progress=bar)
    target = Path(args.output) if args.output else Path.cwd() / paths[0].name
    paths[0].replace(target)
    for folder in (paths[0].parent, paths[0].parent.parent, paths[0].parent.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            break
    print(f"{target}: {period.label}")
    return 0


def _hub_report(url: str, config: SiteConfig, site_id: str, period: Any, folder: Path, now: float, fmt: str,
                bar: Any) -> list[Path]:
    """The periodic report of one county site from the hub's database: the site's record copied into a
    temporary SQLite file, its aggregates rebuilt from the readings, then the edge's own report code."""
    import tempfile

    from monitor.read.hub_site import copy_site
    from monitor.reports.aggregates import DailyAggregator
    from monitor.reports.days import day_bounds, zone
    from monitor.reports.schedule import write_periodic

    tz = zone(config.site(site_id).timezone)
    lo, hi = day_bounds(period.first, tz)[0], day_bounds(period.last, tz)[1]
    with tempfile.TemporaryDirectory(prefix="pretreat-hub-report-") as tmp:
        bar.note("copying the site's record from the hub's database")
        copied = copy_site(url, config, site_id, lo, min(hi, now), Path(tmp) / "record.sqlite")
        agg = DailyAggregator(path=copied.daemon.historian, config=copied)
        try:
            agg.rebuild(lo, hi, site=site_id)
        finally:
            agg.close()
        return write_periodic(copied, copied.site(site_id), period, folder, now=now, formats=(fmt,), progress=bar)


def _annotate(args: argparse.Namespace) -> int:
    from monitor.cli_auth import AuthError, acting_person
    from monitor.reports.annotations import AnnotationError, annotate

    loaded = _loaded(args, need_site=False)
    if loaded is None:
        return 2
    try:
        user = acting_person(args, loaded[0], args.episode.split("/", 1)[0], "industry",
                             "enter the cause and corrective action of an episode")
    except AuthError as exc:
        print(f"pretreat: {exc}", file=sys.stderr)
        return 1
    try:
        a = annotate(Path(loaded[0].daemon.historian), episode=args.episode, cause=args.cause, action=args.action,
                     user=user, now=time.time())
    except AnnotationError as exc:
        print(f"pretreat: {exc}", file=sys.stderr)
        return 2
    print(f"annotated {a.episode} (journaled)")
    return 0


def _daily(args: argparse.Namespace) -> int:
    from monitor.reports.aggregates_db import connect
    from monitor.reports.daily import summarize
    from monitor.reports.plan import compile_plans
    from monitor.reports.render_csv import daily_csv
    from monitor.stores.episodes import EpisodeStore

    loaded = _loaded(args)
    if loaded is None:
        return 2
    config, site_id = loaded
    db = Path(config.daemon.historian)
    conn, store = connect(db), EpisodeStore(path=db)
    try:
        days = summarize(conn, config.site(site_id), compile_plans(config), args.day, args.day,
                         episodes=store.episodes(site=site_id), now=time.time())
    finally:
        store.close()
        conn.close()
    if args.daily_format == "csv":
        sys.stdout.write(daily_csv(days))
    else:
        print(json.dumps([d.to_dict() for d in days], indent=1, ensure_ascii=False))
    return 0


def _ph(args: argparse.Namespace) -> int:
    from monitor.reports.aggregates_db import connect
    from monitor.reports.ph_accounting import monthly_accounts
    from monitor.reports.plan import compile_plans

    loaded = _loaded(args)
    if loaded is None:
        return 2
    config, site_id = loaded
    conn = connect(Path(config.daemon.historian))
    try:
        months = monthly_accounts(conn, config.site(site_id), compile_plans(config), args.ph_first, args.ph_last)
    finally:
        conn.close()
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(("month", "days", "channel", "excursion_min", "allowance_min", "longest_min", "single_limit_min",
                "total_exceeded", "single_exceeded", "citation", "unmeasured_min", "maintenance_min"))
    for m in months:
        w.writerow((m.month, m.days, m.channel, f"{m.excursion_minutes:.1f}", f"{m.allowance_minutes:g}",
                    f"{m.longest_minutes:.1f}", f"{m.single_limit_minutes:g}", int(m.total_exceeded),
                    int(m.single_exceeded), m.total_citation, f"{m.unmeasured_minutes:.1f}",
                    f"{m.maintenance_minutes:.1f}"))
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    from monitor.progress import Progress
    from monitor.reports.aggregates import DailyAggregator
    from monitor.reports.days import day_bounds, zone

    site = getattr(args, "site", None)
    loaded = _loaded(args, need_site=site is not None)
    if loaded is None:
        return 2
    config = loaded[0]
    tz = zone(config.site(site).timezone if site else config.sites[0].timezone)
    agg = DailyAggregator(path=Path(config.daemon.historian), config=config)
    try:
        started = time.monotonic()
        with Progress("rebuilding", unit="channel") as bar:
            result = agg.rebuild(day_bounds(args.rb_first, tz)[0], day_bounds(args.rb_last, tz)[1], site=site,
                                 progress=bar)
    finally:
        agg.close()
    print(f"rebuilt {result.days} channel-days from {result.readings:,} readings in "
          f"{time.monotonic() - started:.1f} s")
    return 0


def add_labs(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="labs_command", metavar="SUBCOMMAND", required=True)
    imp = sub.add_parser("import", help="import composite-sample lab results (CSV); all rows or none")
    _common(imp, site=False)
    imp.add_argument("file", type=Path, metavar="RESULTS.csv")
    imp.set_defaults(func=_labs_import)


def _labs_import(args: argparse.Namespace) -> int:
    from alarms.journal import Journal
    from monitor.reports.aggregates_db import connect
    from monitor.reports.labs import LabImportError, import_csv

    loaded = _loaded(args, need_site=False)
    if loaded is None:
        return 2
    config = loaded[0]
    db = Path(config.daemon.historian)
    conn = connect(db)
    journal = Journal(path=db)
    try:
        result = import_csv(conn, args.file, config, now=time.time(), today=date.today(), journal=journal)
    except LabImportError as exc:
        for line, message in exc.problems:
            print(f"{args.file}:{line}: {message}", file=sys.stderr)
        print(f"{len(exc.problems)} problem(s); nothing imported", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"pretreat: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    finally:
        journal.close()
        conn.close()
    print(f"{args.file}: {result.imported} result(s) imported, {result.skipped} already on file "
          f"(sha256 {result.sha256[:16]}…)")
    return 0


def add_snc(p: argparse.ArgumentParser) -> None:
    _common(p, site=False)
    p.add_argument("--to", dest="last", type=_day, metavar="D", help="last day of the 6-month window (default today)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=_snc)


def _snc(args: argparse.Namespace) -> int:
    from monitor.reports.aggregates_db import connect
    from monitor.reports.labs import read_results
    from monitor.reports.snc import percent, screen, window_ending

    loaded = _loaded(args, need_site=False)
    if loaded is None:
        return 2
    config = loaded[0]
    first, last = window_ending(args.last or date.today())
    conn = connect(Path(config.daemon.historian))
    try:
        result = screen(read_results(conn, first=first, last=last), config, first, last)
    finally:
        conn.close()
    rows = [{"site": s.site, "parameter": s.parameter, "limit": s.limit.printed, "results": s.count,
             "exceeding": s.exceeding, "exceeding_share": percent(s.exceed_share),
             "at_trc": s.at_trc if s.trc is not None else None, "trc_share": percent(s.trc_share),
             "chronic": s.chronic, "trc_violation": s.trc_violation, "citation": s.limit.citation}
            for s in result.screens]
    if args.format == "json":
        print(json.dumps({"window": [first.isoformat(), last.isoformat()], "screens": rows,
                          "in_snc": result.industries_in_snc()}, indent=1, ensure_ascii=False))
    elif args.format == "csv":
        w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else ["site"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    else:
        print(f"Significant noncompliance screen {first} to {last} (40 CFR 403.8(f)(2)(viii))")
        for r in rows:
            flag = ", ".join(k for k in ("chronic", "trc_violation") if r[k]) or "-"
            print(f"  {r['site']:<16} {r['parameter']:<18} limit {r['limit']:<12} n={r['results']:<4} "
                  f">limit {r['exceeding_share']:>8}  >=limit×TRC {r['trc_share']:>8}  SNC: {flag}  "
                  f"({r['citation']})")
        print("In SNC: " + (", ".join(result.industries_in_snc()) or "none"))
    return 0
