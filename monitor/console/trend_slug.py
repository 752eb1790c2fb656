"""The slug limit line of a trend: the threshold in force on each local day (multiplier × that day's baseline).

The baseline is the one the rules know: a permit's fixed normal-sewage strength, or the trailing baseline
rebuilt from the historian exactly as `pretreat rules` and the periodic report do
(`monitor.slug_history.baseline_days`). That rebuild replays up to 60 days of readings, so it is served apart
from the trend (the chart draws first and adds the line when it arrives) and kept for `TODAY_TTL` s per
window (to the hour).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from config.schema import Site, SiteConfig
from monitor.slug_history import baseline_days

TODAY_TTL = 600.0
_CACHE: dict[tuple[str, str, float, float], tuple[float, list[dict[str, Any]]]] = {}
_LOCK = threading.Lock()


def slug_line(config: SiteConfig, site: Site, channel: str, *, start: float, end: float,
              now: float) -> list[dict[str, Any]]:
    """Per local day overlapping [start, end): ``day`` (its start), ``threshold`` (None: no baseline that day,
    no slug judged), ``baseline``, ``unit``, ``multiplier`` and the rule's citation. Empty without a slug rule."""
    rules = [b for b in site.checks if b.rule == "slug" and b.channel == channel]
    if not rules:
        return []
    b = rules[0]
    mult = float(b.params.get("multiplier", 5))
    if "baseline" in b.params:  # a permit's fixed normal-sewage strength: one line over the whole window
        base = float(b.params["baseline"])
        return [{"day": start, "baseline": base, "threshold": mult * base, "multiplier": mult,
                 "fixed": True, "citation": b.citation}]
    days = _days(config, site, channel, start, end, now)
    return [{**d, "multiplier": mult, "citation": b.citation} for d in days]


def _days(config: SiteConfig, site: Site, channel: str, start: float, end: float, now: float) -> list[dict[str, Any]]:
    key = (site.id, channel, start // 3600, end // 3600)  # the live chart's window moves: an hour's grain
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and time.monotonic() < hit[0]:
        return hit[1]
    out = []
    for d in baseline_days(config, site.id, start - 86400.0, end):  # the local day holding ``start`` too
        if d.channel == channel and d.day + 90000.0 > start:
            out.append({"day": d.day, "baseline": d.baseline, "threshold": d.threshold, "unit": d.unit,
                        "fixed": False})
    with _LOCK:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = (time.monotonic() + TODAY_TTL, out)
    return out
