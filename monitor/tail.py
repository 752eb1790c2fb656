"""`pretreat tail`: follow readings as the daemon records them (what `make demo` shows a newcomer).

Reads the historian through its own read-only connection, so it works beside a running daemon (SQLite WAL
lets readers and the writer proceed together). One line per reading: time, site/channel, value and unit,
or the quality and reason of a bad reading.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from config.errors import ConfigErrors
from config.loader import load_config
from monitor import clock
from monitor.read.readings import readings_since


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    p.add_argument("--duration", type=float, default=0.0, help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between looks (default 1)")
    p.add_argument("--every", type=float, default=0.0, metavar="S",
                   help="show a channel's reading at most once per S seconds of reading time, and every change "
                        "between good and bad or between bad reasons (default 0: every reading)")
    p.set_defaults(func=_tail)


def _tail(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config)
    except ConfigErrors as exc:
        print(exc, file=sys.stderr)
        return 2
    db = cfg.daemon.historian
    since = {(c.site, c.id): clock.wall() - 2 * args.interval for c in cfg.channels}
    shown: dict[tuple[str, str], tuple[float, str]] = {}  # channel -> (time, quality and reason) last shown
    deadline = time.monotonic() + args.duration if args.duration else float("inf")
    try:
        while time.monotonic() < deadline:
            if db.exists():
                _show_new(db, since, shown, args.every)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _show_new(db: Path, since: dict[tuple[str, str], float], shown: dict[tuple[str, str], tuple[float, str]],
              every: float) -> None:
    for s in readings_since(db, since):
        key, state = (s.site, s.channel), f"{s.quality.value}:{s.reason}"
        last = shown.get(key)
        if every and last is not None and last[1] == state and s.time - last[0] < every:
            continue
        shown[key] = (s.time, state)
        stamp = s.utc.strftime("%H:%M:%S.%f")[:-3]
        text = f"{s.value:10.3f} {s.unit}" if s.good else f"{s.quality.value.upper()}: {s.reason}"
        print(f"{stamp}Z  {s.site}/{s.channel:<22} {text}", flush=True)
