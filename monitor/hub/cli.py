"""`pretreat hub --config HUB.toml` runs a hub; `pretreat hub status --config HUB.toml` reads its health file.

Status exit codes (as `pretreat status`): 0 healthy, 1 not running (no file, a file older than ``--max-age`` s,
or one marked stopped), 2 the hub file is invalid or unreadable, 3 degraded (broker or database unreachable, or
an ``edge_offline``/``edge_gap`` alarm open).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from monitor.hub.config import HubConfigError, load_hub_config

log = logging.getLogger("pretreat.hub")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("run", "status"), default="run",
                        help="run the hub (default) or show a running hub's health")
    parser.add_argument("--config", type=Path, required=True, help="the hub's TOML file")
    parser.add_argument("--json", action="store_true", help="status: print the health snapshot as JSON")
    parser.add_argument("--max-age", type=float, default=30.0,
                        help="status: seconds after which the health file means the hub is not running")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        cfg = load_hub_config(args.config)
    except HubConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.action == "status":
        return status(cfg.health_file, as_json=args.json, max_age=args.max_age)
    from monitor.hub.service import Hub  # paho and psycopg only for the running hub

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    Hub(cfg).run(stop)
    return 0


def status(path: Path, *, as_json: bool, max_age: float) -> int:
    try:
        snap: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"hub not running: no readable health file {path} ({exc})")
        return 1
    if as_json:
        print(json.dumps(snap, indent=1))
    age = time.time() - float(snap.get("at", 0))
    if not as_json:
        print(render(snap, age))
    if snap.get("state") == "stopped" or age > max_age:
        return 1
    return 3 if (snap.get("alarms") or snap.get("database_error") or not snap.get("broker_connected")) else 0


def render(snap: dict[str, Any], age: float) -> str:
    lines = [f"hub {snap.get('hub')} (group {snap.get('group')}): {snap.get('state')}, snapshot {age:.0f} s old, "
             f"broker {'connected' if snap.get('broker_connected') else 'NOT connected'}, database "
             f"{'unavailable: ' + str(snap['database_error']) if snap.get('database_error') else 'ok'}",
             f"  {snap.get('messages', 0)} messages, {snap.get('readings_inserted', 0)} readings stored "
             f"({snap.get('readings_received', 0)} received), {snap.get('rejected', 0)} refused, "
             f"queue {snap.get('queued', 0)} (at most {snap.get('queue_bound', '?')}, peak "
             f"{snap.get('inbox_peak', 0)})"]
    for e in snap.get("edges", []):
        state = "offline (NDEATH)" if e.get("died_at") else "born" if e.get("born_at") else "seen"
        lines.append(f"  edge {e['node']}: {state}, sites {', '.join(e['sites']) or '-'}, bdSeq {e['bdseq']}, "
                     f"last seen {e['last_seen']}, {e['missing']} missing")
    for a in snap.get("alarms", []):
        lines.append(f"  ! {a['kind']} {a['node']} (sites {', '.join(a['sites']) or '-'}): {a['detail']} "
                     f"since {a['raised_at']}")
    return "\n".join(lines)
