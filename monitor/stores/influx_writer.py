"""One HTTP write of line protocol, its outcome classified, and the bisection that isolates bad points.

Sending uses `influxdb-client`'s WriteApi in SYNCHRONOUS mode, one request per batch, with the client's own
retries disabled (``retries=False``): its batching mode drops points during outages
(influxdb-client-python #80, #198, #332), and we own the retry loop so that a point leaves the durable queue
only after the server answered 2xx.

Outcomes (`Outcome`):
- OK: 2xx.
- MALFORMED: 400/422 — the server rejected the content. The batch is bisected to find the offending lines,
  which are quarantined; the rest is written. (InfluxDB 2.x rejects the whole batch; InfluxDB 1.8 and
  VictoriaMetrics write the lines before the bad one: bisection re-sends those, and the same
  series + timestamp overwrites in InfluxDB.)
- TOO_LARGE: 413 — split like MALFORMED; a single line that is still too large is quarantined.
- AUTH: 401/403 — a configuration problem; fatal at start-up, during a run the queue is kept and retried.
- NOT_FOUND: 404 — no such bucket/org (or not an InfluxDB write endpoint); treated like AUTH.
- UNAVAILABLE: connection errors, timeouts, 429 and 5xx — an outage: keep the queue, back off, retry.

Surprises in influxdb-client 1.50 worth knowing: ``post_write`` requires ``org`` not None (we pass ``""``
when no org is configured, which 1.8-compat servers and VictoriaMetrics ignore); ``auth_basic=True`` sends
``Authorization: Basic base64(token)``, so the token holds ``user:password``; with ``retries=False`` urllib3
raises its own exceptions (``NewConnectionError``, ``ProtocolError``, ``ReadTimeoutError``), not
``ApiException``; ``client.health()`` reports "fail" against VictoriaMetrics, so start-up validation is a
real write instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from config.influx import AuthScheme, InfluxSettings

if TYPE_CHECKING:
    from influxdb_client.rest import ApiException

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    OK = "ok"
    MALFORMED = "malformed"
    TOO_LARGE = "too_large"
    AUTH = "auth"
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"

    @property
    def splittable(self) -> bool:
        return self in (Outcome.MALFORMED, Outcome.TOO_LARGE)


@dataclass(frozen=True, slots=True)
class WriteResult:
    outcome: Outcome
    status: int | None = None  # HTTP status, None for transport failures
    message: str = ""  # server's error text or the transport exception (never the token)
    retry_after: float | None = None  # seconds, from a 429/503 Retry-After header

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


OK = WriteResult(Outcome.OK, 204)


def classify_status(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.OK
    if status in (400, 422):
        return Outcome.MALFORMED
    if status == 413:
        return Outcome.TOO_LARGE
    if status in (401, 403):
        return Outcome.AUTH
    if status == 404:
        return Outcome.NOT_FOUND
    return Outcome.UNAVAILABLE  # 429, 5xx, and anything unexpected: retry, never drop


class LineWriter:
    """Posts newline-separated line protocol (ms precision) to ``{url}/api/v2/write``. Thread-confined:
    use one LineWriter per sending thread."""

    def __init__(self, *, settings: InfluxSettings, token: str) -> None:
        # Imported here, not with the module: influxdb-client and urllib3 took ~0.3 s (idle machine) of every
        # `pretreat run`'s start, with or without an [influx] section (bench/bench_peers.py times the starts).
        import urllib3
        from influxdb_client import InfluxDBClient, WritePrecision
        from influxdb_client.client.write_api import SYNCHRONOUS
        from influxdb_client.rest import ApiException

        self._api_error = ApiException
        self._transport_errors = (urllib3.exceptions.HTTPError, OSError)
        self._ms: Any = WritePrecision.MS  # a plain "ms" string, though `write` is annotated to take the class
        self.settings = settings
        basic = settings.auth_scheme is AuthScheme.BASIC
        self._client = InfluxDBClient(
            url=settings.url, token=token, org=settings.org, timeout=int(settings.timeout * 1000),
            verify_ssl=settings.verify_tls, retries=False, auth_basic=basic and bool(token))
        self._api = self._client.write_api(write_options=SYNCHRONOUS)
        self.requests = 0

    def write(self, body: bytes) -> WriteResult:
        """One request; never raises for server or network trouble (that is what the result is for)."""
        self.requests += 1
        try:
            self._api.write(bucket=self.settings.bucket, org=self.settings.org, record=body,
                            write_precision=self._ms)
        except self._api_error as exc:
            status = int(exc.status or 0)
            return WriteResult(classify_status(status), status, _api_message(exc), _retry_after(exc))
        except self._transport_errors as exc:
            return WriteResult(Outcome.UNAVAILABLE, None, f"{type(exc).__name__}: {exc}")
        return OK

    def close(self) -> None:
        self._api.close()
        self._client.close()


def _api_message(exc: ApiException) -> str:
    body = exc.body
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or exc.reason or "")
    return text.strip()[:500]


def _retry_after(exc: ApiException) -> float | None:
    headers: Any = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


Quarantine = Callable[[bytes, WriteResult], None]


def deliver(write: Callable[[bytes], WriteResult], payloads: list[bytes],
            quarantine: Quarantine) -> WriteResult:
    """Write ``payloads`` (each one or more newline-separated lines) in one request; if the server rejects
    the content, bisect the lines until each rejected line is alone, hand it to ``quarantine`` and write the
    rest.

    Returns OK when every line was either acknowledged or quarantined, so the caller can acknowledge the
    whole batch; otherwise the first non-content failure (outage, auth), and the caller keeps the batch.
    Lines written before such an interruption are written again on the retry (at-least-once).
    """
    result = write(b"\n".join(payloads))
    if not result.outcome.splittable:
        return result
    lines = [line for p in payloads for line in p.split(b"\n")]
    return _bisect(write, lines, result, quarantine)


def _bisect(write: Callable[[bytes], WriteResult], lines: list[bytes], rejection: WriteResult,
            quarantine: Quarantine) -> WriteResult:
    if len(lines) == 1:
        quarantine(lines[0], rejection)
        return OK
    mid = len(lines) // 2
    for half in (lines[:mid], lines[mid:]):
        result = write(b"\n".join(half))
        if result.outcome.splittable:
            result = _bisect(write, half, result, quarantine)
        if not result.ok:
            return result
    return OK
