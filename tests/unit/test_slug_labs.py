"""Vestal-Endicott's slug screened on composite-sample lab results (`monitor.checks.slug_labs`).

Town of Vestal § 18-76(a)(13) [section number inferred]: "for a duration of fifteen (15) minutes have a
concentration greater than five (5) times that of normal sewage", "as measured by suspended solids and BOD"; normal
sewage (§ 18-71 [section number inferred]): "not more than four hundred (400) parts per million of suspended
solids, nor more than two hundred forty (240) parts per million of BOD". Laboratory tests: without an online
surrogate the permit names, the slug is screened on the lab results `pretreat labs import` stores. A result strictly
greater than 5 × normal (2,000 ppm suspended solids, 1,200 ppm BOD) is a slug finding; exactly 5 × is not
("greater than"); a non-detect never is; Town of Southeast measures its slug online, so its lab results are no slug
finding whatever their size.
"""

from __future__ import annotations

import argparse
import io
import json
from datetime import date
from pathlib import Path

from monitor.checks.slug_labs import lab_slug_limits, screen
from monitor.exceedances import report
from monitor.reports.aggregates_db import connect
from monitor.reports.compliance import build_report
from monitor.reports.labs import read_results
from monitor.reports.periods import FEDERAL_CITATION, Period
from monitor.reports.sections import build_sections
from monitor.stores.readonly import connect_readonly
from tests.unit.lab_scenarios import import_lab, lab_config

RESULTS = """site,sample_date,parameter,value,unit,sample_id
vestal-co,2026-03-02,suspended solids,2100,mg/L,C-1
vestal-co,2026-03-03,tss,2000,mg/L,C-2
vestal-co,2026-03-03,bod,1250,ppm,C-2
vestal-co,2026-03-04,bod,<1300,mg/L,C-3
vestal-co,2026-03-05,tss,0.5,ppb,C-4
plating,2026-03-02,tss,5000,mg/L,S-1
"""


def _setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = lab_config(tmp_path, {"vestal-co": "vestal_endicott", "plating": "southeast"})
    assert import_lab(tmp_path, config, RESULTS).imported == 6
    return config


def test_the_thresholds_are_five_times_normal_sewage_with_the_ordinance_citation(tmp_path: Path) -> None:
    config = lab_config(tmp_path, {"vestal-co": "vestal_endicott", "plating": "southeast"})
    limits = lab_slug_limits(config.site("vestal-co"))
    assert {k: (v.normal, v.threshold) for k, v in limits.items()} == {"tss": (400.0, 2000.0),
                                                                       "bod": (240.0, 1200.0)}
    assert limits["tss"].citation.startswith("Town of Vestal § 18-76(a)(13) [section number inferred]")
    assert lab_slug_limits(config.site("plating")) == {}  # Southeast's slug is judged on its online channels


def test_results_above_five_times_normal_are_slug_findings_and_nothing_else_is(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    conn = connect(config.daemon.historian)
    try:
        results = read_results(conn)
    finally:
        conn.close()
    found = [f for s in config.sites for f in screen(results, s)]
    assert [(f.result.sample_id, f.channel, f.result.value_std) for f in found] == [
        ("C-1", "lab:tss", 2100.0), ("C-2", "lab:bod", 1250.0)]


def _exceedances(config, fmt: str, **kw: object) -> str:  # type: ignore[no-untyped-def]
    args = argparse.Namespace(site=None, rule=None, channel=None, format=fmt, evidence=False, data_quality=False,
                              limit=None, utc=False)
    for k, v in kw.items():
        setattr(args, k, v)
    out = io.StringIO()
    conn = connect_readonly(Path(config.daemon.historian))
    try:
        report(conn, out, config=config, args=args, start=None, end=None, now=1_780_000_000.0)
    finally:
        conn.close()
    return out.getvalue()


def test_pretreat_exceedances_lists_the_findings_apart_from_the_episodes(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    table = _exceedances(config, "table")
    assert "SLUG FINDINGS ON LAB RESULTS" in table
    # one unit on both sides: the result and the threshold in mg/L, the ordinance's ppm said to be read as mg/L,
    # and a result the lab wrote in ppm shown as written beside its mg/L
    assert ("2026-03-02  vestal-co/lab:tss  2100 mg/L > 2000 mg/L (5 × 400 mg/L normal sewage, the ordinance's 400 "
            "ppm read as mg/L)  sample C-1") in table
    assert ("2026-03-03  vestal-co/lab:bod  1250 mg/L (reported as 1250 ppm) > 1200 mg/L (5 × 240 mg/L normal "
            "sewage, the ordinance's 240 ppm read as mg/L)  sample C-2") in table
    assert "ppm >" not in table and "ppm normal" not in table
    assert "2 slug finding(s) on lab results" in table and "plating" not in table.split("SLUG FINDINGS")[1]
    rows = [json.loads(line) for line in _exceedances(config, "json").splitlines()]
    assert [(r["record"], r["channel"], r["sample_date"], r["value_mg_l"], r["limit"]) for r in rows] == [
        ("lab_slug", "lab:tss", "2026-03-02", 2100.0, 2000.0), ("lab_slug", "lab:bod", "2026-03-03", 1250.0, 1200.0)]
    assert all("§ 18-76(a)(13)" in r["citation"] for r in rows)
    assert _exceedances(config, "json", rule="ph_low") == ""  # another rule selected: no slug findings
    assert [json.loads(x)["channel"] for x in _exceedances(config, "json", channel="lab:bod").splitlines()] == [
        "lab:bod"]
    csv_text = _exceedances(config, "csv")
    assert csv_text.splitlines()[1].startswith("1,vestal-co,lab:tss,slug,lab result,2026-03-02,")


def test_the_report_has_a_section_of_slug_findings_on_lab_results(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    period = Period(date(2026, 1, 1), date(2026, 6, 30), date(2026, 7, 1), FEDERAL_CITATION)
    sections = {s.key: s for s in build_sections(build_report(config, "vestal-co", period, now=1_780_000_000.0))}
    rows = sections["lab_slugs"].rows
    assert [(r[0], r[1], r[2], r[4], r[5]) for r in rows] == [("2026-03-02", "tss", "2100", "5 × 400 = 2000", "C-1"),
                                                           ("2026-03-03", "bod", "1250", "5 × 240 = 1200", "C-2")]
    assert "§ 18-76(a)(13)" in rows[0][6]
    plating = {s.key for s in build_sections(build_report(config, "plating", period, now=1_780_000_000.0))}
    assert "lab_slugs" not in plating
