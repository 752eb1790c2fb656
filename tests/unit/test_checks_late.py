"""Late and out-of-order readings: the live engine's record (events, then revisions applied as the episode
store applies them) equals a replay of the same readings sorted by time, whatever the arrival order.

The property runs on every golden case (tests/cases/: every rule kind, boundary and jurisdiction): readings
dropped at random (gaps), some delivered twice, the rest delivered in a random order within a skew window, a
block delivered after a clock step back, in random batches. Readings older than the engine's window are
judged again from a history made of the readings delivered so far, as the daemon does from its historian.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks import engine as engine_mod
from monitor.checks import rewind
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent, parse_iso
from tests.unit.checks_helpers import (
    CASES,
    NAMES,
    Reading,
    Record,
    flow_and_count_trace,
    golden_case,
    live_arrivals,
    sample_of,
)

# cases of days of readings (the slug baselines): fewer Hypothesis examples, each costs seconds
LONG = [n for n in NAMES if len((CASES / n / "readings.csv").read_text(encoding="utf-8").splitlines()) > 1000]


def replay_engine(config: SiteConfig, readings: Sequence[Reading]) -> tuple[list[EpisodeEvent], CheckEngine]:
    """`pretreat replay`'s engine over the readings sorted by (time, channel order, arrival)."""
    rank = {c.id: i for i, c in enumerate(config.channels)}
    order = sorted(range(len(readings)), key=lambda i: (readings[i][0], rank[readings[i][1]], i))
    engine = CheckEngine.for_config(config)
    site = config.sites[0].id
    events = engine.process_many(sample_of(site, readings[i]) for i in order)
    assert engine.rejected == 0
    rec = Record()
    rec.record(events)
    return rec.events(), engine


def replayed(config: SiteConfig, readings: Sequence[Reading]) -> list[EpisodeEvent]:
    return replay_engine(config, readings)[0]


# where a single-channel slug fed its last value: set only off the fast path (mass loading uses it, and its
# readings never take the fast path), so it says which readings took which path, not what the rule knows
PATH_ONLY = frozenset({"last_t", "last_v"})


def rule_states(engine: CheckEngine) -> list[tuple[str, str, dict[str, object]]]:
    """Every slug rule's state (`Rule.snapshot`): its days of normal operation, the day and minute in progress,
    the baseline fixed at midnight, candidate and frozen threshold. Equal whichever readings took the fast path
    (the slug's band ends at every minute: each minute's first reading is judged in full), `PATH_ONLY` apart.
    Other rules may roll lazily (a month ends at the next reading off the fast path), so their states are
    compared by their events."""
    return [(b.channel, b.rule, {n: v for n, v in zip(r.state_names(), r.snapshot(), strict=True)
                                 if n not in PATH_ONLY})
            for b, r in engine.rules if b.rule == "slug"]


@st.composite
def deliveries(draw: st.DrawFn, n: int) -> tuple[list[int], list[int]]:
    """Arrival order (indices, duplicates allowed, some dropped) and batch sizes.

    The structure (how many dropped, the skew, duplicates, a clock step back and where) is drawn by Hypothesis;
    the per-reading choices come from a `random.Random` seeded by a number it draws, so a slug case of 10,000 readings
    costs as little to generate as a threshold case of 10."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    drop = draw(st.sampled_from([0.0, 0.01, 0.2]))  # none, a few single holes, ~20 %: random gaps
    keep = [i for i in range(n) if rnd.random() >= drop]
    skew = draw(st.integers(0, 6))
    order = [i for _, i in sorted((k + rnd.randint(0, skew), i) for k, i in enumerate(keep))]
    for _ in range(draw(st.integers(0, 3)) if keep else 0):  # duplicates, each after its first delivery
        d = rnd.choice(keep)
        order.insert(rnd.randint(order.index(d), len(order)), d)
    if len(order) > 4 and draw(st.booleans()):  # clock stepped back: a block arrives after later readings
        a = rnd.randint(0, len(order) - 2)
        z = rnd.randint(a + 1, min(len(order), a + draw(st.sampled_from([20, 200]))))
        block = order[a:z]
        del order[a:z]
        at = rnd.randint(a, len(order))
        order[at:at] = block
    batches = draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))
    return order, batches


def _check(name: str, order: Sequence[int], batches: Sequence[int]) -> None:
    """Live (after revisions) == replay of the sorted readings: the episodes, and the slug rules' final state."""
    config, rows = golden_case(name)
    arrivals = [rows[i] for i in order]
    got, engine = live_arrivals(config, arrivals, batches)
    want, replay = replay_engine(config, arrivals)
    assert got == want
    assert rule_states(engine) == rule_states(replay)
    assert engine.counters()["rejected"] == 0


SHORT = [n for n in NAMES if n not in LONG]


@pytest.mark.parametrize("name", SHORT)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_live_after_revisions_equals_replay_of_sorted_readings(name: str, data: st.DataObject) -> None:
    _check(name, *data.draw(deliveries(len(golden_case(name)[1]))))


@pytest.mark.parametrize("name", LONG)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_days_of_slug_readings_late_equal_replay(name: str, data: st.DataObject) -> None:
    """The slug cases (days of minute readings: the baseline's days of normal operation, the day and minute in
    progress, onset and confirmation): fewer examples, each thousands of readings in a shuffled order."""
    _check(name, *data.draw(deliveries(len(golden_case(name)[1]))))


@pytest.mark.parametrize("name", NAMES)
def test_reversed_arrival_equals_replay(name: str) -> None:
    """The worst order: every reading after a newer one (each one late, most older than the window)."""
    config, rows = golden_case(name)
    arrivals = rows[::-1]
    got, engine = live_arrivals(config, arrivals, [max(1, len(rows) // 40)])
    assert got == replayed(config, arrivals)
    if len({r[0] for r in rows}) > 1:
        assert engine.counters()["late"] > 0


# the mass-loading case holds two days of readings of two channels: with a window of 3 readings nearly every
# late one rebuilds from the history, 25 times over; that took 4 min 22 s at load 5 (the fast suite's longest
# test by far), so it runs with the slow suite (make test-slow, in CI)
@pytest.mark.parametrize("name", ["data_quality_stale_sensor_fault_flatline",
                                  pytest.param("slug_mass_loading_flow_times_concentration", marks=pytest.mark.slow),
                                  "sampler_pawling_fridge_and_interval", "ph_bad_samples_inside_excursion",
                                  "lel_exactly_5_and_10_percent"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_small_windows_and_frequent_checkpoints_keep_the_invariant(name: str, data: st.DataObject) -> None:
    """The same property with a window of 3 readings, a checkpoint every 2 readings or 100 s: trimming,
    count-based checkpoints and rebuilds from the history happen on nearly every late reading."""
    config, rows = golden_case(name)
    order, batches = data.draw(deliveries(len(rows)))
    arrivals = [rows[i] for i in order]
    saved = rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY
    rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY = 100.0, 3, 2, 100.0
    try:
        got, engine = live_arrivals(config, arrivals, batches)
    finally:
        rewind.WINDOW, rewind.MAX_WINDOW, rewind.CHECKPOINT_READINGS, rewind.CHECKPOINT_EVERY = saved
    want, replay = replay_engine(config, arrivals)
    assert got == want
    assert rule_states(engine) == rule_states(replay)


@pytest.mark.parametrize("name", ["data_quality_stale_sensor_fault_flatline", "sampler_pawling_fridge_and_interval",
                                  "ph_bad_samples_inside_excursion", "lel_exactly_5_and_10_percent"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quiet_stretches_judged_again_in_chunks_keep_the_invariant(name: str, data: st.DataObject) -> None:
    """A rewind tests a quiet stretch of the window a chunk at once (`rewind.CHUNK`); with chunks of 3 readings
    (at least 2) their edges fall on every kind of reading the cases hold: a bad sample, a gap, a reading out of
    the band, a checkpoint due."""
    config, rows = golden_case(name)
    order, batches = data.draw(deliveries(len(rows)))
    arrivals = [rows[i] for i in order]
    saved = rewind.CHUNK, rewind.MIN_CHUNK
    rewind.CHUNK, rewind.MIN_CHUNK = 3, 2
    try:
        got, engine = live_arrivals(config, arrivals, batches)
    finally:
        rewind.CHUNK, rewind.MIN_CHUNK = saved
    want, replay = replay_engine(config, arrivals)
    assert got == want
    assert rule_states(engine) == rule_states(replay)



# the pH case of gaps_end_episodes_measured_seconds, its meter polled every second (max_gap 5 s, the loader's least):
# in the chunks `rewind.CHUNK` tests at once, a step of exactly max_gap is measured time and one just over it is a
# gap, which ends the open excursion
GAP_CASE = "gaps_end_episodes_measured_seconds"


@pytest.mark.parametrize("arrival", ["two_late", "blocks_reversed"])
def test_gaps_inside_a_quiet_stretch_judged_again_in_chunks_equal_replay(tmp_path: Path, arrival: str) -> None:
    """Readings every second for 10 minutes, pH 7.0, then 4.0 (an excursion) from 250 s to 500 s, then 7.0; inside
    each quiet stretch a step of exactly max_gap (5 s, at 60 s and 320 s) and one of 5.5 s (at 120 s and 400 s),
    tens of readings from a checkpoint. Delivered late (two readings held to the end: the rewind from 252 s judges
    the 5.5 s step at 400 s inside a chunk; or 50-reading blocks newest first: many rewinds), the live record
    equals the replay of the sorted readings: the excursion ends at 400 s (a gap, 150 s measured), not at 320 s,
    and a new one starts at 405.5 s."""
    site = (CASES / GAP_CASE / "site.toml").read_text(encoding="utf-8")
    assert "\npoll_interval = 60\n" in site
    site = site.replace("\npoll_interval = 60\n", "\npoll_interval = 1\n")
    (tmp_path / "site.toml").write_text(site, encoding="utf-8")
    config = load_config(tmp_path / "site.toml")
    assert config.channels[0].max_gap == 5.0
    t0 = _at("2025-03-03T08:00:00Z")
    steps = {60.0: 5.0, 320.0: 5.0, 120.0: 5.5, 400.0: 5.5, 125.5: 0.5, 405.5: 0.5}
    times, s = [], 0.0
    while s < 600.0:
        times.append(s)
        s += steps.get(s, 1.0)
    rows: list[Reading] = [(t0 + s, "ph", 4.0 if 250.0 <= s < 500.0 else 7.0, "good") for s in times]
    if arrival == "two_late":
        held = [r for r in rows if r[0] - t0 in (2.0, 252.0)]
        arrivals = [r for r in rows if r not in held] + held
    else:
        arrivals = [r for k in range(len(rows) // 50, -1, -1) for r in rows[50 * k:50 * (k + 1)]]
    got, engine = live_arrivals(config, arrivals, [7])
    want = replayed(config, rows)
    assert got == want
    assert [(e.event, e.time - t0, e.end_reason, e.measured, e.unmeasured)
            for e in sorted(want, key=lambda e: e.time)] == [("start", 250.0, None, None, None),
                                                            ("end", 400.0, "gap", 150.0, 0.0),
                                                            ("start", 405.5, None, None, None),
                                                            ("end", 500.0, "cleared", 94.5, 0.0)]
    assert engine.counters()["rewinds"] >= 1


# -- the slug's day state, rewound and rebuilt (slug_flow_daily_baseline_5x_15_minutes: 1 March from 20:00, 2 March
# at 10 gpm all day, 3 March's slug from 10:00, confirmed 10:16, ended 10:20 at a limit of 50) --------------------
SLUG_CASE = "slug_flow_daily_baseline_5x_15_minutes"


def _slugs(events: Iterable[EpisodeEvent]) -> list[tuple[str, float, float | None]]:
    """The slug transitions in time order (`Record.events` sorts by event name first)."""
    return sorted(((e.event, e.time, e.limit) for e in events if e.rule == "slug"), key=lambda x: x[1])


def _at(iso: str) -> float:
    return parse_iso(iso)


def test_a_resent_morning_makes_the_baseline_day_and_the_slug_is_found() -> None:
    """2 March's first three hours arrive a day late (an instrument's buffer): until then 2 March covered 87.5 %
    of its minutes, no day of normal operation, no baseline and no slug on 3 March. Once they arrive, the day
    counts and the slug is found in the past: a revision adds it, as a replay of the readings finds it."""
    config, rows = golden_case(SLUG_CASE)
    held = [r for r in rows if _at("2025-03-02T00:00:00Z") <= r[0] < _at("2025-03-02T03:00:00Z")]
    first = [r for r in rows if r not in held]
    got_before, _ = live_arrivals(config, first, [7])
    assert _slugs(got_before) == []
    got, engine = live_arrivals(config, first + held, [7])
    want = replayed(config, rows)
    assert got == want
    assert _slugs(got) == [("start", _at("2025-03-03T10:00:00Z"), 50.0), ("end", _at("2025-03-03T10:20:00Z"), 50.0)]
    assert engine.counters()["rebuilt_from_history"] >= 1 and engine.counters()["revisions"] >= 1


def test_a_late_low_reading_inside_the_slug_withdraws_it() -> None:
    """A reading of 10 gpm at 10:08:30 on 3 March, delivered after 10:20: the candidate ended there, the one
    after it lasted 10 minutes, no slug. The announced episode is withdrawn (a retraction), as a replay finds."""
    config, rows = golden_case(SLUG_CASE)
    i = next(k for k, r in enumerate(rows) if r[0] == _at("2025-03-03T10:20:00Z"))
    late: Reading = (_at("2025-03-03T10:08:30Z"), "flow", 10.0, "good")
    arrivals = [*rows[:i + 1], late, *rows[i + 1:]]
    got, engine = live_arrivals(config, arrivals, [5])
    assert got == replayed(config, arrivals)
    assert _slugs(got) == []
    assert engine.counters()["retractions"] == 1


def test_a_late_reading_before_midnight_changes_the_baseline_fixed_at_midnight() -> None:
    """A reading of 500 gpm at 23:59:30 on 2 March arrives after 3 March 00:05: the rule state goes back
    before midnight, the minute's mean becomes 255, the day's average 10.17 and 3 March's limit 50.85."""
    config, rows = golden_case(SLUG_CASE)
    i = next(k for k, r in enumerate(rows) if r[0] == _at("2025-03-03T00:05:00Z"))
    late: Reading = (_at("2025-03-02T23:59:30Z"), "flow", 500.0, "good")
    arrivals = [*rows[:i + 1], late, *rows[i + 1:]]
    got, engine = live_arrivals(config, arrivals, [3])
    want, replay = replay_engine(config, arrivals)
    assert got == want
    limit = 5 * (1439 * 10.0 + 255.0) / 1440
    assert [(kind, lim) for kind, _t, lim in _slugs(got)] == [("start", pytest.approx(limit)),
                                                             ("end", pytest.approx(limit))]
    assert rule_states(engine) == rule_states(replay)
    assert engine.counters()["rewinds"] >= 1 and engine.counters()["rebuilt_from_history"] == 0


def test_late_readings_that_arrive_while_the_historian_commits_wait_for_the_next_rebuild(tmp_path: Path) -> None:
    """A meter's buffer re-sent hours late (older than the window) is judged again from the historian once it
    has committed it. Readings of the buffer that arrive while the daemon awaits that commit are not among the
    committed rows: they wait for the next rebuild (`take_waiting`) instead of joining this one, which would
    end the pH excursion at a gap before them and leave that end in the record when the next rebuild starts
    after it (seen live: an excursion recorded as 15 s, then ends without starts; `pretreat audit` exit 1)."""
    from tests.unit.checks_helpers import channel, load, site_toml

    config = load(tmp_path, site_toml(channel("ph", max_gap=60), poll_interval=1.0))
    t0 = 1_796_000_000.0
    burst: list[Reading] = [(t0 + i, "ph", 3.2 if 1000 <= i < 1100 else 7.0, "good") for i in range(990, 1200)]
    now: list[Reading] = [(t0 + 10_800 + i, "ph", 7.0, "good") for i in range(2000)]
    engine = CheckEngine.for_config(config, live=True)
    rec = Record()
    committed: list[Reading] = []

    def history(s: str, ch: str, start: float, end: float) -> Iterable[tuple[float, float, str | None]]:
        return [(t, v, None) for t, c, v, _q in sorted(committed) if c == ch and start <= t < end]

    def ingest(rows: Sequence[Reading]) -> None:
        rec.record(engine.process_many(sample_of("acme", r) for r in rows))
        rec.revise(engine.drain_revisions())

    ingest(now)
    committed += now
    for a in range(0, len(burst), 24):  # each round: 16 readings committed, then 8 arriving during the commit
        first, during = burst[a:a + 16], burst[a + 16:a + 24]
        ingest(first)
        committed += first
        waiting = engine.take_waiting()
        ingest(during)  # not committed by this round's flush
        engine.rejudge_from_history(history, waiting)
        rec.revise(engine.drain_revisions())
        committed += during
    engine.rejudge_from_history(history)
    rec.revise(engine.drain_revisions())
    assert engine.counters()["rebuilt_from_history"] > 1
    replay = CheckEngine.for_config(config)
    want = replay.process_many(sample_of("acme", r) for r in sorted(burst + now))
    assert [(e.time - t0, e.rule, e.event) for e in rec.events() if e.rule == "ph_low"] == \
        [(e.time - t0, e.rule, e.event) for e in sorted(want, key=Record.key) if e.rule == "ph_low"]


def test_a_flow_meter_and_its_sampler_count_take_the_groups_quiet_path_and_equal_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A group of several channels had no quiet path: each steady reading of the flow meter and the sampler count
    was judged in full (the benchmark's 1,000 control manholes spent a fifth of their CPU there). Now a reading
    inside every rule's band, strictly after the group's newest one, is stepped over as a single channel's is.
    In order, most readings of the two take it; delivered out of order (a skew, a block after a clock step
    back), the record still equals the replay of the sorted readings, the overdue interval included."""
    config, _rows = golden_case("sampler_pawling_fridge_and_interval")
    rows = flow_and_count_trace()
    judged: list[str] = []
    judge = engine_mod.LiveProcessor.judge
    monkeypatch.setattr(engine_mod.LiveProcessor, "judge",
                        lambda self, t, v, q: judged.append(self.channel) or judge(self, t, v, q))
    got, _engine = live_arrivals(config, rows, [50])
    want = replayed(config, rows)
    assert got == want
    assert any(e.rule == "sampler_interval" for e in want)
    grouped = sum(1 for r in rows if r[1] in ("flow", "sampler_count"))
    # judged in full now: a flow reading a minute (the slug's minute ends), one of each after the group's
    # checkpoints, and every sample (a count that rose); all 1,080 were before
    assert judged.count("flow") + judged.count("sampler_count") < grouped / 2
    rnd = random.Random(7)
    shuffled = [r for _, r in sorted(((k + rnd.randint(0, 6), k), r) for k, r in enumerate(rows))]
    block = shuffled[400:460]
    del shuffled[400:460]
    shuffled[700:700] = block  # a minute of readings arriving after later ones
    got, _engine = live_arrivals(config, shuffled, [1, 7, 30])
    assert got == replayed(config, shuffled)


def test_a_withdrawn_start_found_again_stands_with_its_new_figures_in_the_store_and_the_hubs_copy(
        tmp_path: Path) -> None:
    """A sampler's overdue interval: its start (onset at the last sample) is announced, withdrawn when a late
    flow reading shows the flow had stopped, then emitted again by the live engine with the same onset but
    confirmed later (at the next count reading: a confirmation rests on the count read unchanged). The store
    restored the row with its *old* confirmation time, so the record differed from the replay of the same
    readings; now the row takes the figures it is recorded with, and the restoration is a
    revision of its own (what the hub's copy follows), journaled so the seals verify."""
    from monitor.checks.revisions import JUDGED_AGAIN
    from monitor.stores.episodes import EpisodeStore
    from monitor.stores.seal_verify import verify_seals
    from monitor.uplink.events import revision_events
    from tests.unit.checks_helpers import sample_of

    config, rows = golden_case("sampler_pawling_fridge_and_interval")
    t0 = rows[0][0]
    arrivals = [(t0 + dt, ch, v, "good") for dt, ch, v in (
        (10, "sampler_count", 100.0), (2120, "flow", 5.0), (2200, "sampler_count", 100.0), (620, "flow", 0.0),
        (20, "sampler_count", 100.0), (2720, "flow", 0.0), (3000, "sampler_count", 100.0), (4220, "flow", 0.0),
        (5720, "sampler_count", 101.0))]
    engine = CheckEngine.for_config(config, live=True)
    path = tmp_path / "pretreat.sqlite"
    store = EpisodeStore(path=path)
    restored = []
    try:
        for k, r in enumerate(arrivals):  # as the daemon records them: events, then the revisions
            recorded = store.record_events(engine.process_many([sample_of("acme", r)]), recorded=1000.0 + k)
            restored += recorded.restored
            store.revise(engine.drain_revisions(), recorded=1000.0 + k)
            assert not engine.waiting_for_history
        got = store.events()
        reasons = [r.reason for r in store.revisions()]
    finally:
        store.close()
    want = replayed(config, arrivals)
    assert got == sorted(want, key=lambda e: e.time)
    assert JUDGED_AGAIN in reasons and restored
    (a,) = restored
    [start] = [e for e in want if e.event == "start"]
    assert a.updated[0][0] == start and a.added == () and a.withdrawn == ()
    # what the uplink sends: the revision names the restored row with its new figures
    (sent,) = revision_events(restored)
    assert sent["type"] == "revision" and sent["updated"][0]["confirmed"] == start.confirmed
    with sqlite3.connect(path) as conn:
        assert verify_seals(conn).findings == []


def test_an_interval_is_never_confirmed_on_flow_time_after_the_counts_last_reading(tmp_path: Path) -> None:
    """The sampler's count rises at 3670 s (a sample: the overdue interval since 600 s ends, cleared) and then
    falls silent past its max_gap while the flow goes on. The count was not read after 3670 s, so a sample may
    have been taken at any time since: the next interval is never shown overdue. The record had an episode
    [3670 s, 3670 s] confirmed on the flow at 9740 s, ended by the count's gap at its last reading, with a
    peak of -3010 s (the time counted at 3670 s computed from a flow state that began later). Now the record,
    the replay and the exceedance history hold the one episode the readings show, its peak the flow time
    counted in it."""
    from monitor.read.episodes import find_episodes
    from monitor.stores.episodes import EpisodeStore
    from tests.unit.checks_helpers import sample_of

    config, rows = golden_case("sampler_pawling_fridge_and_interval")
    t0 = rows[0][0]
    trace = [(t0 + dt, ch, v, "good") for dt, ch, v in (
        (600, "flow", 12.0), (600, "sampler_count", 100.0), (3600, "flow", 0.0), (3600, "sampler_count", 100.0),
        (3670, "sampler_count", 101.0), (6680, "flow", 12.5), (9740, "flow", 12.0),
        (9740, "sampler_count", 101.0))]
    want = replayed(config, trace)
    ends = [(e.time - t0, e.end_reason, e.peak) for e in want if e.rule == "sampler_interval" and e.event == "end"]
    assert ends == [(3670.0, "cleared", 3000.0)]  # flowing 600–3600 s; not after (flow 0, then the count silent)
    engine = CheckEngine.for_config(config, live=True)
    path = tmp_path / "pretreat.sqlite"
    store = EpisodeStore(path=path)
    try:
        store.record(engine.process_many(sample_of("acme", r) for r in trace))
        got = store.events()
    finally:
        store.close()
    assert sorted(got, key=Record.key) == sorted(want, key=Record.key)
    with sqlite3.connect(path) as conn:
        found = [f for f in find_episodes(conn, now=t0 + 10_000, data_quality=True) if f[3] == "sampler_interval"]
    assert [(f[4], f[7] - t0, f[8] - t0) for f in found] == [("closed", 600.0, 3670.0)]
