"""The optional ``[influx]`` table of a site file: where telemetry goes, and how the durable queue is bounded.

```toml
[influx]
url = "https://influx.example.org:8086"   # http:// or https://
org = "water-utility"                      # InfluxDB 2.x organisation (empty for 1.8 / VictoriaMetrics)
bucket = "pretreatment"                    # bucket (InfluxDB 2.x) or "db/rp" (1.8 compatibility API)
token_file = "/etc/pretreat/influx.token"  # relative paths: from the site file's folder
# token_credential = "influx-token"        # or $CREDENTIALS_DIRECTORY/influx-token (LoadCredential=)
auth_scheme = "token"                      # "token" (InfluxDB 2.x/3.x) or "basic" (file: "user:password")
verify_tls = true
batch_size = 5000                          # points per HTTP write
flush_interval = 1.0                       # s: how often queued samples are made durable and sent
timeout = 10.0                             # s per HTTP request
max_backoff = 30.0                         # s: cap of the jittered retry delay during an outage
queue_path = "var/influx-queue.sqlite"     # default: next to the historian
disk_budget_mb = 1024                      # queue payload bound; beyond it the oldest points are dropped
alarm_threshold_pct = 80                   # queue fill that raises the queue alarm
```

The token is never read here and never stored in the settings: `InfluxSettings.read_token()` reads it when
the sink starts, so no repr, log line or health snapshot of the configuration can carry it. The loader only
checks that a token file exists and is readable (a credential name is checked at start, because
``$CREDENTIALS_DIRECTORY`` exists only inside the service).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from config.errors import MISSING
from config.reader import Reader

_KEYS = {
    "url", "org", "bucket", "token_file", "token_credential", "auth_scheme", "verify_tls", "batch_size",
    "flush_interval", "timeout", "max_backoff", "queue_path", "disk_budget_mb", "alarm_threshold_pct",
}
_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_CREDENTIAL = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


class AuthScheme(StrEnum):
    TOKEN = "token"  # "Authorization: Token <token>" (InfluxDB 2.x / 3.x)
    BASIC = "basic"  # "Authorization: Basic base64(user:password)" (1.8 compat, proxies, VictoriaMetrics)


class TokenError(Exception):
    """The token cannot be read at start. The message names the source, never the secret."""


@dataclass(frozen=True, slots=True)
class InfluxSettings:
    """Validated ``[influx]`` settings. Durations are seconds; ``disk_budget_mb`` is MiB of queued payload."""

    url: str
    bucket: str
    queue_path: Path
    org: str = ""
    token_file: Path | None = None
    token_credential: str = ""
    auth_scheme: AuthScheme = AuthScheme.TOKEN
    verify_tls: bool = True
    batch_size: int = 5000
    flush_interval: float = 1.0
    timeout: float = 10.0
    max_backoff: float = 30.0
    disk_budget_mb: float = 1024.0
    alarm_threshold_pct: float = 80.0

    @property
    def budget_bytes(self) -> int:
        return max(1, int(self.disk_budget_mb * 1024 * 1024))

    def read_token(self) -> str:
        """The token (or ``user:password`` for basic auth); empty when no source is configured.

        Raises `TokenError` naming the file or credential that could not be read.
        """
        if self.token_file is not None:
            return _read_secret(self.token_file, f"token_file {self.token_file}")
        if self.token_credential:
            creds = os.environ.get("CREDENTIALS_DIRECTORY", "")
            if not creds:
                raise TokenError(f"token_credential {self.token_credential!r}: $CREDENTIALS_DIRECTORY is not "
                                 "set (run under systemd with LoadCredential=, or use token_file)")
            return _read_secret(Path(creds) / self.token_credential,
                                f"credential {self.token_credential!r} in $CREDENTIALS_DIRECTORY")
        return ""


def _read_secret(path: Path, what: str) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenError(f"{what}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise TokenError(f"{what}: not UTF-8 text") from None
    if not token or "\n" in token:
        raise TokenError(f"{what}: expected exactly one non-empty line")
    return token


def default_queue_path(historian: Path) -> Path:
    """Next to the historian: ``pretreat.sqlite`` → ``pretreat.influx-queue.sqlite``."""
    return historian.with_name(f"{historian.stem}.influx-queue.sqlite")


def parse_influx(raw: dict[str, Any], reader: Reader, base: Path, *,
                 historian: Path | None = None) -> InfluxSettings | None:
    """Parse the ``[influx]`` table of a whole site file (``raw`` is the top-level TOML document).

    Returns None when the table is absent (telemetry disabled). Mistakes are recorded on ``reader`` with
    their key paths, like the rest of the loader; the returned settings are then placeholders.
    ``historian`` (the resolved historian path) sets the default queue location.
    """
    if "influx" not in raw:
        return None
    t = reader.table(raw, "influx", "")
    p = "influx"
    reader.unknown_keys(t, p, _KEYS)
    url = reader.text(t, "url", p, check=lambda v: _URL.match(v) is not None,
                     expected="an http:// or https:// URL")
    token_file = reader.text(t, "token_file", p, default="")
    credential = reader.text(t, "token_credential", p, default="",
                            check=lambda v: v == "" or _CREDENTIAL.match(v) is not None,
                            expected="a systemd credential name (letters, digits, '_', '-', '.')")
    if token_file and credential:
        reader.error(f"{p}.token_credential", credential, "either token_file or token_credential, not both")
    token_path = _resolve(token_file, base) if token_file else None
    if token_path is not None and not os.access(token_path, os.R_OK):
        reader.error(f"{p}.token_file", token_file, "a readable file holding the token")
    queue = reader.text(t, "queue_path", p, default="")
    if queue:
        queue_path = _resolve(queue, base)
    else:
        queue_path = default_queue_path(historian or base / "var" / "pretreat.sqlite")
    return InfluxSettings(
        url=url.rstrip("/"), org=reader.text(t, "org", p, default=""),
        bucket=reader.text(t, "bucket", p, check=bool, expected="a non-empty bucket name"),
        token_file=token_path, token_credential=credential,
        auth_scheme=reader.enum(t, "auth_scheme", p, AuthScheme, default="token"),
        verify_tls=_bool(t, "verify_tls", p, reader, default=True),
        batch_size=reader.integer(t, "batch_size", p, default=5000, minimum=1, maximum=100_000),
        flush_interval=reader.number(t, "flush_interval", p, default=1.0, minimum=0.01, maximum=60),
        timeout=reader.number(t, "timeout", p, default=10.0, minimum=0.1, maximum=300),
        max_backoff=reader.number(t, "max_backoff", p, default=30.0, minimum=0.1, maximum=3600),
        queue_path=queue_path,
        disk_budget_mb=reader.number(t, "disk_budget_mb", p, default=1024.0, minimum=1.0),
        alarm_threshold_pct=reader.number(t, "alarm_threshold_pct", p, default=80.0, minimum=1.0,
                                          maximum=100.0),
    )


def _resolve(value: str, base: Path) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base / path


def _bool(t: dict[str, Any], key: str, path: str, reader: Reader, *, default: bool) -> bool:
    value = t.get(key, default)
    if value is MISSING or not isinstance(value, bool):
        reader.error(f"{path}.{key}", value, "true or false")
        return default
    return value
