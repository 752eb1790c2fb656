"""Recognise a reading delivered twice, so that it is recorded once; and two readings that contradict each other.

QoS 1 is at-least-once on both hops: a publisher whose PUBACK was lost sends its message again (the broker
forwards the copy as a new message), and a broker whose PUBACK from us was lost (a broker restart, a dropped
link, the daemon killed between committing a message's samples and acknowledging it) delivers it again.
Recorded twice, one reading would appear as two in the evidence (tests/faults/test_mqtt_broker_outage.py,
tests/faults/test_mqtt_kill_before_ack.py).

A reading is identified by what it says, not by its bytes: (channel, device time) with its value (or, for a
bad sample, its quality and reason). So a copy whose JSON keys come in another order is the same reading, and a
message that gives *another* value for a channel at an instant already recorded is a conflict: it is kept,
never dropped, as a BAD_VALUE sample whose reason quotes both values (``conflicting reading at the same
time``), and never judged. Only samples that carry the device's own timestamp are compared: a payload without
one is stamped with its receive time, so a copy of it is a new row at a new time (and a bare number repeated
by a device is a real new reading).

The filter survives a restart: the daemon seeds it at start with each MQTT channel's last stored readings
(`seed`), the newest by time and the last arrivals (`monitor.stores.historian_db.recent_samples`: a buffer
re-sent with its real times may be hours older than the newest), so a message committed just before a SIGKILL
and delivered again by the broker afterwards is recognised.

Memory is bounded: the last `RecentReadings.size` (256) readings of the instrument, ~150 bytes each. A repeat
arrives within the sender's window of unacknowledged messages (mosquitto's ``max_inflight_messages`` is 20), so
256 covers any redelivery burst with room to spare.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from monitor.sample import Quality, Sample

CONFLICT = "conflicting reading at the same time"

_Key = tuple[str, str, float]  # site, channel, time
_Says = tuple[float | None, str, str]  # value, quality, reason


def _says(s: Sample) -> _Says:
    return (s.value, s.quality.value, s.reason) if not s.good else (s.value, "good", "")


class RecentReadings:
    """The last ``size`` timestamped readings of one instrument: (site, channel, time) -> what it said."""

    def __init__(self, *, size: int = 256) -> None:
        self.size = size
        self._seen: OrderedDict[_Key, tuple[_Says, ...]] = OrderedDict()  # the recorded one first

    def seed(self, samples: Iterable[Sample]) -> None:
        """Remember readings already recorded (the daemon's last stored ones, at start)."""
        for s in samples:
            self._remember((s.site, s.channel, s.time), (_says(s),))

    def judge(self, samples: Sequence[Sample]) -> tuple[list[Sample], int]:
        """The samples to record (new ones as they are, conflicting ones turned BAD_VALUE) and how many
        were repeats (dropped)."""
        out: list[Sample] = []
        repeats = 0
        for s in samples:
            key = (s.site, s.channel, s.time)
            said = _says(s)
            before = self._seen.get(key)
            if before is None:
                self._remember(key, (said,))
                out.append(s)
            elif said in before:  # the reading, or a conflict already recorded, delivered again
                self._seen.move_to_end(key)
                repeats += 1
            else:
                self._remember(key, (*before, said))
                out.append(Sample.bad(time=s.time, site=s.site, channel=s.channel, unit=s.unit,
                                      quality=Quality.BAD_VALUE,
                                      reason=f"{CONFLICT}: this message says {_show(said)}, "
                                             f"{_show(before[0])} was recorded"))
        return out, repeats

    def _remember(self, key: _Key, said: tuple[_Says, ...]) -> None:
        self._seen[key] = said
        self._seen.move_to_end(key)
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)


def _show(said: _Says) -> str:
    value, quality, reason = said
    if quality == "good":
        return repr(value)
    return f"{quality} ({reason[:60]})" if reason else quality
