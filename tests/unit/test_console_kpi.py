"""Alarm KPIs (ISA-18.2 / EEMUA 191) computed from a real alarm engine's journal on a temporary SQLite file:
alarms per hour and per 10 minutes, chattering, time to acknowledge, standing and stale alarms, the top 10."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from alarms.engine import AlarmEngine, AlarmSpec
from alarms.model import AlarmInput, AlarmSettings, Priority, Seen
from config.loader import load_config
from monitor.console.kpi import kpis
from tests.browser.harness import write_site

T0 = 1_700_000_000.0 - (1_700_000_000.0 % 600)  # on a 10-minute boundary
SITE = "acme-plating"
PH, LEL = f"{SITE}/ph/ph_high", f"{SITE}/lel/lel_single"
SPECS: list[AlarmSpec] = [
    (SITE, "ph", "ph_high", AlarmSettings(priority=Priority.HIGH)),
    (SITE, "lel", "lel_single", AlarmSettings(priority=Priority.CRITICAL)),
]


def inp(rule: str, t: float, active: bool) -> AlarmInput:
    channel = "ph" if rule == "ph_high" else "lel"
    return AlarmInput(time=t, site=SITE, channel=channel, rule=rule, active=active, value=1.0, limit=0.5,
                      citation="§ 112-5A")


def test_rates_chattering_time_to_acknowledge_standing_and_top(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    e = AlarmEngine(path=db, alarms=SPECS, now=T0)
    try:
        # pH: raised, acknowledged after 30 s, cleared; raised twice more within 60 s (chattering), the third
        # acknowledged after 120 s and left standing
        e.apply(inp("ph_high", T0, True), T0)
        e.ack(PH, user="op", now=T0 + 30)
        e.apply(inp("ph_high", T0 + 40, False), T0 + 40)
        e.apply(inp("ph_high", T0 + 45, True), T0 + 45)
        e.ack(PH, user="op", now=T0 + 46)
        e.apply(inp("ph_high", T0 + 50, False), T0 + 50)
        e.apply(inp("ph_high", T0 + 55, True), T0 + 55)
        e.act(PH, Seen(user="acme"), T0 + 56)  # the industry's: not the plant's acknowledgement
        e.ack(PH, user="op", now=T0 + 175)
        # LEL: raised once, never acknowledged, standing since T0 + 700
        e.apply(inp("lel_single", T0 + 700, True), T0 + 700)
    finally:
        e.close()
    config = load_config(write_site(tmp_path))
    conn = sqlite3.connect(db)
    try:
        got = kpis(conn, config, {SITE}, start=T0, end=T0 + 3600, now=T0 + 3600 + 86400)
        later = kpis(conn, config, {SITE}, start=T0 + 600, end=T0 + 3600, now=T0 + 3600)
    finally:
        conn.close()
    o = got["overall"]
    assert (o["alarms"], o["per_hour"], o["max_per_10_min"]) == (4, 4.0, 3)
    assert o["flood_pct"] == 0.0 and o["chattering_alarms"] == [PH]
    assert (o["acknowledged"], o["not_acknowledged"]) == (3, 1)
    assert o["ack_median_s"] == pytest.approx(30.0) and o["ack_median_text"] == "30 s"
    assert o["ack_p90_s"] == pytest.approx(30.0 + 0.8 * (120.0 - 30.0))  # waits 1, 30, 120 s (inclusive method)
    assert (o["standing"], o["stale"], sorted(o["stale_alarms"])) == (2, 2, sorted([LEL, PH]))  # a day later
    assert [(t["alarm"], t["count"], t["share_pct"]) for t in got["top"]] == [(PH, 3, 75.0), (LEL, 1, 25.0)]
    assert [s["site"] for s in got["sites"]] == [SITE] and got["sites"][0]["alarms"] == 4
    # a later period: only the LEL raise; nothing stale an hour after it
    assert (later["overall"]["alarms"], later["overall"]["chattering"], later["overall"]["stale"]) == (1, 0, 0)


def test_the_incremental_journal_index_gives_the_figures_of_a_full_read(tmp_path: Path) -> None:
    """The console files each journal record once (`journal_index`): a request after new transitions reads only
    those, and its KPIs equal the ones computed from the whole journal read at once; a journal re-created at
    the same path is read again from the start."""
    from monitor.console.journal_index import JournalIndexes

    db = tmp_path / "pretreat.sqlite"
    config = load_config(write_site(tmp_path))
    index = JournalIndexes()
    args = {"start": T0, "end": T0 + 3600, "now": T0 + 3600}

    def both() -> tuple[dict, dict]:
        conn = sqlite3.connect(db)
        try:
            return (kpis(conn, config, {SITE}, source="db", index=index, **args),
                    kpis(conn, config, {SITE}, **args))
        finally:
            conn.close()

    e = AlarmEngine(path=db, alarms=SPECS, now=T0)
    try:
        e.apply(inp("ph_high", T0, True), T0)
        e.ack(PH, user="op", now=T0 + 30)
        first, full = both()
        assert first == full and first["overall"]["alarms"] == 1
        seq = index.current(sqlite3.connect(db), "db").seq
        e.apply(inp("ph_high", T0 + 40, False), T0 + 40)
        e.apply(inp("ph_high", T0 + 45, True), T0 + 45)
        e.apply(inp("lel_single", T0 + 700, True), T0 + 700)
        e.ack(LEL, user="op", now=T0 + 760)
        second, full = both()
        assert second == full and second["overall"]["alarms"] == 3 and second["overall"]["acknowledged"] == 2
        assert index.current(sqlite3.connect(db), "db").seq > seq
    finally:
        e.close()
    db.unlink()
    e = AlarmEngine(path=db, alarms=SPECS, now=T0)  # another journal at the same path
    try:
        e.apply(inp("lel_single", T0 + 100, True), T0 + 100)
        third, full = both()
        assert third == full and third["overall"]["alarms"] == 1 and third["top"][0]["alarm"] == LEL
    finally:
        e.close()
