"""`pretreat`: the command line. Each subcommand parses its arguments here and calls the module that owns it.

Exit codes: 0 success, 1 a runtime failure, 2 bad usage or an invalid configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from monitor import clock
from monitor.logs import FORMATS, configure_logging

# subcommand -> ("module:function" that adds its arguments, help text). Imported lazily so that
# `pretreat check-config` does not pay for pymodbus, and a broken optional part cannot break the rest.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("monitor.commands:add_run", "run the monitoring daemon"),
    "check-config": ("monitor.commands:add_check_config", "validate a site file and list every error"),
    "rules": ("monitor.rules_cli:add_arguments",
              "every rule in force per site and channel: limit, reading, citation; channels left unchecked"),
    "readings": ("monitor.export:add_arguments", "export recorded readings of one channel"),
    "tail": ("monitor.tail:add_arguments", "follow readings as the daemon records them"),
    "alarms": ("monitor.alarms_cli:add_alarms", "list, acknowledge, shelve, reset and watch alarms"),
    "journal": ("monitor.alarms_cli:add_journal", "verify the tamper-evident exceedance and alarm journal"),
    "exceedances": ("monitor.exceedances:add_arguments", "exceedance history for enforcement (table, CSV, JSON)"),
    "gateway": ("monitor.alarms_cli:add_gateway", "the Modbus TCP gateway's register map for plant SCADA"),
    "influx": ("monitor.influx_cli:add_arguments", "InfluxDB telemetry tools (backfill)"),
    "report": ("monitor.reports.cli:add_report",
               "compliance reports, daily summaries, pH accounting, episode annotations"),
    "obligations": ("monitor.obligations_cli:add_arguments",
                    "what the episodes oblige the industry to do (deadlines, cited), and recording it done"),
    "nov": ("monitor.notices.cli:add_arguments", "draft a notice of violation for one recorded episode"),
    "labs": ("monitor.reports.cli:add_labs", "import composite-sample lab results (CSV)"),
    "calibration": ("monitor.calibration_cli:add_arguments",
                    "the calibration log of each channel: add an entry, list statuses and entries"),
    "snc": ("monitor.reports.cli:add_snc", "significant noncompliance screen over lab results"),
    "sim": ("simulators.cli:add_arguments", "serve simulated instruments of a site on loopback"),
    "maps": ("monitor.maps_cli:add_arguments",
             "the shipped register maps (instrument catalogue), each with the vendor's manual cited"),
    "seed": ("simulators.seed:add_arguments",
             "record days of simulated normal operation through the daemon (demos, trials of the rules)"),
    "replay": ("monitor.replay:add_arguments", "run the compliance checks over recorded readings (CSV)"),
    "audit": ("monitor.commands:add_audit",
              "check the recorded episodes against a replay of the stored readings (exit 1 on a mismatch)"),
    "status": ("monitor.status:add_arguments",
               "health of the running daemon: instruments, last readings, queues, alarms"),
    "console": ("monitor.console.cli:add_console", "serve the operator console (browser) on 127.0.0.1"),
    "user": ("monitor.console.cli:add_user", "add, list or remove operator console users"),
    "hub": ("monitor.hub.cli:add_arguments",
            "the county hub: edges' Sparkplug B off the central broker into PostgreSQL; `hub status`"),
}


def build_parser(only: str | None = None, *, listing: bool = False) -> argparse.ArgumentParser:
    """The full parser, or (``only``) one with just the named subcommand's module imported: each `pretreat`
    call then pays only for what it runs (pymodbus and influxdb-client cost ~0.6 s and ~70 MB to import).

    ``listing``: no subcommand module is imported at all; each subcommand is an empty parser with its help text
    from SUBCOMMANDS. That is enough for `pretreat --help`, a missing or misspelt command, which only list the
    commands (importing all of them took 2 s, more than any one command's start)."""
    parser = argparse.ArgumentParser(prog="pretreat",
                                     description="pretreat-monitor: industrial pretreatment monitoring")
    _log_options(parser, default=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (target, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        if listing:
            sub.add_parser(name, help=help_text, description=help_text)
            continue
        module_name, func_name = target.split(":")
        try:
            add: Callable[[argparse.ArgumentParser], None] = getattr(
                importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:  # pragma: no cover - only while a part is missing
            p = sub.add_parser(name, help=f"(unavailable: {exc})")
            p.set_defaults(func=lambda _a, e=exc: _unavailable(e))
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        _log_options(command, default=False)
        add(command)
    return parser


def _log_options(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """``--log-level``/``--log-format`` before the subcommand or after it (``pretreat run --log-format json``).
    The subcommand's copies default to SUPPRESS: argparse lets a subparser's defaults overwrite what was
    given before the subcommand."""
    parser.add_argument("--log-level", default="INFO" if default else argparse.SUPPRESS,
                        help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    parser.add_argument("--log-format", choices=FORMATS, default="text" if default else argparse.SUPPRESS,
                        help="text (default: for operators, local time, readings at their resolution), json "
                             "(one object a line, UTC, every field: for journald and log shippers) or kv "
                             "(key=value); under systemd, lines carry journald priorities")


def _unavailable(exc: Exception) -> int:
    print(f"pretreat: this command is unavailable: {exc}", file=sys.stderr)
    return 1


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if it is a known one (skipping `--log-level X`)."""
    it = iter(argv)
    for word in it:
        if word in ("--log-level", "--log-format"):
            next(it, None)
        elif not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen(argv)
    # No known command on the line: argparse will only print the help or an error, so nothing is imported.
    parser = build_parser(chosen, listing=chosen is None)
    args = parser.parse_args(argv)
    if chosen is None:  # pragma: no cover - argparse always exits above; the full parser, should it not
        parser = build_parser()
        args = parser.parse_args(argv)
    try:
        configure_logging(level=args.log_level, fmt=args.log_format)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        clock.install_from_env()  # `make demo` only: see monitor.clock
    except ValueError as exc:
        parser.error(str(exc))
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        code = func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return _closed_pipe()
    return code


def _closed_pipe() -> int:
    """The reader of standard output went away (`| head` has what it wanted): end quietly, as `cat` does.
    Standard output is pointed at /dev/null so that the interpreter's flush at exit does not complain."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
