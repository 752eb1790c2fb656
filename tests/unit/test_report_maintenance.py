"""Maintenance time in the report figures: the instrument's own service/calibration status (quality
``maintenance``) is its own per-day figure, never downtime, never covered (measured) time, and not unmeasured
time in the monthly pH accounting (`monitor.reports.aggregates`, `monitor.checks.coverage`).

The golden site's pH meter is read once a minute (``max_gap`` 180 s). The day 2026-03-07 (24 h) used here has good
readings every minute from 00:00 to 24:00 except where a test puts maintenance or silence; each maintenance
sample's stretch runs to the next sample, at most 180 s.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date
from pathlib import Path

import pytest

from monitor.reports.aggregates import DailyAggregator
from monitor.reports.aggregates_db import connect, read_days, read_states
from monitor.reports.compliance import build_report
from monitor.reports.daily import summarize
from monitor.reports.days import day_bounds
from monitor.reports.periods import Period
from monitor.reports.ph_accounting import monthly_accounts
from monitor.reports.plan import compile_plans
from monitor.reports.sections import build_sections
from monitor.sample import Quality, Sample
from tests.unit.report_scenarios import SITE, TZ, aggregate, record, site_config

DAY = date(2026, 3, 7)
LO = day_bounds(DAY, TZ)[0]
FAR_FUTURE = 4_000_000_000.0


def _ph_day(*, maintenance: range = range(0), silent: range = range(0)) -> list[Sample]:
    """pH 7.0 at every minute 0..1440 of DAY (1440 is the next midnight) but the minutes in ``maintenance``
    (a maintenance sample) and ``silent`` (nothing at all)."""
    out = []
    for m in range(1441):
        t = LO + 60.0 * m
        if m in silent:
            continue
        if m in maintenance:
            out.append(Sample.bad(time=t, site=SITE, channel="ph", unit="pH", quality=Quality.MAINTENANCE,
                                  reason="pH meter: calibration mode"))
        else:
            out.append(Sample(t, SITE, "ph", 7.0, "pH"))
    return out


def _aggregate(tmp_path: Path, samples: list[Sample]):  # type: ignore[no-untyped-def]
    config = site_config(tmp_path)
    aggregate(config, samples)
    return config


def _row(config):  # type: ignore[no-untyped-def]
    conn = connect(config.daemon.historian)
    try:
        [row] = [r for r in read_days(conn, site=SITE, first=DAY.isoformat(), last=DAY.isoformat())
                 if r.channel == "ph"]
    finally:
        conn.close()
    return row


def _ph_summary(config):  # type: ignore[no-untyped-def]
    conn = connect(config.daemon.historian)
    try:
        [s] = summarize(conn, config.site(SITE), compile_plans(config), DAY, DAY, episodes=[], now=FAR_FUTURE)
    finally:
        conn.close()
    return s, next(c for c in s.channels if c.channel == "ph")


def test_two_hour_calibration_is_maintenance_not_downtime(tmp_path: Path) -> None:
    """Calibration 09:00–11:00: 120 maintenance samples, each 60 s to the next sample. Before maintenance had
    its own figure the interval 08:59 → 11:00 (121 min) was a gap: 118 min of downtime."""
    config = _aggregate(tmp_path, _ph_day(maintenance=range(540, 660)))
    row = _row(config)
    assert row.downtime == 0.0
    assert row.maintenance == pytest.approx(7200.0)
    assert row.covered == pytest.approx(86400.0 - 7260.0)  # 08:59 → 11:00 is not measured time
    assert (row.count, row.good) == (1440, 1320)
    s, ph = _ph_summary(config)
    assert (ph.maintenance, ph.downtime) == (pytest.approx(7200.0), 0.0)
    day = json.loads(json.dumps(s.to_dict(), default=str))
    assert next(c for c in day["channels"] if c["channel"] == "ph")["maintenance"] == pytest.approx(7200.0)


def test_a_short_calibration_is_not_covered_time(tmp_path: Path) -> None:
    """One maintenance sample at 12:00 between good readings 11:59 and 12:01 (120 s, within the window): its
    60 s are maintenance, the other 60 s measured."""
    row = _row(_aggregate(tmp_path, _ph_day(maintenance=range(720, 721))))
    assert row.covered == pytest.approx(86400.0 - 60.0)
    assert row.integral == pytest.approx(7.0 * (86400.0 - 60.0))
    assert (row.maintenance, row.downtime) == (pytest.approx(60.0), 0.0)


def test_maintenance_then_silence_is_maintenance_for_max_gap_then_downtime(tmp_path: Path) -> None:
    """"In calibration" at 15:00, then nothing until 16:00: 180 s of maintenance (its most), and of the rest of
    14:59 → 16:00 (3,480 s) the first 180 s are within the window: 3,300 s down."""
    row = _row(_aggregate(tmp_path, _ph_day(maintenance=range(900, 901), silent=range(901, 960))))
    assert row.downtime == pytest.approx(3300.0)
    assert row.maintenance == pytest.approx(180.0)


def test_monthly_ph_accounting_sets_maintenance_beside_unmeasured(tmp_path: Path) -> None:
    """March with only DAY recorded: unmeasured is 1–6 March (8,640 min) plus the minute 08:59 → 09:00 before
    the calibration; the 120 minutes of calibration stand in their own column."""
    config = _aggregate(tmp_path, _ph_day(maintenance=range(540, 660)))
    conn = connect(config.daemon.historian)
    try:
        [march] = monthly_accounts(conn, config.site(SITE), compile_plans(config), DAY, DAY)
    finally:
        conn.close()
    assert march.unmeasured_minutes == pytest.approx(6 * 1440 + 1)
    assert march.maintenance_minutes == pytest.approx(120.0)
    report = build_report(config, SITE, Period(date(2026, 3, 1), date(2026, 3, 31), date(2026, 4, 15), "t"),
                          now=FAR_FUTURE)
    sections = {s.key: s for s in build_sections(report)}
    ph = sections["ph_monthly"]
    at = ph.columns.index("Maintenance (min)")
    assert ph.columns[at - 1] == "Unmeasured (min)" and len(ph.widths) == len(ph.columns)
    assert [r[at] for r in ph.rows] == ["120"]
    done = sections["completeness"]
    col = done.columns.index("Maintenance (min or h)")
    assert len(done.widths) == len(done.columns)
    [ph_total] = [r for r in done.rows if r[0] == "ph"]
    assert ph_total[col] != ph_total[done.columns.index("Downtime (min or h)")]


async def test_rebuild_with_maintenance_equals_live_aggregation(tmp_path: Path) -> None:
    """The historian keeps the quality, so a rebuild sets the same maintenance time apart as the live run."""
    config = site_config(tmp_path)
    samples = _ph_day(maintenance=range(540, 660)) + _ph_day(maintenance=range(900, 901), silent=range(901, 960))
    samples = sorted({s.time: s for s in samples}.values(), key=lambda s: s.time)
    await record(config, samples)
    conn = connect(config.daemon.historian)
    try:
        live = read_days(conn, site=SITE, first=DAY.isoformat(), last=DAY.isoformat())
        agg = DailyAggregator(path=config.daemon.historian, config=config)
        try:
            agg.rebuild(*day_bounds(DAY, TZ))
        finally:
            agg.close()
        rebuilt = read_days(conn, site=SITE, first=DAY.isoformat(), last=DAY.isoformat())
    finally:
        conn.close()
    assert rebuilt == live
    [ph] = [r for r in live if r.channel == "ph"]
    assert ph.maintenance > 0.0


def test_restart_during_calibration_carries_the_maintenance_over(tmp_path: Path) -> None:
    """A daemon restarted at 10:00, in the middle of a calibration, gives the same day as one uninterrupted
    run: the pending stretch and the stretches not yet set against an interval are kept in report_state."""
    samples = _ph_day(maintenance=range(540, 660))
    cut = LO + 600 * 60.0
    rows = []
    for restart in (False, True):
        config = site_config(tmp_path / str(restart))
        aggregate(config, samples, restart_at=cut if restart else None)
        rows.append(_row(config))
    assert rows[0] == rows[1]
    assert (rows[1].maintenance, rows[1].downtime) == (pytest.approx(7200.0), 0.0)


def _version_1_file(path: Path) -> None:
    """Report tables as version 1 wrote them (no maintenance columns), with one aggregated day."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE report_daily (site TEXT NOT NULL, channel TEXT NOT NULL, day TEXT NOT NULL,
            count INTEGER NOT NULL, good INTEGER NOT NULL, late INTEGER NOT NULL, vmin REAL, vmin_t REAL,
            vmax REAL, vmax_t REAL, vsum REAL NOT NULL, integral REAL NOT NULL, covered REAL NOT NULL,
            volume REAL NOT NULL, resets INTEGER NOT NULL, outside REAL NOT NULL, peak30 REAL, peak30_t REAL,
            downtime REAL NOT NULL, first_t REAL, last_t REAL, PRIMARY KEY (site, channel, day)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE report_state (site TEXT NOT NULL, channel TEXT NOT NULL, last_t REAL, good_t REAL,
            good_v REAL, outside INTEGER NOT NULL, exc_start REAL, exc_low REAL, exc_high REAL,
            PRIMARY KEY (site, channel)) STRICT;
        CREATE TABLE report_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
        INSERT INTO report_meta VALUES ('schema_version', 1);
        INSERT INTO report_daily VALUES ('acme', 'ph', '2026-03-07', 1440, 1440, 0, 7.0, 0, 7.0, 0, 10080.0,
            604800.0, 86400.0, 0.0, 0, 0.0, NULL, NULL, 0.0, 0, 86340);
        INSERT INTO report_state VALUES ('acme', 'ph', 86340, 86340, 7.0, 0, NULL, NULL, NULL);
    """)
    conn.close()


def test_a_version_1_file_opens_read_only_and_migrates(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _version_1_file(path)
    ro = connect(path, readonly=True)
    try:
        [row] = read_days(ro, site=SITE, first="2026-03-07", last="2026-03-07")
        assert (row.good, row.maintenance) == (1440, 0.0)
        assert read_states(ro)[(SITE, "ph")].maint_t is None
    finally:
        ro.close()
    conn = connect(path)
    try:
        assert conn.execute("SELECT value FROM report_meta WHERE key = 'schema_version'").fetchone() == (2,)
        [row] = read_days(conn, site=SITE, first="2026-03-07", last="2026-03-07")
        assert (row.good, row.maintenance) == (1440, 0.0)
        assert read_states(conn)[(SITE, "ph")].serviced is None
    finally:
        conn.close()
    connect(path).close()  # opening a migrated file again changes nothing
