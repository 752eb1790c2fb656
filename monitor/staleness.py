"""Staleness: a channel that has had no good reading for too long, judged on a clock tick.

Judging on the tick (style rule 9) is what catches a channel that went quiet, or never reported at all
since start: waiting for data to arrive would never notice its absence. When a channel goes stale the
daemon records one STALE sample (the evidence that the record has a hole, and the input of the `stale`
data-quality rule); the next good reading clears it. Pure: the caller passes ``now``.

Which clock: the windows measure *elapsed* time, so the daemon passes a monotonic clock as ``now`` and the
wall-clock time to stamp STALE samples with as ``stamp``. Judged on the wall clock, an NTP step forward made
every channel stale at once (a flood of false STALE samples and alarms) and a step back hid a channel that
really went quiet for as long as the step (tests/faults/test_clock_step.py).

A reading stamped ahead of the wall clock (MQTT devices may lead by up to 300 s, and are judged at their own
time) also holds the channel fresh until its own time plus the window. The STALE sample that the arrival clock
makes is stamped with the wall clock, which is then *before* that reading, so the checks judge the reading after
it and the ``stale`` episode ends at the reading's time. A stale channel whose newest good reading is stamped at
or after its STALE sample is therefore due again once the wall clock passes that reading's time by the window:
a second STALE sample, stamped then, records the silence after it. The arrival clock still decides when a
channel first goes stale, so an NTP step cannot fake it; the wall clock only times this second sample, which
a step forward can bring sooner for a channel that is already silent by the arrival clock.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from config.schema import Channel, SiteConfig
from monitor.logtext import duration, reading
from monitor.sample import Quality, Sample

log = logging.getLogger(__name__)
# channels logged one line each when many go stale at one tick (a site's devices unreachable at start-up): then
# one summary line. 10,000 warning lines took seconds of the event loop; the STALE samples record them all.
LOG_EACH = 20
_REPORTING = frozenset({Quality.GOOD, Quality.OVER_RANGE, Quality.MAINTENANCE})  # the instrument is answering


@dataclass(slots=True)
class _Watch:
    channel: Channel
    window: float  # s without a good reading before the channel is stale (strictly more than this)
    last_good: float  # receive time of the last good reading (or the start time), on the monotonic clock
    stale: bool = False
    newest: float = -math.inf  # wall time of the newest good reading (its own timestamp, which may lead)
    stale_at: float = -math.inf  # wall time the channel's last STALE sample was stamped with


class StalenessTracker:
    """Tracks the last good reading of every configured channel."""

    def __init__(self, *, config: SiteConfig, now: float) -> None:
        polls = config.daemon.stale_after_polls
        self._watches: dict[tuple[str, str], _Watch] = {}
        for ch in config.channels:
            inst = config.instruments_by_id[(ch.site, ch.instrument)]
            # A poll cannot report sooner than its reply timeout, so the window never undercuts one
            # interval plus one timeout (a 10 ms poll of a device with a 1 s timeout is not stale at 30 ms).
            window = ch.stale_after or max(inst.poll_interval * polls, inst.poll_interval + inst.timeout)
            self._watches[(ch.site, ch.id)] = _Watch(channel=ch, window=window, last_good=now)

    def restart(self, now: float) -> None:
        """Polling starts at ``now``: a window counts from here, not from when the daemon was built (start-up
        rebuilds rule state from the record first, which may take longer than a window)."""
        for w in self._watches.values():
            w.last_good = max(w.last_good, now)

    def window(self, site: str, channel: str) -> float:
        return self._watches[(site, channel)].window

    def observe(self, samples: Iterable[Sample], now: float) -> None:
        """Note good readings; ``now`` is when they arrived (device timestamps may lag or lead). An over-range
        reading counts: the instrument is reporting (an LEL meter saturated high), the checks judge it. So does
        a maintenance sample: the instrument answers that it is being serviced, which is no silence."""
        for s in samples:
            if s.quality not in _REPORTING:
                continue
            w = self._watches.get((s.site, s.channel))
            if w is None:
                continue
            w.last_good = now
            if s.time > w.newest:
                w.newest = s.time
            if w.stale:
                w.stale = False
                log.info("channel %s %s reporting again: %s", s.site, s.channel,
                         reading(s.value, site=s.site, channel=s.channel),
                         extra={"site": s.site, "channel": s.channel, "value": s.value})

    def tick(self, now: float, *, stamp: float | None = None) -> Sequence[Sample]:
        """One STALE sample for each channel that has just gone stale, timed ``stamp`` (default ``now``):
        the wall-clock time, when ``now`` is a monotonic clock (see the module doc). A channel already stale
        whose newest good reading is stamped at or after its STALE sample gets another once ``stamp`` is more
        than the window past that reading's time (a reading from a device clock ahead of the daemon's)."""
        wall = now if stamp is None else stamp
        out: list[Sample] = []
        for w in self._watches.values():
            if not w.stale:
                if now - w.last_good <= w.window:
                    continue
                quiet = now - w.last_good
                reason = f"no good reading for {quiet:.1f} s (window {w.window:g} s)"
            elif w.newest >= w.stale_at and wall - w.newest > w.window:
                quiet = wall - w.newest
                reason = (f"no good reading for {quiet:.1f} s after the newest reading's own time, which was ahead "
                          f"of the daemon's clock (window {w.window:g} s)")
            else:
                continue
            w.stale = True
            w.stale_at = wall
            ch = w.channel
            if len(out) < LOG_EACH:
                log.warning("channel %s %s stale: no good reading for %s", ch.site, ch.id, duration(quiet),
                            extra={"site": ch.site, "channel": ch.id, "quiet_s": quiet, "window_s": w.window})
            out.append(Sample.bad(time=wall, site=ch.site, channel=ch.id, unit=ch.unit, quality=Quality.STALE,
                                  reason=reason))
        if len(out) > LOG_EACH:
            log.warning("%d more channels stale (%d in all at this tick; each is recorded as a STALE reading, "
                        "`pretreat status` lists them)", len(out) - LOG_EACH, len(out),
                        extra={"stale_channels": len(out)})
        return out

    def stale_channels(self) -> list[tuple[str, str]]:
        return [k for k, w in self._watches.items() if w.stale]
