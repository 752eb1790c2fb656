"""Restart without amnesia: rebuild the check engine's state from the recorded readings, then reconcile alarms.

Several rules remember the past: the slug baseline is built from up to 60 days, 40 CFR 401.17's monthly total
runs from the first of the month, an excursion may have started before the restart. A daemon that starts
with empty rule state would miss real violations, so at start-up the recent record (from the earlier of
25 hours ago, 62 days ago for a site with a trailing slug baseline, and the start of the current month in each
site's time zone) is replayed from the historian into
a fresh check engine, exactly as `pretreat replay` would, in time order across channels.

The episode events that replay produces are recorded in the episode store (idempotent: an event already there
is not duplicated; one lost in a crash is restored). They are *not* fed to the alarm engine as they are: it
has its own persisted state, and re-feeding an old start would raise an alarm that was long acknowledged and
cleared. Instead `reconcile` compares the two: an alarm whose condition is still active but whose episode the
record shows ended gets its clear (the missed clear of an episode that ended while the daemon was down, or
after the last alarm input it saw); an episode open in the record whose alarm never heard of it gets its
start. Nothing else is touched, so nothing is announced twice.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from alarms.engine import AlarmEngine
from alarms.model import AlarmInput
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent
from monitor.checks.rewind import History, HistoryRow
from monitor.logtext import duration
from monitor.obligation_watch import OBLIGATION_OVERDUE
from monitor.sample import GOOD
from monitor.slug_history import SLUG_LOOKBACK, recorded_since
from monitor.stores.historian import Historian

log = logging.getLogger(__name__)
BASELINE_WINDOW = 25 * 3600.0  # an open candidate or excursion, with margin


def window_start(config: SiteConfig, now: float) -> float:
    """The earliest time whose readings can still matter to any rule at ``now`` (see `channel_starts`)."""
    return min(channel_starts(config, now).values(), default=now - BASELINE_WINDOW)


def channel_starts(config: SiteConfig, now: float) -> dict[tuple[str, str], float]:
    """Per (site, channel), the earliest time whose readings can still matter at ``now``: the start of the
    current month in the site's time zone (401.17's monthly total) or 25 hours back, and for the inputs of a
    trailing slug baseline the 62 days it looks back for days of normal operation (`monitor.checks.slug`), so
    the daemon's baseline after a restart is the one a replay of the same record computes. Only those channels
    are read that far back."""
    out: dict[tuple[str, str], float] = {}
    for site in config.sites:
        local = datetime.fromtimestamp(now, tz=ZoneInfo(site.timezone))
        base = min(now - BASELINE_WINDOW, local.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp())
        slug = {c for b in site.checks if b.rule == "slug" and "baseline" not in b.params for c in b.inputs}
        for ch in site.channels:
            out[(site.id, ch.id)] = min(base, now - SLUG_LOOKBACK) if ch.id in slug else base
    return out


def history_reader(path: Path) -> History:
    """The committed readings of one channel for the engine's rebuild after a reading older than its window
    (`CheckEngine.rejudge_from_history`): (time, value, None) for a good reading, (time, NaN, quality) else."""

    def rows(site: str, channel: str, start: float, end: float) -> Iterator[HistoryRow]:
        if not path.exists():
            return
        for s in Historian.read(path=path, site=site, channel=channel, start=start, end=end):
            if s.quality is GOOD and s.value is not None:
                yield s.time, float(s.value), None
            else:
                yield s.time, math.nan, s.quality.value

    return rows


def warm_up(engine: CheckEngine, config: SiteConfig, now: float) -> list[EpisodeEvent]:
    """Feed the recent record through ``engine``; returns the episode events it produced."""
    started = time.monotonic()
    events: list[EpisodeEvent] = []
    n = 0
    starts = channel_starts(config, now)
    for s in recorded_since(config, starts, now):
        n += 1
        events.extend(engine.process(s))
    if n:
        log.info("rule state rebuilt from %d recorded readings in %s (%d episode events)", n,
                 duration(time.monotonic() - started), len(events))
    return _cut_notices(events, config, starts)


def _cut_notices(events: list[EpisodeEvent], config: SiteConfig,
                 starts: Mapping[tuple[str, str], float]) -> list[EpisodeEvent]:
    """Leave out the first ``slug_no_baseline`` episode of a channel whose record begins before the window: the
    fresh engine has no baseline at the window's start because it was not shown the days before, not because
    the industry had no day of normal operation (the daemon that judged those readings live had them)."""
    notices = {(e.site, e.channel) for e in events if e.rule == "slug_no_baseline"}
    if not notices or not config.daemon.historian.exists():
        return events
    inputs = {(s.id, b.channel): b.inputs for s in config.sites for b in s.checks if b.rule == "slug"}
    cut: set[tuple[str, str]] = set()
    with Historian.open_readonly(config.daemon.historian) as reader:
        for site, channel in notices:
            for ch in inputs.get((site, channel), ()):
                if next(iter(reader.query(site=site, channel=ch, start=0.0, end=starts.get((site, ch), 0.0))), None):
                    cut.add((site, channel))
    out: list[EpisodeEvent] = []
    for e in events:
        key = (e.site, e.channel)
        if e.rule == "slug_no_baseline" and key in cut:
            if e.event == "end":
                cut.discard(key)  # the first notice is over: any later one is the record's own
            continue
        out.append(e)
    return out


def reconcile(alarms: AlarmEngine, engine: CheckEngine, events: Sequence[EpisodeEvent],
              now: float) -> list[AlarmInput]:
    """Alarm inputs that bring the persisted alarm states in line with the rebuilt episodes."""
    open_now = set(engine.open_episodes())
    last: dict[tuple[str, str, str], EpisodeEvent] = {}
    for e in events:
        last[(e.site, e.channel, e.rule)] = e
    inputs: list[AlarmInput] = []
    for st in alarms.states():
        key = (st.key.site, st.key.channel, st.key.rule)
        if key[2] in ("record_integrity", OBLIGATION_OVERDUE, "calibration_overdue"):  # not a rule's: the record
            continue  # check at start, the obligation watch and the calibration watch raise and clear these
        found = last.get(key)
        if st.condition and key not in open_now:
            t, value = (found.time, found.value) if found is not None and found.event == "end" else (now, None)
            if found is None:  # the record holds no verdict on it at all: say so, it is worth looking into
                log.warning("alarm %s was active, but the readings replayed at start hold no episode of it "
                            "(are they missing from the record?): cleared", st.key.id)
            inputs.append(AlarmInput(time=t, site=key[0], channel=key[1], rule=key[2], active=False,
                                     value=value, limit=st.limit, citation=st.citation))
        elif not st.condition and key in open_now and found is not None and found.event == "start":
            inputs.append(AlarmInput(time=found.time, site=key[0], channel=key[1], rule=key[2], active=True,
                                     value=found.value, limit=found.limit, citation=found.citation))
    return inputs
