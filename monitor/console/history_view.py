"""What the console's history page shows of each episode beyond `pretreat exceedances`'s JSON record: its
stable name, times in the site's zone, peak and limit with their unit, measured and unmeasured time, who
acknowledged the alarm it raised (and which industry user saw it), and the cause and corrective action
the industry entered (`monitor.reports.annotations`).

**Stable ids.** Each episode is named by the id of its start record in the episode store (``episode_id``,
the number in ``/episodes/{id}``), the same for every user and every filter, and by its text name
``site/channel/rule@start`` (what `pretreat report annotate` takes). The running number ``n`` of
`pretreat exceedances` depends on the filter and the caller's sites, so the page never shows it as an id.

**Who acknowledged.** The first ``ack`` (or ``reset`` of an unacknowledged alarm) transition of the episode's
alarm at or after its onset and before the alarm's next episode began: the acknowledgement of the
occurrence this episode raised. Likewise the industry's first ``seen``. Episodes of rules that raise no alarm
(or whose alarm was never acknowledged) have none.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections import defaultdict
from typing import Any
from zoneinfo import ZoneInfo

from config.rule_catalogue import spec
from config.schema import SiteConfig
from monitor.checks.events import iso_utc
from monitor.console.journal_index import JOURNAL, JournalIndexes
from monitor.logtext import duration, local_time, number
from monitor.read.episodes import Episode
from monitor.reports.annotations import all_annotations


def enrich(conn: sqlite3.Connection, config: SiteConfig, records: list[dict[str, Any]],
           shown: list[Episode], *, source: str = "", index: JournalIndexes = JOURNAL) -> None:
    """Add the page's fields to each record (``records[i]`` is ``shown[i]`` as `episode_record` wrote it).
    The acknowledgements come from the journal's incremental index (`monitor.console.journal_index`, keyed
    by ``source``, the daemon's file; empty: the journal read now)."""
    idx = index.current(conn, source)
    acks, seen = idx.acks, idx.seen
    starts: dict[str, list[float]] = defaultdict(list)  # alarm -> episode onsets, to bound each occurrence
    for e in shown:
        if e.start is not None:
            starts[f"{e.site}/{e.channel}/{e.rule}"].append(e.start)
    for v in starts.values():
        v.sort()
    notes = {site: all_annotations(conn, site) for site in {e.site for e in shown}}
    sites = {s.id: s for s in config.sites}
    for rec, e in zip(records, shown, strict=True):
        site = sites.get(e.site)
        zone = ZoneInfo(site.timezone if site is not None else "UTC")
        alarm = f"{e.site}/{e.channel}/{e.rule}"
        name = f"{alarm}@{iso_utc(e.start)}" if e.start is not None else ""
        row = spec(e.rule)
        rec.update({
            "episode_name": name, "site_name": site.name if site is not None else e.site,
            "rule_label": row.label if row is not None else e.rule.replace("_", " "), "timezone": zone.key,
            "start_text": local_time(e.start, zone) if e.start is not None else "",
            "end_text": local_time(e.end, zone) if e.end is not None else ("ongoing" if e.status == "ongoing" else ""),
            "duration_text": duration(e.duration) if e.duration is not None else "",
            "measured_text": duration(e.measured) if e.measured is not None else "",
            "unmeasured_text": duration(e.unmeasured) if e.unmeasured else "",
            "peak_text": _amount(e, e.peak), "limit_text": _amount(e, e.limit)})
        upto = _next_start(starts.get(alarm, []), e.start)
        for key, marks in (("acknowledged", acks), ("seen", seen)):
            got = _first(marks.get(alarm), e.start, upto)
            rec[key] = None if got is None else {**got, "time_text": local_time(got["time"], zone)}
        entries = notes.get(e.site, {}).get(name, ()) if name else ()
        note = entries[-1] if entries else None  # the one in force; the episode's page lists every entry
        rec["cause"] = note.cause if note is not None else ""
        rec["corrective_action"] = note.action if note is not None else ""
        rec["annotated"] = None if note is None else {"user": note.user, "time_text": local_time(note.time, zone),
                                                      "earlier": len(entries) - 1}


def _amount(e: Episode, v: float | None) -> str:
    """A peak or limit with its unit; a duration rule's are seconds, written as a duration."""
    if v is None:
        return ""
    if e.unit == "s":
        return duration(v)
    return f"{number(v)} {e.unit}".strip()


def _next_start(onsets: list[float], start: float | None) -> float:
    if start is None:
        return float("inf")
    i = bisect.bisect_right(onsets, start)
    return onsets[i] if i < len(onsets) else float("inf")


def _first(marks: tuple[list[float], list[dict[str, Any]]] | None, start: float | None,
           upto: float) -> dict[str, Any] | None:
    if marks is None or start is None:
        return None
    times, recs = marks
    i = bisect.bisect_left(times, start)
    return recs[i] if i < len(times) and times[i] < upto else None
