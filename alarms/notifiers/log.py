"""The ``log`` channel: every transition as one line in the daemon's log (journald under systemd).

Useful on a site without any other channel, and as the record of what was announced. Raised, re-alarmed and
escalated alarms are logged at WARNING, everything else at INFO. Always "delivered": a log line cannot be
refused, so this channel never queues for long.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from alarms.model import Kind
from alarms.notifiers.base import Delivery, Message, NotifierContext
from config.notify import NotifierConfig

log = logging.getLogger("pretreat.alarms")
_LOUD = (Kind.RAISE, Kind.REALARM, Kind.ESCALATE)


class LogNotifier:
    kind = "log"
    group_floods = False
    max_batch = 1000
    ready = None

    def __init__(self, *, id: str = "log") -> None:
        self.id = id
        self.lines = 0

    async def start(self) -> None:
        return None

    async def deliver(self, messages: Sequence[Message]) -> Delivery:
        for m in messages:
            for n in m.notices:
                level = logging.WARNING if n.kind in _LOUD else logging.INFO
                log.log(level, "%s — %s (seq %d, %s: %s)", n.alarm, n.headline(), n.seq, n.who, n.why)
                self.lines += 1
        return Delivery(len(messages))

    async def close(self) -> None:
        return None

    def health(self) -> dict[str, Any]:
        return {"lines": self.lines}


def build(config: NotifierConfig, context: NotifierContext) -> LogNotifier:
    return LogNotifier(id=config.id)
