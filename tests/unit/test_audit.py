"""`pretreat audit`, the episode store's revisions and the alarms' reaction to them, on a real historian file.

Readings of a golden case are recorded in an arrival order with late readings (as the daemon records them:
historian first, then the live engine); the episodes and revisions are stored as the daemon stores them. The
audit, reading the historian directly, must find the record equal to its replay; a tampered record must not.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import random
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from alarms.model import State
from config.loader import load_config
from config.schema import SiteConfig
from monitor import audit_scan
from monitor.alarming import Alarming
from monitor.audit import audit, replay_historian, run
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent, parse_iso
from monitor.checks.replay_run import replay
from monitor.checks.slug import detector_of
from monitor.export import export_readings
from monitor.read.episodes import find_episodes
from monitor.sample import Quality, Sample
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from monitor.stores.historian_db import QUALITY_BY_CODE, QUALITY_CODES, open_for_reading
from monitor.warmup import history_reader
from tests.support import IN_CI, run_on_terminal
from tests.unit.checks_helpers import CASES, NAMES, golden_case, record

START = 1_764_590_400.0  # 2025-12-01T12:00:00Z


def _site(tmp_path: Path, name: str) -> SiteConfig:
    """The case's site file, with the register maps of its own folder beside it (a case may ship one)."""
    for f in (CASES / name).glob("*.toml"):
        shutil.copy(f, tmp_path / f.name)
    return load_config(tmp_path / "site.toml")


async def _record(config: SiteConfig, arrivals: list[Sample]) -> CheckEngine:
    """The daemon's data path for these samples, in arrival order, batch by batch."""
    hist = Historian(path=config.daemon.historian, commit_interval=0.05)
    await hist.start()
    store = EpisodeStore(path=config.daemon.historian)
    engine = CheckEngine.for_config(config, live=True)
    try:
        for i in range(0, len(arrivals), 3):
            batch = arrivals[i:i + 3]
            hist.submit(batch)
            store.record(engine.process_many(batch))
            store.revise(engine.drain_revisions(), recorded=START)
            if engine.waiting_for_history:  # as the daemon: once the historian has committed them
                await hist.flush()
                engine.rejudge_from_history(history_reader(config.daemon.historian))
                store.revise(engine.drain_revisions(), recorded=START)
        await hist.flush()
    finally:
        await hist.close()
        store.close()
    return engine


def _samples(name: str) -> list[Sample]:
    config, rows = golden_case(name)
    site = config.sites[0].id
    out = []
    for t, ch, v, q in rows:
        out.append(Sample(time=t, site=site, channel=ch, value=v, unit="") if q == "good" and v is not None
                   else Sample.bad(time=t, site=site, channel=ch, unit="", quality=Quality(q), reason=q))
    return out


@pytest.mark.parametrize("name", ["ph_excursion_single_over_60_minutes", "lel_exactly_5_and_10_percent",
                                  "sampler_pawling_fridge_and_interval"])
async def test_record_with_late_readings_matches_the_audit(tmp_path: Path, name: str) -> None:
    config = _site(tmp_path, name)
    samples = _samples(name)
    rng = random.Random(13)
    arrivals = sorted(samples, key=lambda s: s.time + rng.uniform(0, 3 * 3600))  # hours late, shuffled
    engine = await _record(config, arrivals)
    assert engine.counters()["late"] > 0
    result = audit(config)
    assert result.readings == len(samples)
    assert result.mismatches == [], result.mismatches
    assert result.recorded == result.replayed > 0
    out = io.StringIO()
    assert run(argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None), out=out) == 0
    assert "the record matches the replay" in out.getvalue()


@pytest.mark.parametrize("name", NAMES)
async def test_the_audits_skip_scan_finds_the_engines_episodes_on_every_golden_case(tmp_path: Path,
                                                                                    name: str) -> None:
    """The audit lets SQLite skip quiet readings (band, deadline and ``max_gap`` tested in SQL); recorded in
    time order by the live engine, every golden case's record must match it exactly: gaps, slugs' minutes and
    days, bad runs, censored readings."""
    config = _site(tmp_path, name)
    samples = _samples(name)
    await _record(config, samples)
    result = audit(config)
    assert result.readings == len(samples)
    assert result.mismatches == [], result.mismatches
    assert result.recorded == result.replayed


async def test_the_skip_scan_ends_an_episode_at_a_gap_between_quiet_readings(tmp_path: Path) -> None:
    """pH 4.0 every 60 s (max_gap 180 s) for an hour, nothing for 10 minutes, pH 4.0 for another hour: inside
    the open excursion every reading is quiet, so only the SQL gap test can stop the skip scan at the reading
    after the hole, where the record has the episode ended (``gap``) and a new one started."""
    config = _site(tmp_path, "gaps_end_episodes_measured_seconds")
    t0 = 1_741_000_000.0
    times = [t0 + 60 * i for i in range(61)] + [t0 + 4200 + 60 * i for i in range(61)]
    samples = [Sample(time=t, site="acme", channel="ph", value=4.0, unit="") for t in times]
    samples.append(Sample(time=times[-1] + 60, site="acme", channel="ph", value=7.0, unit=""))
    await _record(config, samples)
    store = EpisodeStore(path=config.daemon.historian)
    try:
        spans = [(e.start, e.end) for e in store.episodes(rule="ph_low")]
    finally:
        store.close()
    assert spans == [(times[0], times[60]), (times[61], times[-1] + 60)]
    result = audit(config)
    assert result.mismatches == [], result.mismatches
    assert result.recorded == result.replayed > 0


@pytest.mark.parametrize(("name", "rule", "onset", "cut"), [
    ("ph_excursion_single_over_60_minutes", "ph_excursion_duration", "2025-03-03T10:00:00Z", 1.0),
    ("slug_flow_daily_baseline_5x_15_minutes", "slug", "2025-03-03T10:00:00Z", 420.0),
])
async def test_a_period_ending_before_an_episode_is_confirmed_still_matches_the_record(
        tmp_path: Path, name: str, rule: str, onset: str, cut: float) -> None:
    """Some rules start an episode at its onset only once it is confirmed later (401.17's 60 minutes of
    excursion, a slug's 15 minutes): ``--to`` between the onset and the confirmation cuts no recorded fact, yet
    a replay that stops at ``--to`` never sees the confirmation. The recorded episode starts in the period, so
    it is compared, and must match (not be reported ``extra``)."""
    config = _site(tmp_path, name)
    await _record(config, _samples(name))
    t0 = parse_iso(onset)
    result = audit(config, start=t0, end=t0 + cut)
    assert result.mismatches == [], result.mismatches
    assert result.recorded == result.replayed >= 1
    store = EpisodeStore(path=config.daemon.historian)
    try:
        assert [e.start for e in store.episodes(rule=rule)] == [t0]
    finally:
        store.close()


@pytest.mark.parametrize("native", [True, False])
def test_a_reading_with_a_quality_code_this_version_does_not_know_is_judged_bad_not_a_traceback(
        tmp_path: Path, native: bool) -> None:
    """A row written into the file by another program, quality code 42 (none of the daemon's): the audit judges
    it as a bad reading named ``unknown-42`` (as `pretreat readings` exports it), inside the excursion, where it
    neither ends nor splits the episode, and compares as before."""
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    record(config, _samples(name))
    db, native = Path(config.daemon.historian), native and audit_scan.available()
    before, _ = _audit_replay(config, db, native=native)
    t0 = next(e.time for e in before if e.event == "start")
    conn = sqlite3.connect(config.daemon.historian)
    with conn:
        (cid,) = conn.execute("SELECT id FROM channels WHERE channel = 'ph'").fetchone()
        conn.execute("INSERT INTO readings VALUES (?, ?, ?, 5.5, 42, 'x')", (cid, t0 + 0.5, 10**9))
    conn.close()
    after, _ = _audit_replay(config, db, native=native)
    assert [(e.time, e.rule, e.event) for e in after if e.rule != "sensor_fault"] == \
        [(e.time, e.rule, e.event) for e in before if e.rule != "sensor_fault"]


@pytest.mark.parametrize("when", [1.7e12, -1e12, math.inf, -math.inf])
def test_a_reading_stored_with_an_impossible_time_is_reported_not_a_traceback(
        tmp_path: Path, when: float, capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged or hand-imported historian: one pH reading stored at an impossible time (1.7e12 s: epoch
    milliseconds stored as seconds, some 54,000 years ahead). The daemon never records such a time (device
    times more than 5 minutes ahead are refused), but an officer auditing a file cannot know that: the audit
    must say the record is unreadable (exit 1, a message naming the file and the channel), not end in a Python
    traceback; a time at ±inf, outside every period replayed, is refused too rather than left out."""
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    record(config, _samples(name))
    conn = sqlite3.connect(config.daemon.historian)
    with conn:
        (cid,) = conn.execute("SELECT id FROM channels WHERE channel = 'ph'").fetchone()
        conn.execute("INSERT INTO readings VALUES (?, ?, ?, ?, 0, '')", (cid, when, 10**9, 2.0))
    conn.close()
    out = io.StringIO()
    assert run(argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None), out=out) == 1
    err = capsys.readouterr().err
    assert "cannot read" in err and "outside years 1-9999" in err and "/ph " in err, err


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_readings_piped_to_replay_judge_a_stored_infinite_reading_as_the_audit_does(tmp_path: Path,
                                                                                 value: float) -> None:
    """A good reading stored as an infinite number (through the historian's API: the drivers never make one) is
    judged by the engine as the bad reading a driver would have made of it (``bad_value``, here a sensor fault
    inside the excursion), by the daemon and by the audit alike. `pretreat readings` writes it ``inf``/``-inf``;
    `pretreat readings … | pretreat replay …` must judge that row the same way, not skip it as unparseable."""
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    samples = _samples(name)
    samples.append(Sample(time=parse_iso("2025-03-03T10:15:00Z"), site="acme", channel="ph", value=value, unit=""))
    record(config, sorted(samples, key=lambda s: s.time))
    exported = io.StringIO()
    export_readings(config.daemon.historian, site="acme", channel="ph", start=None, end=None, fmt="csv",
                    out=exported)
    assert ",inf," in exported.getvalue() or ",-inf," in exported.getvalue()
    out, err = io.StringIO(), io.StringIO()
    replay(config, io.StringIO(exported.getvalue()), out, source="export.csv", err=err)
    replayed = [(parse_iso(e["time"]), e["rule"], e["event"]) for e in map(json.loads, out.getvalue().splitlines())]
    events, _ = _audit_replay(config, Path(config.daemon.historian), native=audit_scan.available())
    assert "sensor_fault" in {e.rule for e in events}
    assert sorted(replayed) == sorted((e.time, e.rule, e.event) for e in events), err.getvalue()


async def test_an_altered_peak_or_start_value_is_a_mismatch(tmp_path: Path) -> None:
    """The figures of an episode come from the readings: a peak made milder in the file (triggers dropped, as
    an adversary with the file would) is reported with both figures, and the audit exits 1."""
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    await _record(config, _samples(name))
    out = io.StringIO()
    assert run(argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None), out=out) == 0
    conn = sqlite3.connect(config.daemon.historian)
    with conn:
        for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                       "AND tbl_name = 'episode_events'").fetchall():
            conn.execute(f"DROP TRIGGER {trigger}")
        assert conn.execute("UPDATE episode_events SET peak = 4.9 WHERE event = 'end' AND peak IS NOT NULL "
                            "AND rule = 'ph_low'").rowcount >= 1
    conn.close()
    out = io.StringIO()
    assert run(argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None), out=out) == 1
    text = out.getvalue()
    assert "different values" in text and "peak 4.9" in text, text


async def test_an_episode_recorded_under_another_limit_is_noted_not_a_mismatch(tmp_path: Path) -> None:
    """The replay judges under the site file as it stands; an episode recorded under another limit (a permit
    renewed since, or the record altered) is listed as ``law differs`` with both, and the audit still exits 0:
    the readings and the episodes agree."""
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    await _record(config, _samples(name))
    args = argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None)
    out = io.StringIO()
    assert run(args, out=out) == 0
    assert "law differs" not in out.getvalue() and "another limit" not in out.getvalue(), out.getvalue()
    conn = sqlite3.connect(config.daemon.historian)
    with conn:
        for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                       "AND tbl_name = 'episode_events'").fetchall():
            conn.execute(f"DROP TRIGGER {trigger}")
        changed = conn.execute("UPDATE episode_events SET limit_value = 4.5, citation = 'an older permit' "
                               "WHERE event = 'start' AND rule = 'ph_low'").rowcount
    conn.close()
    assert changed >= 1
    out = io.StringIO()
    assert run(args, out=out) == 0
    lines = [x for x in out.getvalue().splitlines() if x.startswith("law differs")]
    assert len(lines) == changed, out.getvalue()
    assert "recorded under limit 4.5 (an older permit); the site file now gives limit " in lines[0], lines[0]
    assert f"{changed} episode(s) recorded under another limit or citation" in out.getvalue().splitlines()[-1]


async def test_a_tampered_record_is_reported_and_exits_1(tmp_path: Path) -> None:
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    await _record(config, _samples(name))
    store = EpisodeStore(path=config.daemon.historian)
    first = store.episodes()[0]
    store.record([EpisodeEvent(first.start + 7 * 86400, first.site, first.channel, first.rule, "start", 3.0, 5.0,
                               first.citation)])
    store.close()
    out = io.StringIO()
    assert run(argparse.Namespace(config=str(tmp_path / "site.toml"), start=None, end=None), out=out) == 1
    text = out.getvalue()
    assert "extra" in text and "1 mismatch(es)" in text, text


@pytest.mark.parametrize("ended_first", [False, True], ids=["while-active", "after-it-latched"])
async def test_a_retracted_episode_is_stored_withdrawn_and_its_alarm_returns_to_normal(
        tmp_path: Path, ended_first: bool) -> None:
    """lel_successive announced at the second of 6 % and 6.5 %; a reading of 4 % taken between them arrives
    late: the two were never successive, the episode never happened. The alarm is latched (an LEL alarm): it
    is released all the same, still or already latched, and waits only for the acknowledgement of its raise."""
    config = _site(tmp_path, "lel_exactly_5_and_10_percent")
    site = config.sites[0].id
    lel = next(c.id for c in config.channels if c.kind == "lel")

    def s(t: float, v: float) -> Sample:
        return Sample(time=START + t, site=site, channel=lel, value=v, unit="")

    engine = CheckEngine.for_config(config, live=True)
    store = EpisodeStore(path=config.daemon.historian)
    alarming = Alarming(config=config, now=START, influx=None)
    try:
        events = engine.process_many([s(0, 6.0), s(2, 6.5)])
        assert [(e.rule, e.event) for e in events] == [("lel_successive", "start")]
        store.record(events)
        alarming.on_episodes(events, START + 2)
        alarm = f"{site}/{lel}/lel_successive"
        assert alarming.engine.state(alarm).state is State.ACTIVE_UNACKED
        if ended_first:
            ended = engine.process_many([s(3, 2.0)])
            store.record(ended)
            alarming.on_episodes(ended, START + 3)
            assert alarming.engine.state(alarm).state is State.LATCHED_UNACKED
        assert engine.process_many([s(1, 4.0)]) == []  # late: between the two
        revs = engine.drain_revisions()
        assert [(r.rule, r.retraction, r.active) for r in revs] == [("lel_successive", True, False)]
        store.revise(revs, recorded=START + 3)
        alarming.on_revisions(revs, START + 3)
        st = alarming.engine.state(alarm)
        assert not st.condition and st.state is State.RTN_UNACKED
        journal = [e for e in alarming.engine.journal.records() if e.kind == "transition"]
        assert "retracted" in journal[-1].payload["why"], journal[-1].payload
        assert any(e.kind == "revision" for e in alarming.engine.journal.records())
        assert store.episodes(rule="lel_successive") == []
        (stored,) = store.revisions(rule="lel_successive")
        assert stored.reason == "late reading" and stored.withdrawn and not stored.added
        assert engine.counters()["retractions"] == 1
    finally:
        await alarming.stop()
        store.close()
    conn = sqlite3.connect(config.daemon.historian)
    try:
        found = find_episodes(conn, now=START + 10, rule="lel_successive")
    finally:
        conn.close()
    assert [f[4] for f in found] == ["retracted"]


def test_the_audit_shows_progress_on_a_terminal_and_nothing_elsewhere(tmp_path: Path) -> None:
    name = "ph_excursion_single_over_60_minutes"
    config = _site(tmp_path, name)
    asyncio.run(_record(config, _samples(name)))
    argv = [sys.executable, "-m", "monitor.cli", "audit", "--config", str(tmp_path / "site.toml")]
    root = Path(__file__).resolve().parents[2]
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=root)
    assert piped.returncode == 0 and "the record matches the replay" in piped.stdout and piped.stderr == ""
    done, shown = run_on_terminal(argv[3:], root)  # standard error on a terminal: the bar, counting groups
    assert done.returncode == 0 and "the record matches the replay" in done.stdout
    assert "audit" in shown and "channel group" in shown


def _randomized(samples: list[Sample], config: SiteConfig, rng: random.Random, *, relabel: bool) -> list[Sample]:
    """A golden case's readings made rougher: values jittered, single readings and runs of them dropped (gaps
    longer than ``max_gap``), bad readings of every kind (maintenance too), a second reading at the same time,
    excursions (a run of readings pushed far up or down), flatlines (a run repeating one value), over-range
    readings on channels that judge them; with ``relabel`` the second half under another unit (the historian
    keeps it under a second channel id, which the audit merges back by time)."""
    over = {(c.site, c.id) for c in config.channels if c.over_range_limit is not None}
    bad = [q for q in Quality if q not in (Quality.GOOD, Quality.OVER_RANGE)]
    out: list[Sample] = []
    skip, push, flat = 0, (0, 1.0), (0, 0.0)
    cut = samples[len(samples) // 2].time if relabel else math.inf
    for s in samples:
        r = rng.random()
        if s.time >= cut:
            s = replace(s, unit="relabelled")
        if skip:
            skip -= 1
            continue
        if r < 0.004:
            skip = rng.randint(1, 30)
            continue
        if r < 0.03:
            continue
        if s.value is None or s.quality is not Quality.GOOD:
            out.append(s)
            continue
        v = s.value * (1 + rng.uniform(-0.02, 0.02))
        if push[0]:
            push = (push[0] - 1, push[1])
            v *= push[1]
        elif rng.random() < 0.004:
            push = (rng.randint(2, 40), rng.choice([0.3, 0.6, 1.5, 3.0, 12.0]))
        if flat[0]:
            flat = (flat[0] - 1, flat[1])
            v = flat[1]
        elif rng.random() < 0.004:
            flat = (rng.randint(5, 200), v)
        if r < 0.05:
            q = rng.choice(bad)
            out.append(Sample.bad(time=s.time, site=s.site, channel=s.channel, unit=s.unit, quality=q,
                                  reason=q.value))
        elif r < 0.06 and (s.site, s.channel) in over:
            out.append(replace(s, value=v * 50, quality=Quality.OVER_RANGE))
        else:
            out.append(replace(s, value=v))
        if rng.random() < 0.01:
            out.append(replace(s, value=v * rng.uniform(0.5, 2.0)))
    return out


def _plain_replay(config: SiteConfig, db: Path) -> CheckEngine:
    """The stored readings through the engine without its quiet-band fast path, in (time, channel order, seq):
    every reading judged by every rule."""
    engine = CheckEngine.for_config(config, fast=False)
    procs = {(s.id, ch): p for s in config.sites for ch, p in engine.inputs(s.id).items()}
    order = {(c.site, c.id): i for i, c in enumerate(config.channels)}
    names = {code: q.value for code, q in QUALITY_BY_CODE.items()}
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT c.site, c.channel, r.time, r.seq, r.value, r.quality FROM readings r "
                        "JOIN channels c ON c.id = r.channel_id").fetchall()
    conn.close()
    rows = [r for r in rows if (r[0], r[1]) in order]
    rows.sort(key=lambda r: (r[2], order[(r[0], r[1])], r[3]))
    over = QUALITY_CODES[Quality.OVER_RANGE]
    for site, ch, t, _, v, q in rows:
        p = procs[(site, ch)]
        if (q == 0 or q == over) and v is not None:
            p.good(t, v)
        else:
            p.bad(t, names[q])
    return engine


def _audit_replay(config: SiteConfig, db: Path, *, native: bool, start: float | None = None,
                  end: float | None = None) -> tuple[list[EpisodeEvent], CheckEngine]:
    engine = CheckEngine.for_config(config)
    events: list[EpisodeEvent] = []
    conn = open_for_reading(db)
    try:
        replay_historian(conn, config, engine, events, start=start, end=end, native=native)
    finally:
        conn.close()
    return events + engine.drain(), engine


def _baselines(engine: CheckEngine) -> list[tuple[object, ...]]:
    """Every slug detector's days, day and minute sums (to the bit: the C scanner adds as the engine does)."""
    out: list[tuple[object, ...]] = []
    for _, rule in engine.rules:
        d = detector_of(rule)
        if d is not None:
            out.append((list(d.days), d.day_sum, d.minute_sum, d.minute_count))
    return out


def _by_time(events: list[EpisodeEvent]) -> list[EpisodeEvent]:
    """Events of different channel groups in one order (each group's own order kept: the sort is stable)."""
    return sorted(events, key=lambda e: (e.time, e.site, e.channel, e.rule))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", NAMES)
def test_the_audits_native_and_python_paths_give_the_plain_engines_verdicts(tmp_path: Path, name: str,
                                                                           seed: int) -> None:
    """Over each golden case's readings made rough at random (gaps, bad readings, excursions, slugs, flatlines,
    over-range, two readings at one time; with seed 2 each channel under two historian ids), the audit's replay,
    with the quiet readings stepped over in C and in Python, finds exactly the events of the engine that judges
    every reading with every rule: times, values, peaks, end reasons, measured seconds, censoring."""
    config = _site(tmp_path, name)
    rng = random.Random(f"{name}/{seed}")
    samples = _randomized(_samples(name), config, rng, relabel=seed == 2)
    record(config, samples)
    db = Path(config.daemon.historian)
    engine = _plain_replay(config, db)
    plain, baselines = _by_time(engine.events), _baselines(engine)
    events, python = _audit_replay(config, db, native=False)
    assert _by_time(events) == plain and _baselines(python) == baselines
    if not audit_scan.available() and not IN_CI:  # under CI a missing build is a failure, not a fallback
        pytest.skip("the C scanner is not built (setup.py); the Python path was compared")
    events, native = _audit_replay(config, db, native=True)
    assert _by_time(events) == plain and _baselines(native) == baselines
    times = sorted(s.time for s in samples)
    start, end = times[len(times) // 3], times[2 * len(times) // 3]
    part, native = _audit_replay(config, db, native=True, start=start, end=end)
    assert _by_time(part) == _by_time(_audit_replay(config, db, native=False, start=start, end=end)[0])


def test_the_c_scanners_filter_refuses_rows_sqlite_sorted(tmp_path: Path) -> None:
    """``quiet()`` keeps the engine's state, so it is only right on rows in (time, seq) order; a statement whose
    rows SQLite sorts first (here by value) is refused with an error, never judged out of order."""
    if audit_scan._native is None:
        pytest.skip("the C scanner is not built (setup.py)")
    config = _site(tmp_path, "ph_excursion_single_over_60_minutes")
    record(config, _samples("ph_excursion_single_over_60_minutes"))
    uri = f"{Path(config.daemon.historian).resolve().as_uri()}?mode=ro"
    sql = "SELECT time, value, quality FROM readings WHERE NOT quiet(time, value, quality) ORDER BY value"
    scan = audit_scan._native.Scanner(uri, sql, (), audit_scan.OVER_RANGE, 1000)
    with pytest.raises(audit_scan._native.Error, match="sorted"):
        scan.next(-math.inf, math.inf, math.inf, math.inf, -math.inf, 0.0, None)
    scan.close()
