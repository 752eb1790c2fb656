"""`pretreat obligations list|done` through monitor.cli, over a daemon file with real obligations, and
`pretreat rules` naming each site's obligations or saying that the ordinance states none."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from alarms.journal import Journal
from monitor import cli
from monitor.checks.events import START, EpisodeEvent
from monitor.stores import casefile as store
from monitor.stores.casefile import CaseFile
from tests.unit.checks_helpers import channel, load, site_toml

NY = "America/New_York"
PDF = b"%PDF-1.4\n%%EOF\n"


@pytest.fixture()
def site_file(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(site_toml(channel("ph"), jurisdiction="vestal_endicott", timezone=NY), encoding="utf-8")
    config = load(tmp_path, path.read_text(encoding="utf-8"))
    onset = time.time() - 2 * 86400  # two days ago: the immediate notice and the 24-hour notice are overdue
    cf = CaseFile(Journal(path=config.daemon.historian))
    try:
        cf.open_obligations(config.sites[0], [EpisodeEvent(time=onset, site="acme", channel="ph", rule="ph_low",
                                                           event=START, value=5.1, limit=6.0, citation="x")], onset)
    finally:
        cf.close()
    return path


def test_list_shows_each_obligation_with_its_status_due_time_and_citation(
        site_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["obligations", "list", "--config", str(site_file)]) == 0
    out = capsys.readouterr().out
    assert out.count("OVERDUE") == 2 and out.count("OPEN") == 2  # the immediate and 24-hour notices are late
    assert "Town of Vestal § 18-76(j) [section number inferred]" in out and "40 CFR 403.12(g)(2)" in out
    assert " EST" in out or " EDT" in out  # the site's local time, zone shown
    assert cli.main(["obligations", "list", "--config", str(site_file), "--status", "overdue", "--utc"]) == 0
    out = capsys.readouterr().out
    assert out.count("OVERDUE") == 2 and "OPEN" not in out and " UTC" in out


def test_done_records_the_fulfilment_and_a_written_report_needs_its_pdf(
        site_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(x) for x in (cli.main(["obligations", "list", "--config", str(site_file), "--json"]) == 0
                                    and capsys.readouterr().out.splitlines())]
    by_key = {r["key"]: r for r in rows}
    notice, report = by_key["immediate_notice"]["id"], by_key["written_report"]["id"]
    assert cli.main(["obligations", "done", "--config", str(site_file), str(notice), "--how", "telephone",
                     "--to", "town engineer", "--user", "j.smith"]) == 0
    assert "recorded as done" in capsys.readouterr().out
    assert cli.main(["obligations", "done", "--config", str(site_file), str(report), "--how", "letter",
                     "--to", "commissioner", "--user", "j.smith"]) == 2
    assert "written report" in capsys.readouterr().err
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(PDF)
    assert cli.main(["obligations", "done", "--config", str(site_file), str(report), "--how", "letter",
                     "--to", "commissioner", "--user", "j.smith", "--report", str(pdf)]) == 0
    db = load(tmp_path, site_file.read_text(encoding="utf-8")).daemon.historian
    journal = Journal(path=db)
    try:
        done = {o.key: o.status(time.time()) for o in store.obligations(journal.connection)}
        assert done["immediate_notice"] == "done late" and done["written_report"] == "done"
        kinds = [r.kind for r in journal.records()]
        assert kinds.count("fulfilment") == 2 and "file" in kinds and journal.verify().ok
    finally:
        journal.close()


def test_rules_names_the_obligations_or_says_the_ordinance_states_none(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pawling = tmp_path / "pawling.toml"
    pawling.write_text(site_toml(channel("sampler_temperature"), jurisdiction="pawling", timezone=NY),
                       encoding="utf-8")
    assert cli.main(["rules", "--config", str(pawling)]) == 0
    out = capsys.readouterr().out
    assert "Village of Pawling" in out or "Pawling" in out
    assert "states no notification or report obligation" in out and "40 CFR 403.12(g)(2)" in out
    southeast = tmp_path / "southeast.toml"
    southeast.write_text(site_toml(channel("ph"), jurisdiction="southeast", timezone=NY), encoding="utf-8")
    assert cli.main(["rules", "--config", str(southeast)]) == 0
    out = capsys.readouterr().out
    assert "Telephone and notify the POTW" in out and "immediately (Town of Southeast § 112-5H" in out
