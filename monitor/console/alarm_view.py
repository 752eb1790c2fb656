"""What one row of the console's alarm list shows, beyond `monitor.read.alarms.alarm_rows`: the display order,
the priority's symbol, friendly names, the episode's onset and peak, and every time as the site's local time.

Display order (ISA-18.2 practice, and what an operator needs at 3 a.m.): every unacknowledged alarm first
(active, latched or returned to normal alike), then acknowledged alarms that are still active or latched,
then suppressed ones (shelved, out of service), then normal ones; within a group by priority (critical >
high > medium > low > diagnostic), then newest first. An unacknowledged critical alarm is never below a
low one.

Each priority has a colour *and* a symbol with a number (colour-blind safe): ◆1 critical, ▲2 high,
■3 medium, ●4 low, ○5 diagnostic. The console uses the same pair in its header, the table, the site page and
the tab title.

The peak is the extreme good reading of the alarm's latest episode (from its start record to its end
record, or to now while it lasts): the highest for a high-side limit, the lowest for a low-side one; rules
whose value is not a reading (durations, data quality) have none. Times are epoch seconds UTC in the data
and ``*_text`` strings in the site's zone with its abbreviation (``2026-12-01 16:04:05 EST``), so the browser's
own zone is never used.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any
from zoneinfo import ZoneInfo

from alarms.model import State
from config.rule_catalogue import DURATION_RULES, NO_READING_PEAK, spec
from config.schema import Channel, Site, SiteConfig
from monitor.checks.events import EpisodeEvent
from monitor.logtext import duration, local_time, number
from monitor.stores.episodes import pair_transitions
from monitor.stores.readonly import has_column, standing

UNACKED = frozenset({State.ACTIVE_UNACKED.value, State.LATCHED_UNACKED.value, State.RTN_UNACKED.value})
ACKED_STANDING = frozenset({State.ACTIVE_ACKED.value, State.LATCHED_ACKED.value})
SUPPRESSED = frozenset({State.SHELVED.value, State.OUT_OF_SERVICE.value})
PRIORITY_RANK: dict[str, int] = {"critical": 0, "high": 1, "medium": 2, "low": 3, "diagnostic": 4}
SYMBOLS: dict[str, str] = {"critical": "◆1", "high": "▲2", "medium": "■3", "low": "●4", "diagnostic": "○5"}
STATE_LABELS: dict[str, str] = {
    State.ACTIVE_UNACKED.value: "Active, unacknowledged", State.LATCHED_UNACKED.value: "Latched, unacknowledged",
    State.RTN_UNACKED.value: "Returned to normal, unacknowledged", State.ACTIVE_ACKED.value: "Active, acknowledged",
    State.LATCHED_ACKED.value: "Latched, acknowledged", State.SHELVED.value: "Shelved",
    State.OUT_OF_SERVICE.value: "Out of service", State.NORMAL.value: "Normal",
}
_EPOCH = re.compile(r"(?<![\d.])(1\d{9}(?:\.\d+)?)(?![\d.])")
_SECONDS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?) s\b")


_GROUPS: dict[str, int] = {**{s: 0 for s in UNACKED}, **{s: 1 for s in ACKED_STANDING}, **{s: 2 for s in SUPPRESSED},
                           State.NORMAL.value: 3}


def group(state: str) -> int:
    """0 unacknowledged, 1 acknowledged but standing, 2 suppressed, 3 normal (4: a state not known)."""
    return _GROUPS.get(state, 4)  # a dict: called for every row of 200 sites' tiles and of every sort


def sort_key(row: dict[str, Any]) -> tuple[int, int, float, str]:
    return (group(row["state"]), PRIORITY_RANK.get(row["priority"], 5), -(row["since"] or 0.0), row["alarm"])


def explain(text: str, zone: ZoneInfo) -> str:
    """An alarm explanation as journaled ("condition started at 1796153103.788", "after 900 s") with epoch
    seconds as the site's local time and seconds as a duration."""
    text = _EPOCH.sub(lambda m: local_time(float(m.group(1)), zone), text)
    return _SECONDS.sub(lambda m: duration(float(m.group(1))), text)


def amount(value: float | None, unit: str, decimals: int | None = None) -> str:
    if value is None:
        return ""
    text = number(value, decimals)
    return f"{text} {unit}" if unit else text


def enrich(conn: sqlite3.Connection, config: SiteConfig, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (an `alarm_rows` row with site, channel, rule) with the names, texts, onset and peak shown."""
    site_id, channel, rule = row["site"], row["channel"], row["rule"]
    sites, channels = _lookup(config)
    site = sites.get(site_id)
    zone = ZoneInfo(site.timezone if site is not None else "UTC")
    ch = channels.get((site_id, channel))
    unit = ch.unit if ch is not None else ""
    decimals = ch.decimals if ch is not None else None

    def when(t: float | None) -> str:
        return local_time(t, zone) if t is not None else ""

    out = {**row, "group": group(row["state"]), "symbol": SYMBOLS.get(row["priority"], ""),
           "rule_label": label(rule), "state_label": STATE_LABELS.get(
               row["state"], row["state"]), "timezone": zone.key, "since_text": when(row["since"]),
           "until_text": when(row["until"]), "value_text": amount(row["value"], unit, decimals),
           "limit_text": _limit(row["limit"], unit, rule), "onset": None, "onset_text": "", "end": None,
           "peak": None, "peak_time": None, "peak_text": "", "peak_time_text": ""}
    if row["state"] == State.NORMAL.value:
        return out
    ep = _episode(conn, site_id, channel, rule)
    if ep is None:
        return out
    onset, end, start_value, limit = ep
    out.update(onset=onset, onset_text=when(onset), end=end)
    if rule in NO_READING_PEAK:  # durations included
        return out
    low = start_value is not None and limit is not None and start_value < limit
    peak = _peak(conn, (site_id, channel, rule, onset), end, low=low)
    if peak is not None:
        out.update(peak=peak[1], peak_time=peak[0], peak_text=amount(peak[1], unit, decimals),
                   peak_time_text=when(peak[0]))
    return out


_LOOKUP: list[tuple[SiteConfig, dict[str, Site], dict[tuple[str, str], Channel]]] = []


def _lookup(config: SiteConfig) -> tuple[dict[str, Site], dict[tuple[str, str], Channel]]:
    """Sites by id and channels by (site, channel) of the last configuration seen (by identity): a list of
    4,000 alarms would otherwise search 200 sites 4,000 times."""
    cached = _LOOKUP[:1]
    if cached and cached[0][0] is config:
        return cached[0][1], cached[0][2]
    sites = {s.id: s for s in config.sites}
    channels = {(s.id, c.id): c for s in config.sites for c in s.channels}
    _LOOKUP[:] = [(config, sites, channels)]
    return sites, channels


def site_of(config: SiteConfig, site_id: str) -> Site | None:
    return _lookup(config)[0].get(site_id)


def label(rule: str) -> str:
    """The rule's name as the PDF report gives it."""
    row = spec(rule)
    return row.label if row is not None else rule.replace("_", " ")


def _limit(value: float | None, unit: str, rule: str) -> str:
    if value is None:
        return ""
    return duration(value) if rule in DURATION_RULES else amount(value, unit)


def _episode(conn: sqlite3.Connection, site: str, channel: str,
             rule: str) -> tuple[float, float | None, float | None, float | None] | None:
    """(onset, end or None while it lasts, value at onset, limit) of the rule's latest episode. Its end as the
    store pairs them (`pair_transitions`), from the start before it on: an end at the instant the latest episode
    began may be the one before's (a sample clears an overdue interval and is the next one's onset)."""
    k = (site, channel, rule)
    try:
        live = standing(conn)  # a transition a correction after late readings withdrew is not the episode's
        starts = conn.execute("SELECT time FROM episode_events WHERE site = ? AND channel = ? AND rule = ? "
                              f"AND event = 'start'{live} ORDER BY time DESC LIMIT 2", k).fetchall()
        if not starts:
            return None
        reason = "end_reason" if has_column(conn, "episode_events", "end_reason") else "NULL"
        rows = conn.execute(f"SELECT time, event, value, limit_value, {reason} FROM episode_events WHERE site = ? "
                            f"AND channel = ? AND rule = ?{live} AND time >= ? ORDER BY time, id",
                            (*k, starts[-1][0])).fetchall()
    except sqlite3.OperationalError:  # no episode store yet
        return None
    events = (EpisodeEvent(t, site, channel, rule, ev, v, lim, "", None, why) for t, ev, v, lim, why in rows)
    latest = starts[0][0]
    for st, end in pair_transitions(events):
        if st.time == latest:
            return float(st.time), None if end is None else float(end.time), st.value, st.limit
    return None


# Peaks already found, per episode (site, channel, rule, onset): (read up to, peak or None). The console
# rebuilds the whole list on every alarm change, and an episode may last days of 1 s readings, so each
# episode's readings are read once, then only the newer ones. (A reading stored later with an older
# timestamp is not seen until the console restarts.)
_PEAKS: dict[tuple[str, str, str, float], tuple[float, tuple[float, float] | None]] = {}
_PEAKS_KEPT = 10_000


def _peak(conn: sqlite3.Connection, key: tuple[str, str, str, float], end: float | None, *,
          low: bool) -> tuple[float, float] | None:
    """(time, value) of the extreme good reading over [onset, end] (to the newest while ``end`` is None):
    the lowest for a low-side limit, else the highest; ties: the earliest."""
    site, channel, _rule, onset = key
    read_to, best = _PEAKS.get(key, (onset, None))
    if end is not None and read_to >= end and key in _PEAKS:
        return best
    try:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM channels WHERE site = ? AND channel = ?",
                                               (site, channel))]
        marks = ",".join("?" * len(ids))
        order = "ASC" if low else "DESC"
        upper = end if end is not None else float("inf")
        # the newest first, and the peak only up to it: each query is its own read, and the historian may commit
        # between them; read the other way round, readings committed in between were counted as read, unseen
        newest = conn.execute(f"SELECT MAX(time) FROM readings WHERE channel_id IN ({marks}) AND time <= ?",
                              (*ids, upper)).fetchone()[0] if ids else None
        row = conn.execute(f"SELECT time, value FROM readings WHERE channel_id IN ({marks}) AND time >= ? "
                           f"AND time <= ? AND quality = 0 AND value IS NOT NULL ORDER BY value {order}, time "
                           "LIMIT 1", (*ids, read_to, newest)).fetchone() if newest is not None else None
    except sqlite3.OperationalError:  # no historian tables yet
        return None
    found = None if row is None else (float(row[0]), float(row[1]))
    if found is not None and (best is None or (found[1] < best[1] if low else found[1] > best[1])):
        best = found
    if len(_PEAKS) >= _PEAKS_KEPT:
        _PEAKS.clear()
    _PEAKS[key] = (max(read_to, float(newest)) if newest is not None else read_to, best)
    return best
