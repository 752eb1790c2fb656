"""Acknowledge a QoS 1 message only once its samples are committed: the broker keeps what is not yet on disk.

Acknowledged as soon as the sink had taken its samples, a message was the broker's to forget while its samples
still waited in the historian's queue (up to ``commit_interval``): a daemon killed then lost the readings for
good (tests/faults/test_sigkill.py lost 2 of 97 in 20 kills). Given ``committed`` (an awaitable that returns
once everything the sink has taken so far is durable: `Historian.flush`), `CommitAcks` holds the PUBACKs and
sends them in batches after each commit, in the order the messages arrived (MQTT 3.1.1 § 4.6). A daemon killed
before then gets those messages again from the broker on its next connect.

A held acknowledgement belongs to its connection. When the link drops, the broker re-sends the unacknowledged
messages on the next connection of the persistent session, with their original packet ids and the DUP flag
(MQTT 3.1.1 § 4.4); their samples were already taken, so `carried_over` recognises those copies: acknowledged
(after the next commit), not recorded again. With a session the broker did not keep, nothing is re-sent.

Cost: the broker allows a subscriber a limited number of unacknowledged messages (mosquitto:
``max_inflight_messages``, 20 by default), so one instrument's link carries at most that many messages per
commit interval: far above what an instrument publishes, and it is also the backpressure that keeps messages in
the broker while the disk cannot be written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Protocol

from drivers.base import Committed

log = logging.getLogger(__name__)

KILL_BEFORE_ACK = "PRETREAT_TEST_KILL_BEFORE_ACK"  # environment variable of the test seam (see run)
DRAIN_TIMEOUT = 5.0  # s a clean stop waits for the commit (a full disk must not keep the daemon from stopping)


class _Acker(Protocol):
    def ack(self, mid: int, qos: int) -> object: ...


class CommitAcks:
    """The PUBACKs of one MQTT client, held until the samples they cover are committed. Loop thread only."""

    def __init__(self, *, committed: Committed, name: str) -> None:
        self._committed = committed
        self._name = name
        self._pending: list[tuple[int, int]] = []  # (mid, qos) in arrival order, not yet acknowledged
        self._carried: set[int] = set()  # mids taken on a lost connection, which the broker will re-send
        self._wake = asyncio.Event()
        # tests/faults/test_mqtt_kill_before_ack.py: the process kills itself after a commit, before its acks
        self._kill_before_ack = os.environ.get(KILL_BEFORE_ACK) == "1"

    def hold(self, mid: int, qos: int) -> None:
        self._pending.append((mid, qos))
        self._wake.set()

    def carried_over(self, mid: int, dup: bool) -> bool:
        """True if this message is the broker re-sending one whose samples were taken before the link
        dropped: acknowledge it (`hold`) without recording it again."""
        if mid not in self._carried:
            return False
        self._carried.discard(mid)
        return dup  # a fresh message reusing the id (not a re-send) is a new one

    def link_lost(self) -> None:
        """The connection is gone: its held acknowledgements cannot be sent on it any more."""
        self._carried.update(mid for mid, _ in self._pending)
        self._pending.clear()

    def session_lost(self) -> None:
        """The broker kept no session: it re-sends nothing."""
        self._carried.clear()

    async def run(self, client: _Acker) -> None:
        """Acknowledge after each commit, until cancelled (when the connection ends)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            n = len(self._pending)
            try:
                await self._committed()
            except Exception:  # the historian stopped for good: keep the messages in the broker
                log.exception("%s: samples cannot be committed; MQTT messages are left unacknowledged",
                              self._name)
                return
            if self._kill_before_ack and n:  # test seam: a crash between the commit and the PUBACK
                os.kill(os.getpid(), signal.SIGKILL)
            self._send(client, n)

    async def drain(self, client: _Acker) -> None:
        """Before a clean disconnect: commit and acknowledge everything taken, so nothing is re-sent."""
        if not self._pending:
            return
        n = len(self._pending)
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT):
                await self._committed()
        except Exception:  # TimeoutError included: the broker keeps them and re-sends them to the next run
            log.exception("%s: samples not committed; %d MQTT messages left unacknowledged", self._name, n)
            return
        self._send(client, n)

    def _send(self, client: _Acker, n: int) -> None:
        batch, self._pending = self._pending[:n], self._pending[n:]
        for mid, qos in batch:
            client.ack(mid, qos)
