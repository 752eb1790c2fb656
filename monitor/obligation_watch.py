"""The daemon's side of obligations: create them when an episode is confirmed, and raise an alarm while any is
overdue.

Each industry site whose episodes oblige anything has one alarm, ``<site>/obligations/obligation_overdue``,
active while at least one of its obligations is past its due time with no fulfilment recorded, and cleared
when every overdue one is recorded as done, or closed by an invalidation or a withdrawal of its episode.

Late readings correct the episode record (`monitor.checks.revisions`), and the obligations follow the
correction (`ObligationWatch.on_revisions`): an episode found late opens its obligations like a live one; an
episode retracted (it never happened) has its unmet obligations closed as withdrawn; an episode whose start
moved is another episode (the id carries its start, and the deadlines run from it), so the old one's unmet
obligations are closed as withdrawn, naming the corrected episode, the corrected one's are opened, and a
notice already given for the old one is carried over (`CaseFile.carry_fulfilments`). Its text
(`overdue_text`, carried as the alarm's citation and shown instead of a reading) names the first overdue
obligation, its deadline, due time in the site's zone and citation, and is renewed when the set changes.
It goes through the ordinary alarm engine, so it is journaled, announced on the site's routes (the
industry's and the plant operator's audiences alike) and listed in the console and `pretreat alarms list`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from alarms.journal import Journal
from alarms.model import AlarmInput, AlarmSettings, Priority
from config.obligations import OBLIGATION_CHANNEL, OBLIGATION_OVERDUE, obligations_of
from config.schema import Site
from monitor.checks.coverage import END_GAP
from monitor.checks.events import END, START, EpisodeEvent, iso_utc
from monitor.checks.revisions import Revision
from monitor.logtext import local_time
from monitor.stores.casefile import CaseFile, Obligation, episode_key, overdue_sites

RETRACTED = "the episode was retracted after late readings, it never happened"

CHECK_EVERY = 10.0  # s between looks at the due times (deadlines are hours or days apart)


def obligation_alarm_specs(sites: Iterable[Site]) -> list[tuple[str, str, str, AlarmSettings]]:
    """The engine's overdue-obligation alarms: one for each site where an episode obliges anything."""
    return [(s.id, OBLIGATION_CHANNEL, OBLIGATION_OVERDUE, AlarmSettings(priority=Priority.HIGH))
            for s in sites if obligations_of(s)]


def resumed_after_gap(events: Sequence[EpisodeEvent]) -> set[int]:
    """Indexes of the (gap end, start) pairs in a batch that only split one episode at a gap in the data
    (`monitor.checks.coverage`): the end at the last reading before the gap and the start at the first after
    it come out of judging that one reading, so they are in the same batch."""
    resumed: set[int] = set()
    gap_end: dict[tuple[str, str, str], int] = {}
    for i, e in enumerate(events):
        key = (e.site, e.channel, e.rule)
        if e.event == END and e.end_reason == END_GAP:
            gap_end[key] = i
        elif e.event == START and key in gap_end and events[gap_end[key]].time <= e.time:
            resumed.update((gap_end.pop(key), i))
    return resumed


class ObligationWatch:
    """Creates obligations from episode events and says which overdue alarms change (see the module doc)."""

    def __init__(self, *, sites: Sequence[Site], journal: Journal, every: float = CHECK_EVERY) -> None:
        self.sites = {s.id: s for s in sites if obligations_of(s)}
        self.casefile = CaseFile(journal, {s.id: s.timezone for s in sites})
        self.every = every  # s between looks at the due times
        self._checked = float("-inf")
        self._named: dict[str, tuple[int, ...]] = {}  # site -> the overdue obligations its alarm text names

    def on_episodes(self, events: Sequence[EpisodeEvent], now: float) -> list[int]:
        """Open the obligations of the violation episodes that start in ``events``; the new ids. A start that
        only resumes an episode split by a gap in the data (`resumed_after_gap`) is the same discharge, whose
        obligations are already open: it opens none."""
        skip = resumed_after_gap(events)
        starts = [e for i, e in enumerate(events) if e.event == START and i not in skip]
        made: list[int] = []
        for site_id in {e.site for e in starts}:
            site = self.sites.get(site_id)
            if site is not None:
                made += self.casefile.open_obligations(site, starts, now)
        if made:
            self._checked = float("-inf")  # an "immediately" obligation is due at once: look now
        return made

    def on_revisions(self, revisions: Sequence[Revision], now: float) -> tuple[list[int], list[int]]:
        """Bring the obligations in line with corrections of the episode record (see the module doc); the ids
        opened and the ids closed. Each revision's withdrawn starts are paired in time order with its added
        ones, as `Revision.changes` words them: a withdrawn start with an added one moved there, one left over
        was retracted, an added start left over was found. Idempotent, as `on_episodes` is: a revision
        replayed opens and closes nothing more."""
        opened: list[int] = []
        closed: list[int] = []
        for r in revisions:
            site = self.sites.get(r.site)
            if site is None:
                continue
            resumed = resumed_after_gap(r.added)
            added = [e for i, e in enumerate(r.added) if e.event == START and i not in resumed]
            new_keys = {episode_key(e.site, e.channel, e.rule, e.time) for e in added}
            gone = sorted(e.time for e in r.withdrawn if e.event == START
                          and episode_key(e.site, e.channel, e.rule, e.time) not in new_keys)
            fresh = sorted((e for e in added if not any(
                e.time == w.time and w.event == START for w in r.withdrawn)), key=lambda e: e.time)
            moved = dict(zip(gone, fresh, strict=False))  # old start -> the corrected episode's start event
            for e in added:  # found late, moved here, or reappeared after a withdrawal
                key = episode_key(e.site, e.channel, e.rule, e.time)
                self.casefile.reinstate(key, site=r.site, reason=f"found again after late readings ({r.reason})",
                                        now=now)
                opened += self.casefile.open_obligations(site, [e], now)
            for t in gone:
                old = episode_key(r.site, r.channel, r.rule, t)
                to = moved.get(t)
                if to is None:
                    why = RETRACTED
                else:
                    new = episode_key(to.site, to.channel, to.rule, to.time)
                    why = (f"its start was corrected to {iso_utc(to.time)} after late readings: "
                           f"the obligations are those of episode {new}")
                    self.casefile.carry_fulfilments(old, new, now=now)
                closed += self.casefile.withdraw(old, site=r.site, reason=why, now=now)
        if opened or closed:
            self._checked = float("-inf")  # the overdue alarm follows at the next look, which is now
        return opened, closed

    def inputs(self, now: float, condition: Callable[[str], bool], *, force: bool = False) -> list[AlarmInput]:
        """Alarm inputs for the sites whose overdue state differs from the alarm's ``condition(alarm_id)``, or
        whose overdue obligations changed while the alarm is active (one met, another still overdue: the text
        names those still overdue); looks at most every ``every`` s unless ``force``. Obligations fulfilled or
        closed by an invalidation or a withdrawal are never overdue (`monitor.stores.casefile.overdue_sites`)."""
        if not self.sites or (not force and now - self._checked < self.every):
            return []
        self._checked = now
        overdue = overdue_sites(self.casefile.journal.connection, now)
        out: list[AlarmInput] = []
        for site_id, site in self.sites.items():
            late = overdue.get(site_id, [])
            named = tuple(o.id for o in late)
            active = condition(f"{site_id}/{OBLIGATION_CHANNEL}/{OBLIGATION_OVERDUE}")
            if bool(late) == active and (not late or self._named.get(site_id) == named):
                continue
            self._named[site_id] = named
            out.append(AlarmInput(time=now, site=site_id, channel=OBLIGATION_CHANNEL, rule=OBLIGATION_OVERDUE,
                                  active=bool(late), value=None, limit=None,
                                  citation=overdue_text(late, ZoneInfo(site.timezone))[:500]))
        return out


def overdue_text(late: Sequence[Obligation], zone: ZoneInfo) -> str:
    """What the overdue alarm says: the first overdue obligation (what, to whom, its deadline in the law's
    words, the due time in the site's zone, its citation) and how many more; or that none is overdue."""
    if not late:
        return "no obligation overdue (each one met, or closed when its episode was invalidated or withdrawn)"
    first = late[0]
    more = f"; {len(late) - 1} more outstanding or overdue" if len(late) > 1 else ""
    if first.immediate:  # no period stated: outstanding since confirmation, not "overdue" by zero seconds
        return (f"obligation #{first.id} notice outstanding: {first.action} to {first.recipient} "
                f"({first.due_text}), since {local_time(first.aware, zone)}; {first.citation}; "
                f"episode {first.episode}{more}")
    return (f"obligation #{first.id} overdue: {first.action} to {first.recipient} ({first.due_text}), due "
            f"{local_time(first.due, zone)}; {first.citation}; episode {first.episode}{more}")


def condition_of(engine: Any) -> Callable[[str], bool]:
    """``condition(alarm_id)`` read from an `alarms.engine.AlarmEngine`."""
    return lambda alarm_id: bool(engine.state(alarm_id).condition)
