"""What the hub's end-to-end tests share: `pretreat hub` as a child process with its own TOML file, and the
PostgreSQL readings read back for a reading-by-reading comparison."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.support import PATIENCE, Mosquitto, PostgreSQL, wait_until

ROOT = Path(__file__).resolve().parents[1]


class HubProcess:
    """`pretreat hub --config` in its own process (a test SIGKILLs it)."""

    def __init__(self, tmp: Path, name: str, broker: Mosquitto, db: PostgreSQL, *, port: int | None = None,
                 **hub: Any) -> None:
        """``port``: the broker's port as the hub reaches it (a `LinkProxy`'s), by default the broker's own."""
        self.config = tmp / f"{name}.toml"
        settings = {"client_id": name, "group": "county", "health_file": f"{name}.health.json",
                    "edge_silence": 60, "gap_grace": 1, "health_interval": 0.3, "max_batch": 200, **hub}
        lines = ["[broker]", 'host = "127.0.0.1"', f"port = {port or broker.port}", "[hub]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
        lines += ["[database]", f'url = "{db.url}"']
        self.config.write_text("\n".join(lines) + "\n")
        self.health = tmp / f"{name}.health.json"
        self.log = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.health.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "hub", "--config", str(self.config)],
                                         cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        assert wait_until(lambda: self.snapshot().get("broker_connected")), f"hub never connected: {self.log}"

    def snapshot(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.health.read_text()))
        except (OSError, ValueError):
            return {}

    def status(self) -> subprocess.CompletedProcess[str]:
        """`pretreat hub status` as an operator runs it (exit 0 healthy, 3 degraded)."""
        return subprocess.run([sys.executable, "-m", "monitor.cli", "hub", "status", "--config", str(self.config)],
                              cwd=ROOT, capture_output=True, text=True)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def count(db: PostgreSQL, sql: str = "SELECT count(*) FROM readings", args: tuple[Any, ...] = ()) -> int:
    """One number from the database, -1 while it is unreachable."""
    try:
        with psycopg.connect(db.url, connect_timeout=2) as conn:
            return int(conn.execute(sql, args).fetchone()[0])  # type: ignore[index]
    except psycopg.OperationalError:
        return -1


def alarms(db: PostgreSQL, *, open_only: bool = True) -> list[tuple[Any, ...]]:
    """(kind, node, sites, detail) of the hub's alarms, the open ones or all of them."""
    with psycopg.connect(db.url) as conn:
        return conn.execute("SELECT kind, node, sites, detail FROM hub_alarms"
                            + (" WHERE cleared_at IS NULL" if open_only else "") + " ORDER BY kind, node").fetchall()

