"""Data coverage: which stretches of a channel's time were measured, one rule for every check.

We only allege what was measured. Two consecutive good readings of a channel further apart than the channel's
``max_gap`` (seconds, `config.schema.Channel.max_gap`) have a *gap* between them: nothing is known about the
discharge inside it. Bad samples between two good readings neither make nor close a gap (a bad sample is not a
measurement); the interval between the two good readings decides.

- An interval between consecutive good readings of at most ``max_gap`` (inclusive) is *measured* time; a longer
  one is *unmeasured*.
- An episode does not continue across a gap: the engine (`monitor.checks.engine.Processor`) tells every rule of
  the channel about it (``Rule.gap``) before the reading after it is judged; per-reading and duration rules end
  their episode at the last reading before the gap (``end_reason = "gap"``) and, if the channel is still out of
  limits, start a new one at the first reading after it. Rules whose episode legitimately spans unmeasured time
  (the calendar month of 40 CFR 401.17(a)(1), a slug whose rule chooses to) count the gap as unmeasured.
- Every episode's end carries ``measured_seconds`` and ``unmeasured_seconds``; they add up to its span (end time
  minus start time). The measured figure is what the record proves; measured + unmeasured is the worst case.
- Rolling statistics weigh each reading by the time to the next one, capped at ``max_gap`` (`weight`), so a
  burst of readings does not outweigh a steady stretch and a reading before a hole does not stand for the hole.

The default ``max_gap``, set by the loader (`config.instruments.default_max_gap`), is 3 × the instrument's poll
interval (for MQTT: its expected publishing interval, the same ``poll_interval`` key), never under 5 s: one or
two missed polls are ordinary (a timeout, a reconnect), three in a row are a hole in the record.

Maintenance (the instrument's own service/calibration status, quality ``maintenance``) is a third category,
neither measured nor unmeasured. Its readings are not judged (they are bad samples) and its time is not a gap:

- *maintenance time* runs from a ``maintenance`` sample to the channel's next sample of any quality, each such
  stretch counted up to ``max_gap`` (an instrument that said "in calibration" and then fell silent for a day
  was in calibration for at most ``max_gap`` of it: the rest is unexplained);
- the gap test between two good readings leaves the maintenance time out: a two-hour calibration between
  readings polled every second is no gap, and no downtime. If the interval is longer than ``max_gap`` only
  because of it, rules that end episodes at a gap end them at the last reading before it with
  ``end_reason = "maintenance"`` (nothing is alleged about a discharge while the instrument was serviced:
  the record says so, and why); if the interval without its maintenance time is still longer, it is a gap;
- shorter maintenance keeps an episode open (as any bad sample does: toggling a calibration bit cannot split
  an excursion), and every episode's end carries ``maintenance_seconds`` beside ``measured_seconds`` and
  ``unmeasured_seconds``: the three add up to its span, and the measured figure never includes maintenance.

This module is the shared vocabulary (end reasons, the accounting helpers); the slug rule uses the same
`Coverage` for its candidate and baseline time.
"""

from __future__ import annotations

import math

END_CLEARED = "cleared"  # a reading back within limits (or, for the sampler interval, a new sample)
END_GAP = "gap"  # the last reading before a gap in the data: nothing is alleged about the time after it
END_MONTH = "month_end"  # the first reading at or after the end of the accounting month (40 CFR 401.17(a)(1))
END_MAINTENANCE = "maintenance"  # the last reading before the instrument's service/calibration period (see above)
END_REASONS = (END_CLEARED, END_GAP, END_MONTH, END_MAINTENANCE)
# Two ends of one rule at one instant end two episodes: the one open before the instant, then one that began at it
# (records from before 2026-12-04 hold a sampler's: the next overdue interval's onset was the sample that cleared
# the last, and a gap in the count then ended it there). The first is ended by that instant's reading (cleared,
# month_end); the second by what is known only later (the last reading before a gap or a service period). So at one
# instant ends pair in this order, whatever order they were stored in (a correction after late readings can store
# the second first). An end recorded before its reason was kept (None) was the only one at its instant.
_END_ORDER = {None: 0, END_CLEARED: 0, END_MONTH: 1, END_GAP: 2, END_MAINTENANCE: 2}


def end_order(reason: str | None) -> int:
    """Where an end with ``reason`` comes among ends of one rule at one instant (see `_END_ORDER`)."""
    return _END_ORDER.get(reason, 0)


def is_gap(dt: float, max_gap: float) -> bool:
    """True when ``dt`` seconds between two consecutive good readings is a gap (strictly longer than max_gap)."""
    return dt > max_gap


def weight(dt: float, max_gap: float) -> float:
    """A reading's weight in a time-weighted mean: the time to the next reading, capped at ``max_gap``."""
    return dt if dt <= max_gap else max_gap


def close_maintenance(stretches: list[tuple[float, float]], start: float, t: float,
                      max_gap: float) -> tuple[float, float] | None:
    """End the maintenance stretch that a ``maintenance`` sample at ``start`` began, at ``t`` (the channel's next
    sample), at most ``max_gap`` long (see the module doc), and add it to ``stretches`` (merged with the last one
    when they touch). Returns the stretch, or None when it is empty. The engine and the day aggregates both keep
    their stretches with this, so a report's maintenance time is the time the rules left out."""
    end = min(t, start + max_gap)
    if end <= start:
        return None
    if stretches and stretches[-1][1] >= start:
        stretches[-1] = (stretches[-1][0], end)
    else:
        stretches.append((start, end))
    return start, end


class Coverage:
    """Measured and unmeasured seconds over a stretch of one channel's readings.

    ``add(dt)`` takes the interval between two consecutive good readings: up to ``max_gap`` it is measured, a
    longer one unmeasured. ``hole(dt)`` adds unmeasured time directly (the engine has already decided it is a
    gap). Used by rules whose episode may span a gap and by the slug rule's candidate timing.
    """

    __slots__ = ("max_gap", "measured", "unmeasured")

    def __init__(self, *, max_gap: float = math.inf) -> None:
        self.max_gap = max_gap
        self.measured = 0.0
        self.unmeasured = 0.0

    def add(self, dt: float) -> None:
        if dt > self.max_gap:
            self.unmeasured += dt
        else:
            self.measured += dt

    def hole(self, dt: float) -> None:
        self.unmeasured += dt

    def reset(self) -> None:
        self.measured = self.unmeasured = 0.0


class TimeWeightedMean:
    """A mean of readings, each weighted by the time to the next reading capped at ``max_gap`` (seconds).

    The latest reading has no weight until the next one arrives (its interval is not known yet). ``mean`` is
    None until some reading has weight.
    """

    __slots__ = ("last_t", "last_v", "max_gap", "total", "weight")

    def __init__(self, *, max_gap: float) -> None:
        self.max_gap = max_gap
        self.total = 0.0
        self.weight = 0.0
        self.last_t: float | None = None
        self.last_v = 0.0

    def add(self, t: float, v: float) -> None:
        if self.last_t is not None:
            w = weight(t - self.last_t, self.max_gap)
            self.total += self.last_v * w
            self.weight += w
        self.last_t, self.last_v = t, v

    @property
    def mean(self) -> float | None:
        return self.total / self.weight if self.weight > 0.0 else None
