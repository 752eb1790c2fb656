"""`pretreat replay`: run the compliance checks over recorded readings (CSV), print the episodes (JSONL).

    pretreat replay --config SITE.toml READINGS.csv [--output EPISODES.jsonl]

Input: a CSV whose header names ``time``, ``channel`` and ``value`` and optionally ``site`` and ``quality``
(other columns, such as the ``unit`` and ``reason`` of `pretreat readings` exports, are ignored). ``time`` is
ISO 8601 with an offset or ``Z``. ``quality`` is ``good`` (also the default when the column is absent or the
cell blank) or any other word, which marks the row bad and is its reason; a bad row's value is ignored, except
an ``over_range`` row's: the instrument's number above its span, judged as the live daemon judges it (as
``valid_max``, censored, on a channel that judges over-range readings; otherwise as out of range). A good
row's value is a plain decimal number (no ``1_000``, ``infinity`` or spaces), or exactly ``inf``/``-inf``, the
export's spelling of a stored infinite number, judged as the daemon judges it (``bad_value``). ``site`` may be
omitted when the site file has one site. Each row is a line (`monitor.checks.replay_csv` says how quotes, implausible
times and odd rows are read). Rows must be in time order per channel; a row out of order, unparseable, with an
implausible time or naming an unknown channel is reported on stderr with its line number, skipped and
counted. The engine is the daemon's own (`monitor.checks.engine`), fed in file order: for the rules that read
two channels (sampler interval, mass-loading slug) the interleaving of those channels' rows matters, as
arrival order does live; sort such files by time.

Output: one JSON object per episode transition, sorted by time (see `EpisodeEvent.to_json`); an episode still
open at the end of the input has no ``end``. A summary (rows read, rows rejected, episodes per rule) goes to
stderr. Exit 0 when the input was processed (episodes are data, not errors), 2 for an invalid site file, 1 for
an input or output file that cannot be read or written, 3 when more than ``--max-rejected`` per cent of the
rows (default 1 %) were rejected: the counts and episodes are still printed, but they are not those of the
whole file.
"""

from __future__ import annotations

import argparse
import csv
import os
import stat
import sys
from typing import TextIO, cast

from config.loader import load_config_or_report
from monitor.checks.replay_csv import InputError
from monitor.checks.replay_run import replay
from monitor.progress import CountingReader, Progress

_EXIT_CONFIG, _EXIT_IO, _EXIT_REJECTED = 2, 1, 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", required=True, metavar="SITE.toml", help="site file (jurisdiction, permit, rules)"
    )
    p.add_argument("readings", metavar="READINGS.csv",
                   help="time,channel,value[,site][,quality] rows; - reads standard input")
    p.add_argument("--output", metavar="EPISODES.jsonl", help="write episodes here instead of stdout")
    p.add_argument(
        "--report-limit",
        type=int,
        default=1000,
        metavar="N",
        help="list at most N skipped rows on stderr (all are counted; 0 lists every one)",
    )
    p.add_argument(
        "--max-rejected",
        type=float,
        default=1.0,
        metavar="PCT",
        help="exit 3 when more than PCT %% of the rows are rejected (default 1)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load_config_or_report(args.config, outcome="nothing replayed")
    if config is None:
        return _EXIT_CONFIG
    try:
        # a byte that is not UTF-8 spoils its row (rejected, with its line), not the run
        stdin = args.readings == "-"  # `pretreat readings … | pretreat replay --config F -`
        with open(sys.stdin.fileno() if stdin else args.readings, newline="", encoding="utf-8-sig",
                  errors="surrogateescape", closefd=not stdin) as src:
            out: TextIO = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
            st = os.fstat(src.fileno())
            try:
                with Progress("replay", unit="B", unit_scale=True,
                              total=st.st_size if stat.S_ISREG(st.st_mode) else None) as bar:
                    stats = replay(
                        config, cast(TextIO, CountingReader(src, bar)) if bar.shown else src, out,
                        source="<stdin>" if stdin else args.readings, err=sys.stderr, report_limit=args.report_limit
                    )
            finally:
                if out is not sys.stdout:
                    out.close()
    except (OSError, UnicodeDecodeError, csv.Error, InputError) as exc:
        print(f"pretreat replay: {exc}", file=sys.stderr)
        return _EXIT_IO
    print(stats.summary(), file=sys.stderr)
    share = 100.0 * stats.rejected.total / stats.rows if stats.rows else 0.0
    if share > args.max_rejected:
        print(f"pretreat replay: {share:.2f} % of the rows were rejected, more than --max-rejected "
              f"{args.max_rejected:g} %: the episodes above are not those of the whole file", file=sys.stderr)
        return _EXIT_REJECTED
    return 0
