"""Alarm-system performance per ISA-18.2 (ANSI/ISA-18.2-2016 §16) and EEMUA 191, from the journal's
transitions over a period: per site and overall.

Definitions (the figures are only as good as these; each is stated on the page too):

* **Annunciated alarm**: a ``raise`` transition (re-alarms and escalations of the same occurrence are
  reminders, not new alarms).
* **Alarms per operator-hour**: annunciated alarms / hours of the period, for one console position (the
  plant's operator sees every site). ISA-18.2's "very likely acceptable" is about 6 per hour (150 per day),
  "maximum manageable" about 12 per hour (300 per day); EEMUA 191: one per 10 minutes is manageable.
* **Alarms per 10 minutes**: the busiest 10-minute interval (aligned on the epoch), and the share of
  10-minute intervals with more than 10 alarms (an alarm flood; target under 1 % of the time).
* **Standing alarms**: alarms active or latched now (acknowledged or not); **stale**: of those, the ones
  whose state has not changed (no raise, acknowledgement or latch) for more than 24 h (ISA-18.2's stale
  alarm). Taken from ``alarm_state``, as of now, whatever the period.
* **Chattering**: an alarm raised 3 or more times within 60 s at least once in the period.
* **Top 10**: the alarms raised most often in the period, with their share of all raises.
* **Time to acknowledge**: from each raise to the first ``ack`` (or reset of the unacknowledged alarm) of the
  same alarm before its next raise; median and 90th percentile of those acknowledged, and how many were
  not acknowledged by the end of the period. An industry's ``seen`` does not count (it is not the plant's
  acknowledgement).

The journal has no time index: its raises and acknowledgements come from `monitor.console.journal_index`,
which reads each record once (a request reads only those appended since the last) and keeps them per alarm
in time order, so a period is two bisections per alarm.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections import Counter
from collections.abc import Collection
from typing import Any

from alarms.model import State
from config.rule_catalogue import spec
from config.schema import SiteConfig
from monitor.console.journal_index import JOURNAL, JournalIndexes, between
from monitor.logtext import duration
from monitor.stores.readonly import has_table

FLOOD_PER_10_MIN = 10
CHATTER_COUNT, CHATTER_WINDOW = 3, 60.0
STALE_AFTER = 86400.0
STANDING = frozenset({State.ACTIVE_UNACKED.value, State.ACTIVE_ACKED.value, State.LATCHED_UNACKED.value,
                      State.LATCHED_ACKED.value})


def kpis(conn: sqlite3.Connection | None, config: SiteConfig, sites: Collection[str], *, start: float,
         end: float, now: float, source: str = "", index: JournalIndexes = JOURNAL) -> dict[str, Any]:
    """The KPIs of ``sites`` over [start, end): ``overall`` and ``sites`` (one entry per site), ``top``.
    ``source`` names the journal for the incremental index (the daemon's file; empty: read it all now)."""
    raises: dict[str, list[float]] = {}  # alarm -> raise times in the period
    acks: dict[str, list[float]] = {}  # alarm -> acknowledgement times (any time after start)
    if conn is not None:
        idx = index.current(conn, source)
        for alarm, times in idx.raises.items():
            if alarm.split("/")[0] in sites and (got := between(times, start, end)):
                raises[alarm] = got
        for alarm, times in idx.kpi_acks.items():
            if alarm.split("/")[0] in sites and (got := between(times, start)):
                acks[alarm] = got
    standing = _standing(conn, sites, now)
    names = {s.id: s.name for s in config.sites}
    per_site = {}
    for site in sorted(sites, key=lambda x: names.get(x, x)):
        mine = {a: ts for a, ts in raises.items() if a.split("/")[0] == site}
        per_site[site] = {"site": site, "site_name": names.get(site, site),
                          **_figures(mine, acks, [s for s in standing if s["site"] == site], start, end)}
    total = Counter({a: len(ts) for a, ts in raises.items()})
    count = sum(total.values())
    top = [{"alarm": a, "site_name": names.get(a.split("/")[0], a.split("/")[0]), "channel": a.split("/")[1],
            "rule_label": _label(a.split("/")[2]), "count": n, "share_pct": round(100.0 * n / count, 1)}
           for a, n in total.most_common(10)]
    return {"start": start, "end": end, "hours": (end - start) / 3600.0,
            "overall": _figures(raises, acks, standing, start, end), "sites": list(per_site.values()),
            "top": top, "definitions": {"flood_per_10_min": FLOOD_PER_10_MIN,
                                        "chatter": [CHATTER_COUNT, CHATTER_WINDOW], "stale_after_s": STALE_AFTER}}


def _figures(raises: dict[str, list[float]], acks: dict[str, list[float]], standing: list[dict[str, Any]],
             start: float, end: float) -> dict[str, Any]:
    times = sorted(t for ts in raises.values() for t in ts)
    hours = max((end - start) / 3600.0, 1e-9)
    buckets = Counter(int(t // 600) for t in times)
    intervals = max(1, int(end // 600) - int(start // 600) + (1 if end % 600 else 0))
    floods = sum(1 for n in buckets.values() if n > FLOOD_PER_10_MIN)
    waits, unacked = [], 0
    for alarm, ts in raises.items():
        for i, t in enumerate(sorted(ts)):
            upto = ts[i + 1] if i + 1 < len(ts) else end
            got = next((a for a in acks.get(alarm, []) if t <= a < upto), None)
            if got is None:
                unacked += 1
            else:
                waits.append(got - t)
    chattering = sorted(a for a, ts in raises.items() if _chatters(sorted(ts)))
    stale = [s for s in standing if s["age_s"] is not None and s["age_s"] > STALE_AFTER]
    median = statistics.median(waits) if waits else None
    p90 = (statistics.quantiles(waits, n=10, method="inclusive")[-1] if len(waits) >= 2
           else waits[0] if waits else None)
    return {"alarms": len(times), "per_hour": round(len(times) / hours, 2),
            "max_per_10_min": max(buckets.values(), default=0),
            "flood_pct": round(100.0 * floods / intervals, 2), "standing": len(standing),
            "stale": len(stale), "stale_alarms": [s["alarm"] for s in stale],
            "chattering": len(chattering), "chattering_alarms": chattering,
            "ack_median_s": median, "ack_p90_s": p90,
            "ack_median_text": duration(median) if median is not None else "",
            "ack_p90_text": duration(p90) if p90 is not None else "",
            "acknowledged": len(waits), "not_acknowledged": unacked}


def _chatters(ts: list[float]) -> bool:
    return any(ts[i + CHATTER_COUNT - 1] - ts[i] <= CHATTER_WINDOW for i in range(len(ts) - CHATTER_COUNT + 1))


def _standing(conn: sqlite3.Connection | None, sites: Collection[str], now: float) -> list[dict[str, Any]]:
    """Alarms active or latched now, with how long since their last change (the raise or latch)."""
    if conn is None or not has_table(conn, "alarm_state"):
        return []
    out = []
    for alarm, state, text in conn.execute("SELECT alarm_id, state, record FROM alarm_state"):
        site = alarm.split("/")[0]
        if site not in sites or state not in STANDING:
            continue
        rec = json.loads(text)
        since = rec.get("changed")
        out.append({"alarm": alarm, "site": site, "state": state,
                    "age_s": None if since is None else max(0.0, now - float(since))})
    return out


def _label(rule: str) -> str:
    row = spec(rule)
    return row.label if row is not None else rule.replace("_", " ")
