"""pH excursion time, 40 CFR 401.17: no single excursion over 60 minutes, at most 7 h 26 min per calendar
month.

An *excursion* is a continuous period with the pH outside the site's range (low or high, uninterrupted: going
straight from too low to too high is one excursion). Its time is measured from the first out-of-range reading
to the first in-range reading; bad samples neither end nor interrupt it (the data-quality rules cover those).
Only measured time counts (`monitor.checks.coverage`): a gap in the data (consecutive good readings further
apart than the channel's ``max_gap``) ends the excursion at the last reading before it, since nothing shows the
pH stayed out of range; if it is still out of range after the gap, a new excursion starts at the first reading
after it. So a single excursion's length is always measured time, and the month's total is the sum of measured
excursion time; the unmeasured time of the month is kept beside it (``unmeasured_seconds``) as the worst case.

Calendar months are those of the site's time zone: the month ends at local midnight of the 1st, whatever its
UTC offset (DST changes inside the month only change how many real seconds the month has; excursion time is
always real elapsed seconds). Time of an excursion that spans a month boundary is split at the boundary.
"""

from __future__ import annotations

import math
from datetime import datetime
from zoneinfo import ZoneInfo

from config.rule_catalogue import RuleName
from config.rule_model import ExcursionParams
from config.rules import RuleBinding
from monitor.checks.base import EMPTY, INF, MARGIN, VIOLATES, Band, Rule, complies_band, violates_band
from monitor.checks.coverage import END_MONTH
from monitor.checks.events import EpisodeEvent


class _Excursions(Rule):
    """Shared range test; ``side`` only chooses which out-of-range interval the quiet band covers."""

    __slots__ = (
        "in_band",
        "limit",
        "max",
        "max_band",
        "max_viol",
        "min",
        "min_band",
        "min_viol",
        "side",
        "start_time",
        "start_value",
    )

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(ExcursionParams)
        self.limit = p.limit  # seconds
        self.min, self.max = p.min, p.max
        self.min_viol, self.max_viol = VIOLATES[p.min_operator], VIOLATES[p.max_operator]
        lo = complies_band(p.min_operator, self.min)[0] if math.isfinite(self.min) else -INF
        hi = complies_band(p.max_operator, self.max)[1] if math.isfinite(self.max) else INF
        self.in_band = (lo, hi)
        self.min_band = violates_band(p.min_operator, self.min)
        self.max_band = violates_band(p.max_operator, self.max)
        self.start_time: float | None = None  # first out-of-range reading of the excursion in progress
        self.start_value = 0.0  # its value: the onset an episode of a duration rule starts at
        self.side = 0  # -1 low, +1 high: the side of the last out-of-range reading
        self.is_open = False

    def outside(self, v: float) -> bool:
        if self.min_viol(v, self.min):
            self.side = -1
            return True
        if self.max_viol(v, self.max):
            self.side = 1
            return True
        return False

    def value_band(self) -> tuple[float, float]:
        if self.start_time is None:
            return self.in_band
        return self.min_band if self.side < 0 else self.max_band


class ExcursionDuration(_Excursions):
    """``ph_excursion_duration``: an excursion longer than ``limit`` s. The episode starts at its onset (the
    first out-of-range reading, with that reading's value) and is confirmed at the first reading more than
    ``limit`` s into it (``confirmed``: the live alarm fires then); it ends with the excursion.

    When that first reading is the in-range one that ends the excursion (sparse readings: out of range at
    08:00, back in range at 09:30), the excursion was still longer than the limit: a start (time = onset,
    confirmed at that reading) and an end at that reading record it, peak = the excursion's length.
    """

    __slots__ = ()
    runs = (RuleName.PH_EXCURSION_DURATION,)

    def good(self, t: float, v: float, port: int) -> None:
        if self.outside(v):
            if self.start_time is None:
                self.start_time, self.start_value = t, v
            if not self.is_open and t - self.start_time > self.limit:
                self.is_open = True
                self.start(self.start_time, self.start_value, self.limit, confirmed=t)
        elif self.start_time is not None:
            length = t - self.start_time
            if not self.is_open and length > self.limit:  # sparse readings: too long, known only now
                self.start(self.start_time, self.start_value, self.limit, confirmed=t)
                self.is_open = True
            if self.is_open:
                self.is_open = False
                self.end(t, v, self.limit, length)
            self.start_time = None

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if self.is_open and self.start_time is not None:
            self.is_open = False
            self.end_at_gap(t0, v0, self.limit, t0 - self.start_time)
        self.start_time = None

    def band(self, port: int) -> Band:
        lo, hi = self.value_band()
        if self.start_time is not None and not self.is_open:
            return lo, hi, self.start_time + self.limit - MARGIN
        return lo, hi, INF


class MonthlyExcursion(_Excursions):
    """``ph_monthly_excursion``: the month's excursion time over ``limit`` s starts an episode at that
    reading.

    The episode ends with the first reading at or after the month's end (``end_reason = "month_end"``); it
    spans gaps in the data (the month does not end at a gap). Its end carries the month's accounting rather than
    the episode's span: ``measured_seconds`` = the month's measured excursion time (= peak, the figure judged
    against the limit), ``unmeasured_seconds`` = the month's time not covered by readings (the worst case: had
    the pH been out of range throughout every gap, the total would be their sum). When
    the total is only known to have passed the limit at the first reading after the month's end (sparse
    readings across the boundary), the exceedance is still recorded: a start and an end at that reading, peak =
    the month's total. ``month_gaps``: the month's unmeasured seconds so far (gaps, split at month ends).
    ``month_maint``: the month's maintenance seconds (the instrument in service or calibration,
    `monitor.checks.coverage`), taken out of ``month_gaps`` and reported as the end's ``maintenance_seconds``:
    not an excursion, not unmeasured time. (A calibration running across the month's end counts in the month it
    began; the part after the boundary stays in the next month's unmeasured time.)
    """

    __slots__ = ("acc", "gap_end", "month_end", "month_gaps", "month_maint", "zone")
    runs = (RuleName.PH_MONTHLY_EXCURSION,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.zone = ZoneInfo(binding.typed(ExcursionParams).timezone)
        self.month_end: float | None = None
        self.acc = 0.0  # excursion seconds already counted in the current month
        self.month_gaps = 0.0
        self.month_maint = 0.0
        self.gap_end = -INF  # end of the last gap: its part after a month end belongs to the next month

    def good(self, t: float, v: float, port: int) -> None:
        self._roll(t, v)
        if self.outside(v):
            if self.start_time is None:
                self.start_time = t
        elif self.start_time is not None:
            self.acc += t - self.start_time
            self.start_time = None
        total = self.acc + (t - self.start_time if self.start_time is not None else 0.0)
        if not self.is_open and total > self.limit:
            self.is_open = True
            self.start(t, v, self.limit)

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if self.start_time is not None:  # the excursion ends at its last measured reading
            self.acc += t0 - self.start_time
            self.start_time = None
        super().gap(t0, v0, t1, port)
        if self.month_end is not None:
            self.month_gaps += min(t1, self.month_end) - t0
        self.gap_end = t1

    def maint(self, a: float, b: float, counted: bool, port: int) -> None:
        if self.month_end is None:
            return
        d = min(b, self.month_end) - a
        if d > 0.0:
            self.month_maint += d
            if counted:  # the gap just counted held it: it is maintenance, not unmeasured time
                self.month_gaps = max(0.0, self.month_gaps - d)

    def _roll(self, t: float, v: float) -> None:
        if self.month_end is None:
            self.month_end = next_month_start(t, self.zone)
        while t >= self.month_end:
            boundary = self.month_end
            if self.start_time is not None:  # split the excursion in progress at the boundary
                self.acc += boundary - self.start_time
                self.start_time = boundary
            if not self.is_open and self.acc > self.limit:
                self.start(t, v, self.limit)
                self.is_open = True
            if self.is_open:
                self.is_open = False
                self.end(t, v, self.limit, self.acc, END_MONTH, (self.acc, self.month_gaps),
                         self.month_maint if self.month_maint > 0.0 else None)
            self.acc = 0.0
            self.month_maint = 0.0
            self.month_end = next_month_start(boundary, self.zone)
            self.month_gaps = max(0.0, min(self.gap_end, self.month_end) - boundary)

    def band(self, port: int) -> Band:
        lo, hi = self.value_band()
        if self.month_end is None:
            return EMPTY
        # the first reading of a new month is judged in full, whatever the excursion's state: the month then rolls
        # at the boundary, not at a later reading off the fast path (a gap after quiet readings of the new month
        # was counted from the boundary as unmeasured, and in part to the month before: the verdict depended on
        # which readings took the fast path, a rewind's or an arrival order's; an adversarial review found it)
        until = self.month_end
        if self.start_time is not None and not self.is_open:
            until = min(until, self.start_time + (self.limit - self.acc) - MARGIN)
        return lo, hi, until


def next_month_start(t: float, zone: ZoneInfo) -> float:
    """Epoch seconds of local midnight on the 1st of the month after the one containing ``t`` in ``zone``."""
    local = datetime.fromtimestamp(t, zone)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    return datetime(year, month, 1, tzinfo=zone).timestamp()
