"""The operator command queue against a real AlarmEngine on a temporary SQLite file: commands are carried
out once, answered with the journaled transitions or the refusal, and never applied late."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.commands import CommandQueue, Status, apply_pending
from alarms.engine import AlarmEngine, AlarmSpec
from alarms.model import AlarmInput, AlarmSettings, Kind, Priority, State

T0 = 1_700_000_000.0
PH = "acme-plating/ph/ph_high"
LEL = "acme-plating/lel/lel_single"
SPECS: list[AlarmSpec] = [
    ("acme-plating", "ph", "ph_high", AlarmSettings(priority=Priority.HIGH)),
    ("acme-plating", "lel", "lel_single", AlarmSettings(priority=Priority.CRITICAL, latched=True)),
]


def ph(t: float, active: bool) -> AlarmInput:
    return AlarmInput(time=t, site="acme-plating", channel="ph", rule="ph_high", active=active, value=9.6,
                      limit=9.0, citation="§ 112-5A(1)(c)")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "pretreat.sqlite"


@pytest.fixture
def engine(path: Path) -> Iterator[AlarmEngine]:
    e = AlarmEngine(path=path, alarms=SPECS, now=T0)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def queue(path: Path, engine: AlarmEngine) -> Iterator[CommandQueue]:
    q = CommandQueue(path=path)
    try:
        yield q
    finally:
        q.close()


def journal(engine: AlarmEngine, kind: str) -> list[dict[str, object]]:
    return [r.payload for r in engine.journal.records(kinds=[kind])]


def test_ack_is_carried_out_once_and_answered_with_the_journaled_transition(
        engine: AlarmEngine, queue: CommandQueue) -> None:
    engine.apply(ph(T0 + 1, True), T0 + 1)
    cid = queue.submit(alarm_id=PH, action="ack", user="jdoe", note="industry called", now=T0 + 2)
    assert queue.get(cid).status is Status.PENDING
    made = apply_pending(queue, engine, T0 + 3)
    assert [(t.kind, t.to_state, t.who, t.why) for t in made] == [
        (Kind.ACK, State.ACTIVE_ACKED, "jdoe", "industry called")]
    cmd = queue.get(cid)
    assert cmd.status is Status.DONE and cmd.done_at == T0 + 3 and cmd.taken_at == T0 + 3
    assert [t["kind"] for t in cmd.transitions] == ["ack"]
    assert cmd.transitions[0]["seq"] == made[0].seq  # the answer names the journal record
    assert engine.state(PH).state is State.ACTIVE_ACKED
    # the same command is never carried out twice
    assert apply_pending(queue, engine, T0 + 4) == []
    assert [a["user"] for a in journal(engine, "action")] == ["jdoe"]
    assert engine.journal.verify().ok


def test_refusals_come_back_with_the_engines_reason(engine: AlarmEngine, queue: CommandQueue) -> None:
    nothing = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0)
    unknown = queue.submit(alarm_id="acme-plating/ph/no_rule", action="ack", user="jdoe", now=T0)
    not_latched = queue.submit(alarm_id=PH, action="reset", user="jdoe", now=T0)
    assert apply_pending(queue, engine, T0 + 1) == []
    answers = {cid: queue.get(cid) for cid in (nothing, unknown, not_latched)}
    assert all(c.status is Status.REFUSED for c in answers.values())
    assert "nothing to acknowledge" in answers[nothing].why_not
    assert answers[unknown].why_not == "no such alarm"
    assert "not a latched alarm" in answers[not_latched].why_not
    assert len(journal(engine, "refusal")) == 3


def test_shelve_carries_until_and_reason(engine: AlarmEngine, queue: CommandQueue) -> None:
    cid = queue.submit(alarm_id=LEL, action="shelve", user="jdoe", until=T0 + 3600, reason="meter recal",
                       now=T0)
    (made,) = apply_pending(queue, engine, T0 + 1)
    assert (made.kind, made.why) == (Kind.SHELVE, "meter recal")
    st = engine.state(LEL)
    assert (st.state, st.mode_until, st.mode_by) == (State.SHELVED, T0 + 3600, "jdoe")
    assert queue.get(cid).status is Status.DONE


def test_a_malformed_shelve_is_refused_and_journaled(engine: AlarmEngine, queue: CommandQueue) -> None:
    cid = queue.submit(alarm_id=LEL, action="shelve", user="jdoe", reason="x", now=T0)  # no until
    assert apply_pending(queue, engine, T0 + 1) == []
    assert "needs an expiry" in queue.get(cid).why_not
    assert journal(engine, "refusal")[0]["command"] == cid
    with pytest.raises(ValueError, match="unknown action"):
        queue.submit(alarm_id=PH, action="silence", user="jdoe")
    with pytest.raises(ValueError, match="ttl"):
        queue.submit(alarm_id=PH, action="ack", user="jdoe", ttl=0)


def test_a_command_picked_up_after_its_expiry_is_not_carried_out(engine: AlarmEngine,
                                                                 queue: CommandQueue) -> None:
    engine.apply(ph(T0 + 1, True), T0 + 1)
    cid = queue.submit(alarm_id=PH, action="ack", user="jdoe", ttl=30, now=T0 + 2)
    assert apply_pending(queue, engine, T0 + 32.5) == []  # the daemon was down for half a minute
    cmd = queue.get(cid)
    assert cmd.status is Status.EXPIRED and "expired" in cmd.why_not
    assert engine.state(PH).state is State.ACTIVE_UNACKED  # nobody acknowledged what they did not see
    assert journal(engine, "refusal")[0]["command"] == cid
    # exactly at the expiry it is still valid
    cid2 = queue.submit(alarm_id=PH, action="ack", user="jdoe", ttl=30, now=T0 + 40)
    assert [t.kind for t in apply_pending(queue, engine, T0 + 70)] == [Kind.ACK]
    assert queue.get(cid2).status is Status.DONE


def test_cancel_only_while_pending(engine: AlarmEngine, queue: CommandQueue) -> None:
    engine.apply(ph(T0 + 1, True), T0 + 1)
    cid = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0 + 2)
    assert queue.cancel(cid, why="no answer in 5 s", now=T0 + 7)
    assert queue.get(cid).status is Status.CANCELLED and queue.get(cid).why_not == "no answer in 5 s"
    assert apply_pending(queue, engine, T0 + 8) == []
    assert engine.state(PH).state is State.ACTIVE_UNACKED
    taken = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0 + 9)
    (cmd,) = queue.take_pending(T0 + 10)
    assert cmd.id == taken and cmd.status is Status.TAKEN
    assert not queue.cancel(taken)  # the daemon has it: the requester must wait for the answer
    assert not queue.cancel(cid)  # final states stay final


def test_two_daemons_racing_claim_each_command_once(path: Path, engine: AlarmEngine,
                                                   queue: CommandQueue) -> None:
    other = CommandQueue(path=path)
    try:
        ids = [queue.submit(alarm_id=PH, action="ack", user=f"op{i}", now=T0) for i in range(20)]
        got: list[list[int]] = [[], []]

        def take(slot: int) -> None:
            q = CommandQueue(path=path)  # its own connection, made in the thread that uses it
            try:
                for _ in range(50):
                    got[slot] += [c.id for c in q.take_pending(T0 + 1)]
            finally:
                q.close()

        threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(got[0] + got[1]) == ids
        assert other.take_pending(T0 + 2) == []
    finally:
        other.close()


def test_a_command_interrupted_by_a_daemon_stop_is_settled_not_reapplied(path: Path, engine: AlarmEngine,
                                                                         queue: CommandQueue) -> None:
    cid = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0)
    assert [c.id for c in queue.take_pending(T0 + 1)] == [cid]  # ... and the daemon dies here
    restarted = CommandQueue(path=path)
    try:
        assert restarted.take_pending(T0 + 60) == []
        cmd = restarted.get(cid)
        assert cmd.status is Status.REFUSED and "journal" in cmd.why_not
        with pytest.raises(KeyError, match="not taken"):
            restarted.complete(cid, [], now=T0 + 61)
    finally:
        restarted.close()


def test_wait_returns_as_soon_as_the_daemon_answers(path: Path, engine: AlarmEngine,
                                                    queue: CommandQueue) -> None:
    engine.apply(ph(T0 + 1, True), T0 + 1)
    cid = queue.submit(alarm_id=PH, action="ack", user="jdoe")
    t0 = time.monotonic()
    assert queue.wait(cid, 0.2).status is Status.PENDING  # nobody answers: back after the timeout
    assert 0.2 <= time.monotonic() - t0 < 2.0
    answered = threading.Event()

    def daemon() -> None:  # the daemon's end of the queue, in another thread with its own connection
        daemon_side = CommandQueue(path=path)
        try:
            time.sleep(0.15)
            cmds = daemon_side.take_pending(T0 + 5)
            daemon_side.complete(cmds[0].id, [], now=T0 + 5)
            answered.set()
        finally:
            daemon_side.close()

    th = threading.Thread(target=daemon)
    th.start()
    try:
        t0 = time.monotonic()
        cmd = queue.wait(cid, 5.0)
        assert cmd.status is Status.DONE and answered.is_set()
        assert time.monotonic() - t0 < 1.0
    finally:
        th.join()


def test_cli_side_does_not_create_a_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has the daemon ever run"):
        CommandQueue(path=tmp_path / "missing.sqlite", create=False)
    assert not (tmp_path / "missing.sqlite").exists()


def test_a_failing_engine_write_is_answered_and_the_tick_goes_on(engine: AlarmEngine,
                                                                 queue: CommandQueue) -> None:
    engine.apply(ph(T0 + 1, True), T0 + 1)
    first = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0 + 2)
    second = queue.submit(alarm_id=LEL, action="ack", user="jdoe", now=T0 + 2)
    engine.journal.connection.close()  # every engine write now fails with sqlite3.ProgrammingError
    assert apply_pending(queue, engine, T0 + 3) == []
    for cid in (first, second):
        cmd = queue.get(cid)
        assert cmd.status is Status.REFUSED
    assert "could not record it" in queue.get(first).why_not
    assert engine.state(PH).state is State.ACTIVE_UNACKED  # memory stays consistent with the file


def test_a_locked_file_postpones_commands_to_the_next_tick(path: Path, engine: AlarmEngine) -> None:
    queue = CommandQueue(path=path, busy_timeout=0.05)
    try:
        engine.apply(ph(T0 + 1, True), T0 + 1)
        cid = queue.submit(alarm_id=PH, action="ack", user="jdoe", now=T0 + 2)
        blocker = sqlite3.connect(path, timeout=0)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the queue's busy timeout
        try:
            assert apply_pending(queue, engine, T0 + 3) == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert queue.get(cid).status is Status.PENDING
        assert [t.kind for t in apply_pending(queue, engine, T0 + 4)] == [Kind.ACK]
    finally:
        queue.close()


def test_an_industrys_seen_and_a_comment_are_journaled_and_leave_the_alarm_as_it_was(
        engine: AlarmEngine, queue: CommandQueue) -> None:
    engine.apply(ph(T0, True), T0)
    seen = queue.submit(alarm_id=PH, action="seen", user="acme", note="our operator is on it", now=T0 + 1)
    said = queue.submit(alarm_id=PH, action="comment", user="op", note="called ACME at 03:10", now=T0 + 1)
    empty = queue.submit(alarm_id=PH, action="comment", user="op", note="  ", now=T0 + 1)
    assert apply_pending(queue, engine, T0 + 2) == []  # no transition: the plant's alarm is not acknowledged
    assert [queue.get(c).status for c in (seen, said)] == [Status.DONE, Status.DONE]
    assert queue.get(empty).status is Status.REFUSED and "needs its text" in queue.get(empty).why_not
    assert engine.state(PH).state is State.ACTIVE_UNACKED
    assert [(a["action"], a["user"], a["note"]) for a in journal(engine, "action")] == [
        ("seen", "acme", "our operator is on it"), ("comment", "op", "called ACME at 03:10")]
    normal = queue.submit(alarm_id=LEL, action="seen", user="acme", now=T0 + 3)
    apply_pending(queue, engine, T0 + 3)
    assert "nothing to acknowledge" in queue.get(normal).why_not


def test_a_queue_table_of_an_older_daemon_is_widened_for_the_new_actions_keeping_its_rows(path: Path) -> None:
    old = sqlite3.connect(path)
    old.executescript("""CREATE TABLE operator_commands (id INTEGER PRIMARY KEY, alarm_id TEXT NOT NULL,
        action TEXT NOT NULL CHECK (action IN ('ack', 'shelve', 'unshelve', 'reset', 'out-of-service', 'in-service')),
        user TEXT NOT NULL, note TEXT NOT NULL, until REAL, reason TEXT NOT NULL, requested_at REAL NOT NULL,
        expires_at REAL NOT NULL, status TEXT NOT NULL, result TEXT, taken_at REAL, done_at REAL);
        INSERT INTO operator_commands
        VALUES (7, 'a/b/c', 'ack', 'op', '', NULL, '', 1.0, 2.0, 'done', '{}', 1.5, 1.6);""")
    old.close()
    with CommandQueue(path=path) as q:
        assert q.get(7).action == "ack" and q.get(7).status is Status.DONE
        cid = q.submit(alarm_id=PH, action="comment", user="op", note="hello", now=T0)
        assert cid == 8 and q.get(cid).action == "comment"
