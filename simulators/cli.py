"""`pretreat sim`: serve a site's instruments on their configured links, optionally playing a scenario.

Exit codes: 0 stopped cleanly (SIGINT/SIGTERM or ``--duration`` reached), 1 could not serve (a port in use,
no MQTT broker), 2 bad usage, site file or scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from simulators.broker import LocalBroker, missing_brokers
from simulators.scenario import shipped_scenarios


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE",
                   help="site file (TOML) whose instruments to serve")
    p.add_argument("--scenario", metavar="NAME",
                   help=f"a shipped scenario ({', '.join(shipped_scenarios())}) or a scenario file; "
                        "default: normal operation")
    p.add_argument("--speed", type=float, default=1.0, metavar="X",
                   help="simulated seconds per wall-clock second (default 1; 60 plays an hour in a minute)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S simulated seconds (S / X of wall time); default: run until Ctrl-C")
    p.add_argument("--tick", type=float, default=0.1, metavar="S",
                   help="wall seconds between updates of the simulated values (default 0.1)")
    p.add_argument("--no-broker", action="store_true",
                   help="do not start a local mosquitto for MQTT instruments configured on a loopback "
                        "port that nothing listens on")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.speed <= 0 or args.tick <= 0 or (args.duration is not None and args.duration <= 0):
        print("pretreat sim: --speed, --tick and --duration must be positive", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigErrors as exc:
        return _config_errors(exc)
    brokers: list[LocalBroker] = []
    try:
        if not args.no_broker:
            _start_brokers(config, brokers)
        return asyncio.run(_serve(config, args))
    except ConfigErrors as exc:
        return _config_errors(exc)
    except (OSError, ConnectionError, RuntimeError) as exc:  # port taken, no broker, no socat
        print(f"pretreat sim: cannot serve: {exc}", file=sys.stderr)
        return 1
    finally:
        for b in brokers:
            b.stop()


async def _serve(config: SiteConfig, args: argparse.Namespace) -> int:
    """Run until the duration passes or SIGINT/SIGTERM arrives; both stop the simulator cleanly."""
    from simulators.runner import run_sim  # pymodbus, aiohttp, paho: not for `pretreat sim --help`

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await run_sim(config, scenario=args.scenario, speed=args.speed, duration=args.duration,
                      stop=stop, tick=args.tick)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    return 0


def _start_brokers(config: SiteConfig, started: list[LocalBroker]) -> None:
    """Append each broker as soon as it runs, so the caller stops it even if a later one fails."""
    for port in missing_brokers(config):
        try:
            broker = LocalBroker(port=port)
        except FileNotFoundError as exc:
            print(f"pretreat sim: no broker on 127.0.0.1:{port} and {exc}", file=sys.stderr)
            continue
        broker.start()
        started.append(broker)
        print(f"pretreat sim: started mosquitto on 127.0.0.1:{port} (stopped on exit; --no-broker to skip)")


def _config_errors(exc: ConfigErrors) -> int:
    for e in exc.errors:
        print(e, file=sys.stderr)
    print(f"{len(exc.errors)} error(s); nothing started", file=sys.stderr)
    return 2
