"""Per-day pre-aggregates, maintained as data arrives, so reports over months never rescan raw readings.

`DailyAggregator.observe` sees every batch the daemon ingests (cheap: a few attribute updates per reading) and
accrues, per site, channel and *local* calendar day: counts (received, good, late), min/max with their times,
sums, the time integral of the value (a reading's value holds until the next good reading, across at most the
channel's ``max_gap``, `monitor.checks.coverage`), totaliser and sample-counter increments apportioned over the
days they span, seconds outside the pH range or the sampler fridge band (timed as the 40 CFR 401.17 rules time
them: from the first reading outside to the first reading back inside; bad samples neither end nor interrupt an
excursion, a gap ends it at the last reading before it, so only measured time counts), the highest 30-minute
average flow rate, downtime (time not within the max gap of a good reading) and maintenance time.

Maintenance (quality ``maintenance``: the instrument said it was being serviced or calibrated) follows the check
engine's rule (`monitor.checks.coverage`): a maintenance sample's stretch runs to the channel's next sample of any
quality, at most ``max_gap`` long, and is accrued as ``maintenance`` seconds of the days it covers. It is neither
measured nor down: between two good readings its time is left out of ``covered``, ``outside`` and the integral,
and out of the gap test, so a calibration between readings polled every second is no downtime; what is left of
a longer interval after its maintenance time and the first ``max_gap`` seconds is downtime. A gap (an interval
longer than ``max_gap``, maintenance or not) still ends an excursion and the rolling peak's window, as it ends
an episode. `flush` merges what accrued
since the last flush into SQLite (see `aggregates_db`); `rebuild` recomputes a range of days from the historian
(backfill, late readings, tests).

Readings of one channel must arrive in time order (the check engine has the same rule): a reading older than
the channel's last one is counted as ``late`` in its day and not accrued, so replaying history after a restart
cannot count it twice. `rebuild` is the way to fold late readings in.

Kept whole at under 500 lines: `observe` (the per-reading accrual) and `rebuild` must apply the very same
day-boundary apportioning to the same per-channel state, and splitting them apart would put that state's rules in
two places; the SQL and the state's storage are already in `aggregates_db`, the rolling peak's buffer in
`peak_window`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from config.schema import SiteConfig
from monitor.checks.coverage import close_maintenance
from monitor.reports.aggregates_db import STATE_COLUMNS, UPSERT_DAY, ChannelState, connect, read_states
from monitor.reports.days import DayCursor, day_bounds, local_day, spread
from monitor.reports.peak_window import PeakWindow
from monitor.reports.plan import PEAK_WINDOW, ChannelPlan, compile_plans
from monitor.sample import GOOD, Quality, Sample
from monitor.stores.historian_db import HistorianReader, series_of

if TYPE_CHECKING:
    from monitor.progress import Progress

try:  # ordinary readings accrued in C (setup.py); absent where it could not be built
    from monitor.reports import _dayaccrue as _native
except ImportError:  # the install had no C compiler or headers: `DailyAggregator.observe` loops in Python
    _native = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
MAINTENANCE = Quality.MAINTENANCE


class _Day:
    """What accrued for one channel and day since the last flush (every field merges, see aggregates_db)."""

    __slots__ = ("count", "covered", "downtime", "first_t", "good", "integral", "last_t", "late", "maintenance",
                 "outside", "peak30", "peak30_t", "resets", "vmax", "vmax_t", "vmin", "vmin_t", "volume", "vsum")

    def __init__(self) -> None:
        self.count = self.good = self.late = self.resets = 0
        self.vsum = self.integral = self.covered = self.volume = self.outside = self.downtime = 0.0
        self.maintenance = 0.0
        self.vmin: float | None = None
        self.vmax: float | None = None
        self.peak30: float | None = None
        self.vmin_t = self.vmax_t = self.peak30_t = self.first_t = self.last_t = None  # type: float | None

    def row(self, site: str, channel: str, day: date) -> tuple[object, ...]:
        return (site, channel, day.isoformat(), self.count, self.good, self.late, self.vmin, self.vmin_t,
                self.vmax, self.vmax_t, self.vsum, self.integral, self.covered, self.volume, self.resets,
                self.outside, self.peak30, self.peak30_t, self.downtime, self.first_t, self.last_t, self.maintenance)


class _Chan:
    """One channel's accrual state and its days not yet flushed."""

    __slots__ = ("cursor", "days", "exc_high", "exc_low", "exc_start", "excursions", "good_t", "good_v",
                 "is_total", "last_t", "max_gap", "ml", "mseg", "ok_hi", "ok_lo", "outside", "plan", "rolling_peak",
                 "run_integral", "violates", "window")

    def __init__(self, plan: ChannelPlan, state: ChannelState | None) -> None:
        self.plan = plan
        self.is_total = plan.is_total  # plain attributes: read for every reading
        self.max_gap = plan.max_gap
        self.rolling_peak = plan.rolling_peak
        self.cursor = DayCursor(plan.tz)
        self.days: dict[date, _Day] = {}
        rng = plan.ph_range or plan.band
        self.violates = rng.violates() if rng is not None else None
        # readings inside the range: with no excursion open, such a reading changes nothing `excursion` keeps
        self.ok_lo, self.ok_hi = rng.complies() if rng is not None else (math.inf, -math.inf)
        self.window = PeakWindow()
        self.run_integral = 0.0
        self.excursions: list[tuple[float, float, float, float]] = []  # closed, not flushed
        self.ml: float | None = None  # the latest maintenance sample whose stretch is not closed yet
        self.mseg: list[tuple[float, float]] = []  # maintenance stretches [a, b) since the last good reading
        s = state
        self.last_t: float | None = s.last_t if s else None
        self.good_t: float | None = s.good_t if s else None
        self.good_v: float | None = s.good_v if s else None
        self.outside = s.outside if s else False
        self.exc_start: float | None = s.exc_start if s else None
        self.exc_low: float = s.exc_low if s and s.exc_low is not None else 0.0
        self.exc_high: float = s.exc_high if s and s.exc_high is not None else 0.0
        if s is not None:
            self.ml = s.maint_t
            self.mseg = [(float(a), float(b)) for a, b in json.loads(s.serviced or "[]")]

    def day(self, t: float) -> _Day:
        d = self.cursor.at(t)
        acc = self.days.get(d)
        if acc is None:
            acc = self.days[d] = _Day()
        return acc

    def _at(self, d: date) -> _Day:
        acc = self.days.get(d)
        if acc is None:
            acc = self.days[d] = _Day()
        return acc

    def sample(self, t: float, v: float | None, maint: bool = False) -> None:
        """Accrue one reading (``v`` None: a bad one; ``maint``: a bad one of quality ``maintenance``). Runs for
        every reading the daemon records, so the common case (a reading of the cursor's day, after a good one
        within the max gap, no maintenance) is written out inline."""
        last = self.last_t
        if last is not None and t < last:
            self.day(t).late += 1
            return
        self.last_t = t
        if self.ml is not None:
            self._close_maintenance(t)
        if maint:
            self.ml = t
        cur = self.cursor
        if cur.start <= t < cur.end:
            acc = self.days.get(cur.day) or self._at(cur.day)
        else:
            acc = self.day(t)
        acc.count += 1
        if acc.first_t is None:
            acc.first_t = t
        acc.last_t = t
        if v is None:
            return
        acc.good += 1
        acc.vsum += v
        vmin, vmax = acc.vmin, acc.vmax
        if vmin is None or v < vmin:
            acc.vmin, acc.vmin_t = v, t
        if vmax is None or v > vmax:
            acc.vmax, acc.vmax_t = v, t
        t0, v0 = self.good_t, self.good_v
        if t0 is not None and v0 is not None:
            gap = t - t0
            if (cur.start <= t0 and t < cur.end and gap <= self.max_gap and not self.outside and not self.is_total
                    and not self.mseg):
                acc.integral += v0 * gap  # `interval` for two readings of one day, neither down nor outside
                acc.covered += gap
            else:
                self.interval(t0, v0, t, v)
        elif self.mseg:
            self.mseg = []  # maintenance before the first good reading: no interval to take it out of
        if self.rolling_peak:
            self.rolling(t, v, acc)
        if self.violates is not None:
            self.excursion(t, v)
        self.good_t, self.good_v = t, v

    def _close_maintenance(self, t: float) -> None:
        """The pending maintenance sample's stretch ends at ``t`` (the next sample), at most ``max_gap`` long:
        accrued to the days it covers and kept for the next good reading's interval."""
        a, self.ml = self.ml, None
        assert a is not None
        stretch = close_maintenance(self.mseg, a, t, self.max_gap)
        if stretch is not None:
            spread(*stretch, self.cursor, self._maint)

    def _maint(self, d: date, s: float) -> None:
        self._at(d).maintenance += s

    def interval(self, t0: float, v0: float, t: float, v: float) -> None:
        """Accrue the interval between two successive good readings over the days it spans."""
        plan, cur = self.plan, self.cursor
        gap = t - t0
        single = cur.start <= t0 and t < cur.end  # the common case: both readings in today
        serviced = bool(self.mseg)
        if serviced:
            self._serviced_interval(t0, v0, t)
        elif gap <= plan.max_gap:
            if single:
                acc = self.days[cur.day]
                acc.integral += v0 * gap
                acc.covered += gap
            else:
                spread(t0, t, cur, lambda d, s: self._cover(d, s, v0))
        else:
            spread(t0 + plan.max_gap, t, cur, self._down)
            self.window.clear()  # a 30-minute average needs 30 minutes of data
            self._end_excursion(t0)  # only measured time is excursion time (monitor.checks.coverage)
        if self.outside and not serviced:
            if single:
                self.days[cur.day].outside += gap
            else:
                spread(t0, t, cur, self._out)
        if self.is_total:
            delta = v - v0
            if delta < 0:
                self.day(t).resets += 1
            elif single or delta == 0:
                self.days[cur.day].volume += delta
            else:
                spread(t0, t, cur, lambda d, s: self._vol(d, delta * s / gap))
        cur.at(t)  # leave the cursor on the reading's day

    def _serviced_interval(self, t0: float, v0: float, t: float) -> None:
        """Covered, outside and down time of an interval with maintenance in it: only its other time (the free
        pieces) counts; if that is longer than ``max_gap`` it is down after its first ``max_gap`` seconds."""
        free: list[tuple[float, float]] = []
        a = t0
        for s0, s1 in self.mseg:
            s0, s1 = max(s0, t0), min(s1, t)
            if s0 > a:
                free.append((a, s0))
            a = max(a, s1)
        if a < t:
            free.append((a, t))
        self.mseg = []
        if t - t0 <= self.max_gap:
            for a, b in free:
                spread(a, b, self.cursor, lambda d, s: self._cover(d, s, v0))
                if self.outside:
                    spread(a, b, self.cursor, self._out)
            return
        skip = self.max_gap if sum(b - a for a, b in free) > self.max_gap else float("inf")
        for a, b in free:
            used = min(skip, b - a)
            skip -= used
            spread(a + used, b, self.cursor, self._down)
        self.window.clear()
        self._end_excursion(t0)

    def _cover(self, d: date, s: float, v0: float) -> None:
        acc = self._at(d)
        acc.integral += v0 * s
        acc.covered += s

    def _down(self, d: date, s: float) -> None:
        self._at(d).downtime += s

    def _out(self, d: date, s: float) -> None:
        self._at(d).outside += s

    def _vol(self, d: date, amount: float) -> None:
        self._at(d).volume += amount

    def rolling(self, t: float, v: float, acc: _Day) -> None:
        """The highest average rate over any 30 minutes fully covered by data, credited to the day the
        window ends in. The running integral uses the same held values as ``integral``."""
        w = self.window
        if w.size:
            lt, li, lv = w.last()
            self.run_integral = li + lv * (t - lt)
        w.append(t, self.run_integral, v)
        edge = t - PEAK_WINDOW
        while w.size > 1 and w.second_time() <= edge:
            w.popleft()
        t_first, i_first, v_first = w.first()
        if t_first <= edge:
            avg = (self.run_integral - (i_first + v_first * (edge - t_first))) / PEAK_WINDOW
            if acc.peak30 is None or avg > acc.peak30:
                acc.peak30, acc.peak30_t = avg, t

    def _end_excursion(self, t0: float) -> None:
        """A gap after the reading at ``t0``: an excursion in progress ends there, as the pH rules end it."""
        if self.exc_start is not None:
            self.excursions.append((self.exc_start, t0, self.exc_low, self.exc_high))
            self.exc_start = None
        self.outside = False

    def excursion(self, t: float, v: float) -> None:
        assert self.violates is not None
        out = self.violates(v)
        if out:
            if self.exc_start is None:
                self.exc_start, self.exc_low, self.exc_high = t, v, v
            else:
                self.exc_low, self.exc_high = min(self.exc_low, v), max(self.exc_high, v)
        elif self.exc_start is not None:
            self.excursions.append((self.exc_start, t, self.exc_low, self.exc_high))
            self.exc_start = None
        self.outside = out

    def state_row(self) -> tuple[object, ...]:
        p = self.plan
        open_ = self.exc_start is not None
        return (p.site, p.channel, self.last_t, self.good_t, self.good_v, int(self.outside), self.exc_start,
                self.exc_low if open_ else None, self.exc_high if open_ else None, self.ml,
                json.dumps(self.mseg) if self.mseg else None)


@dataclass(frozen=True, slots=True)
class RebuildResult:
    days: int  # channel-days written
    readings: int  # readings fed from the historian


class DailyAggregator:
    """Keeps the per-day pre-aggregates of every configured channel. See the module doc.

    Threading: `observe` runs on the daemon's event loop; `flush` may run there or in a worker thread (it
    takes what accrued under a lock, then writes without holding it).
    """

    def __init__(self, *, path: Path, config: SiteConfig) -> None:
        self.path = Path(path)
        self.config = config
        self.plans = compile_plans(config)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._conn = connect(self.path)
        states = read_states(self._conn)
        self._chans = {key: _Chan(plan, states.get(key)) for key, plan in self.plans.items()}
        self.unknown = 0  # samples of channels not in the configuration (not aggregated)

    def observe(self, samples: Sequence[Sample]) -> None:
        """Accrue a batch (any order across channels; time order within one channel).

        Where the extension is built (`monitor.reports._dayaccrue`), the ordinary readings (`_Chan.sample`'s
        inline case) are accrued in C, the same comparisons and arithmetic, and every other one here."""
        chans = self._chans
        with self._lock:
            if _native is not None and isinstance(samples, list | tuple):
                run = _native.run
                i = run(samples, 0, chans, GOOD, MAINTENANCE)
                while i < len(samples):  # (read again: the Python a reading runs may have changed the batch)
                    self._accrue(samples[i])
                    i = run(samples, i + 1, chans, GOOD, MAINTENANCE)
                return
            for s in samples:
                self._accrue(s)

    def _accrue(self, s: Sample) -> None:
        ch = self._chans.get((s.site, s.channel))
        if ch is None:
            self.unknown += 1
            return
        q = s.quality
        ch.sample(s.time, s.value if q is GOOD else None, q is MAINTENANCE)

    def flush(self) -> int:
        """Merge everything accrued since the last flush into the database; returns channel-days written."""
        with self._write_lock:
            with self._lock:
                taken = [(c, c.days, c.excursions, c.state_row()) for c in self._chans.values()
                         if c.days or c.excursions]
                for c, _d, _e, _s in taken:
                    c.days, c.excursions = {}, []
            return self._write(taken, states=True)

    def _write(self, taken: Iterable[tuple[_Chan, dict[date, _Day], list[tuple[float, float, float, float]],
                                           tuple[object, ...]]], *, states: bool,
               keep: tuple[date, date] | None = None) -> int:
        rows: list[tuple[object, ...]] = []
        excursions: list[tuple[object, ...]] = []
        state_rows: list[tuple[object, ...]] = []
        for c, days, exc, state in taken:
            p = c.plan
            rows.extend(acc.row(p.site, p.channel, d) for d, acc in days.items()
                        if keep is None or keep[0] <= d <= keep[1])
            excursions.extend((p.site, p.channel, "ph" if p.ph_range else "band", *e) for e in exc)
            state_rows.append(state)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(UPSERT_DAY, rows)
            conn.executemany("INSERT OR REPLACE INTO report_excursions (site, channel, kind, start, end, low, "
                             "high) VALUES (?, ?, ?, ?, ?, ?, ?)", excursions)
            if states:
                conn.executemany(f"INSERT OR REPLACE INTO report_state ({', '.join(STATE_COLUMNS)}) VALUES "
                                 f"({', '.join('?' * len(STATE_COLUMNS))})", state_rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(rows)

    def close(self) -> None:
        self.flush()
        self._conn.close()

    def open_excursions(self) -> dict[tuple[str, str], tuple[float, float, float]]:
        """Excursions in progress: (site, channel) -> (start, low, high)."""
        with self._lock:
            return {k: (c.exc_start, c.exc_low, c.exc_high) for k, c in self._chans.items()
                    if c.exc_start is not None}

    def rebuild(self, start: float, end: float, *, historian: Path | None = None, site: str | None = None,
                progress: Progress | None = None) -> RebuildResult:
        """Recompute the local days touching [start, end) from the historian, replacing their rows (of
        ``site`` only, if given; ``progress`` advances by one per channel).

        Each channel is fed from its last good reading before the first day (so gaps and held values across
        the boundary accrue as live) plus half an hour (the rolling peak's window). Excursions that started
        inside the days are replaced; the live state is left alone unless the rebuilt range reaches past it.
        """
        self.flush()
        path = Path(historian or self.config.daemon.historian)
        fed = written = 0
        sites = [s for s in self.config.sites if site is None or s.id == site]
        if progress is not None:
            progress.total(sum(1 for p in self.plans.values() if p.site in {s.id for s in sites}))
        with HistorianReader(path=path) as reader:
            for one in sites:
                plans = [p for p in self.plans.values() if p.site == one.id]
                if not plans:
                    continue
                tz = plans[0].tz
                first, last = local_day(start, tz), local_day(max(start, end - 1e-6), tz)
                lo, hi = day_bounds(first, tz)[0], day_bounds(last, tz)[1]
                self._conn.execute("DELETE FROM report_daily WHERE site = ? AND day >= ? AND day <= ?",
                                   (one.id, first.isoformat(), last.isoformat()))
                self._conn.execute("DELETE FROM report_excursions WHERE site = ? AND start >= ? AND start < ?",
                                   (one.id, lo, hi))
                for plan in plans:
                    if progress is not None:
                        progress.note(f"{plan.site}/{plan.channel}")
                    n, w = self._rebuild_channel(reader, plan, lo, hi, (first, last))
                    fed, written = fed + n, written + w
                    if progress is not None:
                        progress.advance()
        return RebuildResult(days=written, readings=fed)

    def _rebuild_channel(self, reader: HistorianReader, plan: ChannelPlan, lo: float, hi: float,
                         keep: tuple[date, date]) -> tuple[int, int]:
        chan = _Chan(plan, None)
        feed_from = lo - PEAK_WINDOW
        prior = _good_reading(reader, plan, feed_from, before=True)
        if prior is not None:
            chan.sample(*prior)
        n = 0
        for s in reader.query(site=plan.site, channel=plan.channel, start=feed_from, end=hi):
            chan.sample(s.time, s.value if s.good else None, s.quality is MAINTENANCE)
            n += 1
        after = _good_reading(reader, plan, hi, before=False)
        if after is not None:  # closes the last day's final interval, as the next live reading does
            chan.sample(*after)
        chan.excursions = [e for e in chan.excursions if lo <= e[0] < hi and e[0] > feed_from]
        live = self._chans[(plan.site, plan.channel)]
        reaches = chan.last_t is not None and (live.last_t is None or chan.last_t >= live.last_t)
        written = self._write([(chan, chan.days, chan.excursions, chan.state_row())], states=reaches, keep=keep)
        if reaches:
            with self._lock:
                chan.days, chan.excursions = {}, []
                chan.cursor = DayCursor(plan.tz)
                self._chans[(plan.site, plan.channel)] = chan
        return n, written


if _native is not None:
    _native.bind(Sample, _Chan, DayCursor, _Day, PeakWindow, float(PEAK_WINDOW))


def _good_reading(reader: HistorianReader, plan: ChannelPlan, t: float, *,
                  before: bool) -> tuple[float, float] | None:
    """The channel's last good reading before ``t`` or first at or after it (an index seek on the clustered
    (channel_id, time) key, not a scan; good readings are rarely far away)."""
    best: tuple[float, float] | None = None
    sql = ("SELECT time, value FROM readings WHERE channel_id = ? AND quality = 0 AND "
           + ("time < ? ORDER BY time DESC LIMIT 1" if before else "time >= ? ORDER BY time LIMIT 1"))
    for cid, _unit in series_of(reader.conn, plan.site, plan.channel):
        row = reader.conn.execute(sql, (cid, t)).fetchone()
        if row is not None and (best is None or (row[0] > best[0]) == before):
            best = (float(row[0]), float(row[1]))
    return best
