"""`pretreat readings`: export one channel's recorded readings, good and bad, as CSV or JSON Lines.

    pretreat readings (--config FILE | --db PATH | --database URL) --site S --channel C [--from T] [--to T]
                      [--format csv|json] [--output F]

``--config`` names the site file whose ``[daemon].historian`` is read (``--db PATH`` names the file
directly). The historian is opened read-only, so this runs beside a running daemon. ``--database
postgresql://…`` reads the county hub's database instead (every edge's sites; with ``--config`` naming the
site file for the calibration column), and writes the same rows the edge's historian gives.

Times (``--from`` inclusive, ``--to`` exclusive) are ISO 8601 with ``Z`` or an offset
(``2026-01-31T05:00:00Z``, ``2026-01-31T00:00:00-05:00``); a date alone means midnight UTC. A time without
an offset is refused: whether "05:00" means UTC or the site's local time is exactly the kind of ambiguity
a compliance record must not have.

Output (see `monitor.export_render` for the exact time and number formats):
- CSV: header ``time,site,channel,value,unit,quality,reason,calibration``; ``time`` ISO 8601 UTC with ``Z``
  (milliseconds when fractional); ``value`` empty for a bad reading; fields quoted only when needed
  (RFC 4180); lines end with ``\\n``. ``calibration`` is empty while the channel's instrument was in
  calibration (or no interval is stated), else ``overdue`` or ``no calibration recorded`` as known when the
  reading was taken (with ``at the time; in date by an entry made later`` where a backdated entry differs)
  (`monitor.stores.calibration`; needs ``--config``, which states the intervals).
- JSON Lines: one object per reading with the same keys, ``value`` null for a bad reading.
Readings come in time order (equal times in arrival order). With ``--output`` the file is written under a
temporary name and renamed when complete, so a failed export never leaves a truncated file behind.

Exit codes: 0 done (also when the range holds no readings); 1 a runtime failure (output not writable, the
historian unreadable mid-way); 2 bad usage: unknown site or channel (the known ones are listed), bad time,
``--from`` after ``--to``, no historian file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TextIO

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from monitor.export_render import CSV_HEADER, ExportPlan, render
from monitor.read.times import TIME_HELP, UsageError, parse_time
from monitor.stores.historian_db import HistorianError, list_channels, open_for_reading, series_of
from monitor.stores.hub_record import is_database_url


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group()
    source.add_argument("--config", metavar="FILE", help="site file (TOML); its [daemon].historian is read")
    source.add_argument("--db", metavar="PATH", help="historian SQLite file (instead of --config)")
    p.add_argument("--database", metavar="URL",
                   help="the county hub's PostgreSQL database (postgresql://…) instead of the historian file")
    p.add_argument("--site", required=True, help="site id")
    p.add_argument("--channel", required=True, help="channel id")
    p.add_argument("--from", dest="start", metavar="T", help=f"first time, inclusive ({TIME_HELP})")
    p.add_argument("--to", dest="end", metavar="T", help=f"end time, exclusive ({TIME_HELP})")
    p.add_argument("--format", choices=("csv", "json"), default="csv",
                   help="csv (default) or json (JSON Lines)")
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of standard output")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="worker processes for long ranges (default: one per idle CPU, at most 4; 1: none)")
    p.set_defaults(func=run)


def auto_jobs() -> int:
    """One worker per idle CPU (by the 1-minute load average), at most 4; 1 renders in this process.

    Workers cost ~30 % more CPU in total than one process (the text crosses a pipe), so they only pay on
    idle cores: on a busy machine they would just compete with each other.
    """
    cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        load = 0.0
    return max(1, min(4, round(cpus - load)))


def export_readings(db: Path | str, *, site: str, channel: str, start: float | None, end: float | None,
                    fmt: str, out: TextIO, jobs: int = 1, allow_empty: bool = False,
                    overdue: tuple[tuple[float, float, str], ...] = ()) -> int:
    """Write one channel's readings to ``out`` (header first for CSV); return how many were written.

    Raises `UsageError` for an unknown site/channel (unless ``allow_empty``: the channel is configured but
    has no readings yet, so the export is just empty), ``start`` after ``end``, or no historian file.
    """
    if start is not None and end is not None and start > end:
        raise UsageError("--from is after --to")
    if fmt not in ("csv", "json"):
        raise UsageError(f"format {fmt!r}: expected csv or json")
    try:
        conn = open_for_reading(db if isinstance(db, str) else Path(db))
    except HistorianError as exc:
        raise UsageError(str(exc)) from None
    try:
        series = series_of(conn, site, channel)
        if not series and not allow_empty:
            raise UsageError(_unknown(list_channels(conn), site, channel, db))
    finally:
        conn.close()
    if fmt == "csv":
        out.write(CSV_HEADER)
    if not series:
        return 0
    if isinstance(db, str):
        jobs = 1  # the day windows are forked workers over a SQLite file; the hub's database serves one reader
    plan = ExportPlan(path=db if isinstance(db, str) else Path(db), site=site, channel=channel,
                      series=tuple(reversed(series)), fmt=fmt, start=start, end=end, overdue=overdue)
    return render(plan, out.write, jobs=jobs)


def _unknown(known: list[tuple[str, str, str]], site: str, channel: str, db: Path | str) -> str:
    db = "the hub's database" if isinstance(db, str) else db  # a URL may carry a password: never print it
    sites = sorted({s for s, _c, _u in known})
    if site not in sites:
        return (f"no readings recorded for site {site!r} in {db}; "
                f"sites recorded: {', '.join(sites) if sites else '(none yet)'}")
    channels = sorted({c for s, c, _u in known if s == site})
    return f"site {site!r} has no channel {channel!r} recorded in {db}; its channels: {', '.join(channels)}"


def run(args: argparse.Namespace) -> int:
    try:
        db, configured, cfg = _source(args)
        start = parse_time(args.start) if args.start else None
        end = parse_time(args.end) if args.end else None
        jobs = args.jobs if args.jobs > 0 else auto_jobs()
        kwargs = dict(site=args.site, channel=args.channel, start=start, end=end, fmt=args.format, jobs=jobs,
                      allow_empty=(args.site, args.channel) in configured, overdue=_overdue(cfg, args))
        if args.output:
            n = _to_file(db, Path(args.output), kwargs)
        else:
            n = export_readings(db, out=sys.stdout, **kwargs)
            sys.stdout.flush()
    except UsageError as exc:
        print(f"pretreat readings: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (OSError, HistorianError) as exc:
        print(f"pretreat readings: {exc}", file=sys.stderr)
        return 1
    if n == 0:
        print(f"pretreat readings: no readings of {args.site}/{args.channel} in that range", file=sys.stderr)
    return 0


def _source(args: argparse.Namespace) -> tuple[Path | str, set[tuple[str, str]], SiteConfig | None]:
    """The historian file (or the hub's database URL), the (site, channel) pairs the site file configures
    (empty with --db) and the site file."""
    database = getattr(args, "database", None)
    if database is not None and not is_database_url(database):
        raise UsageError(f"--database {database!r}: expected a postgresql:// URL (the hub's database)")
    if not args.db and not args.config and database is None:
        raise UsageError("give --config FILE or --db PATH (or --database URL)")
    if args.db and database is not None:
        raise UsageError("give --db PATH or --database URL, not both")
    if args.db:
        return Path(args.db), set(), None
    if not args.config:
        return str(database), set(), None
    try:
        cfg = load_config(args.config)
    except ConfigErrors as exc:
        raise UsageError(f"invalid site file:\n{exc}") from None
    where = database if database is not None else cfg.daemon.historian
    return where, {(c.site, c.id) for c in cfg.channels}, cfg


def _overdue(cfg: SiteConfig | None, args: argparse.Namespace) -> tuple[tuple[float, float, str], ...]:
    """The spans in which the channel's instrument was overdue for calibration (needs the site file's
    intervals; with --db only the column stays empty)."""
    if cfg is None:
        return ()
    from monitor.calibration import channel_spans

    return tuple(channel_spans(cfg, args.site, args.channel))


def _to_file(db: Path | str, target: Path, kwargs: dict[str, object]) -> int:
    partial = target.with_name(target.name + ".part")
    try:
        with partial.open("w", encoding="utf-8", newline="") as fh:
            n = export_readings(db, out=fh, **kwargs)  # type: ignore[arg-type]
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return n
