"""`pretreat replay`: run the compliance checks over recorded readings (CSV), print the episodes (JSONL).

    pretreat replay --config SITE.toml READINGS.csv [--output EPISODES.jsonl]

Input: a CSV whose header names ``time``, ``channel`` and ``value`` and optionally ``site`` and ``quality``
(other columns, such as the ``unit`` and ``reason`` of `pretreat readings` exports, are ignored). ``time`` is
ISO 8601 with an offset or ``Z``. ``quality`` is ``good`` (also the default when the column is absent or the
cell blank) or any other word, which marks the row bad and is its reason; a bad row's value is ignored.
``site`` may be omitted when the site file has one site. Rows must be in time order per channel; a row out of
order, unparseable, or naming an unknown channel is reported on stderr with its line number, skipped and
counted. The engine is the daemon's own (`monitor.checks.engine`), fed in file order: for the rules that read
two channels (sampler interval, mass-loading slug) the interleaving of those channels' rows matters, as
arrival order does live; sort such files by time.

Output: one JSON object per episode transition, sorted by time (see `EpisodeEvent.to_json`); an episode still
open at the end of the input has no ``end``. A summary (rows read, rows rejected, episodes per rule) goes to
stderr. Exit 0 when the input was processed (episodes are data, not errors), 2 for an invalid site file, 1 for
an input or output file that cannot be read or written.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Iterator, Mapping
from itertools import chain, islice
from typing import TextIO

from config.loader import load_config_or_report
from config.rules import is_data_quality
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine, Processor
from monitor.checks.replay_io import Rejections, SortedEvents, time_parser

CHUNK = 16384  # rows between drains of the engine's events (bounds the events held in memory)
_EXIT_CONFIG, _EXIT_IO = 2, 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", required=True, metavar="SITE.toml", help="site file (jurisdiction, permit, rules)"
    )
    p.add_argument("readings", metavar="READINGS.csv", help="time,channel,value[,site][,quality] rows")
    p.add_argument("--output", metavar="EPISODES.jsonl", help="write episodes here instead of stdout")
    p.add_argument(
        "--report-limit",
        type=int,
        default=1000,
        metavar="N",
        help="list at most N skipped rows on stderr (all are counted; 0 lists every one)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config_or_report(args.config, outcome="nothing replayed")
    if config is None:
        return _EXIT_CONFIG
    try:
        with open(args.readings, newline="", encoding="utf-8-sig") as src:
            out: TextIO = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
            try:
                stats = replay(
                    config, src, out, source=args.readings, err=sys.stderr, report_limit=args.report_limit
                )
            finally:
                if out is not sys.stdout:
                    out.close()
    except (OSError, UnicodeDecodeError, csv.Error, InputError) as exc:
        print(f"pretreat replay: {exc}", file=sys.stderr)
        return _EXIT_IO
    print(stats.summary(), file=sys.stderr)
    return 0


class InputError(Exception):
    """The CSV cannot be replayed at all (no usable header, or no site column with several sites)."""


class ReplayStats:
    def __init__(self, *, rows: int, rejected: Rejections, events: SortedEvents, written: int) -> None:
        self.rows = rows
        self.rejected = rejected
        self.starts = events.starts
        self.ends = events.ends
        self.written = written

    def summary(self) -> str:
        lines = [
            f"rows read: {self.rows}",
            f"rows rejected: {self.rejected.total}"
            + "".join(f"; {k} {n}" for k, n in sorted(self.rejected.kinds.items())),
        ]
        for title, quality in (("exceedance episodes", False), ("data-quality episodes", True)):
            rules = sorted(r for r in self.starts if is_data_quality(r) == quality)
            body = ", ".join(f"{r} {self.starts[r]} (open {self.starts[r] - self.ends[r]})" for r in rules)
            lines.append(f"{title}: {body or 'none'}")
        lines.append(f"transitions written: {self.written}")
        return "\n".join(lines)


def replay(
    config: SiteConfig,
    src: TextIO,
    out: TextIO,
    *,
    source: str = "-",
    err: TextIO = sys.stderr,
    report_limit: int = 1000,
    engine: CheckEngine | None = None,
) -> ReplayStats:
    """Replay one CSV stream through a fresh engine for ``config``; events to ``out``, rejects to ``err``."""
    engine = engine or CheckEngine.for_config(config)
    first = src.readline()
    header = next(csv.reader([first]), []) if first else []
    if not header:
        raise InputError(f"{source}: empty file (expected a header time,channel,value)")
    cols = _columns(header, source)
    reject = Rejections(err=err, source=source, limit=report_limit)
    sink = SortedEvents(out)
    if cols == {"time": 0, "channel": 1, "value": 2} and len(header) == 3 and len(config.sites) == 1:
        chunks = _plain_lines(src, engine.inputs(config.sites[0].id), reject)
    else:
        if "site" not in cols and len(config.sites) != 1:
            raise InputError(f"{source}: no 'site' column, but the site file has {len(config.sites)} sites")
        by_site = {s.id: engine.inputs(s.id) for s in config.sites}
        handle = _general_row(by_site, cols, len(header), config.sites[0].id, reject)
        chunks = _general_lines(src, handle)
    rows = 0
    for n in chunks:
        rows += n
        if engine.events:
            sink.add(engine.drain())
    written = sink.close()
    return ReplayStats(rows=rows, rejected=reject, events=sink, written=written)


def _columns(header: list[str], source: str) -> dict[str, int]:
    names = [h.strip().lower() for h in header]
    missing = [c for c in ("time", "channel", "value") if c not in names]
    if missing:
        raise InputError(
            f"{source}: header {header!r} lacks {missing} (expected time,channel,value[,site][,quality])"
        )
    dupes = sorted({n for n in names if names.count(n) > 1 and n in _KNOWN})
    if dupes:
        raise InputError(f"{source}: header repeats {dupes}")
    return {n: i for i, n in enumerate(names) if n in _KNOWN}


_KNOWN = ("time", "channel", "value", "site", "quality")


def _plain_lines(src: TextIO, procs: Mapping[str, Processor], reject: Rejections) -> Iterator[int]:
    """The hot loop for the plain ``time,channel,value`` layout; yields rows handled per chunk.

    No Sample objects and, for lines without quotes, no csv tokenizer: an unquoted line split on commas is
    exactly what `csv.reader` makes of it. A line with balanced quotes goes through `csv.reader` alone; one
    whose quoted field runs onto the next line hands the rest of the file to `csv.reader`. The fast path of
    `Processor.good` is inlined here. (`float` accepts '7_2' as 72, as Python literals do; every other
    malformed number is rejected.)
    """
    parse = time_parser()
    last_ts, t, lineno = "", 0.0, 1
    while True:
        n = 0
        for line in islice(src, CHUNK):
            lineno += 1
            n += 1
            if '"' in line:
                if line.count('"') % 2:
                    yield n - 1
                    yield from _csv_rest(src, line, lineno, _plain_row(procs, reject, parse))
                    return
                parts = next(csv.reader([line]))
            else:
                parts = line.split(",")
            try:
                ts, ch, v = parts
                if ts != last_ts:
                    t = parse(ts)
                    last_ts = ts
                x = float(v)
                p = procs[ch]
            except ValueError as exc:
                reject(lineno, "unparseable", f"{exc}: {line.rstrip()!r}")
                continue
            except KeyError:
                reject(lineno, "unknown channel", repr(ch))
                continue
            if t < p.last:
                reject(lineno, "out of order", f"{ts} for channel {ch!r} is before its previous row")
                continue
            p.last = t
            if t < p.until and p.lo <= x <= p.hi:
                acc = p.acc
                if acc is not None:
                    acc.cur_sum += x
                    acc.cur_cnt += 1
                continue
            p.slow_good(t, x)
        yield n
        if n < CHUNK:
            return


RowHandler = Callable[[list[str], int], None]


def _plain_row(procs: Mapping[str, Processor], reject: Rejections,
               parse: Callable[[str], float]) -> RowHandler:
    """One parsed row of the plain layout (the slow road, after a multi-line quoted field)."""

    def handle(row: list[str], line: int) -> None:
        try:
            ts, ch, v = row
            t, x = parse(ts), float(v)
        except ValueError as exc:
            reject(line, "unparseable", f"{exc}: {row!r}")
            return
        p = procs.get(ch)
        if p is None:
            reject(line, "unknown channel", repr(ch))
        elif p.good(t, x):
            reject(line, "out of order", f"{ts} for channel {ch!r} is before its previous row")

    return handle


def _general_row(by_site: Mapping[str, Mapping[str, Processor]], cols: dict[str, int], width: int,
                 default_site: str, reject: Rejections) -> RowHandler:
    """One parsed row in any column order, with optional ``site`` and ``quality`` columns."""
    ti, ci, vi = cols["time"], cols["channel"], cols["value"]
    si, qi = cols.get("site"), cols.get("quality")
    parse = time_parser()
    last_ts, last_t = "", 0.0  # rows of one second share the time text: parse it once

    def handle(row: list[str], line: int) -> None:
        nonlocal last_ts, last_t
        if len(row) != width:
            reject(line, "unparseable", f"{len(row)} fields, expected {width}: {row!r}")
            return
        site = row[si] if si is not None else default_site
        ch = row[ci]
        proc = by_site.get(site, {}).get(ch)
        if proc is None:
            reject(line, "unknown channel", f"site {site!r} channel {ch!r}")
            return
        quality = row[qi] if qi is not None else "good"
        if quality != "good":
            quality = quality.strip().lower() or "good"
        ts = row[ti]
        try:
            if ts != last_ts:
                last_t, last_ts = parse(ts), ts
            t = last_t
            x = float(row[vi]) if quality == "good" else 0.0
        except ValueError as exc:
            reject(line, "unparseable", f"{exc}: {row!r}")
            return
        if proc.good(t, x) if quality == "good" else proc.bad(t, quality):
            reject(line, "out of order", f"{ts} for channel {ch!r} is before its previous row")

    return handle


def _general_lines(src: TextIO, handle: RowHandler) -> Iterator[int]:
    """Lines split on commas (quoted lines through `csv.reader`), each row to ``handle``."""
    lineno = 1
    while True:
        n = 0
        for line in islice(src, CHUNK):
            lineno += 1
            n += 1
            if '"' in line:
                if line.count('"') % 2:
                    yield n - 1
                    yield from _csv_rest(src, line, lineno, handle)
                    return
                handle(next(csv.reader([line])), lineno)
            else:
                handle(line.rstrip("\r\n").split(","), lineno)
        yield n
        if n < CHUNK:
            return


def _csv_rest(src: TextIO, line: str, lineno: int, handle: RowHandler) -> Iterator[int]:
    """From a line whose quoted field continues on the next one, the rest of the file through `csv.reader`."""
    reader = csv.reader(chain([line], src))
    offset = lineno - 1
    while True:
        n = 0
        for row in islice(reader, CHUNK):
            n += 1
            handle(row, offset + reader.line_num)
        yield n
        if n < CHUNK:
            return
