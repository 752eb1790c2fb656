"""What one MQTT message becomes: the samples of its channels, a repeat of a reading already taken, or a
message on a topic no channel uses.

The driver (`drivers.mqtt.driver.MqttDriver`) hands every message paho delivers to `MessageIntake.decode`
on the event loop thread and delivers what it returns; counting happens here, where the outcome is known
(`MqttCounters`: messages, samples, bad samples, decode errors, time fallbacks, clock skews, repeats, unexpected
messages). A device clock running too far ahead is a state: logged when it starts and when it ends.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

import paho.mqtt.client as mqtt

from config.schema import Channel, Instrument
from drivers.mqtt.counters import MqttCounters
from drivers.mqtt.dedupe import RecentReadings
from drivers.mqtt.payload import MAX_FUTURE_SKEW, Decoded, InstrumentDecoder
from monitor.sample import Quality, Sample

log = logging.getLogger(__name__)


class MessageIntake:
    """Decodes the messages of one MQTT instrument. ``unsubscribe(topic)`` drops a subscription no channel
    uses (left in the persistent session by an earlier configuration)."""

    def __init__(self, *, instrument: Instrument, channels: Sequence[Channel], counters: MqttCounters, name: str,
                 unsubscribe: Callable[[str], None]) -> None:
        self._decoder = InstrumentDecoder(instrument=instrument, channels=channels)
        self._counters = counters
        self._name = name
        self._unsubscribe = unsubscribe
        self._recent = RecentReadings()
        self._unexpected_topics: set[str] = set()

    @property
    def topics(self) -> Sequence[str]:
        """The channel topics, in the order the driver subscribes them."""
        return self._decoder.topics

    def seed(self, samples: Sequence[Sample]) -> None:
        """The channels' last stored readings (`drivers.mqtt.dedupe.RecentReadings.seed`)."""
        self._recent.seed(samples)

    def decode(self, msg: mqtt.MQTTMessage, received: float) -> Decoded | None:
        """The samples of ``msg`` (received at ``received``, epoch s); None when there is nothing to deliver
        (an exact copy of a reading already taken, or a topic no channel uses): acknowledge it only."""
        try:
            topic = msg.topic
        except UnicodeDecodeError:  # paho raises for a topic that is not UTF-8; no channel can match it
            self._unexpected(repr(msg._topic), unsubscribe=False)  # the raw bytes, for the log only
            return None
        decoder = self._decoder.decoders.get(topic)
        if decoder is None:
            self._unexpected(topic, unsubscribe=True)
            return None
        payload = bytes(msg.payload)
        try:
            decoded = decoder.decode(payload, received=received, retained=bool(msg.retain))
        except Exception as exc:  # pragma: no cover - the decoder is built (and fuzzed) never to raise
            log.exception("%s: MQTT payload decoder failed on %r", self._name, topic)
            decoded = decoder.failed(f"internal decoder error {exc!r}", received=received)
        c = self._counters
        if decoded.timestamped:  # a copy of a reading already taken, or a conflicting one (drivers.mqtt.dedupe)
            fresh, repeated = self._recent.judge(decoded.samples)
            if not fresh:
                c.repeats += 1  # acknowledged only
                return None
            if repeated or fresh != list(decoded.samples):
                decoded = dataclasses.replace(decoded, samples=tuple(fresh))
        c.messages += 1
        c.last_message_at = received
        c.time_fallbacks += bool(decoded.time_problem)
        if decoded.clock_ahead:
            if c.clock_ahead is None:  # logged once per episode of a fast clock, counted every message
                log.warning("%s: device clock %.0f s ahead of the receive time (more than %g s): its readings are "
                            "recorded as clock_skew, not judged, until its clock is set", self._name,
                            decoded.clock_ahead, MAX_FUTURE_SKEW)
            c.clock_skews += 1
            c.clock_ahead = decoded.clock_ahead
        elif decoded.timestamped and c.clock_ahead is not None:
            log.info("%s: device timestamps usable again (clock no longer ahead)", self._name)
            c.clock_ahead = None
        for s in decoded.samples:
            c.samples += 1
            c.bad_samples += not s.good
            c.decode_errors += s.quality is Quality.DECODE_ERROR
        return decoded

    def _unexpected(self, topic: str, *, unsubscribe: bool) -> None:
        """A message no channel listens to. The driver only ever subscribes exact topics, so it comes from a
        subscription an earlier configuration left in the persistent session: drop that subscription."""
        self._counters.unexpected_messages += 1
        if topic in self._unexpected_topics:
            return
        self._unexpected_topics.add(topic)
        log.warning("%s: message on %r, which no channel uses (subscription left in the broker session by an "
                    "earlier configuration?); unsubscribing", self._name, topic)
        if unsubscribe:
            self._unsubscribe(topic)
