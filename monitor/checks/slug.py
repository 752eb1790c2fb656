"""Slug loads: more than 5 × the average of normal operation, sustained for longer than 15 minutes.

Southeast § 112-5A(1)(j) and Mineola § 46.2(24) measure a slug against "the average twenty-four-hour
concentration, quantities or flow during normal operation". The baseline is built from whole local days:

- a **day of normal operation** is a local calendar day (the site's time zone) of which at least 90 % is
  *measured time* (`monitor.checks.coverage`: intervals between consecutive good readings of at most the
  channel's ``max_gap``, so a meter publishing every 90 s, 2 min or 5 min covers its day as well as one polled
  every second), in which no slug episode was open, and in which the value was above zero for at least one hour
  of measured time (the industry operated: a weekend shutdown is no day of normal operation, so Monday is
  measured against working days, not against zero);
- its **24-hour average** is the time-weighted mean over the day's measured time, zero-flow hours included:
  each reading's value holds until the next reading (an interval longer than ``max_gap`` is a gap and weighs
  nothing), whatever the sample rate. Readings within one clock minute are held as their mean from the first of
  them (the engine's fast path adds them up without their times); at a poll of a minute or slower every reading
  is weighed exactly;
- **the baseline for a day** is the mean of the 24-hour averages of the most recent ``baseline_days`` (N, 7 by
  default) days of normal operation before it, looked back at most 60 days. It is fixed at local midnight for
  the whole day. With no day of normal operation yet there is no baseline and no slug is judged (`pretreat
  rules` says so), and the detector raises the data-quality episode ``slug_no_baseline`` saying why: it starts
  at the first reading of a day without a baseline (the channel's first reading, or after 60 days without a day
  of normal operation) and ends at the first reading of the first day that has one. It follows the readings
  alone, as the baseline does, so the daemon and a replay find the same notice.

Every good reading counts toward its day, whether or not a candidate is open; a day in which a slug episode
was open is then left out as a whole, so a slug never inflates the baseline it is judged against. The state is
a few numbers per day (the day in progress and up to 30 days' averages), so live and replay compute it the same
way from the same readings; a restarted daemon rebuilds it by replaying the recorded days (`monitor.warmup`).

A reading above multiplier × baseline opens a *candidate* at its **onset** and freezes the threshold; the
candidate continues while every good reading stays above it; the first reading once it has lasted longer than
the duration (``>``, or ``>=`` for "for a duration of 15 minutes") **confirms** it: the episode's ``start``
event carries time = onset, the onset reading and ``confirmed`` = that moment (the live alarm fires then). The
first reading at or below the frozen threshold ends candidate or episode, and so does a gap in the data
(`monitor.checks.coverage`: the episode ends at the last reading before it, ``end_reason = "gap"``), so a
slug's duration is always measured time. A permit that selects the literal
reading of Southeast's "or" (``multiple_alone``) has duration 0: the onset reading confirms itself. Vestal words
the rule against a fixed "normal sewage" strength instead: the binding then carries ``baseline``.
Mass loading (flow × concentration) runs the same detector on the product of the latest good readings of
both channels, computed whenever either reports; a bad reading of either leaves no product until it recovers.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from config.rule_catalogue import RuleName
from config.rule_model import SlugParams
from config.rules import RuleBinding
from monitor.checks.base import EMPTY, INF, MARGIN, VIOLATES, Band, Rule
from monitor.checks.coverage import END_CLEARED
from monitor.checks.events import END, START, EpisodeEvent

IDLE, CANDIDATE, EPISODE = 0, 1, 2
COVERAGE = 0.9  # share of a day that must be measured time for it to count as a day of normal operation
OPERATING = 3600.0  # seconds of measured time above zero for a day to count as one on which the industry operated
LOOKBACK_DAYS = 60  # the baseline looks back at most this many days for days of normal operation
NO_BASELINE = (f"no baseline, so no slug is judged: no day of normal operation yet in the last {LOOKBACK_DAYS} "
               "days (a local day counts when readings cover at least 90 % of it, no slug episode is in it and "
               "the readings were above zero for at least an hour)")
"""Why a trailing-baseline slug rule has no baseline: the ``slug_no_baseline`` notice's words (after the
citation), and what `pretreat rules` and the console say of such a day."""


def local_day(t: float, zone: ZoneInfo) -> tuple[float, float]:
    """[start, end) in epoch seconds of the local calendar day holding ``t`` (23 or 25 h across DST)."""
    d = datetime.fromtimestamp(t, zone).date()
    start = datetime(d.year, d.month, d.day, tzinfo=zone)
    nxt = d + timedelta(days=1)
    return start.timestamp(), datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone).timestamp()


class SlugDetector(Rule):
    """The slug state machine on one series of values (a channel's readings, or a derived mass loading)."""

    __slots__ = (
        "above",
        "baseline_days",
        "cand_start",
        "cand_value",
        "day_end",
        "day_had_slug",
        "day_measured",
        "day_operating",
        "day_start",
        "day_sum",
        "days",
        "duration",
        "fixed",
        "frozen",
        "last_t",
        "last_v",
        "log",
        "longer",
        "minute",
        "minute_count",
        "minute_sum",
        "multiplier",
        "nb_cite",
        "nb_hole",
        "nb_start",
        "peak",
        "seg_t",
        "state",
        "strict",
        "threshold",
        "zone",
    )
    # the detector raises ``slug_no_baseline`` itself (it owns the baseline); that rule is never bound on its own
    runs = (RuleName.SLUG, RuleName.SLUG_NO_BASELINE)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(SlugParams)
        self.multiplier = p.multiplier
        self.above = VIOLATES[p.operator]
        self.strict = p.operator == ">"
        self.duration = p.duration
        self.longer = VIOLATES[p.duration_operator]
        self.fixed = p.baseline
        self.baseline_days = p.baseline_days
        self.zone = ZoneInfo(p.timezone)
        self.days: deque[tuple[float, float]] = deque(maxlen=self.baseline_days)  # (day start, 24-hour average)
        # the minute in progress (epoch minutes): its readings' sum and count, and the time of its first reading
        # (None: no reading since the minute began or since a gap), from which their mean is held
        self.minute: int | None = None
        self.minute_sum, self.minute_count = 0.0, 0
        self.seg_t: float | None = None
        # the local day in progress: the integral of its held values (value × s), its measured seconds, those of
        # them above zero (the industry operated), and whether a slug episode was open in it
        self.day_start = self.day_end = -INF
        self.day_sum, self.day_measured, self.day_operating, self.day_had_slug = 0.0, 0.0, 0.0, False
        self.threshold = INF if self.fixed is None else self.multiplier * self.fixed  # multiplier × today's baseline
        self.state = IDLE
        self.cand_start = self.cand_value = self.frozen = self.peak = 0.0
        self.last_t = self.last_v = 0.0  # the last value fed (mass loading: where its episode ends at a gap)
        # the slug_no_baseline notice: its start (None: not open) and the unmeasured seconds in it so far
        self.nb_start: float | None = None
        self.nb_hole = 0.0
        # when a caller asks (the report): each day's (start, baseline or None, starts of the days it rests on)
        self.log: list[tuple[float, float | None, tuple[float, ...]]] | None = None
        self.nb_cite = f"{binding.citation}: {NO_BASELINE}"

    @classmethod
    def build(cls, *, binding: RuleBinding, out: list[EpisodeEvent]) -> Rule:
        """One channel's readings, or the mass loading of a (flow, concentration) pair."""
        if len(binding.inputs) == 2:
            return LoadingSlug(binding=binding, out=out)
        return cls(binding=binding, out=out)

    def good(self, t: float, v: float, port: int) -> None:
        self.feed(t, v)

    def add_quiet(self, v: float) -> None:
        """A reading inside the band this detector promised (`band`: idle, below the threshold, within the
        minute in progress): all it changes is the minute's sum. The engine's fast path and the replay loop
        call it instead of `feed`."""
        self.minute_sum += v
        self.minute_count += 1

    def add_quiet_sum(self, total: float, count: int) -> None:
        """``count`` such readings at once, whose values add up to ``total``."""
        self.minute_sum += total
        self.minute_count += count

    def quiet_run(self, minute_sum: float, count: int) -> None:
        """``count`` such readings added one by one elsewhere (the audit's C scanner, `monitor.audit_scan`), in
        order, onto this minute's sum, which is now ``minute_sum``: the same float `add_quiet` would reach."""
        self.minute_sum = minute_sum
        self.minute_count += count

    def feed(self, t: float, v: float) -> None:
        m = int(t // 60.0)
        if m != self.minute:
            self._rollover(m, t)
            if self.fixed is None and (self.threshold == INF) != (self.nb_start is not None):
                self._notice(t, v)
        if self.seg_t is None:
            self.seg_t = t
        self.minute_sum += v  # every good reading counts toward its day (the fast path adds in-band ones)
        self.minute_count += 1
        self.last_t, self.last_v = t, v
        if self.state == IDLE:
            if not self.above(v, self.threshold):
                return
            self.state, self.cand_start, self.cand_value, self.frozen, self.peak = CANDIDATE, t, v, self.threshold, v
        elif self.above(v, self.frozen):
            self.peak = max(self.peak, v)
        else:
            if self.state == EPISODE:
                self.end(t, v, self.frozen, self.peak)
            self.state = IDLE
            return
        if self.state == CANDIDATE and self.longer(t - self.cand_start, self.duration):
            self.state = EPISODE
            self.day_had_slug = True
            self.start(self.cand_start, self.cand_value, self.frozen, confirmed=t)

    def _notice(self, t: float, v: float) -> None:
        """Open or close the ``slug_no_baseline`` data-quality episode at the reading at ``t``: open while the
        day has no baseline; it spans gaps (counted unmeasured), like ``stale``."""
        if self.nb_start is None:
            self.nb_start, self.nb_hole = t, 0.0
            self.out.append(EpisodeEvent(t, self.site, self.channel, RuleName.SLUG_NO_BASELINE.value, START, None,
                                         None, self.nb_cite))
            return
        unmeasured = min(self.nb_hole, t - self.nb_start)
        self.out.append(EpisodeEvent(t, self.site, self.channel, RuleName.SLUG_NO_BASELINE.value, END, v, None,
                                     self.nb_cite, None, END_CLEARED, t - self.nb_start - unmeasured, unmeasured))
        self.nb_start = None

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        """A gap in the data ends the candidate or episode at the last value before it (`monitor.checks.coverage`):
        the duration of a slug is measured time, so a candidate never confirms across unmeasured time; if the
        values are still above the threshold after the gap, a new candidate starts at the first one."""
        if self.nb_start is not None:
            self.nb_hole += t1 - max(t0, self.nb_start)
        if self.seg_t is not None and self.minute_count:  # the held values end at the last reading: t0..t1 weighs 0
            self._hold(self.seg_t, t0, self.minute_sum / self.minute_count)
        self.seg_t, self.minute_sum, self.minute_count = None, 0.0, 0
        if self.state == EPISODE:
            self.end_at_gap(t0, v0, self.frozen, self.peak)
        self.state = IDLE

    def _rollover(self, m: int, t: float) -> None:
        """Close the minute in progress at the reading at ``t`` (the first of minute ``m``): its readings' mean
        holds from its first reading to ``t`` (measured time: a longer interval was told as a gap first). At
        local midnight close the day and fix the new baseline; a hold across midnight is split between the days."""
        a = self.seg_t if self.minute_count else None
        mean = self.minute_sum / self.minute_count if self.minute_count else 0.0
        self.minute, self.minute_sum, self.minute_count, self.seg_t = m, 0.0, 0, None
        if self.fixed is not None:
            return
        if m * 60.0 >= self.day_end:
            if a is not None:
                self._hold(a, min(t, self.day_end), mean)
            self._new_day(m * 60.0)
            if a is not None:
                self._hold(max(a, self.day_start), t, mean)
        elif a is not None:
            self._hold(a, t, mean)

    def _hold(self, a: float, b: float, v: float) -> None:
        """The value ``v`` held over the measured interval [a, b) of the day in progress."""
        d = b - a
        if d > 0.0:
            self.day_sum += v * d
            self.day_measured += d
            if v > 0.0:
                self.day_operating += d

    def _new_day(self, t: float) -> None:
        if self.day_end > -INF and self.day_measured > 0.0:
            span = self.day_end - self.day_start
            if (self.day_measured >= COVERAGE * span and not self.day_had_slug
                    and self.day_operating >= OPERATING):
                self.days.append((self.day_start, self.day_sum / self.day_measured))
        self.day_start, self.day_end = local_day(t, self.zone)
        self.day_sum, self.day_measured, self.day_operating = 0.0, 0.0, 0.0
        self.day_had_slug = self.state == EPISODE
        base = self.baseline_for(self.day_start)
        self.threshold = INF if base is None else self.multiplier * base
        if self.log is not None:
            self.log.append((self.day_start, base, tuple(start for start, _ in self._recent(self.day_start))))

    def _recent(self, day_start: float) -> list[tuple[float, float]]:
        """The (start, 24-hour average) of the days of normal operation within the look-back of ``day_start``."""
        return [(start, avg) for start, avg in self.days if start >= day_start - LOOKBACK_DAYS * 86400.0 - 7200.0]

    def baseline_for(self, day_start: float) -> float | None:
        """Mean of the 24-hour averages of the most recent days of normal operation within the look-back."""
        recent = [avg for _, avg in self._recent(day_start)]
        return math.fsum(recent) / len(recent) if recent else None

    @property
    def baseline(self) -> float | None:
        """The baseline in force for the current day (None: no day of normal operation yet, no slug judged)."""
        return None if self.threshold == INF else self.threshold / self.multiplier

    def in_force(self) -> dict[str, Any]:
        """The baseline this detector judges by now, JSON-ready (the daemon's health snapshot, `pretreat rules`):
        ``day``, the local date (ISO) of the day in progress, the day of the last reading, for which it was fixed
        at local midnight (None before the first reading); ``baseline`` and ``threshold`` (multiplier ×
        baseline; both None while there is none and no slug is judged); ``rests_on``, the local dates of the days
        of normal operation it is the mean of; ``fixed``, True for a fixed normal-sewage strength (no day)."""
        if self.fixed is not None:
            return {"fixed": True, "day": None, "baseline": self.fixed, "threshold": self.multiplier * self.fixed,
                    "rests_on": []}
        if self.day_end == -INF:
            return {"fixed": False, "day": None, "baseline": None, "threshold": None, "rests_on": []}
        base = self.baseline
        rests = [] if base is None else [self._date(start) for start, _ in self._recent(self.day_start)]
        return {"fixed": False, "day": self._date(self.day_start), "baseline": base,
                "threshold": None if base is None else self.threshold, "rests_on": rests}

    def _date(self, day_start: float) -> str:
        return datetime.fromtimestamp(day_start, self.zone).date().isoformat()

    @property
    def notice_open(self) -> bool:
        """True while the ``slug_no_baseline`` data-quality episode is open (an alarm to keep across a restart)."""
        return self.nb_start is not None

    @property
    def normal_days(self) -> int:
        return len(self.days)

    @property
    def accumulating(self) -> bool:
        return self.minute is not None

    def band(self, port: int) -> Band:
        if self.minute is None:
            return EMPTY
        minute_end = (self.minute + 1) * 60.0
        if self.state == IDLE:  # in band: the reading only adds to the minute's sum (see Processor)
            return -INF, (self.threshold if self.strict else math.nextafter(self.threshold, -INF)), minute_end
        lo = math.nextafter(self.frozen, INF) if self.strict else self.frozen
        until = minute_end
        if self.state == CANDIDATE:
            until = min(until, self.cand_start + self.duration - MARGIN)
        return lo, self.peak, until

    def active(self) -> bool:
        return self.state == EPISODE

    def memory_bytes(self) -> int:
        """Bytes held by the baseline: the days' averages (a fixed few per channel, whatever the sample rate)."""
        return 16 * (self.days.maxlen or 0) + 64


def detector_of(rule: Rule) -> SlugDetector | None:
    """The slug detector of a check (a channel's, or a mass loading's), or None for any other check."""
    det = rule.detector if isinstance(rule, LoadingSlug) else rule
    return det if isinstance(det, SlugDetector) else None


class LoadingSlug(Rule):
    """Slug on mass loading: port 0 is the flow, port 1 the concentration; events name
    ``flow*concentration``."""

    __slots__ = ("detector", "latest")

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.detector = SlugDetector(binding=binding, out=out)
        self.latest: list[float | None] = [None, None]

    def good(self, t: float, v: float, port: int) -> None:
        self.latest[port] = v
        flow, conc = self.latest
        if flow is not None and conc is not None:
            self.detector.feed(t, flow * conc)

    def bad(self, t: float, quality: str, port: int) -> None:
        self.latest[port] = None  # never a product of a last-good value

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        # a gap in either input ends the product's candidate or episode, at the last product computed
        self.detector.why = self.why
        self.detector.gap(self.detector.last_t, self.detector.last_v, t1, port)

    def maint(self, a: float, b: float, counted: bool, port: int) -> None:
        self.detector.maint(a, b, counted, port)  # the detector's episodes carry the maintenance time

    def band(self, port: int) -> Band:
        return EMPTY

    def active(self) -> bool:
        return self.detector.active()
