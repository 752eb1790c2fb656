"""The ``log`` channel: every notice it is routed as one line in the daemon's log, at DEBUG.

The daemon logs each alarm transition once, whatever the channels (`alarms.engine`, at WARNING for raised,
re-alarmed and escalated alarms, INFO otherwise). This channel's lines are the notices as routed and grouped
(with their journal seq), i.e. the same events again, so they are DEBUG: at the default level the log says
each event once (issue 18); ``--log-level DEBUG`` shows what the channel announced. Always "delivered": a log
line cannot be refused, so this channel never queues for long.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from alarms.notifiers.base import Delivery, Message, NotifierContext
from config.notify import NotifierConfig

log = logging.getLogger("pretreat.alarms")


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
                log.debug("log channel %s: %s — %s (seq %d, %s: %s)", self.id, n.alarm, n.headline(), n.seq,
                          n.who, n.why)
                self.lines += 1
        return Delivery(len(messages))

    async def close(self) -> None:
        return None

    def health(self) -> dict[str, Any]:
        return {"lines": self.lines}


def build(config: NotifierConfig, context: NotifierContext) -> LogNotifier:
    return LogNotifier(id=config.id)
