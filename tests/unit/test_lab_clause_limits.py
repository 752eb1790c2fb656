"""The lab-measured clauses of Wilson (fats, wax, grease or oils over 100 mg/l) and Vestal–Endicott (emulsified oil
and grease over an average of 50 ppm; more than 2 ppm hydrogen sulfide) are judged on imported lab results, and the
citations users read carry the law, not the seed file and line (those stay in the profile as provenance)."""

from __future__ import annotations

import argparse
import re
from datetime import date
from pathlib import Path

import pytest

from config.pollutants import JURISDICTION_LIMITS
from monitor.reports import cli
from monitor.reports.daily import WILSON_PEAK_CITATION
from monitor.reports.periods import PAWLING_CITATION
from tests.unit.lab_scenarios import lab_config, screen_imported

_PROVENANCE = re.compile(r"seed |\.txt line")


def _csv(*rows: str) -> str:
    return "site,sample_date,parameter,value,unit,sample_id\n" + "\n".join(rows) + "\n"


def test_wilson_fog_and_vestal_endicott_oil_grease_and_sulfide_are_judged(tmp_path: Path) -> None:
    config = lab_config(tmp_path, {"wilson-co": "wilson", "ve-co": "vestal_endicott"})
    text = _csv("wilson-co,2026-03-02,oil and grease,101,mg/L,w1",  # in excess of 100 mg/l
                "wilson-co,2026-03-03,oil and grease,100,mg/L,w2",  # exactly 100: not in excess
                "ve-co,2026-03-02,emulsified oil and grease,51,ppm,v1",
                "ve-co,2026-03-03,emulsified oil and grease,50,ppm,v2",
                "ve-co,2026-03-04,hydrogen sulfide,2.5,mg/L,v3")
    s = screen_imported(tmp_path, config, text, 5)
    got = {(x.site, x.parameter): (x.count, x.exceeding, x.limit.printed, x.limit.citation) for x in s.screens}
    assert got == {
        ("wilson-co", "fog"): (2, 1, "100 mg/l", "Town of Wilson § 105-5C(4) [item number not printed]"),
        ("ve-co", "fog_emulsified"): (2, 1, "50 ppm", "Town of Vestal § 18-76(a)(2) [section number inferred]"),
        ("ve-co", "hydrogen_sulfide"): (1, 1, "2 ppm", "Town of Vestal § 18-76(a)(4) [section number inferred]"),
    }
    assert not s.unscreened


def test_no_user_facing_citation_names_a_seed_file_or_line() -> None:
    for key, limits in JURISDICTION_LIMITS.items():
        for lim in limits:
            assert not _PROVENANCE.search(lim.citation), (key, lim.parameter, lim.citation)
            assert lim.seed and lim.line  # the provenance is kept, apart from the citation
    for citation in (PAWLING_CITATION, WILSON_PEAK_CITATION):
        assert not _PROVENANCE.search(citation), citation


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_snc_output_names_no_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    config = lab_config(tmp_path, {"wilson-co": "wilson"})
    screen_imported(tmp_path, config, _csv("wilson-co,2026-03-02,cyanide,3,mg/L,c1",
                                           "wilson-co,2026-03-03,fog,150,mg/L,f1"), 2)
    parser = argparse.ArgumentParser(prog="pretreat")
    cli.add_snc(parser.add_subparsers(dest="command").add_parser("snc"))
    args = parser.parse_args(["snc", "--config", str(tmp_path / "site.toml"), "--to", str(date(2026, 6, 30)),
                              "--format", fmt])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "§ 105-5C(2)" in out and "§ 105-5C(4)" in out
    assert not _PROVENANCE.search(out), out


@pytest.mark.parametrize("jurisdiction", ["pawling", "wilson"])
def test_report_and_rules_output_name_no_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              jurisdiction: str) -> None:
    """The report (HTML and CSV, with its Due row and its limits in force) and `pretreat rules` cite the law;
    the seed file and line are provenance in the profile only."""
    from monitor.cli import main
    from monitor.reports.compliance import build_report
    from monitor.reports.periods import due_dates, period_for_due
    from monitor.reports.render_csv import render_csv
    from monitor.reports.render_html import render_html
    from tests.unit.report_scenarios import SITE, site_config

    site_config(tmp_path)
    text = (tmp_path / "site.toml").read_text().replace('jurisdiction = "pawling"', f'jurisdiction = "{jurisdiction}"')
    (tmp_path / "site.toml").write_text(text)
    from config.loader import load_config

    config = load_config(tmp_path / "site.toml")
    site = config.site(SITE)
    period = period_for_due(site, due_dates(site, 2026)[0])
    report = build_report(config, SITE, period, now=1_790_000_000.0)
    rendered = render_html(report) + render_csv(report)
    assert main(["rules", "--config", str(tmp_path / "site.toml")]) == 0
    rendered += capsys.readouterr().out
    assert not _PROVENANCE.search(rendered), _PROVENANCE.search(rendered)
