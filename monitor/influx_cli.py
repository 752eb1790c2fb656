"""`pretreat influx backfill`: re-send a period from the SQLite historian to InfluxDB.

    pretreat influx backfill --config site.toml --from 2025-11-01 --to 2025-11-02T06:00:00-05:00 \\
        [--site S] [--channel C ...] [--db PATH] [--dry-run]

Why: InfluxDB is never the only copy. After an outage longer than the queue's disk budget, after a restore of
the InfluxDB server, or when telemetry is switched on for an existing site, the historian still holds every
reading. Backfill writes them with exactly the lines the live sink writes (`influx_lines`: same measurement,
tags and millisecond timestamp), so running it twice, or over a period already sent live, overwrites instead
of duplicating. (VictoriaMetrics keeps duplicates unless started with ``-dedup.minScrapeInterval``.)

Times: ISO 8601 with ``Z`` or an offset; a date alone is midnight UTC. ``--from`` is inclusive, ``--to``
exclusive. Backfill talks to the server directly (not through the daemon's queue file, which a running daemon
holds): an outage longer than ``--give-up-after`` stops it with exit code 1, and re-running is safe.
Exit codes: 0 done, 1 server refused or unavailable or points rejected, 2 bad usage/configuration.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from config.errors import ConfigErrors
from config.influx import InfluxSettings, TokenError
from config.loader import load_config
from drivers.backoff import retries
from monitor.progress import Progress
from monitor.read.times import UsageError, parse_time
from monitor.stores.historian import Historian, HistorianError
from monitor.stores.influx import instruments_of
from monitor.stores.influx_lines import SampleFormatter
from monitor.stores.influx_writer import LineWriter, Outcome, WriteResult, deliver

log = logging.getLogger(__name__)


class BackfillError(Exception):
    """The server refused us or stayed unavailable; the message says what to do."""


@dataclass(slots=True)
class BackfillReport:
    points: int = 0
    channels: int = 0
    requests: int = 0
    seconds: float = 0.0
    quarantined: list[tuple[bytes, str]] = field(default_factory=list)  # (line, server's reason)


def time_arg(text: str) -> float:
    """``--from``/``--to`` as argparse reads them: `monitor.read.times.parse_time`, its mistakes as usage
    errors. Naive times are refused: a compliance record must not depend on the zone of the machine that
    runs the command."""
    try:
        return parse_time(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def backfill(*, settings: InfluxSettings, instruments: Mapping[tuple[str, str], tuple[str, str]],
             historian: Path, start: float, end: float, site: str | None = None,
             channels: Sequence[str] | None = None, give_up_after: float = 60.0, dry_run: bool = False,
             progress: Callable[[str, int], None] | None = None, bar: Progress | None = None) -> BackfillReport:
    """Send every recorded reading with ``start <= time < end`` of the selected channels, channel by
    channel, in time order, ``settings.batch_size`` lines per request. Raises `BackfillError` (server),
    `HistorianError` (file) or ValueError (unknown site/channel, listing the known ones)."""
    began = time.monotonic()
    report = BackfillReport()
    formatter = SampleFormatter(instruments=instruments)
    with Historian.open_readonly(historian) as reader:
        selected = _select(reader.channels(), site, channels)
        if bar is not None:
            bar.total(len(selected))
        writer = None if dry_run else LineWriter(settings=settings, token=settings.read_token())
        try:
            for s, ch in selected:
                n = 0
                for batch in formatter.batches(reader.query(site=s, channel=ch, start=start, end=end),
                                               settings.batch_size):
                    if writer is not None:
                        _send(writer, batch, report, give_up_after, settings.max_backoff)
                    n += len(batch)
                    if bar is not None:
                        bar.note(f"{s}/{ch}: {n} points")
                report.points += n
                report.channels += 1
                if progress is not None:
                    progress(f"{s}/{ch}", n)
                if bar is not None:
                    bar.advance()
        finally:
            if writer is not None:
                report.requests = writer.requests
                writer.close()
    report.seconds = time.monotonic() - began
    return report


def _select(known: list[tuple[str, str, str]], site: str | None,
            channels: Sequence[str] | None) -> list[tuple[str, str]]:
    pairs = sorted({(s, c) for s, c, _unit in known})
    if site is not None and site not in {s for s, _ in pairs}:
        raise ValueError(f"no site {site!r} in the historian; known: {sorted({s for s, _ in pairs})}")
    pairs = [p for p in pairs if site is None or p[0] == site]
    if channels:
        missing = sorted(set(channels) - {c for _, c in pairs})
        if missing:
            where = f" for site {site!r}" if site else ""
            raise ValueError(f"no channel {', '.join(map(repr, missing))} in the historian{where}; "
                             f"known: {sorted({c for _, c in pairs})}")
        pairs = [p for p in pairs if p[1] in channels]
    return pairs


def _send(writer: LineWriter, lines: list[bytes], report: BackfillReport, give_up_after: float,
          max_backoff: float) -> None:
    backoff = retries(max_backoff)
    failing_since: float | None = None

    def quarantine(line: bytes, result: WriteResult) -> None:
        report.quarantined.append((line, f"HTTP {result.status}: {result.message}"))

    while True:
        result = deliver(writer.write, lines, quarantine)
        if result.ok:
            return
        if result.outcome in (Outcome.AUTH, Outcome.NOT_FOUND):
            raise BackfillError(f"{writer.settings.url} refused the write (HTTP {result.status}): "
                                f"{result.message}; check token, org and bucket")
        now = time.monotonic()
        failing_since = failing_since or now
        if now - failing_since > give_up_after:
            raise BackfillError(f"{writer.settings.url} unavailable for {give_up_after:g} s "
                                f"({result.message}); {report.points} points of earlier channels were sent. "
                                "Re-run when it is back: backfill is idempotent")
        time.sleep(backoff.next(result.retry_after))


# -- CLI -------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="influx_command", required=True, metavar="ACTION")
    b = sub.add_parser("backfill", help="re-send a period from the historian to InfluxDB (idempotent)",
                       description="Re-send a period of recorded readings from the historian to InfluxDB. "
                                   "Same lines as the live sink: re-running overwrites, never duplicates.")
    b.add_argument("--config", required=True, metavar="FILE", help="site file with an [influx] table")
    b.add_argument("--from", dest="start", required=True, type=time_arg, metavar="T",
                   help="first instant, inclusive (ISO 8601 with Z or offset; a date = 00:00 UTC)")
    b.add_argument("--to", dest="end", required=True, type=time_arg, metavar="T", help="end, exclusive")
    b.add_argument("--site", help="only this site")
    b.add_argument("--channel", action="append", metavar="C", help="only this channel (repeatable)")
    b.add_argument("--db", type=Path, metavar="PATH", help="historian file (default: [daemon].historian)")
    b.add_argument("--give-up-after", type=float, default=60.0, metavar="S",
                   help="stop when the server stays unavailable this long (default 60)")
    b.add_argument("--dry-run", action="store_true", help="read and count, send nothing")
    b.set_defaults(func=_backfill)


def _backfill(args: argparse.Namespace) -> int:
    if args.start >= args.end:
        return _usage("--from must be before --to")
    try:
        config = load_config(args.config)
    except ConfigErrors as exc:
        for e in exc.errors:
            print(e, file=sys.stderr)
        return 2
    settings = config.influx
    if settings is None:
        return _usage(f"{args.config} has no [influx] table: nothing to send to")
    historian = args.db or config.daemon.historian
    try:
        with Progress("backfill", unit="channel") as bar:  # on a terminal; quiet elsewhere
            report = backfill(settings=settings, instruments=instruments_of(config), historian=historian,
                              start=args.start, end=args.end, site=args.site, channels=args.channel,
                              give_up_after=args.give_up_after, dry_run=args.dry_run, bar=bar)
    except (ValueError, HistorianError, TokenError) as exc:
        return _usage(str(exc))
    except BackfillError as exc:
        print(f"pretreat influx backfill: {exc}", file=sys.stderr)
        return 1
    verb = "would send" if args.dry_run else "sent"
    print(f"{verb} {report.points} points of {report.channels} channels in {report.seconds:.1f} s "
          f"({report.requests} requests)")
    for line, reason in report.quarantined:
        print(f"rejected by the server ({reason}): {line[:200].decode('utf-8', 'replace')}", file=sys.stderr)
    return 1 if report.quarantined else 0


def _usage(message: str) -> int:
    print(f"pretreat influx backfill: {message}", file=sys.stderr)
    return 2
