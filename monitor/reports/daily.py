"""The daily summary of a site: one local calendar day, built from the per-day aggregates and the episodes.

Per day (including days with gaps, and the 23- and 25-hour days DST makes): total flow from the totaliser,
cross-checked against the integrated flow rate (a disagreement over 5 % is flagged: a drifting meter or a
totaliser that was reset), peak flow and the thirty-minute peak flow rate (Town of Wilson § 105-7E
[subsection letter inferred from the text's own cross-reference "§ 105-7E(10)"], item [5] of the permit
application, seed 004 line 231: "Average and thirty-minute peak wastewater flow rates"), pH min/max and
minutes outside the range, the highest temperature and % LEL, the sampler's samples taken, fridge min/max and
minutes out of band, data completeness per channel (% of expected readings received with good quality) and
downtime, and the exceedance episodes open during the day.

Completeness counts good readings against the day's elapsed seconds divided by the instrument's poll (or
publish) interval; it is capped at 100 % (an instrument publishing faster than configured is not "more than
complete"). Downtime is time not within the channel's staleness window of a good reading: closed gaps come from
the aggregates; a gap still open at the time of the report (the instrument has not come back) is added up to
``now``; days before the channel's first aggregated day count as down entirely. Maintenance time (the
instrument said it was serviced or calibrated, quality ``maintenance``; `monitor.reports.aggregates`) is its own
figure and never downtime: in a gap still open, the day's maintenance is taken out of the open tail.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from config.schema import ChannelKind, Site
from monitor.reports.aggregates_db import ChannelState, DayRow, read_days, read_states
from monitor.reports.days import day_bounds, days
from monitor.reports.plan import ChannelPlan, compile_plans, volume_factor
from monitor.stores.episodes import Episode

FLOW_TOLERANCE = 0.05  # totaliser vs integrated rate: more than 5 % apart is flagged
WILSON_PEAK_CITATION = ("Town of Wilson § 105-7E [subsection inferred] item [5]: "
                        "\"Average and thirty-minute peak wastewater flow rates\"")


@dataclass(frozen=True, slots=True)
class ChannelDay:
    """One channel on one day. Values in the channel's unit; times epoch seconds UTC; durations seconds."""

    channel: str
    kind: str
    unit: str
    received: int
    good: int
    expected: int
    completeness: float  # % of expected readings received good, 0–100
    downtime: float
    maintenance: float  # s the instrument said it was serviced or calibrated: neither covered nor downtime
    late: int
    min: float | None
    min_time: float | None
    max: float | None
    max_time: float | None
    mean: float | None  # time-weighted
    integral: float  # ∫ value dt over covered time (value unit × s): a flow rate's volume before conversion
    covered: float  # s covered by good readings no further apart than the staleness window
    outside: float | None  # s outside the pH range / fridge band; None where no range is stated
    increase: float | None  # totaliser volume or samples taken; None for other kinds
    resets: int
    peak30: float | None  # flow rate: highest 30-minute average
    peak30_end: float | None


@dataclass(frozen=True, slots=True)
class FlowCheck:
    """Total flow from the totaliser against ∫ rate dt, in the totaliser's unit."""

    rate_channel: str
    total_channel: str
    unit: str
    totaliser: float | None
    integrated: float | None
    difference: float | None  # |a - b| / max(a, b), 0–1
    flagged: bool


@dataclass(frozen=True, slots=True)
class DailySummary:
    site: str
    day: str  # ISO date, local
    hours: float  # 23, 24 or 25
    channels: tuple[ChannelDay, ...]
    flow: FlowCheck | None
    episodes: tuple[Episode, ...]

    def channel(self, kind: ChannelKind) -> ChannelDay | None:
        return next((c for c in self.channels if c.kind == kind.value), None)

    def headline(self) -> dict[str, float | None]:
        """The figures a coordinator reads first, by channel kind (first channel of each kind)."""
        ph, temp, lel = (self.channel(k) for k in (ChannelKind.PH, ChannelKind.TEMPERATURE, ChannelKind.LEL))
        flow, fridge = self.channel(ChannelKind.FLOW), self.channel(ChannelKind.SAMPLER_TEMPERATURE)
        count = self.channel(ChannelKind.SAMPLER_COUNT)
        f = self.flow
        return {
            "total_flow": f.totaliser if f else None,
            "integrated_flow": f.integrated if f else None,
            "peak_flow": flow.max if flow else None,
            "peak_30min_flow": flow.peak30 if flow else None,
            "ph_min": ph.min if ph else None,
            "ph_max": ph.max if ph else None,
            "ph_minutes_outside": _minutes(ph.outside) if ph else None,
            "temperature_max": temp.max if temp else None,
            "lel_max": lel.max if lel else None,
            "samples_taken": count.increase if count else None,
            "fridge_min": fridge.min if fridge else None,
            "fridge_max": fridge.max if fridge else None,
            "fridge_minutes_out_of_band": _minutes(fridge.outside) if fridge else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site, "day": self.day, "hours": self.hours, "headline": self.headline(),
            "flow_check": asdict(self.flow) if self.flow else None,
            "channels": [asdict(c) for c in self.channels],
            "episodes": [asdict(e) for e in self.episodes],
        }


def _minutes(s: float | None) -> float | None:
    return None if s is None else s / 60.0


def summarize(conn: sqlite3.Connection, site: Site, plans: dict[tuple[str, str], ChannelPlan], first: date,
              last: date, *, episodes: Sequence[Episode], now: float) -> list[DailySummary]:
    """Daily summaries for ``first``..``last`` (local days, both included) from the aggregates in ``conn``."""
    mine = [p for (s, _c), p in plans.items() if s == site.id]
    tz = mine[0].tz if mine else None
    rows = {(r.channel, r.day): r for r in read_days(conn, site=site.id, first=first.isoformat(),
                                                      last=last.isoformat())}
    states = read_states(conn)
    firsts = dict(conn.execute("SELECT channel, min(day) FROM report_daily WHERE site = ? GROUP BY channel",
                               (site.id,)).fetchall())
    out: list[DailySummary] = []
    for d in days(first, last):
        if tz is None:
            break
        lo, hi = day_bounds(d, tz)
        chans = tuple(_channel_day(p, rows.get((p.channel, d.isoformat())), states.get((site.id, p.channel)),
                                   firsts.get(p.channel), d, lo, hi, now) for p in mine)
        eps = tuple(e for e in episodes if e.start < hi and (e.end is None or e.end >= lo))
        out.append(DailySummary(site=site.id, day=d.isoformat(), hours=round((hi - lo) / 3600.0, 6),
                                channels=chans, flow=_flow_check(site, chans), episodes=eps))
    return out


def _channel_day(p: ChannelPlan, r: DayRow | None, state: ChannelState | None, first_day: str | None, d: date,
                 lo: float, hi: float, now: float) -> ChannelDay:
    elapsed = max(0.0, min(hi, now) - lo)
    expected = int(elapsed / p.interval) if p.interval > 0 else 0
    good = r.good if r else 0
    downtime = r.downtime if r else 0.0
    maintenance = r.maintenance if r else 0.0
    if first_day is None or d.isoformat() < first_day:
        downtime = elapsed  # nothing ever received up to this day
    elif state is not None and state.good_t is not None:
        tail_from = max(lo, state.good_t + p.max_gap)
        tail = max(0.0, min(hi, now) - tail_from)  # the gap still open now
        if state.good_t + p.max_gap <= lo:
            tail -= maintenance  # the whole day is in the open gap, so is all its maintenance
        downtime += max(0.0, tail)
    downtime = min(downtime, max(0.0, elapsed - maintenance))
    ranged = p.ph_range is not None or p.band is not None
    return ChannelDay(
        channel=p.channel, kind=p.kind.value, unit=p.unit, received=r.count if r else 0, good=good,
        expected=expected, completeness=min(100.0, 100.0 * good / expected) if expected else 0.0,
        downtime=min(downtime, elapsed), maintenance=maintenance, late=r.late if r else 0,
        min=r.vmin if r else None, min_time=r.vmin_t if r else None,
        max=r.vmax if r else None, max_time=r.vmax_t if r else None, mean=r.mean if r else None,
        integral=r.integral if r else 0.0, covered=r.covered if r else 0.0,
        outside=(r.outside if r else 0.0) if ranged else None,
        increase=(r.volume if r else 0.0) if p.is_total else None, resets=r.resets if r else 0,
        peak30=r.peak30 if r else None, peak30_end=r.peak30_t if r else None,
    )


def _flow_check(site: Site, chans: Sequence[ChannelDay]) -> FlowCheck | None:
    rate = next((c for c in chans if c.kind == ChannelKind.FLOW.value), None)
    total = next((c for c in chans if c.kind == ChannelKind.FLOW_TOTAL.value), None)
    if rate is None or total is None:
        return None
    factor = volume_factor(rate.unit, total.unit)
    integrated = rate.integral * factor if factor is not None and rate.good else None
    tot = total.increase if total.good else None
    diff = None
    if tot is not None and integrated is not None and max(tot, integrated) > 0:
        diff = abs(tot - integrated) / max(tot, integrated)
    return FlowCheck(rate_channel=rate.channel, total_channel=total.channel, unit=total.unit, totaliser=tot,
                     integrated=integrated, difference=diff, flagged=diff is not None and diff > FLOW_TOLERANCE)


def daily_summaries(conn: sqlite3.Connection, config: Any, site_id: str, first: date, last: date, *,
                    episodes: Sequence[Episode], now: float) -> list[DailySummary]:
    """`summarize` for a site of a loaded configuration."""
    return summarize(conn, config.site(site_id), compile_plans(config), first, last, episodes=episodes, now=now)
