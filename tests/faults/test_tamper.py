"""Someone with write access to the SQLite file edits the record behind the daemon's back: deletes an episode
row, edits a reading, adds a reading, cuts records off the journal's end. `pretreat journal verify` must name
each change (what, series, UTC day, time) and fail; before seals it said "intact" (issue 15).

The record is made by the real stores (historian writer thread, episode store, alarm engine, sealer), then
edited with plain ``sqlite3`` as an adversary would (dropping the append-only triggers where needed).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, AlarmSettings
from monitor import cli
from monitor.checks.events import EpisodeEvent
from monitor.sample import Sample
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from monitor.stores.seals import DAY, Sealer, anchor_path, append_anchor, journal_head

DAY0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z
SITE = "acme"


def _readings() -> list[Sample]:
    out = []
    for i in range(0, 7200):  # two hours of 1 s pH readings, a few bad ones among them
        t = DAY0 + 3600 + i
        if i % 997 == 0:
            out.append(Sample.bad(time=t, site=SITE, channel="ph", unit="pH", quality=_quality(),
                                  reason="COMM_FAILURE: no reply within 0.5 s"))
        else:
            out.append(Sample(time=t, site=SITE, channel="ph", value=7.0 + (i % 50) / 100, unit="pH"))
    return out


def _quality():  # type: ignore[no-untyped-def]
    from monitor.sample import Quality
    return Quality.COMM_FAILURE


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "pretreat.sqlite"

    async def record() -> None:
        h = Historian(path=path, commit_interval=0.05)
        await h.start()
        h.submit(_readings())
        await h.close()

    asyncio.run(record())
    store = EpisodeStore(path=path)
    store.record([EpisodeEvent(DAY0 + 5000, SITE, "ph", "ph_low", "start", 4.2, 5.0, "§ 112-5A(1)(c)"),
                  EpisodeEvent(DAY0 + 5400, SITE, "ph", "ph_low", "end", 6.0, 5.0, "§ 112-5A(1)(c)", 3.9)])
    store.close()
    engine = AlarmEngine(path=path, alarms=[(SITE, "ph", "ph_low", AlarmSettings())], now=DAY0 + 5000)
    engine.apply(AlarmInput(time=DAY0 + 5000, site=SITE, channel="ph", rule="ph_low", active=True, value=4.2,
                            limit=5.0, citation="§ 112-5A(1)(c)"), DAY0 + 5000)
    engine.close()
    sealed = Sealer(path=path, on_sealed=lambda head: append_anchor(anchor_path(path), head, DAY0 + DAY))
    assert sealed.run_once(now=DAY0 + DAY + 4 * 3600) == 1  # the day is complete 3 h after its end
    assert sealed.stats.readings == 7200
    return path


def verify(db: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = cli.main(["journal", "verify", "--db", str(db), *extra])
    return code, capsys.readouterr().out


def edit(db: Path, *sql: str) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER IF EXISTS journal_no_delete")
        for s in sql:
            conn.execute(s)
        conn.commit()
    finally:
        conn.close()


def test_an_untouched_record_verifies(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = verify(db, capsys, "--anchor", str(anchor_path(db)))
    assert code == 0, out
    assert out.startswith("journal intact: ")
    assert "seals intact: 1 day seals over 7200 readings, 2 episode events" in out


def test_a_deleted_episode_row_is_named(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(db, "DELETE FROM episode_events WHERE event = 'end'")
    code, out = verify(db, capsys)
    assert code == 1
    assert "episode event missing: acme/ph 2026-12-01 2026-12-01T01:30:00Z: ph_low end" in out


def _ids_after_the_next_event(db: Path) -> dict[str, int]:
    """Record one more event as the daemon does; each stored event's id."""
    store = EpisodeStore(path=db)
    store.record([EpisodeEvent(DAY0 + 6000, SITE, "ph", "ph_high", "start", 11.0, 10.0, "§ 112-5A(1)(c)")])
    store.close()
    return _ids(db)


def _ids(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {f"{r} {e}": i for i, r, e in conn.execute("SELECT id, rule, event FROM episode_events")}
    finally:
        conn.close()


@pytest.mark.parametrize("older_file", [False, True])
def test_a_deleted_last_episode_row_is_not_covered_by_the_next_event(
        db: Path, capsys: pytest.CaptureFixture[str], older_file: bool) -> None:
    """The last row deleted, then the daemon records its next event: that event is given a new id, not the
    deleted row's (SQLite's default), so the deleted one is still named. A file written before ``last_id`` was
    kept learns the highest id from the journal's records."""
    edit(db, "DELETE FROM episode_events WHERE event = 'end'",
         *(["DELETE FROM episode_meta WHERE key = 'last_id'"] if older_file else []))
    assert _ids_after_the_next_event(db) == {"ph_low start": 1, "ph_high start": 3}
    code, out = verify(db, capsys)
    assert code == 1
    assert "episode event missing: acme/ph 2026-12-01 2026-12-01T01:30:00Z: ph_low end (id 2)" in out


def test_a_deleted_row_whose_id_is_given_again_is_named(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The adversary also winds ``last_id`` back while the daemon runs (a store opened later learns the highest
    id from the journal), so the next event recorded takes the deleted row's id and a journal record of its own:
    the id's records now name two different events, and the first one is missing."""
    store = EpisodeStore(path=db)
    edit(db, "DELETE FROM episode_events WHERE event = 'end'",
         "UPDATE episode_meta SET value = 1 WHERE key = 'last_id'")
    store.record([EpisodeEvent(DAY0 + 6000, SITE, "ph", "ph_high", "start", 11.0, 10.0, "§ 112-5A(1)(c)")])
    store.close()
    assert _ids(db) == {"ph_low start": 1, "ph_high start": 2}
    code, out = verify(db, capsys)
    assert code == 1
    assert ("episode event missing: acme/ph 2026-12-01 2026-12-01T01:30:00Z: ph_low end (id 2; the id now holds "
            "acme/ph ph_high start at 2026-12-01T01:40:00Z)") in out
    assert out.count("NOT intact: episode event") == 1, out  # the new event's own row matches its record
    assert "3 episode events" in out  # the one whose id was given again is counted


@pytest.mark.parametrize("last_id", [1, None])
def test_a_deleted_row_recorded_again_with_other_figures_is_named(
        db: Path, capsys: pytest.CaptureFixture[str], last_id: int | None) -> None:
    """The last row deleted and ``last_id`` wound back (or deleted) while the daemon is stopped; at its start the
    daemon replays recent history and records the same transition again, with figures of its own (a replay that
    begins inside the episode sees a different peak). Given the deleted row's id, the new record would become
    the id's newest and the original figures would vanish unnamed: a store opened takes the highest id from the
    journal, so the event gets a new id and the deleted row is still named."""
    edit(db, "DELETE FROM episode_events WHERE event = 'end'",
         "DELETE FROM episode_meta WHERE key = 'last_id'" if last_id is None else
         f"UPDATE episode_meta SET value = {last_id} WHERE key = 'last_id'")
    store = EpisodeStore(path=db)
    store.record([EpisodeEvent(DAY0 + 5400, SITE, "ph", "ph_low", "end", 6.5, 5.0, "§ 112-5A(1)(c)", 4.4)])
    store.close()
    assert _ids(db) == {"ph_low start": 1, "ph_low end": 3}
    code, out = verify(db, capsys)
    assert code == 1
    assert "episode event missing: acme/ph 2026-12-01 2026-12-01T01:30:00Z: ph_low end (id 2)" in out


def test_a_last_id_past_every_id_given_is_named_and_mended_at_start(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``last_id`` raised to SQLite's largest integer: the next id would not fit, and the daemon could record no
    episode event. The check names it, and a store opened gives the next id after the highest one given."""
    edit(db, f"UPDATE episode_meta SET value = {2**63 - 1} WHERE key = 'last_id'")
    code, out = verify(db, capsys)
    assert code == 1
    assert (f"episode event altered: episode_meta: last_id is {2**63 - 1}, past the highest id given (2)"
            in out), out
    assert _ids_after_the_next_event(db) == {"ph_low start": 1, "ph_low end": 2, "ph_high start": 3}
    code, out = verify(db, capsys)
    assert code == 0, out


def test_a_last_id_past_every_id_given_while_the_store_is_open_does_not_stop_recording(
        db: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """The same while the daemon runs: its next event is still recorded, under the next id proven, and the
    operator's log says what was found."""
    store = EpisodeStore(path=db)
    edit(db, f"UPDATE episode_meta SET value = {2**63 - 1} WHERE key = 'last_id'")
    store.record([EpisodeEvent(DAY0 + 6000, SITE, "ph", "ph_high", "start", 11.0, 10.0, "§ 112-5A(1)(c)")])
    store.close()
    assert _ids(db) == {"ph_low start": 1, "ph_low end": 2, "ph_high start": 3}
    assert "last_id was set past the largest id SQLite holds" in caplog.text
    code, out = verify(db, capsys)
    assert code == 0, out


def test_a_row_recorded_before_sealing_withdrawn_by_hand_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file recorded before seals (schema 1) is sealed when a sealing version first opens it; an adversary
    then sets ``withdrawn = 1`` on one of its rows, and every report leaves that episode out."""
    from tests.unit.checks_helpers import SCHEMA_1

    path = tmp_path / "pretreat.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    conn.close()
    EpisodeStore(path=path).close()
    edit(path, "UPDATE episode_events SET withdrawn = 1 WHERE event = 'end'")
    code, out = verify(path, capsys)
    assert code == 1, out
    assert "episode event altered" in out and "ph_low end (id 2): withdrawn = 1" in out


def test_an_added_episode_row_is_named(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(db, "INSERT INTO episode_events (time, site, channel, rule, event, value, limit_value, peak, "
             f"citation, data_quality) VALUES ({DAY0 + 7000}, 'acme', 'ph', 'ph_high', 'start', 11, 10, NULL, "
             "'x', 0)")
    code, out = verify(db, capsys)
    assert code == 1
    assert "episode event added: acme/ph 2026-12-01 2026-12-01T01:56:40Z: ph_high start" in out


def test_an_edited_reading_is_named_to_its_minute(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(db, f"UPDATE readings SET value = 7.01 WHERE time = {DAY0 + 3600 + 125}")
    code, out = verify(db, capsys)
    assert code == 1
    assert "reading altered: acme/ph 2026-12-01 2026-12-01T01:02:00Z: 60 readings in this minute" in out


def test_a_deleted_and_an_added_reading_are_named(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(db, f"DELETE FROM readings WHERE time = {DAY0 + 3600 + 4000}",
         f"INSERT INTO readings VALUES (1, {DAY0 + 3600 + 6000.5}, 3, 7.1, 0, '')")
    code, out = verify(db, capsys)
    assert code == 1
    assert "reading missing: acme/ph 2026-12-01 2026-12-01T02:06:00Z: 1 of the 60 readings" in out
    assert "reading added: acme/ph 2026-12-01 2026-12-01T02:40:00Z: 1 reading(s) more" in out


def test_a_truncated_journal_tail_fails_against_alarm_state_and_the_anchor_file(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = journal_head(db)[0]
    edit(db, f"DELETE FROM journal WHERE seq > {head - 3}")
    code, out = verify(db, capsys)
    assert code == 1, out
    assert f"but the journal ends at {head - 3}" in out  # alarm_state.seq names a cut-off record
    code, out = verify(db, capsys, "--anchor", str(anchor_path(db)))
    assert code == 1
    assert f"record {head} named by the anchor is missing" in out


def test_an_episode_event_committed_while_the_record_is_checked_is_no_finding(db: Path) -> None:
    """The daemon records while its start-up check runs (and while an officer runs `journal verify`): an
    episode event and its journal record are committed together, and the check must see the file at one
    moment. Here the event is committed just as the check starts reading the journal's episode records, after
    it has read the episode table: read in separate snapshots, it looked "missing" from its table (the
    SIGKILL scenario's spurious record_integrity alarm)."""
    from monitor.record_check import check_record
    from monitor.stores.readonly import connect_readonly

    writes: list[str] = []

    def commit_an_event(statement: str) -> None:  # sqlite3 calls this as each statement starts running
        reads_episode_records = statement.startswith("SELECT payload FROM journal WHERE kind") and \
            "episode" in statement and "LIMIT" not in statement
        if reads_episode_records and not writes:
            writes.append(statement)
            store = EpisodeStore(path=db)
            store.record([EpisodeEvent(DAY0 + 6000, SITE, "ph", "ph_low", "start", 4.1, 5.0, "§ 112-5A(1)(c)")])
            store.close()

    conn = connect_readonly(db)
    try:
        conn.set_trace_callback(commit_an_event)
        check = check_record(conn)
    finally:
        conn.close()
    assert writes, "the event was never committed during the check: the test proves nothing"
    assert check.ok, check.problems()
