"""Small subcommands that only read configuration."""

from __future__ import annotations

import argparse
import sys

from config.loader import check_config


def add_check_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="FILE", help="site file (TOML)")
    p.set_defaults(func=_check_config)


def _check_config(args: argparse.Namespace) -> int:
    errors = check_config(args.config)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"{len(errors)} error(s); nothing started", file=sys.stderr)
        return 2
    print(f"{args.config}: OK")
    return 0
