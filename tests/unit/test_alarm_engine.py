"""The alarm engine: states for every configured alarm, journaled transitions, and state that survives a
restart or a crash (no duplicate raise, no missed clear)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.engine import AlarmEngine, AlarmSpec
from alarms.model import AlarmInput, AlarmSettings, Kind, Priority, Refusal, State, Transition

T0 = 1_700_000_000.0
PH = "acme-plating/ph/ph_high"
LEL = "acme-plating/lel/lel_single"
SPECS: list[AlarmSpec] = [
    ("acme-plating", "ph", "ph_high", AlarmSettings(priority=Priority.HIGH)),
    ("acme-plating", "ph", "ph_low", AlarmSettings(priority=Priority.HIGH)),
    ("acme-plating", "lel", "lel_single", AlarmSettings(priority=Priority.CRITICAL, latched=True)),
]
REPO = Path(__file__).resolve().parents[2]


def ph(t: float, active: bool, value: float = 9.6) -> AlarmInput:
    return AlarmInput(time=t, site="acme-plating", channel="ph", rule="ph_high", active=active, value=value,
                      limit=9.0, citation="§ 112-5A(1)(c)")


def open_engine(path: Path, now: float, specs: list[AlarmSpec] = SPECS) -> AlarmEngine:
    return AlarmEngine(path=path, alarms=specs, now=now)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "pretreat.sqlite"


@pytest.fixture
def engine(path: Path) -> Iterator[AlarmEngine]:
    e = open_engine(path, T0)
    try:
        yield e
    finally:
        e.close()


def journal_kinds(e: AlarmEngine, kind: str = "transition") -> list[tuple[str, str]]:
    return [(r.payload["alarm"], r.payload["kind"]) for r in e.journal.records(kinds=[kind])]


def row(path: Path, alarm_id: str) -> tuple[str, int, dict[str, object]]:
    db = sqlite3.connect(path)
    try:
        state, seq, record = db.execute("SELECT state, seq, record FROM alarm_state WHERE alarm_id = ?",
                                        (alarm_id,)).fetchone()
    finally:
        db.close()
    return state, seq, json.loads(record)


def test_every_configured_alarm_exists_at_start(engine: AlarmEngine) -> None:
    assert [s.id for s in engine.states()] == [LEL, "acme-plating/ph/ph_high", "acme-plating/ph/ph_low"]
    assert all(s.state is State.NORMAL for s in engine.states())
    assert engine.state(LEL).settings.latched
    with pytest.raises(ValueError, match="twice"):
        AlarmEngine(path=Path("/nonexistent/x.sqlite"), alarms=SPECS + SPECS[:1], now=T0)


def test_transitions_are_journaled_and_state_row_agrees(engine: AlarmEngine, path: Path) -> None:
    (raised,) = engine.apply(ph(T0 + 1, True), T0 + 1)
    assert raised.kind is Kind.RAISE and raised.seq is not None
    rec = next(engine.journal.records(after=raised.seq - 1, limit=1))
    assert rec.kind == "transition" and rec.payload == raised.to_payload()
    assert engine.journal.records(kinds=["episode"]).__next__().payload["event"] == "start"
    state, seq, record = row(path, PH)
    assert (state, seq, record["phase"]) == ("active-unacknowledged", raised.seq, "active-unacknowledged")
    result = engine.ack(PH, user="jdoe", note="industry called", now=T0 + 5)
    assert not isinstance(result, Refusal)
    (acked,) = result
    assert (acked.who, acked.why, acked.seq) == ("jdoe", "industry called", raised.seq + 2)  # after "action"
    assert row(path, PH)[:2] == ("active-acknowledged", acked.seq)
    assert engine.journal.verify().ok


def test_restart_resumes_without_duplicate_raise_and_still_clears(path: Path) -> None:
    e = open_engine(path, T0)
    assert [t.kind for t in e.apply(ph(T0 + 1, True), T0 + 1)] == [Kind.RAISE]
    e.close()
    e = open_engine(path, T0 + 100)
    try:
        assert e.state(PH).state is State.ACTIVE_UNACKED
        # after a restart the checks report the episode again: it is the same alarm, not a new one
        assert e.apply(ph(T0 + 101, True), T0 + 101) == []
        # the condition ended while the daemon was down: the first input saying so clears it
        cleared = e.apply(ph(T0 + 102, False, value=8.2), T0 + 102)
        assert [(t.kind, t.to_state) for t in cleared] == [(Kind.CLEAR, State.RTN_UNACKED)]
        assert journal_kinds(e) == [(PH, "raise"), (PH, "clear")]
        starts = [r.payload for r in e.journal.records(kinds=["engine"])]
        # only alarms that ever left their initial state have a stored row
        assert [s["restored"] for s in starts] == [0, 1] and starts[1]["active"] == [PH]
    finally:
        e.close()


CRASH = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, AlarmSettings
e = AlarmEngine(path=Path(sys.argv[1]), alarms=[("acme-plating", "ph", "ph_high", AlarmSettings())], now={t0})
e.apply(AlarmInput(time={t0} + 1, site="acme-plating", channel="ph", rule="ph_high", active=True, value=9.6,
                   limit=9.0), {t0} + 1)
os.kill(os.getpid(), signal.SIGKILL)  # mid-episode, no close()
"""


def test_kill_9_mid_episode_then_restart(path: Path) -> None:
    code = textwrap.dedent(CRASH).format(repo=str(REPO), t0=T0)
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    e = AlarmEngine(path=path, alarms=[("acme-plating", "ph", "ph_high", AlarmSettings())], now=T0 + 60)
    try:
        assert e.journal.verify().ok
        assert e.state(PH).state is State.ACTIVE_UNACKED
        assert e.apply(ph(T0 + 61, True), T0 + 61) == []
        assert [t.kind for t in e.apply(ph(T0 + 62, False, value=7.0), T0 + 62)] == [Kind.CLEAR]
        assert journal_kinds(e) == [(PH, "raise"), (PH, "clear")]
    finally:
        e.close()


def test_timers_that_fell_due_while_down_fire_on_the_first_tick(path: Path) -> None:
    e = open_engine(path, T0)
    e.apply(ph(T0 + 1, True), T0 + 1)
    e.shelve(PH, user="op", until=T0 + 600, reason="probe cleaning", now=T0 + 2)
    e.close()
    e = open_engine(path, T0 + 5000)
    try:
        assert e.state(PH).state is State.SHELVED
        trs = e.tick(T0 + 5000)
        assert [(t.kind, t.time) for t in trs] == [(Kind.SHELVE_EXPIRED, T0 + 600), (Kind.RAISE, T0 + 600)]
        assert e.tick(T0 + 5001) == []
    finally:
        e.close()


def test_tick_with_nothing_due_writes_nothing(engine: AlarmEngine) -> None:
    head = engine.journal.head()
    assert engine.tick(T0 + 10) == []
    assert engine.journal.head() == head


def test_operator_actions_by_id_and_refusals_are_journaled(engine: AlarmEngine) -> None:
    engine.apply(AlarmInput(time=T0, site="acme-plating", channel="lel", rule="lel_single", active=True,
                            value=12.0, limit=10.0), T0)
    engine.apply(AlarmInput(time=T0 + 5, site="acme-plating", channel="lel", rule="lel_single", active=False,
                            value=1.0, limit=10.0), T0 + 5)
    assert engine.state(LEL).state is State.LATCHED_UNACKED
    refusal = engine.reset("acme-plating/ph/ph_low", user="op", now=T0 + 6)
    assert isinstance(refusal, Refusal) and "not a latched alarm" in refusal.reason
    unknown = engine.ack("acme-plating/ph/nope", user="op", now=T0 + 6)
    assert isinstance(unknown, Refusal) and unknown.reason == "no such alarm"
    assert isinstance(engine.ack("garbage", user="op", now=T0 + 6), Refusal)
    done = engine.reset(LEL, user="op", note="vented", now=T0 + 7)
    assert not isinstance(done, Refusal) and [t.kind for t in done] == [Kind.RESET]
    assert [r.payload["reason"] for r in engine.journal.records(kinds=["refusal"])] == [
        refusal.reason, "no such alarm", "no such alarm"]
    actions = [r.payload for r in engine.journal.records(kinds=["action"])]
    assert actions == [{"alarm": LEL, "action": "reset", "user": "op", "note": "vented"}]
    assert engine.counters["refusals"] == 3


def test_input_for_an_unconfigured_alarm_is_journaled_not_lost(engine: AlarmEngine) -> None:
    stray = AlarmInput(time=T0, site="acme-plating", channel="temp", rule="temperature_high", active=True)
    assert engine.apply(stray, T0) == []
    (rec,) = list(engine.journal.records(kinds=["episode"]))
    assert rec.payload["alarm"] == "acme-plating/temp/temperature_high" and rec.payload["unconfigured"]
    assert engine.counters["unknown_inputs"] == 1


def test_a_failed_write_leaves_state_and_journal_unchanged(engine: AlarmEngine, path: Path) -> None:
    engine.apply(ph(T0, True), T0)
    head = engine.journal.head()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE alarm_state")  # the state upsert will now fail inside the transaction
    db.close()
    with pytest.raises(sqlite3.OperationalError):
        engine.apply(ph(T0 + 1, False, value=8.0), T0 + 1)
    assert engine.journal.head() == head  # the journal records were rolled back with it
    assert engine.state(PH).state is State.ACTIVE_UNACKED  # memory still agrees with the file


def test_apply_many_is_one_batch_in_order(engine: AlarmEngine) -> None:
    trs = engine.apply_many([ph(T0, True), ph(T0 + 1, False, value=8.0), ph(T0 + 2, True)], T0 + 2)
    assert [t.kind for t in trs] == [Kind.RAISE, Kind.CLEAR, Kind.RAISE]
    seqs = [t.seq or 0 for t in trs]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3 and 0 not in seqs
    kinds = [r.kind for r in engine.journal.records(after=1)]
    assert kinds == ["episode", "transition"] * 3


def test_restore_adapts_to_changed_settings_and_survives_a_corrupt_row(path: Path) -> None:
    e = open_engine(path, T0)
    lel = AlarmInput(time=T0, site="acme-plating", channel="lel", rule="lel_single", active=True, value=20.0,
                     limit=10.0)
    e.apply_many([lel, ph(T0, True)], T0)
    e.apply(AlarmInput(time=T0 + 1, site="acme-plating", channel="lel", rule="lel_single", active=False,
                       value=0.0, limit=10.0), T0 + 1)
    assert e.state(LEL).state is State.LATCHED_UNACKED
    e.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE alarm_state SET record = '{not json' WHERE alarm_id = ?", (PH,))
    db.commit()
    db.close()
    unlatched = [SPECS[0], SPECS[1], ("acme-plating", "lel", "lel_single", AlarmSettings(latched=False))]
    e = open_engine(path, T0 + 10, unlatched)
    try:
        assert e.state(LEL).state is State.RTN_UNACKED  # not stuck waiting for a reset that is refused
        assert e.state(PH).state is State.NORMAL  # unreadable: started afresh, and said so
        start = list(e.journal.records(kinds=["engine"]))[-1].payload
        assert "JSONDecodeError" in start["restore_errors"][PH] and start["restored"] == 1
        assert row(path, LEL)[0] == "returned-to-normal-unacknowledged"
        assert row(path, PH)[0] == "normal"  # the unreadable row was replaced
    finally:
        e.close()


def test_state_table_matches_the_last_transition_of_each_alarm(engine: AlarmEngine, path: Path) -> None:
    last: dict[str, Transition] = {}
    steps = [engine.apply(ph(T0, True), T0), engine.ack(PH, user="op", now=T0 + 1),
             engine.out_of_service("acme-plating/ph/ph_low", user="tech", reason="probe out", now=T0 + 2),
             engine.apply(ph(T0 + 3, False, value=8.0), T0 + 3)]
    for trs in steps:
        assert not isinstance(trs, Refusal)
        last.update({t.alarm_id: t for t in trs})
    for alarm_id, t in last.items():
        state, seq, _ = row(path, alarm_id)
        assert (state, seq) == (t.to_state.value, t.seq)
