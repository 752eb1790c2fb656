"""Flood grouping: a burst of notifications to one recipient becomes one summary instead of a storm.

ISA-18.2 calls ≥ 10 alarms in 10 minutes per operator a flood; past that, more messages are not more
information. Rule, per recipient (a channel's target: one e-mail address, one webhook): a notice queued at
time t is sent alone while fewer than ``threshold`` notices to that recipient were queued within
``(t − window, t]``; otherwise it opens a *group*, and every later notice to that recipient joins the group
until it is sent. A group is sent as one summary message ``hold`` seconds after its first notice was queued
(so the rest of the burst can join), or at once when it holds ``max_group`` notices. Every notice, alone or
summarised, counts towards the recipient's rate, so the flood lasts as long as the alarm rate stays high.
A group of one is sent as an ordinary message. Priorities in ``exempt`` (critical by default) are never
grouped: an explosive-vapour alarm is not buried in a pH summary (it may then overtake a held summary).

The rate is judged on the times notices were *queued* (the outbox's ``created``), not sent: after an outage,
a backlog is grouped exactly as it would have been live. The counts live in memory: after a restart a flood
still in progress sends up to ``threshold`` more notices alone before grouping again.

Pure (no I/O, the caller passes ``now``). `plan` does not change the counts: the dispatcher calls `commit`
for each planned message once the channel confirmed it, so a failed delivery is planned the same way again.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from alarms.notifiers.base import Message, Notice
from config.notify import FloodSettings


@dataclass(frozen=True, slots=True)
class Pending:
    """A queued notice: its outbox record id and when it was queued (epoch s)."""

    id: int
    created: float
    notice: Notice


@dataclass(frozen=True, slots=True)
class Planned:
    """A message ready to send, with the queued notices it carries (their ids are acked together)."""

    message: Message
    members: tuple[Pending, ...]

    @property
    def ids(self) -> list[int]:
        return [p.id for p in self.members]


class FloodGrouper:
    """Plans what to send now for one channel. ``enabled=False`` (a machine feed) sends every notice alone."""

    def __init__(self, *, settings: FloodSettings, enabled: bool = True) -> None:
        self.settings = settings
        self.enabled = enabled and settings.threshold > 0
        self._sent: dict[str, list[float]] = {}  # recipient → sorted queue times of notices already sent

    def plan(self, pending: Sequence[Pending], now: float) -> tuple[list[Planned], float | None]:
        """Messages to send now, in queue order of their first notice, and when the next held group falls
        due (None if nothing is held). ``pending`` is the outbox head, in order."""
        if not self.enabled:
            return [_single(p) for p in pending], None
        if pending:
            self._prune(min(p.created for p in pending) - self.settings.window)
        counts = {k: list(v) for k, v in self._sent.items()}  # simulated: commit() makes it real
        ready: list[Planned] = []
        groups: dict[str, list[Pending]] = {}
        for p in pending:
            target = p.notice.target
            if p.notice.priority in self.settings.exempt:
                ready.append(_single(p))
                bisect.insort(counts.setdefault(target, []), p.created)
            elif target in groups:
                groups[target].append(p)
            elif self._recent(counts.get(target, []), p.created) >= self.settings.threshold:
                groups[target] = [p]
            else:
                ready.append(_single(p))
                bisect.insort(counts.setdefault(target, []), p.created)
        due: float | None = None
        for target, members in groups.items():
            for start in range(0, len(members), self.settings.max_group):
                chunk = members[start:start + self.settings.max_group]
                when = chunk[0].created + self.settings.hold
                if len(chunk) < self.settings.max_group and when > now:
                    due = when if due is None else min(due, when)
                    break  # a held chunk keeps everything after it for this recipient
                ready.append(_group(target, chunk))
        ready.sort(key=lambda m: m.members[0].id)
        return ready, due

    def commit(self, planned: Planned) -> None:
        """Count a planned message's notices as sent to its recipient."""
        if not self.enabled:
            return
        times = self._sent.setdefault(planned.message.target, [])
        for p in planned.members:
            bisect.insort(times, p.created)

    def recent(self, target: str, at: float) -> int:
        """Notices counted for ``target`` within the window ending at ``at`` (health, tests)."""
        return self._recent(self._sent.get(target, []), at)

    def _recent(self, times: list[float], at: float) -> int:
        lo = bisect.bisect_right(times, at - self.settings.window)
        hi = bisect.bisect_right(times, at)
        return hi - lo

    def _prune(self, before: float) -> None:
        for target in list(self._sent):
            times = self._sent[target]
            del times[:bisect.bisect_right(times, before)]
            if not times:
                del self._sent[target]


def _single(p: Pending) -> Planned:
    return Planned(Message(target=p.notice.target, notices=(p.notice,)), (p,))


def _group(target: str, members: list[Pending]) -> Planned:
    if len(members) == 1:
        return _single(members[0])
    return Planned(Message(target=target, notices=tuple(m.notice for m in members), grouped=True),
                   tuple(members))
