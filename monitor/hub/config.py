"""The hub's own small TOML file (``pretreat hub --config HUB.toml``), validated with every error listed.

Example::

    [broker]
    host = "broker.county.example"   # the central MQTT 5 broker
    port = 1883
    [hub]
    client_id = "hub-a"               # unique per hub process; its broker session survives a restart
    group = "pretreat-hubs"           # the shared-subscription group every hub of the county joins
    sparkplug_group = "pretreat"      # the edges' [uplink] group
    health_file = "/var/lib/pretreat-hub/hub-a.health.json"
    edge_silence = 60                 # s without a message after which an edge is offline
    [database]
    url = "postgresql://pretreat@db.county.example/pretreat"
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.uplink import contract

NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class HubConfigError(ValueError):
    """The hub's file is unreadable or invalid; the message lists every problem with its key."""


@dataclass(frozen=True)
class HubConfig:
    broker_host: str
    broker_port: int
    client_id: str
    group: str
    sparkplug_group: str
    database_url: str
    health_file: Path
    edge_silence: float = 60.0
    """s without any message from an edge (NDEATH aside) after which it is offline (strictly more than)."""
    gap_grace: float = 5.0
    """s a missing Sparkplug seq may stay missing (another hub of the group may still be committing it)."""
    max_batch: int = 500
    """MQTT messages a database transaction takes at most; each is acknowledged after the commit."""
    receive_maximum: int = 1000
    """Unacknowledged QoS 1 messages the broker may send ahead (MQTT 5 Receive Maximum); bounds a batch too."""
    session_expiry: int = 7 * 86400
    """s the broker keeps this hub's session (its unacknowledged and queued messages) while it is down."""
    health_interval: float = 2.0
    keepalive: int = 30

    @property
    def subscriptions(self) -> tuple[str, str]:
        """The shared Sparkplug namespace of the group and the edges' JSON event topics."""
        return contract.subscriptions(self.sparkplug_group, share=self.group)


def load_hub_config(path: Path) -> HubConfig:
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise HubConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise HubConfigError(f"{path}: not valid TOML: {exc}") from exc
    errors: list[str] = []
    broker, hub, db = (_table(raw, name, errors) for name in ("broker", "hub", "database"))
    for extra in sorted(set(raw) - {"broker", "hub", "database"}):
        errors.append(f"[{extra}]: unknown section (expected [broker], [hub], [database])")

    def get(table: dict[str, Any], section: str, key: str, kind: type, default: Any = None) -> Any:
        value = table.get(key, default)
        if value is None:
            errors.append(f"[{section}] {key}: missing")
        elif kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        elif not isinstance(value, kind) or isinstance(value, bool):
            errors.append(f"[{section}] {key}: expected {kind.__name__}, got {value!r}")
        return value

    values = {
        "broker_host": get(broker, "broker", "host", str, "127.0.0.1"),
        "broker_port": get(broker, "broker", "port", int, 1883),
        "keepalive": get(broker, "broker", "keepalive", int, 30),
        "client_id": get(hub, "hub", "client_id", str),
        "group": get(hub, "hub", "group", str, "pretreat-hubs"),
        "sparkplug_group": get(hub, "hub", "sparkplug_group", str, "pretreat"),
        "health_file": get(hub, "hub", "health_file", str, "hub.health.json"),
        "edge_silence": get(hub, "hub", "edge_silence", float, 60.0),
        "gap_grace": get(hub, "hub", "gap_grace", float, 5.0),
        "max_batch": get(hub, "hub", "max_batch", int, 500),
        "receive_maximum": get(hub, "hub", "receive_maximum", int, 1000),
        "session_expiry": get(hub, "hub", "session_expiry", int, 7 * 86400),
        "health_interval": get(hub, "hub", "health_interval", float, 2.0),
        "database_url": get(db, "database", "url", str),
    }
    _check_values(values, errors)
    _check_keys(broker, "broker", {"host", "port", "keepalive"}, errors)
    _check_keys(hub, "hub", {k for k in values if k not in ("broker_host", "broker_port", "keepalive",
                                                            "database_url")}, errors)
    _check_keys(db, "database", {"url"}, errors)
    if errors:
        raise HubConfigError(f"{path}: {len(errors)} error(s):\n  " + "\n  ".join(errors))
    health = Path(values["health_file"])
    values["health_file"] = health if health.is_absolute() else path.parent / health
    return HubConfig(**values)


def _table(raw: dict[str, Any], name: str, errors: list[str]) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        errors.append(f"[{name}]: expected a table")
        return {}
    return value


def _check_keys(table: dict[str, Any], section: str, known: set[str], errors: list[str]) -> None:
    errors.extend(f"[{section}] {key}: unknown key (known: {', '.join(sorted(known))})"
                  for key in sorted(set(table) - known))


def _check_values(v: dict[str, Any], errors: list[str]) -> None:
    for key, section in (("client_id", "hub"), ("group", "hub"), ("sparkplug_group", "hub")):
        if isinstance(v[key], str) and not NAME.match(v[key]):
            errors.append(f"[{section}] {key}: {v[key]!r} must be letters, digits, '_' or '-' (an MQTT topic level)")
    if isinstance(v["broker_port"], int) and not 0 < v["broker_port"] < 65536:
        errors.append(f"[broker] port: {v['broker_port']} is not a TCP port (1..65535)")
    if isinstance(v["database_url"], str) and not v["database_url"].startswith(("postgresql://", "postgres://")):
        errors.append(f"[database] url: {v['database_url']!r} is not a postgresql:// URL")
    for key, low in (("edge_silence", 1), ("gap_grace", 0), ("max_batch", 1), ("receive_maximum", 1),
                     ("session_expiry", 60), ("health_interval", 0.1), ("keepalive", 5)):
        if isinstance(v[key], int | float) and not isinstance(v[key], bool) and v[key] < low:
            errors.append(f"[{'broker' if key == 'keepalive' else 'hub'}] {key}: {v[key]} is below {low}")
