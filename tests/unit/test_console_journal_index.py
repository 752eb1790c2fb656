"""The console's incremental index of the alarm journal (`monitor.console.journal_index`), on a real alarm
engine's journal: filed a few records at a time, it holds exactly what one read of the whole journal gives
(the history page's acknowledgements and industry `seen` marks, the KPI page's raises and acknowledgements),
each list in time order; the period picked out of it is the records in [start, end)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alarms.engine import AlarmEngine, AlarmSpec
from alarms.model import AlarmInput, AlarmSettings, Priority, Seen
from monitor.console.journal_index import JournalIndex, JournalIndexes, between

T0 = 1_700_000_000.0
PH = "acme/ph/ph_high"
SPECS: list[AlarmSpec] = [("acme", "ph", "ph_high", AlarmSettings(priority=Priority.HIGH, latched=True))]


def raised(t: float, active: bool) -> AlarmInput:
    return AlarmInput(time=t, site="acme", channel="ph", rule="ph_high", active=active, value=10.0, limit=9.0,
                      citation="§ 1")


def fields(idx: JournalIndex) -> tuple:
    return ({a: list(v) for a, v in idx.raises.items()}, {a: list(v) for a, v in idx.kpi_acks.items()},
            idx.acks, idx.seen)


def test_filed_a_few_records_at_a_time_the_index_equals_one_full_read(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    index = JournalIndexes()
    e = AlarmEngine(path=db, alarms=SPECS, now=T0)
    conn = sqlite3.connect(db)
    try:
        steps = [
            lambda: e.apply(raised(T0, True), T0),
            lambda: e.act(PH, Seen(user="acme", note="on it"), T0 + 5),
            lambda: e.ack(PH, user="op", note="called them", now=T0 + 30),
            lambda: e.apply(raised(T0 + 40, False), T0 + 40),
            lambda: e.reset(PH, user="op", now=T0 + 50),
            lambda: e.apply(raised(T0 + 100, True), T0 + 100),
            lambda: e.apply(raised(T0 + 110, False), T0 + 110),
            lambda: e.reset(PH, user="lead", note="unacknowledged reset", now=T0 + 120),
        ]
        for step in steps:
            step()
            assert fields(index.current(conn, "db")) == fields(JournalIndexes().current(conn, ""))
        idx = index.current(conn, "db")
    finally:
        conn.close()
        e.close()
    assert list(idx.raises[PH]) == [T0, T0 + 100]
    assert list(idx.kpi_acks[PH]) == [T0 + 30, T0 + 120]  # the ack, and the reset of the unacknowledged alarm
    assert [(r["user"], r["note"].split(" (")[0]) for r in idx.acks[PH][1]] == [
        ("op", "called them"), ("lead", "unacknowledged reset")]
    assert idx.seen[PH][0] == [T0 + 5] and idx.seen[PH][1][0]["user"] == "acme"
    assert between(idx.raises[PH], T0, T0 + 100) == [T0] and between(idx.raises[PH], T0 + 1) == [T0 + 100]
