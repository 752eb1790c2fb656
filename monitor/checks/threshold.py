"""Per-reading limit rules: pH low/high, temperature, LEL (single and successive) and the sampler's fridge and
pacing.

Inclusivity follows the ordinance's words through the binding's ``operator`` (the violation condition): "less
than 5.0" is ``<`` so 5.0 complies; "more than 5 %" is ``>`` so exactly 5 % complies. An episode starts at the
first violating reading and ends at the first complying one; bad samples are ignored (see `base.Rule.bad`).
None of these episodes continues across a gap in the data (`monitor.checks.coverage`): it ends at the last
reading before the gap, and the first reading after it is judged afresh (a new episode if it still violates).
"""

from __future__ import annotations

import math

from config.rule_catalogue import RuleName
from config.rule_model import BandParams, IntervalParams, ThresholdParams
from config.rules import RuleBinding
from monitor.checks.base import EMPTY, INF, MARGIN, VIOLATES, Band, Rule, complies_band, violates_band
from monitor.checks.events import EpisodeEvent
from monitor.sample import Quality

STALE = Quality.STALE.value


class ThresholdRule(Rule):
    """``ph_low``, ``ph_high``, ``temperature_high``, ``lel_single``: one reading past the limit starts an
    episode.

    With ``readings = N > 1`` (``lel_successive``) it takes N successive good readings past the limit: the Nth
    starts the episode, the first complying reading ends it. "Successive" counts good readings only: a bad
    sample between two readings over 5 % LEL does not break the succession (it neither starts nor interrupts),
    but a gap does: two readings with a gap between them are not successive.
    """

    __slots__ = ("high", "limit", "needed", "op", "peak", "run", "run_peak", "violates")
    runs = (RuleName.PH_LOW, RuleName.PH_HIGH, RuleName.TEMPERATURE_HIGH, RuleName.LEL_SINGLE, RuleName.LEL_SUCCESSIVE)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(ThresholdParams)
        self.limit = p.limit
        self.op = p.operator
        self.violates = VIOLATES[self.op]
        self.high = self.op in (">", ">=")
        self.needed = p.readings
        self.run = 0  # successive violating readings so far, capped at `needed`
        self.run_peak = 0.0
        self.is_open = False
        self.peak = 0.0

    def _more_extreme(self, v: float, than: float) -> bool:
        return v > than if self.high else v < than

    def good(self, t: float, v: float, port: int) -> None:
        if not self.violates(v, self.limit):
            self.run = 0
            if self.is_open:
                self.is_open = False
                self.end(t, v, self.limit, self.peak)
            return
        self.run_peak = v if self.run == 0 or self._more_extreme(v, self.run_peak) else self.run_peak
        self.run = min(self.run + 1, self.needed)
        if self.is_open:
            if self._more_extreme(v, self.peak):
                self.peak = v
        elif self.run >= self.needed:
            self.is_open = True
            self.peak = self.run_peak
            self.start(t, v, self.limit)

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        self.run = 0
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, self.limit, self.peak)

    def band(self, port: int) -> Band:
        if self.is_open:  # further violating readings short of a new peak change nothing
            lo, hi = violates_band(self.op, self.limit)
            return (lo, self.peak, INF) if self.high else (self.peak, hi, INF)
        if self.run:
            return EMPTY  # every reading either extends or breaks the succession
        lo, hi = complies_band(self.op, self.limit)
        return lo, hi, INF


class SamplerTemperature(Rule):
    """The composite sampler's fridge outside set point ± tolerance (Pawling: 4 °C ± 2 °C, so 2 and 6
    comply)."""

    __slots__ = ("high", "low", "mid", "peak")
    runs = (RuleName.SAMPLER_TEMPERATURE,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        p = binding.typed(BandParams)
        self.low, self.high = p.low, p.high
        self.mid = (self.low + self.high) / 2.0
        self.is_open = False
        self.peak = 0.0  # the reading furthest from the set point

    def _side_limit(self, v: float) -> float:
        return self.high if v > self.mid else self.low

    def good(self, t: float, v: float, port: int) -> None:
        outside = v < self.low or v > self.high
        if self.is_open:
            if not outside:
                self.is_open = False
                self.end(t, v, self._side_limit(self.peak), self.peak)
            elif abs(v - self.mid) > abs(self.peak - self.mid):
                self.peak = v
        elif outside:
            self.is_open = True
            self.peak = v
            self.start(t, v, self._side_limit(v))

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, self._side_limit(self.peak), self.peak)

    def band(self, port: int) -> Band:
        if not self.is_open:
            return self.low, self.high, INF
        if self.peak > self.high:
            return math.nextafter(self.high, INF), self.peak, INF
        return self.peak, math.nextafter(self.low, -INF), INF


class SamplerInterval(Rule):
    """No new sample (the sampler's count did not increase) for more than 15 minutes of flow above zero.

    Port 0 is the sample count, port 1 the flow rate. The interval counts only time during which the latest
    flow reading is good and above zero: a flow-paced sampler legitimately waits while nothing flows, and
    while the flow reading is bad, flow > 0 cannot be shown (that time is not counted; the stale/sensor_fault
    rules cover the meter). The limit is strict: exactly 15 minutes complies.

    Lateness rests on a count reading, never on the flow alone: the interval is shown overdue at a reading once more
    than the limit is counted *and* a count reading has shown it (``shown``: that reading's time): the count read
    unchanged with more than the limit counted, or with exactly the limit counted and the flow above zero right
    after it (so that the time counted grew past the limit at once). Any sample after that reading comes after the
    limit, so the sampler was late whenever it takes one; a count read with exactly the limit counted while nothing
    flowed after it shows nothing (a sample in the still time would come at exactly the limit, which complies). A
    count reading shows it only on flow time measured through it (``pend`` until then): once a flow reading at or
    after it comes with no gap before it, good, or bad but not STALE while the flow was known (the meter's last
    value taken to hold until it; ``flow_t``: the latest such reading this rule saw); a gap in the flow before that
    shows what was measured up to the gap's start. A sample or a gap in the count before that flow reading ends the
    wait with no episode (our reading: the evidence was not complete when the interval ended; in the daemon's own
    record that is within one poll of the flow meter). Flow time during which the count was not read (bad samples,
    silence) counts only when a later count reading shows the count unchanged (no sample was taken meanwhile), and
    no interval is shown overdue by flow time after the count's last reading or in a gap of the flow. ``seen`` is
    the counted time at the latest count reading this rule saw. The episode starts at its onset, the last sample
    (when the count last rose), and is confirmed at the reading (of either channel) where both hold (``confirmed``:
    the live alarm fires then), its value being the sampler's count; the next increase of the count (a new sample)
    ends it. A count that goes down is a counter reset, not a sample.

    Gaps (`monitor.checks.coverage`): a gap in the flow readings is not counted (flow above zero was not measured)
    once it is known, i.e. at the next flow reading: from the flow's last reading before it, or from the interval's
    start when a sample came since. Until then the flow's STALE sample (recorded by the daemon three polls after the
    last reading, and present in exported readings) stops the count, and the gap takes back what was counted before
    it (``held``: when the flow went unknown while counted as flowing, and since when it was). A lateness shown at a
    bad flow sample other than STALE is taken back too when the gap shows less than the limit measured, but an
    episode already confirmed then stands, with the flow time counted (our reading: the daemon records a sample at
    every poll, so that is at most one poll of the meter after its last good reading; in readings recorded elsewhere
    it can be longer, and the episode's peak can then fall below the limit). A gap in the count ends an open episode
    at the count's last reading before it (a sample may have been taken unseen), its peak the time counted at that
    reading (while an episode is open every count reading reaches the rule, so ``seen`` is exactly that), and the
    count starts afresh at its first reading after it (the onset of a later overdue interval is then that first
    reading). An episode can be confirmed after that end: when the flow reading that shows the count's last reading
    measured comes after the count's gap (in either order at one instant), and with a peak of exactly the limit when
    the count was read at exactly the limit with the flow running.
    """

    __slots__ = ("acc", "count", "flow_since", "flow_t", "flowing", "held", "last_sample", "limit", "pend", "seen",
                 "shown")
    runs = (RuleName.SAMPLER_INTERVAL,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.limit = binding.typed(IntervalParams).limit
        self.count: float | None = None
        self.flowing: bool | None = None  # None: no good flow reading in force
        self.flow_since = 0.0
        self.acc = 0.0  # counted seconds before `flow_since`, since the last sample
        self.last_sample = 0.0  # when the count last rose (or was first read): the onset of an overdue interval
        self.seen = 0.0  # `_total` at the latest count reading this rule saw, since the last sample
        # the count reading of this interval that showed any later sample late (its time), or None
        self.shown: float | None = None
        # a count reading that will show it once a flow reading at or after it, with no gap before, shows the
        # time it counted measured: (its time, whether more than the limit was counted, the flow's state then);
        # None: none waiting
        self.pend: tuple[float, bool, bool | None] | None = None
        self.flow_t = -INF  # the latest flow reading, good or bad but STALE, this rule saw (each from `_due` on)
        # (when the flow went unknown, since when it had been counted as flowing): a bad flow sample while
        # flowing, until the next good flow reading; None otherwise
        self.held: tuple[float, float] | None = None
        self.is_open = False

    def _counted(self, t: float) -> float:
        return self.acc + (t - self.flow_since if self.flowing else 0.0)

    def _total(self, t: float) -> float:
        """The interval's length at ``t`` as this rule measures it (s): the peak of its episodes."""
        return self._counted(t)

    def _overdue(self, t: float) -> bool:
        return self._counted(t) > self.limit

    def _grows(self, flowing: bool | None) -> bool:
        """`_total` grows while the flow is in state ``flowing``: a count read at exactly the limit followed by
        that state shows lateness."""
        return flowing is True

    def good(self, t: float, v: float, port: int) -> None:
        if port == 0:
            if self.count is None or v > self.count:
                if self.is_open:
                    self.is_open = False
                    self.end(t, v, self.limit, self._total(t))
                self.acc, self.flow_since, self.last_sample = 0.0, t, t
                self._sampled()
            self.count = v
            self.seen = seen = self._total(t)
            if self.shown is None and seen >= self.limit:
                self.pend = (t, seen > self.limit, self.flowing)
                if self._measured(t):
                    self._resolve(self.flowing)
        else:
            self._set_flowing(t, v > 0.0)
            self.flow_t = t
            self._flow_read(t)
        self._check(t)

    def _flow_read(self, t: float) -> None:
        """A flow reading at ``t`` shows a waiting count reading's time measured; the flow's state that followed
        that reading is this one's at the same instant, else the one the count reading saw."""
        pend = self.pend
        if pend is not None and pend[0] <= t:
            self._resolve(self.flowing if pend[0] == t else pend[2])

    def _measured(self, t: float) -> bool:
        """The time counted to ``t`` is measured: a flow reading at ``t`` already came (gaps told), good or bad
        but STALE (a STALE sample says the meter fell silent: the gap its next reading shows decides)."""
        return self.flow_t >= t

    def _resolve(self, after: bool | None) -> None:
        """The waiting count reading shows lateness: more than the limit, or exactly it with the flow in state
        ``after`` right after it growing the time counted."""
        pend, self.pend = self.pend, None
        if pend is not None and (pend[1] or self._grows(after)):
            self.shown = pend[0]

    def _sampled(self) -> None:
        """A new interval begins (a sample, or the count's first reading)."""
        self.shown = self.held = self.pend = None

    def _check(self, t: float) -> None:
        if not self.is_open and self.count is not None and self.shown is not None and self._overdue(t):
            self.is_open = True
            self.start(self.last_sample, self.count, self.limit, confirmed=t)

    def bad(self, t: float, quality: str, port: int) -> None:
        if port == 1:
            known = self.flowing is not None
            self._set_flowing(t, None)
            # the meter's last value taken to hold until this sample, when one held (a gap found later takes
            # it back); a STALE sample says the meter fell silent: the gap its next reading shows decides
            if quality != STALE and known:
                self.flow_t = t
                self._flow_read(t)
                self._check(t)

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if port == 1:
            # unknown from the last flow reading until the next one; a sample since then began the interval at
            # ``flow_since``, after ``t0``: none of this interval's time was measured flowing
            held = self.held
            if held is not None:  # counted as flowing until a bad sample: from t0 on that was not measured
                self.held = None
                back = held[0] - max(t0, held[1])
                if back > 0.0:
                    self.acc -= back
                    self._unmeasured(back)
            # a count reading after t0 counted time in the gap: it shows lateness only on what was measured to t0
            at_t0 = self._cut(t0)
            # (at t0 itself too: exactly the limit there showed lateness by the flow running on, into the gap)
            pend = self.pend
            if pend is not None and pend[0] >= t0:
                self.pend = None
                if at_t0 > self.limit:
                    self.shown = pend[0]
            if self.shown is not None and self.shown >= t0 and not at_t0 > self.limit:
                self.shown = None  # shown on time the gap takes back, or on the flow running on into it
            self._set_flowing(max(t0, self.flow_since), None)
            return
        if self.is_open:
            self.is_open = False
            self.end_at_gap(t0, v0, self.limit, self.seen)  # `seen`: counted at t0, the count's last reading
        self.count = None
        self.acc, self.flow_since, self.last_sample, self.seen = 0.0, t1, t1, 0.0
        self._sampled()

    def _unmeasured(self, s: float) -> None:
        """``s`` seconds counted as flowing were not measured after all (a flow gap found later)."""

    def _cut(self, t0: float) -> float:
        """What a count reading after ``t0``, the flow's last reading before a gap, showed on measured time: the
        time counted to ``t0`` (``held`` already taken back; a sample since ``t0`` counts from itself)."""
        return self._counted(max(t0, self.flow_since))

    def _set_flowing(self, t: float, flowing: bool | None) -> None:
        if flowing == self.flowing:
            return
        if self.flowing:
            self.acc += t - self.flow_since
            if flowing is None:
                self.held = (t, self.flow_since)
        if flowing is not None:
            self.held = None
        self.flowing = flowing
        self.flow_since = t

    def _due(self) -> float:
        """When `_total` passes the limit (s, pulled in by ``MARGIN``; -inf: already past, inf: not growing)."""
        if self.flowing:
            return self.flow_since + (self.limit - self.acc) - MARGIN
        return -INF if self.acc >= self.limit else INF

    def band(self, port: int) -> Band:
        """The count's readings reach the rule from the moment the limit may be passed (a confirmation needs
        one) and, while an episode is open, every one of them (its gap end's peak is the time counted at the
        last); the flow's from that moment too (the one that shows a count reading's time measured, and the
        confirmation)."""
        if self.count is None:
            return EMPTY
        if self.is_open:
            until = -INF if port == 0 else INF
        elif port == 0:
            until = self._due()
        else:
            until = self._flow_until()
        return self._port_band(port, until)

    def _flow_until(self) -> float:
        return -INF if self.shown is not None or self.pend is not None else self._due()

    def _port_band(self, port: int, until: float) -> Band:
        """Quiet while the count is unchanged (port 0) or the flow stays on the same side of zero (port 1)."""
        if port == 0:
            return EMPTY if self.count is None else (self.count, self.count, until)
        if self.flowing is None:
            return EMPTY
        if self.flowing:
            return math.nextafter(0.0, INF), INF, until
        return -INF, 0.0, until


class SamplerIntervalUnverified(SamplerInterval):
    """``sampler_interval_unverified`` (data quality): the sampling-interval clock does not stop because the
    flow reading is bad. Time since the last sample during which the flow is unknown (bad, or not yet read) is time
    in which the sampler may have been late: when it, added to the flowing time counted, passes the limit while the
    flowing time alone does not, the interval cannot be verified. As for `SamplerInterval`, that is shown at a
    reading only once a count reading has shown it: the count read unchanged with more than the limit (flowing plus
    unknown) behind it, or exactly the limit while that total grows (the flow above zero or unknown). A flow gap
    found later moves the flowing time it takes back to the unknown. The episode starts at its onset, the last
    sample, ``confirmed`` at that reading, and ends at the next sample. It is a data-quality episode (the flow
    meter's fault, not a discharge exceedance), so that an unverifiable interval is never silence.
    """

    __slots__ = ("moot", "uacc")
    runs = (RuleName.SAMPLER_INTERVAL_UNVERIFIED,)

    def __init__(self, *, binding: RuleBinding, out: list[EpisodeEvent]) -> None:
        super().__init__(binding=binding, out=out)
        self.uacc = 0.0  # unknown-flow seconds before `flow_since`, since the last sample
        # the flowing time alone passed the limit at a reading of this interval: `SamplerInterval`'s episode,
        # and never this one before the next sample (the flowing time only grows), so no reading need reach it
        self.moot = False

    def _unknown(self, t: float) -> float:
        return self.uacc + (t - self.flow_since if self.flowing is None else 0.0)

    def _total(self, t: float) -> float:
        return self._counted(t) + self._unknown(t)

    def _overdue(self, t: float) -> bool:
        return self._counted(t) <= self.limit < self._total(t)

    def _sampled(self) -> None:
        super()._sampled()
        self.uacc = 0.0  # the unknown-flow time starts afresh with the interval
        self.moot = False

    def _grows(self, flowing: bool | None) -> bool:
        return flowing is not False

    def _measured(self, t: float) -> bool:
        # its total counts unknown flow too: a gap found later moves time within it, never out; only exactly the
        # limit waits for the flow's state after the count reading (a flow reading at the same instant may stop it)
        return self.seen > self.limit or self.flow_t >= t

    def _unmeasured(self, s: float) -> None:
        self.uacc += s  # the flowing time taken back was unknown-flow time

    def _cut(self, t0: float) -> float:
        return INF  # a flow gap moves time within its total (flowing to unknown), never out: what it showed stands

    def gap(self, t0: float, v0: float, t1: float, port: int) -> None:
        if port == 1:
            self.moot = False  # the flowing time, counted on to now, is cut at the gap: maybe under the limit
        super().gap(t0, v0, t1, port)

    def _check(self, t: float) -> None:
        if not self.moot and self.count is not None and self._counted(t) > self.limit:
            self.moot = True
        super()._check(t)

    def bad(self, t: float, quality: str, port: int) -> None:
        super().bad(t, quality, port)
        self._check(t)

    def _set_flowing(self, t: float, flowing: bool | None) -> None:
        if flowing != self.flowing and self.flowing is None:
            self.uacc += t - self.flow_since
        super()._set_flowing(t, flowing)

    def _due(self) -> float:
        if self.moot or self.acc > self.limit:
            return INF  # the flowing time alone is over: `SamplerInterval`'s episode, not this one
        if self.flowing is not False:  # the total still grows: due when it passes the limit
            return self.flow_since + (self.limit - self.acc - self.uacc) - MARGIN
        return -INF if self.acc + self.uacc >= self.limit else INF

    def _flow_until(self) -> float:
        return INF if self.moot or self.acc > self.limit else super()._flow_until()
