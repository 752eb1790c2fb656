"""The hash-chained journal: the documented encoding, append-only triggers, and tamper detection that names
the first bad record, whether the tampering went through SQL or through the file's bytes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.journal import GENESIS, Entry, Journal

T0 = 1_700_000_000.25


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite"


@pytest.fixture
def journal(path: Path) -> Iterator[Journal]:
    j = Journal(path=path)
    try:
        yield j
    finally:
        j.close()


def fill(j: Journal, n: int = 10) -> None:
    j.append_many([Entry("transition", {"alarm": "acme/ph/ph_high", "n": i, "value": 9.0 + i / 4}, T0 + i)
                   for i in range(1, n + 1)])


def tamper(path: Path, *statements: str) -> None:
    """What someone with the file could do: drop the guards and edit rows with plain sqlite3."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TRIGGER IF EXISTS journal_no_update")
    db.execute("DROP TRIGGER IF EXISTS journal_no_delete")
    for sql in statements:
        db.execute(sql)
    db.close()


def test_records_chain_with_the_documented_canonical_encoding(journal: Journal) -> None:
    assert journal.head() == (0, GENESIS)
    assert journal.append("episode", {"b": 1, "a": "pH ≥ 9", "v": None}, T0) == 1
    seqs = journal.append_many([Entry("transition", {"x": 1.5}, T0 + 1), Entry("action", {}, T0 + 2)])
    assert seqs == [2, 3]
    prev = GENESIS
    for rec in journal.records():
        # recomputed from the module docstring's description alone, with the standard library
        doc = {"kind": rec.kind, "payload": rec.payload, "prev": prev, "seq": rec.seq, "time": rec.time}
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert hashlib.sha256(text.encode()).hexdigest() == rec.hash
        assert rec.prev == prev
        prev = rec.hash
    assert journal.head() == (3, prev)
    assert [r.seq for r in journal.records(after=1, kinds=["action"])] == [3]
    result = journal.verify()
    assert result.ok and result.records == 3 and result.head == (3, prev)


def test_update_and_delete_are_refused_through_sql(journal: Journal, path: Path) -> None:
    fill(journal, 3)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE journal SET payload = '{}' WHERE seq = 2")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM journal WHERE seq = 3")
    db.close()
    assert journal.verify().ok


def test_edited_payload_is_named(journal: Journal, path: Path) -> None:
    fill(journal)
    tamper(path, """UPDATE journal SET payload = replace(payload, '"value":10.75', '"value":8.75')
                    WHERE seq = 7""")
    r = journal.verify()
    assert (r.ok, r.first_bad, r.problem) == (False, 7, "altered")
    assert r.head[0] == 6 and "7" in r.detail


def test_edited_and_rehashed_record_is_named(journal: Journal, path: Path) -> None:
    fill(journal)
    rec = next(journal.records(after=3, limit=1))
    from alarms.journal import record_hash
    forged = json.dumps({**rec.payload, "value": 1.0}, sort_keys=True, separators=(",", ":"))
    h = record_hash(seq=4, time=rec.time, kind=rec.kind, payload_text=forged, prev=rec.prev)
    tamper(path, f"UPDATE journal SET payload = '{forged}', hash = '{h}' WHERE seq = 4")
    r = journal.verify()
    assert (r.first_bad, r.problem) == (4, "altered")


def test_deleted_record_is_named(journal: Journal, path: Path) -> None:
    fill(journal)
    tamper(path, "DELETE FROM journal WHERE seq = 5")
    r = journal.verify()
    assert (r.first_bad, r.problem, r.records) == (5, "missing", 5)


def test_deleted_and_renumbered_records_are_named(journal: Journal, path: Path) -> None:
    fill(journal)
    tamper(path, "DELETE FROM journal WHERE seq = 5", "UPDATE journal SET seq = seq - 1 WHERE seq > 5")
    r = journal.verify()
    assert (r.first_bad, r.problem) == (5, "missing")


def test_swapped_records_are_named(journal: Journal, path: Path) -> None:
    fill(journal)
    tamper(path, "UPDATE journal SET seq = -1 WHERE seq = 3", "UPDATE journal SET seq = 3 WHERE seq = 4",
           "UPDATE journal SET seq = 4 WHERE seq = -1")
    r = journal.verify()
    assert (r.first_bad, r.problem) == (3, "reordered")


def test_swapped_contents_are_named(journal: Journal, path: Path) -> None:
    fill(journal)
    cols = "time, kind, payload, prev, hash"
    tamper(path, f"CREATE TEMP TABLE t AS SELECT seq, {cols} FROM journal WHERE seq IN (8, 9)",
           *(f"UPDATE journal SET ({cols}) = (SELECT {cols} FROM t WHERE seq = {b}) WHERE seq = {a}"
             for a, b in ((8, 9), (9, 8))))
    r = journal.verify()
    assert (r.first_bad, r.problem) == (8, "reordered")


def test_truncated_tail_is_caught_by_an_anchor(journal: Journal, path: Path) -> None:
    fill(journal)
    anchor = journal.head()
    tamper(path, "DELETE FROM journal WHERE seq >= 9")
    assert journal.verify().ok  # a chain alone cannot see its end cut off
    r = journal.verify(anchor=anchor)
    assert (r.ok, r.first_bad, r.problem) == (False, 10, "missing")
    forged_anchor = (8, "f" * 64)
    assert journal.verify(anchor=forged_anchor).problem == "altered"


def test_edit_of_the_file_bytes_is_detected(path: Path) -> None:
    j = Journal(path=path)
    fill(j)
    j.close()  # the last connection closing checkpoints the WAL into the main file
    assert not Path(f"{path}-wal").exists()
    data = path.read_bytes()
    assert data.count(b'"value":10.25') == 1  # record 5
    path.write_bytes(data.replace(b'"value":10.25', b'"value":19.25'))  # same length: the file stays valid
    j = Journal(path=path)
    try:
        r = j.verify()
        assert (r.first_bad, r.problem) == (5, "altered")
    finally:
        j.close()


def test_append_many_is_all_or_nothing(journal: Journal) -> None:
    fill(journal, 2)
    head = journal.head()
    with pytest.raises(ValueError):
        journal.append_many([Entry("x", {"ok": 1}, T0), Entry("x", {"bad": float("nan")}, T0)])

    def failing(seqs: list[int]) -> list[tuple[str, list[tuple[Any, ...]]]]:
        assert seqs == [3]
        return [("INSERT INTO no_such_table VALUES (?)", [(1,)])]

    with pytest.raises(sqlite3.OperationalError):
        journal.append_many([Entry("x", {"ok": 1}, T0)], also=failing)
    with pytest.raises(ValueError, match="kind"):
        journal.append("", {}, T0)
    assert journal.head() == head and journal.verify().ok


def test_two_writers_on_one_file_keep_one_chain(path: Path) -> None:
    a, b = Journal(path=path), Journal(path=path)
    try:
        for i in range(20):
            (a if i % 3 else b).append("action", {"i": i}, T0 + i)
        r = a.verify()
        assert r.ok and r.records == 20
        assert [rec.payload["i"] for rec in b.records()] == list(range(20))
    finally:
        a.close()
        b.close()


def test_a_marked_break_is_reported_once_and_checking_resumes_after_the_marker(journal: Journal,
                                                                              path: Path) -> None:
    from alarms.journal import BREAK

    fill(journal)
    tamper(path, """UPDATE journal SET payload = replace(payload, '"value":10.75', '"value":8.75')
                    WHERE seq = 7""")
    journal.append(BREAK, {"first_bad": 7, "problem": "altered"}, T0 + 20)  # what the daemon does at start
    fill(journal, 3)
    r = journal.verify()
    assert (r.ok, r.first_bad, r.problem) == (False, 7, "altered")
    assert len(r.breaks) == 1 and "break marked by record 11" in r.breaks[0]
    assert r.detail.endswith("intact after it") and r.head[0] == 14
    assert r.records == 10  # checked: 1-7 up to the break, then 12-14 after the marker
    tamper(path, """UPDATE journal SET payload = replace(payload, '"n":2', '"n":5') WHERE seq = 13""")
    r = journal.verify()  # a later edit is not covered by the old marker
    assert (r.ok, r.first_bad, r.problem) == (False, 13, "altered") and len(r.breaks) == 1
    assert not r.detail.endswith("intact after it")


def test_records_of_one_kind_are_found_through_the_kind_index(path: Path) -> None:
    """The episode store reads its records' highest id each time it opens (`monitor.stores.episodes`), and the
    record check reads seals and episode events by kind: through the index, not a scan of every seal record (a
    year of a 1,000-channel site is ~400,000 records, ~0.2 s a scan here against ~1 ms)."""
    from monitor.stores.episodes import EpisodeStore

    EpisodeStore(path=path).close()
    conn = sqlite3.connect(path)
    try:
        plan = " ".join(str(r[-1]) for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT max(json_extract(payload, '$.id')) FROM journal WHERE kind = 'episode_event'"))
    finally:
        conn.close()
    assert "USING INDEX journal_kind" in plan, plan
