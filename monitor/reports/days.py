"""Local calendar days and months of a site, as epoch-second intervals.

Reports are per *local* calendar day (the site's ``timezone``): a day runs from local midnight to the next
local midnight, so the day DST starts has 23 hours and the day it ends has 25. Every duration in the reports
is real elapsed seconds; only the day boundaries follow the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def local_day(t: float, tz: ZoneInfo) -> date:
    """The local calendar day containing epoch second ``t``."""
    return datetime.fromtimestamp(t, tz).date()


def day_start(day: date, tz: ZoneInfo) -> float:
    """Epoch seconds of local midnight starting ``day`` (midnight always exists in the zones we serve: the
    US, Canadian and European DST changes happen at 01:00–03:00)."""
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()


def day_bounds(day: date, tz: ZoneInfo) -> tuple[float, float]:
    """[start, end) of ``day`` in epoch seconds; ``end - start`` is 82,800, 86,400 or 90,000 s."""
    return day_start(day, tz), day_start(day + timedelta(days=1), tz)


def days(first: date, last: date) -> Iterator[date]:
    """Every day from ``first`` to ``last``, both included."""
    d = first
    while d <= last:
        yield d
        d += timedelta(days=1)


def month_start(year: int, month: int) -> date:
    return date(year, month, 1)


def next_month(d: date) -> date:
    """The first day of the month after the one containing ``d``."""
    return date(d.year + 1, 1, 1) if d.month == 12 else date(d.year, d.month + 1, 1)


def add_months(d: date, months: int) -> date:
    """``d`` moved by whole months (day clamped to the month's length)."""
    index = d.year * 12 + (d.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    last = (next_month(date(year, month, 1)) - timedelta(days=1)).day
    return date(year, month, min(d.day, last))


class DayCursor:
    """Caches the bounds of the local day last asked for, so that a steady stream of readings costs one
    comparison per reading to find its day (the datetime conversion runs once per day per channel)."""

    __slots__ = ("day", "end", "start", "tz")

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self.day = date.min
        self.start = self.end = float("-inf")

    def at(self, t: float) -> date:
        if not (self.start <= t < self.end):
            self.day = local_day(t, self.tz)
            self.start, self.end = day_bounds(self.day, self.tz)
        return self.day


def spread(a: float, b: float, cursor: DayCursor, add: Callable[[date, float], None]) -> None:
    """Split the interval [a, b) at local midnights and call ``add(day, seconds)`` for each piece.

    Quantities that accrue over an interval (integrated flow, excursion time, downtime) belong to the days
    the interval covers, in proportion; callers scale ``seconds`` by their rate.
    """
    while a < b:
        day = cursor.at(a)
        piece_end = min(b, cursor.end)
        add(day, piece_end - a)
        a = piece_end
