"""Recognise a reading delivered twice, so that it is recorded once.

QoS 1 is at-least-once on both hops: a publisher whose PUBACK was lost sends its message again (the broker
forwards the copy as a new message), and a broker whose PUBACK from us was lost (a broker restart, a dropped
link) delivers it again. Recorded twice, one reading would appear as two in the evidence (found by
tests/faults/test_mqtt_broker_outage.py).

Only an exact copy of a message that carries its own device timestamp is a repeat: the same bytes then mean the
same reading taken at the same moment. A payload without a usable device timestamp is stamped with its receive
time, so a copy of it is a new row at a new time (and a bare number repeated by a device is a real new
reading); those are never dropped here.

Memory is bounded, and small: the last `RecentMessages.size` (256) messages of the instrument, as one 16-byte
digest of topic and payload each (~100 bytes with the dict entry). A repeat arrives within the sender's window
of unacknowledged messages (a broker redelivers its in-flight messages after a reconnect: mosquitto's
``max_inflight_messages`` is 20; a publisher resends the one whose PUBACK it lost), so 256 covers any
redelivery burst with room to spare. (It was 4,096 topic-and-digest pairs: ~1 MiB an instrument, filling for
over an hour at one message a second, which `bench/soak.py` showed as steady growth.) It does not survive a
daemon restart.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


class RecentMessages:
    """The last ``size`` timestamped messages of one instrument, by a digest of topic and payload."""

    def __init__(self, *, size: int = 256) -> None:
        self.size = size
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def repeat(self, topic: str, payload: bytes) -> bool:
        """True if this exact message was seen recently; otherwise remember it and return False."""
        h = hashlib.blake2b(len(payload).to_bytes(8, "big"), digest_size=16)  # the length: where the payload ends
        h.update(payload)
        h.update(topic.encode())
        key = h.digest()
        if key in self._seen:
            self._seen.move_to_end(key)
            return True
        self._seen[key] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return False
