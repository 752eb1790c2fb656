"""Small subcommands that only read configuration."""

from __future__ import annotations

import argparse
import sys

from config.loader import checked_config


def add_run(p: argparse.ArgumentParser) -> None:
    """`pretreat run`'s arguments, here rather than in monitor.app: importing the daemon (APScheduler, paho,
    protobuf, every store) costs ~1 s of CPU, which `pretreat run --help` and a mistyped option need not pay."""
    p.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from monitor.app import run_command

    return run_command(args)


def add_audit(p: argparse.ArgumentParser) -> None:
    """`pretreat audit`'s arguments, here rather than in monitor.audit: the replay's engine and scanners it
    imports cost ~0.1 s of CPU that `pretreat audit --help` need not pay (its start was over 0.4 s)."""
    p.add_argument("--config", required=True, metavar="SITE.toml", help="the daemon's site file")
    p.add_argument("--database", metavar="URL",
                   help="audit the county hub's PostgreSQL database (postgresql://…) instead of the daemon's file")
    p.add_argument("--from", dest="start", metavar="T", help="first episode start compared (ISO 8601)")
    p.add_argument("--to", dest="end", metavar="T", help="end of the period, exclusive (ISO 8601)")
    p.set_defaults(func=_audit)


def _audit(args: argparse.Namespace) -> int:
    from monitor.audit import run

    return run(args)


def add_check_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="FILE", help="site file (TOML)")
    p.set_defaults(func=_check_config)


def _check_config(args: argparse.Namespace) -> int:
    config, errors = checked_config(args.config)
    for e in errors:
        print(e, file=sys.stderr)
    if config is None:
        print(f"{len(errors)} error(s); nothing started", file=sys.stderr)
        return 2
    from monitor.rules_cli import unchecked

    for site in config.sites:
        for note in dict.fromkeys(str(b.params["looser"]) for b in site.checks if b.params.get("looser")):
            print(f"warning: site {site.id}: {note}", file=sys.stderr)
    left = unchecked(config)
    print(f"{args.config}: OK; {len(left)} channel(s) left unchecked by any discharge rule"
          + (" (pretreat rules --config FILE says why)" if left else ""))
    return 0
