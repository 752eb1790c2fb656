"""The time axis of a trend in the site's zone: ticks at local round hours and local midnights, and the zone's
abbreviations (EST, or EST/EDT across a change), so a chart never shows the browser's clock silently.

Computed on the server with `zoneinfo` (the tz database the rest of the product uses for local days), so the
ticks are the same in every browser and testable: on the day clocks spring forward a local day is 23 h long
and 02:00 does not exist; on the day they fall back 01:00 happens twice (both are ticks, labelled with their
abbreviation) and the day is 25 h long.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

# tick spacings (s) on the local clock: sub-hour steps divide an hour, hour steps divide a day
STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400)
MIN_PX = 70  # px a tick label needs (a time "23:00"; a date "Sun 03-08")


def step_for(span: float, width_px: int) -> int:
    """The smallest spacing that leaves at least `MIN_PX` between ticks on a chart ``width_px`` wide."""
    most = max(2, width_px // MIN_PX)
    return next((s for s in STEPS if span / s <= most), STEPS[-1])


def _midnights(start: float, end: float, zone: ZoneInfo) -> list[datetime]:
    """Local midnights from the one at or before ``start`` to the first after ``end`` (aware datetimes)."""
    day = datetime.fromtimestamp(start, zone).date()
    out = []
    while True:
        m = datetime(day.year, day.month, day.day, tzinfo=zone)
        out.append(m)
        if m.timestamp() > end:
            return out
        day += timedelta(days=1)


def ticks(start: float, end: float, zone_name: str, width_px: int) -> list[dict[str, object]]:
    """Ticks in [start, end]: ``t`` (epoch s), ``label`` (local, in ``zone_name``), ``midnight`` (a local day
    starts there: labelled with its date)."""
    zone = ZoneInfo(zone_name)
    step = step_for(end - start, width_px)
    out: list[dict[str, object]] = []
    seen: set[float] = set()
    days = _midnights(start, end, zone)
    for n, m in enumerate(days[:-1]):
        if step >= 86400:
            if n % (step // 86400):
                continue
            cands = [m.timestamp()]
        else:
            # walk the day's wall clock in ``step`` and map each wall time to the instants that show it
            cands = []
            nxt = days[n + 1].timestamp()
            for k in range(0, 86400, step):
                wall = datetime(m.year, m.month, m.day, tzinfo=None) + timedelta(seconds=k)
                for fold in (0, 1):
                    t = wall.replace(tzinfo=zone, fold=fold).timestamp()
                    back = datetime.fromtimestamp(t, zone).replace(tzinfo=None)
                    if back == wall and m.timestamp() <= t < nxt:  # exists (not skipped by a spring forward)
                        cands.append(t)
        for t in sorted(set(cands)):
            if start <= t <= end and t not in seen:
                seen.add(t)
                local = datetime.fromtimestamp(t, zone)
                midnight = local.hour == 0 and local.minute == 0
                label = local.strftime("%a %m-%d") if midnight else local.strftime("%H:%M")
                out.append({"t": t, "label": label, "midnight": midnight})
    _mark_repeats(out, zone)
    return out


def _mark_repeats(out: list[dict[str, object]], zone: ZoneInfo) -> None:
    """The hour repeated when clocks fall back carries its abbreviation (01:00 EDT, 01:00 EST)."""
    def key(x: dict[str, object]) -> tuple[object, object]:
        return (datetime.fromtimestamp(float(x["t"]), zone).date(), x["label"])  # type: ignore[arg-type]
    keys = [key(x) for x in out]
    for x, k in zip(out, keys, strict=True):
        if keys.count(k) > 1:
            x["label"] = f"{x['label']} {datetime.fromtimestamp(float(x['t']), zone).tzname()}"  # type: ignore[arg-type]


def zone_label(start: float, end: float, zone_name: str) -> str:
    """The zone's abbreviations over [start, end] in order ("EST", "EST/EDT")."""
    zone = ZoneInfo(zone_name)
    names: list[str] = []
    points = [start, end] + [m.timestamp() for m in _midnights(start, end, zone)]
    for t in sorted(p for p in points if start <= p <= end):
        name = datetime.fromtimestamp(t, zone).tzname() or zone_name
        if name not in names:
            names.append(name)
    return "/".join(names)

