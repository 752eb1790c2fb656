"""Late and out-of-order readings: the live engine's record (events, then revisions applied as the episode
store applies them) equals a replay of the same readings sorted by time, whatever the arrival order.

The property runs on every golden case (tests/cases/: every rule kind, boundary and jurisdiction): readings
dropped at random (gaps), some delivered twice, the rest delivered in a random order within a skew window, a
block delivered after a clock step back, in random batches. Readings older than the engine's window are
judged again from a history made of the readings delivered so far, as the daemon does from its historian.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks import rewind
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent, parse_iso
from monitor.checks.revisions import Revision
from monitor.sample import Quality, Sample

CASES = Path(__file__).resolve().parents[1] / "cases"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "readings.csv").exists())
Reading = tuple[float, str, float | None, str]  # time, channel, value, quality


def _case(name: str) -> tuple[SiteConfig, list[Reading]]:
    config = load_config(CASES / name / "site.toml")
    rows: list[Reading] = []
    with (CASES / name / "readings.csv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            q = (r.get("quality") or "good").strip().lower() or "good"
            rows.append((parse_iso(r["time"]), r["channel"], float(r["value"]) if q == "good" else None, q))
    return config, rows


def _sample(site: str, r: Reading) -> Sample:
    t, ch, v, q = r
    if q == "good":
        assert v is not None
        return Sample(time=t, site=site, channel=ch, value=v, unit="")
    return Sample.bad(time=t, site=site, channel=ch, unit="", quality=Quality(q), reason=q)


class Record:
    """The episode store's semantics: events keyed by (site, channel, rule, event, time); a revision
    withdraws, then adds; a recorded event that was withdrawn is restored."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str, float], tuple[EpisodeEvent, bool]] = {}

    @staticmethod
    def key(e: EpisodeEvent) -> tuple[str, str, str, str, float]:
        return e.site, e.channel, e.rule, e.event, e.time

    def record(self, events: Iterable[EpisodeEvent]) -> None:
        for e in events:
            old = self.rows.get(self.key(e))
            self.rows[self.key(e)] = (old[0] if old else e, False)

    def revise(self, revs: Iterable[Revision]) -> None:
        for r in revs:
            for e in r.withdrawn:
                if self.key(e) in self.rows:
                    self.rows[self.key(e)] = (self.rows[self.key(e)][0], True)
            for e in r.added:
                self.rows[self.key(e)] = (e, False)

    def events(self) -> list[EpisodeEvent]:
        return sorted((e for e, gone in self.rows.values() if not gone), key=self.key)


def replayed(config: SiteConfig, readings: Sequence[Reading]) -> list[EpisodeEvent]:
    """`pretreat replay`'s engine over the readings sorted by (time, channel order, arrival)."""
    rank = {c.id: i for i, c in enumerate(config.channels)}
    order = sorted(range(len(readings)), key=lambda i: (readings[i][0], rank[readings[i][1]], i))
    engine = CheckEngine.for_config(config)
    site = config.sites[0].id
    events = engine.process_many(_sample(site, readings[i]) for i in order)
    assert engine.rejected == 0
    rec = Record()
    rec.record(events)
    return rec.events()


def live(config: SiteConfig, arrivals: Sequence[Reading], batches: Sequence[int]) -> tuple[list[EpisodeEvent],
                                                                                           CheckEngine]:
    engine = CheckEngine.for_config(config, live=True)
    site = config.sites[0].id
    rec = Record()
    delivered: list[Reading] = []

    def history(s: str, ch: str, start: float, end: float) -> Iterator[tuple[float, float, str | None]]:
        rows = sorted((r for r in delivered if r[1] == ch and start <= r[0] < end), key=lambda r: r[0])
        for t, _c, v, q in rows:
            yield (t, v, None) if q == "good" and v is not None else (t, math.nan, q)

    i, b = 0, 0
    while i < len(arrivals):
        n = batches[b % len(batches)]
        b += 1
        batch = arrivals[i:i + n]
        i += n
        delivered.extend(batch)
        rec.record(engine.process_many(_sample(site, r) for r in batch))
        rec.revise(engine.drain_revisions())
        if engine.waiting_for_history:  # the daemon: once the historian has committed the batch
            engine.rejudge_from_history(history)
            rec.revise(engine.drain_revisions())
    return rec.events(), engine


@st.composite
def deliveries(draw: st.DrawFn, n: int) -> tuple[list[int], list[int]]:
    """Arrival order (indices, duplicates allowed, some dropped) and batch sizes."""
    keep = [i for i in range(n) if draw(st.integers(0, 9)) > 1]  # ~20 % dropped: random gaps
    dupes = draw(st.lists(st.sampled_from(keep), max_size=3)) if keep else []
    skew = draw(st.integers(0, 6))
    jitter = [draw(st.integers(0, skew)) for _ in keep]
    order = [i for _, i in sorted(zip((k + j for k, j in zip(range(len(keep)), jitter, strict=True)),
                                      keep, strict=True))]
    for d in dupes:
        order.insert(draw(st.integers(order.index(d), len(order))), d)
    if len(order) > 4 and draw(st.booleans()):  # clock stepped back: a block arrives after later readings
        a = draw(st.integers(0, len(order) - 2))
        z = draw(st.integers(a + 1, min(len(order), a + 20)))
        block = order[a:z]
        del order[a:z]
        at = draw(st.integers(a, len(order)))
        order[at:at] = block
    batches = draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))
    return order, batches


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_live_after_revisions_equals_replay_of_sorted_readings(name: str, data: st.DataObject) -> None:
    config, rows = _case(name)
    order, batches = data.draw(deliveries(len(rows)))
    arrivals = [rows[i] for i in order]
    got, engine = live(config, arrivals, batches)
    assert got == replayed(config, arrivals)
    assert engine.counters()["rejected"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_reversed_arrival_equals_replay(name: str) -> None:
    """The worst order: every reading after a newer one (each one late, most older than the window)."""
    config, rows = _case(name)
    arrivals = rows[::-1]
    got, engine = live(config, arrivals, [max(1, len(rows) // 40)])
    assert got == replayed(config, arrivals)
    if len({r[0] for r in rows}) > 1:
        assert engine.counters()["late"] > 0


@pytest.mark.parametrize("name", ["data_quality_stale_sensor_fault_flatline",
                                  "slug_mass_loading_flow_times_concentration", "sampler_pawling_fridge_and_interval",
                                  "ph_bad_samples_inside_excursion", "lel_exactly_5_and_10_percent"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_small_windows_and_frequent_checkpoints_keep_the_invariant(name: str, data: st.DataObject) -> None:
    """The same property with a window of 3 readings, a checkpoint every 2 readings or 100 s: trimming,
    count-based checkpoints and rebuilds from the history happen on nearly every late reading."""
    config, rows = _case(name)
    order, batches = data.draw(deliveries(len(rows)))
    arrivals = [rows[i] for i in order]
    saved = rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY
    rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY = 100.0, 3, 2, 100.0
    try:
        got, _engine = live(config, arrivals, batches)
    finally:
        rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY = saved
    assert got == replayed(config, arrivals)
