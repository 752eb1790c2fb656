"""The optional ``[uplink]`` table of a site file: the central MQTT broker the daemon publishes its record to
in Sparkplug B v1.0 (`monitor.uplink`), and how the durable queue that bridges an outage is bounded.

```toml
[uplink]
host = "broker.county.example.org"
port = 1883                         # 8883 with tls = true
group = "pretreat"                  # Sparkplug group_id
node = "acme-plating"               # Sparkplug edge_node_id (default: the first site's id, sanitised)
client_id = ""                      # default "pretreat-edge-<node>"
username = ""                       # with password_file: MQTT username/password authentication
password_file = ""                  # relative paths: from the site file's folder
tls = false                         # TLS with the system's CA certificates
keepalive = 30                      # s; the broker publishes the NDEATH last will after 1.5 × this silence
batch_size = 500                    # readings per DDATA message at most
flush_interval = 0.5                # s: how often committed readings are queued and sent
backlog_rate = 5000                 # readings/s at most while the backlog of an outage drains
max_backoff = 30.0                  # s: cap of the jittered reconnect delay
queue_path = ""                     # default: next to the historian (<historian>.uplink-queue.sqlite)
disk_budget_mb = 2048               # queue payload bound; beyond it the oldest readings are dropped (counted)
```

Why the names must be plain: a Sparkplug topic is ``spBv1.0/<group>/<MSG>/<node>/<device>``, so a ``/``,
``+`` or ``#`` in a group or node id would change the topic's meaning. The password is never read here and
never kept in the settings (read at start, as the InfluxDB token is).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.errors import MISSING
from config.reader import Reader

_KEYS = {
    "host", "port", "group", "node", "client_id", "username", "password_file", "tls", "keepalive", "batch_size",
    "flush_interval", "backlog_rate", "max_backoff", "queue_path", "disk_budget_mb",
}
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a Sparkplug group or edge node id (no '/', '+', '#')
_HOST = re.compile(r"^[A-Za-z0-9.:_\[\]-]{1,253}$")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True, slots=True)
class UplinkSettings:
    """Validated ``[uplink]`` settings. Durations are seconds, ``backlog_rate`` readings per second,
    ``disk_budget_mb`` MiB of queued payload."""

    host: str
    node: str
    queue_path: Path
    port: int = 1883
    group: str = "pretreat"
    client_id: str = ""
    username: str = ""
    password_file: Path | None = None
    tls: bool = False
    keepalive: int = 30
    batch_size: int = 500
    flush_interval: float = 0.5
    backlog_rate: float = 5000.0
    max_backoff: float = 30.0
    disk_budget_mb: float = 2048.0

    @property
    def budget_bytes(self) -> int:
        return max(1, int(self.disk_budget_mb * 1024 * 1024))

    @property
    def mqtt_client_id(self) -> str:
        return self.client_id or f"pretreat-edge-{self.node}"

    def read_password(self) -> str | None:
        """The password (first line of ``password_file``), or None without one. Raises OSError."""
        if self.password_file is None:
            return None
        return self.password_file.read_text(encoding="utf-8").strip()


def sanitise(site_id: str) -> str:
    """A site id as a Sparkplug node id: characters outside [A-Za-z0-9_-] become '_'."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", site_id)[:64] or "edge"


def default_queue_path(historian: Path) -> Path:
    """Next to the historian: ``pretreat.sqlite`` → ``pretreat.uplink-queue.sqlite``."""
    return historian.with_name(f"{historian.stem}.uplink-queue.sqlite")


def parse_uplink(raw: dict[str, Any], reader: Reader, base: Path, *, historian: Path,
                 first_site: str) -> UplinkSettings | None:
    """Parse ``[uplink]`` of a whole site file (``raw`` is the top-level document); None when absent.

    Mistakes are recorded on ``reader`` with their key paths; the returned settings are then placeholders.
    ``first_site``: the id of the file's first site, the default edge node id."""
    if "uplink" not in raw:
        return None
    p = "uplink"
    t = reader.table(raw, "uplink", "")
    reader.unknown_keys(t, p, _KEYS)
    names = "1 to 64 letters, digits, '_' or '-' (a Sparkplug id: no '/', '+', '#')"
    host = reader.text(t, "host", p, check=lambda v: _HOST.match(v) is not None, expected="a broker host name or "
                      "address")
    group = reader.text(t, "group", p, default="pretreat", check=lambda v: NAME.match(v) is not None,
                       expected=names)
    node = reader.text(t, "node", p, default=sanitise(first_site), check=lambda v: NAME.match(v) is not None,
                      expected=names)
    client_id = reader.text(t, "client_id", p, default="", check=lambda v: v == "" or _CLIENT_ID.match(v) is not None,
                           expected="an MQTT client id (letters, digits, '_', '-', '.')")
    password = reader.text(t, "password_file", p, default="")
    password_path = _resolve(password, base) if password else None
    if password_path is not None and not os.access(password_path, os.R_OK):
        reader.error(f"{p}.password_file", password, "a readable file holding the MQTT password")
    username = reader.text(t, "username", p, default="")
    if password_path is not None and not username:
        reader.error(f"{p}.username", "", "a username to go with password_file")
    queue = reader.text(t, "queue_path", p, default="")
    tls = t.get("tls", False)
    if tls is MISSING or not isinstance(tls, bool):
        reader.error(f"{p}.tls", tls, "true or false")
        tls = False
    return UplinkSettings(
        host=host, port=reader.integer(t, "port", p, default=8883 if tls else 1883, minimum=1, maximum=65535),
        group=group, node=node, client_id=client_id, username=username, password_file=password_path, tls=tls,
        keepalive=reader.integer(t, "keepalive", p, default=30, minimum=5, maximum=3600),
        batch_size=reader.integer(t, "batch_size", p, default=500, minimum=1, maximum=10_000),
        flush_interval=reader.number(t, "flush_interval", p, default=0.5, minimum=0.01, maximum=60),
        backlog_rate=reader.number(t, "backlog_rate", p, default=5000.0, minimum=1.0, maximum=10_000_000),
        max_backoff=reader.number(t, "max_backoff", p, default=30.0, minimum=0.1, maximum=3600),
        queue_path=_resolve(queue, base) if queue else default_queue_path(historian),
        disk_budget_mb=reader.number(t, "disk_budget_mb", p, default=2048.0, minimum=1.0),
    )


def _resolve(value: str, base: Path) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base / path
