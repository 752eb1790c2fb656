"""Calibration status per channel, from the site file's intervals and the calibration log; the daemon's
``calibration_overdue`` alarm.

`statuses` answers "is each instrument in calibration now?" for `pretreat calibration list`, the console and
the reports. `CalibrationWatch` runs in the daemon: once a minute (and at start) it reads the log through its
own read-only connection and raises the channel's ``calibration_overdue`` alarm (a data-quality alarm, priority
low by default, routed like every alarm: the site's industry and plant-operator routes hear it) when the
instrument is overdue or an interval is in force and no calibration is recorded, and clears it when a new
entry brings it in date. The alarm's time is the moment the daemon noticed (its clock), its explanation the
status (`monitor.stores.calibration.Status.text`, its times in the site's local time with the zone, as the
daemon's log and the tables give times). It is no episode: it is judged from the log and the clock,
not from readings, so `pretreat replay` has nothing to find; the enforcement record shows the calibration
status during each episode instead (`pretreat exceedances`, the report).
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from zoneinfo import ZoneInfo

from alarms.model import AlarmInput
from config.calibration import CALIBRATION_OVERDUE
from config.schema import Site, SiteConfig
from monitor.checks.events import iso_utc
from monitor.logtext import local_time
from monitor.stores.calibration import (
    Calibration,
    Status,
    during,
    entries,
    known_overdue_spans,
    latest_id,
    read_entries,
    status_at,
)

CALIBRATION_CITATION = "data quality: instrument calibration (not a discharge exceedance)"
CHECK_EVERY = 60.0  # s between reads of the calibration log by the daemon


def logs(path: Path, site: str | None = None) -> dict[tuple[str, str], list[Calibration]]:
    """(site, channel) → its entries, oldest first."""
    out: dict[tuple[str, str], list[Calibration]] = defaultdict(list)
    for c in read_entries(path, site):
        out[(c.site, c.channel)].append(c)
    return out


def channel_status(site: Site, channel: str, log: Sequence[Calibration], t: float) -> Status:
    interval = site.calibration.interval(channel) if site.calibration is not None else None
    return status_at(log, interval, t)


def statuses(config: SiteConfig, t: float, *, site: str | None = None) -> list[tuple[str, str, Status]]:
    """(site, channel, status at ``t``) for every channel of the configuration (or of one site)."""
    found = logs(config.daemon.historian, site)
    return [(s.id, ch.id, channel_status(s, ch.id, found.get((s.id, ch.id), []), t))
            for s in config.sites if site in (None, s.id) for ch in s.channels]


def site_time(site: Site) -> Callable[[float], str]:
    """How tables, reports and the daemon's log write a calibration time: the site's local time with its zone."""
    zone = ZoneInfo(site.timezone)
    return lambda t: local_time(t, zone)


def episode_calibration(site: Site | None, found: dict[tuple[str, str], list[Calibration]], channel: str,
                        start: float, end: float | None, *, now: float, local: bool = False) -> str:
    """The calibration status of the instrument(s) behind an episode, over its span (a derived channel such as
    ``flow*concentration`` names each input's); an open episode (``end`` None) is judged up to ``now``. Times
    in ISO 8601 UTC, or with ``local`` the site's local time with its zone. Empty without the site's
    configuration."""
    if site is None:
        return ""
    when = site_time(site) if local else iso_utc
    parts = channel.split("*")
    out = []
    for ch in parts:
        interval = site.calibration.interval(ch) if site.calibration is not None else None
        text = during(found.get((site.id, ch), []), interval, start, end, now=now, when=when)
        out.append(f"{ch}: {text}" if len(parts) > 1 else text)
    return "; ".join(out)


def watched(sites: Iterable[Site]) -> list[tuple[str, str]]:
    """(site, channel) of every channel with a calibration interval in force: each has an alarm."""
    return [(s.id, ch) for s in sites if s.calibration is not None for ch in s.calibration.intervals]


def channel_spans(config: SiteConfig, site: str, channel: str) -> list[tuple[float, float, str]]:
    """The spans during which one channel's instrument was overdue as known at the time (`known_overdue_spans`):
    for marking its exported readings without asking the log per reading."""
    found = next((s for s in config.sites if s.id == site), None)
    if found is None:
        return []
    interval = found.calibration.interval(channel) if found.calibration is not None else None
    return known_overdue_spans(logs(config.daemon.historian, site).get((site, channel), []), interval)


class CalibrationWatch:
    """The daemon's side: turns overdue statuses into alarm inputs. On every tick it asks the log's newest
    entry id (one indexed read on the daemon's own connection), so an entry added by `pretreat calibration
    add` or the console clears the alarm at the next tick; and once a minute it re-judges the statuses
    against the clock, so a due date passing raises it within a minute."""

    def __init__(self, config: SiteConfig, apply: Callable[[list[AlarmInput], float], None],
                 conn: Callable[[], sqlite3.Connection]) -> None:
        self._config = config
        self._sites = {s.id: s for s in config.sites}
        self._watched = watched(config.sites)
        self._apply = apply
        self._conn = conn
        self._next = -math.inf
        self._seen: int | None = None  # newest entry id judged
        self._active: dict[tuple[str, str], bool] = {}

    def tick(self, now: float) -> None:
        if not self._watched:
            return
        newest = latest_id(self._conn())
        if now < self._next and newest == self._seen:
            return
        self._next, self._seen = now + CHECK_EVERY, newest
        self.check(now)

    def check(self, now: float) -> None:
        """Read the log and raise or clear each watched channel's alarm whose state changed."""
        found: dict[tuple[str, str], list[Calibration]] = defaultdict(list)
        for c in entries(self._conn()):
            found[(c.site, c.channel)].append(c)
        inputs = []
        for site, channel in self._watched:
            st = channel_status(self._sites[site], channel, found.get((site, channel), []), now)
            if self._active.get((site, channel)) == st.overdue:
                continue
            self._active[(site, channel)] = st.overdue
            inputs.append(AlarmInput(time=now, site=site, channel=channel, rule=CALIBRATION_OVERDUE,
                                     active=st.overdue, value=None, limit=None,
                                     citation=f"{CALIBRATION_CITATION}; "
                                              f"{st.text(site_time(self._sites[site]))}"[:500]))
        if inputs:
            self._apply(inputs, now)
