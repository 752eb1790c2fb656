"""Health counters of one MQTT instrument link, published as the daemon's own telemetry.

Per rule 11, state changes are logged and everything else is counted: these are the counted facts. They are
plain attributes, written only on the event loop thread (the driver runs all paho callbacks there), so read
them from the loop too.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class MqttCounters:
    """Health of one MQTT instrument link. Written only on the event loop thread; read it from there too."""

    connected: bool = False  # CONNACK accepted and the link not lost since
    subscribed: bool = False  # every channel topic granted by the broker on the current connection
    messages: int = 0  # messages received on channel topics
    unexpected_messages: int = 0  # messages on topics no channel listens to (stale session subscriptions)
    samples: int = 0  # samples delivered from messages, good or bad
    bad_samples: int = 0  # of which not good
    decode_errors: int = 0  # of which DECODE_ERROR
    time_fallbacks: int = 0  # messages whose device timestamp was missing or unusable
    clock_skews: int = 0  # of which too far ahead of the receive time: their readings recorded as clock_skew
    clock_ahead: float | None = None  # s the latest such timestamp led by, until a message's device time is used
    repeats: int = 0  # exact copies of a timestamped message already taken (QoS 1 resends), not recorded again
    connects: int = 0  # accepted connections
    reconnects: int = 0  # accepted connections after the first
    connect_failures: int = 0  # attempts that failed: TCP error, CONNACK timeout or refusal
    subscribe_failures: int = 0  # topics the broker refused
    last_message_at: float | None = None  # receive time (epoch s) of the latest message
    last_outage: float | None = None  # duration (s) of the latest outage, from loss to accepted reconnect
