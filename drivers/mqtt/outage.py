"""The state changes of one MQTT link, logged once each (style rule 11): an outage when it starts and when it
ends, with its length and the failed attempts in between (counted, and logged at DEBUG only).

`MqttDriver` calls `LinkLog.up` on every accepted connection and `LinkLog.lost` on every loss or failed
attempt; `lost` says when an outage starts, so the driver records its evidence (one COMM_FAILURE sample per
channel) once per outage, not once per attempt.
"""

from __future__ import annotations

import logging
import time

from drivers.mqtt.counters import MqttCounters
from monitor.number_text import duration

log = logging.getLogger(__name__)


class LinkLog:
    """One instrument's link to ``where`` (``host:port``), as ``name`` (``site/instrument``) and ``client_id``."""

    def __init__(self, *, name: str, where: str, client_id: str, counters: MqttCounters) -> None:
        self._name = name
        self._where = where
        self._client_id = client_id
        self._counters = counters
        self._since: float | None = None  # monotonic s when the current outage started; None while up
        self._attempts = 0  # failed attempts in the current outage

    def up(self, session_present: bool) -> None:
        """An accepted connection (CONNACK success); ``session_present`` as the broker said."""
        c = self._counters
        c.connected = True
        c.connects += 1
        if c.connects > 1:
            c.reconnects += 1
        if self._since is not None:
            c.last_outage = time.monotonic() - self._since
            log.info("%s: MQTT link to %s restored after %s (%d failed attempts)", self._name,
                     self._where, duration(c.last_outage), self._attempts,
                     extra={"link": self._where, "outage_s": c.last_outage})
            self._since = None
        elif c.connects == 1:
            log.info("%s: connected to MQTT broker %s as %r", self._name, self._where, self._client_id)
        if not session_present and c.connects > 1:
            log.warning("%s: broker %s kept no session for %r: QoS 1/2 messages published while the link was "
                        "down are lost (broker restarted without persistence, or session expired)",
                        self._name, self._where, self._client_id)

    def lost(self, reason: str, *, was_up: bool) -> str | None:
        """A connection lost (``was_up``) or an attempt failed, for ``reason``. Returns the reason to record
        as evidence when this starts an outage, else None (the outage goes on)."""
        c = self._counters
        c.connected = c.subscribed = False
        if not was_up:
            c.connect_failures += 1
        if self._since is not None:
            self._attempts += 1
            log.debug("%s: MQTT broker %s still unavailable: %s", self._name, self._where, reason)
            return None
        self._since = time.monotonic()
        self._attempts = 0 if was_up else 1
        what = "lost" if was_up else "unavailable"
        log.warning("%s: MQTT link to %s %s: %s; reconnecting with backoff", self._name, self._where, what,
                    reason)
        return f"MQTT broker {self._where} {what}: {reason}"
