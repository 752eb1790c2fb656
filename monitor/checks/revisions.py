"""Revisions: what re-judging a channel after a late reading changed in the episode record.

A reading that arrives after a newer one of its channel (a device clock ahead, a buffered re-send, the wall
clock stepped back) is judged at its own time: the check engine rewinds the channel's rule state and judges
its readings again in time order (`monitor.checks.rewind`). What that second judgement emits can differ from
what the first one announced: an episode found in the past, a start or an end that moved, or an announced
episode that never happened. Each difference, per rule and channel, is one `Revision`: the transitions it
withdraws and the ones it adds. Revisions are stored with the episode events (`monitor.stores.episodes`),
journaled, and fed to the alarm engine (`monitor.alarming`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.checks.events import END, START, EpisodeEvent, iso_utc

LATE_READING = "late reading"
# A transition a revision withdrew, emitted again by the live engine (a start whose duration is exceeded again
# with the same onset, say): the episode store restores the row with the figures it now has and keeps this
# revision, so the record and the hub's copy say it stands again and why (`EpisodeStore.record_events`).
JUDGED_AGAIN = "judged again after a revision"


@dataclass(frozen=True, slots=True)
class Revision:
    """One rule × channel's correction. ``late``: time of the earliest late reading that caused it (epoch s).
    ``active``: whether the rule's episode is open once the readings known so far are judged in time order
    (what its alarm's condition must now be)."""

    site: str
    channel: str
    rule: str
    withdrawn: tuple[EpisodeEvent, ...]
    added: tuple[EpisodeEvent, ...]
    late: float
    active: bool
    reason: str = LATE_READING

    @property
    def retraction(self) -> bool:
        """An announced episode start is withdrawn and none replaces it: the episode never happened."""
        starts = sum(e.event == START for e in self.withdrawn) - sum(e.event == START for e in self.added)
        return starts > 0

    def changes(self) -> list[str]:
        """The revision in words, one line per change (what `pretreat exceedances` and the console show)."""
        out: list[str] = []
        for kind in (START, END):
            old = sorted(e.time for e in self.withdrawn if e.event == kind)
            new = sorted(e.time for e in self.added if e.event == kind)
            for a, b in zip(old, new, strict=False):
                out.append(f"{kind} moved {iso_utc(a)} -> {iso_utc(b)}" if a != b
                           else f"{kind} at {iso_utc(a)} revised")
            out += [f"{kind} at {iso_utc(a)} withdrawn" for a in old[len(new):]]
            out += [f"{kind} at {iso_utc(b)} found" for b in new[len(old):]]
        return out

    def to_payload(self) -> dict[str, Any]:
        return {"site": self.site, "channel": self.channel, "rule": self.rule, "reason": self.reason,
                "late": self.late, "active": self.active, "changes": self.changes(),
                "withdrawn": [e.to_dict() for e in self.withdrawn], "added": [e.to_dict() for e in self.added]}


def diff(old: Sequence[EpisodeEvent], new: Sequence[EpisodeEvent], *, late: float,
         active: dict[tuple[str, str, str], bool]) -> list[Revision]:
    """Per rule × channel, the transitions of ``old`` not in ``new`` and those of ``new`` not in ``old``."""
    if list(old) == list(new):
        return []
    keys: dict[tuple[str, str, str], None] = {}
    for e in (*old, *new):
        keys.setdefault((e.site, e.channel, e.rule), None)
    out: list[Revision] = []
    for key in keys:
        o = Counter(e for e in old if (e.site, e.channel, e.rule) == key)
        n = Counter(e for e in new if (e.site, e.channel, e.rule) == key)
        gone, came = o - n, n - o
        if gone or came:
            out.append(Revision(*key, withdrawn=tuple(sorted(gone.elements(), key=_order)),
                                added=tuple(sorted(came.elements(), key=_order)), late=late,
                                active=active.get(key, False)))
    return out


def _order(e: EpisodeEvent) -> tuple[float, int]:
    return e.time, 0 if e.event == END else 1
