"""`pretreat tail`: follow readings as the daemon records them (what `make demo` shows a newcomer).

Reads the historian through its own read-only connection, so it works beside a running daemon (SQLite WAL
lets readers and the writer proceed together). One line per reading: time, site/channel, value and unit,
or the quality and reason of a bad reading. As the daemon's log beside it on the demo's screen: the time of day
in the site's zone with its abbreviation (``--utc``: UTC to the millisecond), the value at the channel's
resolution (four significant digits where it is unknown, `monitor.cli_render`).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from monitor import clock
from monitor.cli_render import Render, add_utc_option
from monitor.read.readings import readings_since
from monitor.sample import Sample


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    p.add_argument("--duration", type=float, default=0.0, help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between looks (default 1)")
    p.add_argument("--every", type=float, default=0.0, metavar="S",
                   help="show a channel's reading at most once per S seconds of reading time, and every change "
                        "between good and bad or between bad reasons (default 0: every reading)")
    add_utc_option(p)
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
    line = Line(cfg, utc=args.utc)
    try:
        while time.monotonic() < deadline:
            if db.exists():
                _show_new(db, since, shown, args.every, line)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


class Line:
    """One reading as a line of `pretreat tail`."""

    def __init__(self, cfg: SiteConfig, *, utc: bool) -> None:
        self.render = Render(cfg, utc=utc)
        self.utc = utc
        self.zones = {site.id: ZoneInfo(site.timezone) for site in cfg.sites}

    def __call__(self, s: Sample) -> str:
        zone = None if self.utc else self.zones.get(s.site)
        if zone is None:
            stamp = s.utc.strftime("%H:%M:%S.%f")[:-3] + "Z"
        else:
            stamp = datetime.fromtimestamp(s.time, zone).strftime("%H:%M:%S %Z")
        if s.good:
            text = f"{self.render.number(s.value, s.site, s.channel):>10} {s.unit}"
        else:
            text = f"{s.quality.value.upper()}: {s.reason}"
        return f"{stamp}  {s.site}/{s.channel:<22} {text}"


def _show_new(db: Path, since: dict[tuple[str, str], float], shown: dict[tuple[str, str], tuple[float, str]],
              every: float, line: Line) -> None:
    for s in readings_since(db, since):
        key, state = (s.site, s.channel), f"{s.quality.value}:{s.reason}"
        last = shown.get(key)
        if every and last is not None and last[1] == state and s.time - last[0] < every:
            continue
        shown[key] = (s.time, state)
        print(line(s), flush=True)
