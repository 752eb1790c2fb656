"""How often each instrument must be calibrated: the permit's requirement and the site's own setting.

Two places may state an interval, in days, per channel id or per channel kind (a channel id wins over its kind):

```toml
[site.permit.calibration]                 # the permit's requirement; its citation is required
cite = "Permit PJSC-IU-2025-04, Part III.B"
ph = 30                                   # every pH channel: at most 30 days between calibrations
flow = 365

[site.calibration]                        # the site's own schedule (e.g. the manufacturer's), no citation
ph-probe-2 = 14                           # one channel by id
```

The interval in force for a channel is the shorter of the two where both state one (a site may calibrate more
often than its permit requires, never less: the permit binds), with where it comes from. Where neither states
one there is no interval: the channel's status says "no calibration interval stated", and no due date is made
up (a technician's own "next due" on a calibration entry still counts, `monitor.stores.calibration`).

Days are calendar days in the site's time zone: 30 days after 2026-11-01 00:00 EDT is due at 2026-12-01 00:00
EST (the same local clock time), not 30 × 86,400 s later (which a daylight-saving change shifts by an hour).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from config.reader import Reader
from config.schema import Channel, ChannelKind

CALIBRATION_OVERDUE = "calibration_overdue"  # the alarm's rule name (monitor.calibration raises it)
NO_INTERVAL = "no calibration interval stated"
SITE_SETTING = "site setting [site.calibration]"
MAX_DAYS = 3660.0  # ten years: a longer "interval" is a typing mistake, not a schedule


@dataclass(frozen=True, slots=True)
class Interval:
    """The calibration interval in force for one channel: ``days`` and ``source`` (the permit's citation, or
    `SITE_SETTING`); ``zone`` is the site's time zone, in which the days are counted."""

    days: float
    source: str
    zone: str = "UTC"

    def due_from(self, t: float) -> float:
        """Epoch s when an instrument calibrated at ``t`` (epoch s) is due: ``days`` calendar days later at the
        same local clock time in ``zone`` (a fraction of a day is added as elapsed hours after that)."""
        whole = int(self.days)
        local = datetime.fromtimestamp(t, ZoneInfo(self.zone)) + timedelta(days=whole)  # wall-clock arithmetic
        return local.timestamp() + (self.days - whole) * 86400.0


@dataclass(frozen=True, slots=True)
class CalibrationPolicy:
    """Per channel id, the interval in force (channels without one are absent)."""

    intervals: Mapping[str, Interval] = field(default_factory=dict)

    def interval(self, channel: str) -> Interval | None:
        return self.intervals.get(channel)


def _days(raw: dict[str, Any], p: str, reader: Reader, channels: Sequence[Channel],
          skip: frozenset[str]) -> dict[str, float]:
    """Channel id → days from one table whose keys are channel ids or channel kinds."""
    kinds = {k.value for k in ChannelKind}
    ids = {c.id for c in channels}
    by_kind: dict[str, float] = {}
    by_id: dict[str, float] = {}
    for key in raw:
        if key in skip:
            continue
        if key not in ids and key not in kinds:
            reader.error(f"{p}.{key}", key, f"a channel id of this site {sorted(ids)} or a channel kind "
                                            f"{sorted(kinds)}, with the days between calibrations")
            continue
        days = reader.number(raw, key, p, minimum=0.0, exclusive_min=True, maximum=MAX_DAYS)
        if days is None or days <= 0:
            continue
        (by_id if key in ids else by_kind)[key] = days
    return {c.id: by_id.get(c.id, by_kind.get(c.kind.value, 0.0)) for c in channels
            if c.id in by_id or c.kind.value in by_kind}


def parse_calibration(site_raw: Mapping[str, Any], permit_raw: Mapping[str, Any], permit_id: str, p: str,
                      reader: Reader, channels: Sequence[Channel], timezone: str = "UTC") -> CalibrationPolicy:
    """``[site.calibration]`` and ``[site.permit.calibration]`` of one site; mistakes go to ``reader``.
    ``timezone`` is the site's, in which intervals count calendar days."""
    site_table = reader.table(dict(site_raw), "calibration", p)
    permit_table = reader.table(dict(permit_raw), "calibration", f"{p}.permit") if permit_raw else {}
    permit_days: dict[str, float] = {}
    cite = ""
    if permit_table:
        cite = reader.text(permit_table, "cite", f"{p}.permit.calibration",
                          check=lambda c: bool(permit_id) and permit_id in c,
                          expected=f"the permit's citation for its calibration requirement, naming the permit "
                                   f"('Permit {permit_id or '<id>'}, Part ...')")
        permit_days = _days(permit_table, f"{p}.permit.calibration", reader, channels,
                            frozenset({"cite", "quote"}))
    site_days = _days(site_table, f"{p}.calibration", reader, channels, frozenset())
    out: dict[str, Interval] = {}
    for ch in channels:
        found = [Interval(d, cite or f"Permit {permit_id}", timezone) for d in (permit_days.get(ch.id),) if d]
        found += [Interval(d, SITE_SETTING, timezone) for d in (site_days.get(ch.id),) if d]
        if found:
            out[ch.id] = min(found, key=lambda i: i.days)  # the shorter binds; on a tie the permit's
    return CalibrationPolicy(intervals=out)
