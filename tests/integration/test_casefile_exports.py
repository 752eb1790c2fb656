"""An episode enforcement marked invalid stays in every export, with its justification, and is left out of the
violation counts: the compliance report (cover count, episode table, its own section in HTML and CSV) and
`pretreat exceedances` (table, CSV, JSON). Scenario data recorded through the real stores."""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import sqlite3
from datetime import date, datetime

import pytest

from config.rule_catalogue import DURATION_RULES
from config.schema import SiteConfig
from monitor.cli_render import Render
from monitor.exceedances import report as exceedances_report
from monitor.reports.compliance import ComplianceReport, build_report
from monitor.reports.periods import Period
from monitor.reports.render_csv import render_csv
from monitor.reports.render_html import render_html
from monitor.reports.sections import build_sections
from monitor.stores.casefile import CaseFile
from tests.unit.report_scenarios import SITE, TZ, record, scenario, site_config

NOW = datetime(2026, 3, 20, 9, 0, tzinfo=TZ).timestamp()
PERIOD = Period(date(2026, 3, 1), date(2026, 3, 4), date(2026, 3, 15), "test period")
REASON = "pH probe failed its calibration check of 2026-03-02 (record CAL-118); readings invalid"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> SiteConfig:
    config = site_config(tmp_path_factory.mktemp("casefile-exports"))
    asyncio.run(record(config, scenario(date(2026, 3, 1), 4)))
    return config


def _exceedances(config: SiteConfig, fmt: str) -> str:
    out = io.StringIO()
    db = config.daemon.historian
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        exceedances_report(conn, out, config=config, now=NOW, start=None, end=None, args=argparse.Namespace(
            site=SITE, rule=None, channel=None, format=fmt, evidence=False, data_quality=False, limit=0))
    finally:
        conn.close()
    return out.getvalue()


def _daily_episodes(report: ComplianceReport) -> int:
    [daily] = [x for x in build_sections(report) if x.key == "daily"]
    return sum(int(row[-1]) for row in daily.rows)


def test_an_invalidated_episode_is_listed_struck_and_not_counted(recorded: SiteConfig) -> None:
    config = recorded
    before = build_report(config, SITE, PERIOD, now=NOW)
    assert before.exceedances, "the scenario has violations to count"
    target = before.exceedances[0]
    cf = CaseFile.open(config.daemon.historian)
    try:
        cf.invalidate(target.id, site=SITE, reason=REASON, user="enf", now=NOW)
        assert cf.journal.verify().ok
    finally:
        cf.close()

    after = build_report(config, SITE, PERIOD, now=NOW)
    assert len(after.exceedances) == len(before.exceedances) - 1
    assert _daily_episodes(after) == _daily_episodes(before) - 1  # nor in the daily table's count
    assert target.id not in {e.id for e in after.exceedances}
    assert [(e.id, e.invalid.reason if e.invalid else "") for e in after.invalidated] == [(target.id, REASON)]
    assert len(after.episodes) == len(before.episodes)  # nothing is removed from the record
    html, csv_text = render_html(after), render_csv(after)
    for text in (html, csv_text):
        assert REASON in text and target.id in text and "marked invalid" in text
    [table_section] = [x for x in build_sections(after) if x.key == "invalidated"]
    assert "Unit" in table_section.columns and "Start (local)" in table_section.columns  # every header, its unit
    [row] = table_section.rows
    cells = dict(zip(table_section.columns, row, strict=True))
    if target.rule in DURATION_RULES:  # peak and limit are times, each with its unit
        assert cells["Unit"] == "" and cells["Limit"].endswith("min"), cells
    else:
        assert cells["Unit"] == next(c.unit for c in config.site(SITE).channels if c.id == target.channel)

    rows = [json.loads(line) for line in _exceedances(config, "json").splitlines()]
    marked = [r for r in rows if r["invalid"]]
    assert len(marked) == 1 and REASON in marked[0]["invalid"] and "enf" in marked[0]["invalid"]
    assert all(r["invalid"] is None for r in rows if r is not marked[0])
    table = _exceedances(config, "table")
    assert "[INVALID: marked invalid by enf" in table and "1 of those shown marked invalid" in table
    local = Render(config).time(NOW, SITE)  # the table's times are the site's, the invalidation's too
    assert local.endswith(("EST", "EDT")) and f"marked invalid by enf at {local}: {REASON}" in table, table
    csv_rows = list(csv.DictReader(io.StringIO(_exceedances(config, "csv"))))
    assert sum(1 for r in csv_rows if REASON in r["invalid"]) == 1 and len(csv_rows) == len(rows)
