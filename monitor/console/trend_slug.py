"""The slug limit line of a trend: the threshold in force on each local day (multiplier × that day's baseline).

The baseline is the one the rules know: a permit's fixed normal-sewage strength; for the day in progress the
one the running daemon judges by (its health snapshot's ``slug_baselines``); for earlier days of the window the
trailing baseline rebuilt from the historian exactly as `pretreat rules` and the periodic report do
(`monitor.slug_history.baseline_days`). That rebuild replays up to 60 days of readings, so it is served apart
from the trend (the chart draws first and adds the line when it arrives) and kept for `TODAY_TTL` s per
window (to the hour).
"""

from __future__ import annotations

import threading
import time
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from config.schema import Site, SiteConfig
from monitor.slug_history import baseline_days

TODAY_TTL = 600.0
_CACHE: dict[tuple[str, str, float, float], tuple[float, list[dict[str, Any]]]] = {}
_LOCK = threading.Lock()


def slug_line(config: SiteConfig, site: Site, channel: str, *, start: float, end: float, now: float,
              live: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per local day overlapping [start, end): ``day`` (its start), ``threshold`` (None: no baseline that day,
    no slug judged), ``baseline``, ``unit``, ``multiplier``, ``source`` and the rule's citation. Empty without a
    slug rule. ``live`` is the daemon's health snapshot entry for the rule (`monitor.slug_history.BaselineSection`):
    the day in progress takes the baseline the running daemon judges by ("daemon"); earlier days are rebuilt from
    the record ("record"), as `pretreat rules` does."""
    rules = [b for b in site.checks if b.rule == "slug" and b.channel == channel]
    if not rules:
        return []
    b = rules[0]
    mult = float(b.params.get("multiplier", 5))
    if "baseline" in b.params:  # a permit's fixed normal-sewage strength: one line over the whole window
        base = float(b.params["baseline"])
        return [{"day": start, "baseline": base, "threshold": mult * base, "multiplier": mult,
                 "fixed": True, "source": "permit", "citation": b.citation}]
    today = _live_day(live, site.timezone)
    days = _days(config, site, channel, start, end if today is None else min(end, today), now) \
        if today is None or start < today else []
    out = [{**d, "multiplier": mult, "source": "record", "citation": b.citation} for d in days]
    if today is not None and live is not None and end > today:
        out.append({"day": today, "baseline": live.get("baseline"), "threshold": live.get("threshold"),
                    "unit": "", "fixed": False, "multiplier": mult, "source": "daemon", "citation": b.citation})
    return out


def _live_day(live: dict[str, Any] | None, zone: str) -> float | None:
    """The start (epoch s) of the local day the daemon's baseline is for, or None without one."""
    if not isinstance(live, dict) or not live.get("day"):
        return None
    d = date.fromisoformat(str(live["day"]))
    return datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(zone)).timestamp()


def _days(config: SiteConfig, site: Site, channel: str, start: float, end: float, now: float) -> list[dict[str, Any]]:
    key = (site.id, channel, start // 3600, end // 3600)  # the live chart's window moves: an hour's grain
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and time.monotonic() < hit[0]:
        return hit[1]
    mine = [d for d in baseline_days(config, site.id, start - 90000.0, end) if d.channel == channel]
    first = max((k for k, d in enumerate(mine) if d.day <= start), default=0)  # the local day holding ``start``
    out = [{"day": d.day, "baseline": d.baseline, "threshold": d.threshold, "unit": d.unit, "fixed": False}
           for d in mine[first:]]
    with _LOCK:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = (time.monotonic() + TODAY_TTL, out)
    return out
