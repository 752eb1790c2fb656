"""`pretreat obligations list|done` through monitor.cli, over a daemon file with real obligations, and
`pretreat rules` naming each site's obligations or saying that the ordinance states none."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import pytest

from alarms.journal import Journal
from monitor import cli
from monitor.checks.events import START, EpisodeEvent
from monitor.console.users import Role, User, default_users_path, hash_password, save_users
from monitor.stores import casefile as store
from monitor.stores.casefile import CaseFile
from tests.unit.checks_helpers import channel, load, site_toml

NY = "America/New_York"
PDF = b"%PDF-1.4\n%%EOF\n"
PASSWORD = "a long enough password"
J_SMITH = ("--user", "j.smith", "--password-stdin")  # the industry's person, authenticated (monitor.cli_auth)


@pytest.fixture(autouse=True)
def passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO((PASSWORD + "\n") * 20))


@pytest.fixture()
def site_file(tmp_path: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(site_toml(channel("ph"), jurisdiction="vestal_endicott", timezone=NY)
                    .replace('id = "acme"\n', 'id = "acme"\ncompany = "ACME"\n', 1), encoding="utf-8")
    save_users(default_users_path(path.resolve()), {
        "j.smith": User("j.smith", Role.INDUSTRY, "ACME", hash_password(PASSWORD)),
        "other": User("other", Role.INDUSTRY, "Other Co.", hash_password(PASSWORD)),
        "op": User("op", Role.OPERATOR, "", hash_password(PASSWORD))})
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
    # the 24-hour notice is late; the immediate notice states no period: outstanding, not overdue
    assert out.count("OVERDUE") == 1 and out.count("OUTSTANDING") == 1 and out.count("OPEN") == 2
    assert "Town of Vestal § 18-76(j) [section number inferred]" in out and "40 CFR 403.12(g)(2)" in out
    assert " EST" in out or " EDT" in out  # the site's local time, zone shown
    assert cli.main(["obligations", "list", "--config", str(site_file), "--status", "overdue", "--utc"]) == 0
    out = capsys.readouterr().out
    assert out.count("OVERDUE") == 1 and "OPEN" not in out and "OUTSTANDING" not in out and " UTC" in out


def test_done_records_the_fulfilment_and_a_written_report_needs_its_pdf(
        site_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(x) for x in (cli.main(["obligations", "list", "--config", str(site_file), "--json"]) == 0
                                    and capsys.readouterr().out.splitlines())]
    by_key = {r["key"]: r for r in rows}
    notice, report = by_key["immediate_notice"]["id"], by_key["written_report"]["id"]
    assert cli.main(["obligations", "done", "--config", str(site_file), str(notice), "--how", "telephone",
                     "--to", "town engineer", *J_SMITH]) == 0
    assert "recorded as done" in capsys.readouterr().out
    assert cli.main(["obligations", "done", "--config", str(site_file), str(report), "--how", "letter",
                     "--to", "commissioner", *J_SMITH]) == 2
    assert "written report" in capsys.readouterr().err
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(PDF)
    assert cli.main(["obligations", "done", "--config", str(site_file), str(report), "--how", "letter",
                     "--to", "commissioner", *J_SMITH, "--report", str(pdf)]) == 0
    db = load(tmp_path, site_file.read_text(encoding="utf-8")).daemon.historian
    journal = Journal(path=db)
    try:
        done = {o.key: o.status(time.time()) for o in store.obligations(journal.connection)}
        assert done["immediate_notice"] == "done" and done["written_report"] == "done"  # "immediately": never late
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
    assert "telephone and notify the POTW" in out
    assert "immediately (no period stated) (Town of Southeast § 112-5H" in out
    assert "If the discharge was accidental" in out  # the duty is the ordinance's for an accidental discharge


def _ids(site_file: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    assert cli.main(["obligations", "list", "--config", str(site_file), "--json"]) == 0
    return {r["key"]: r["id"] for r in map(json.loads, capsys.readouterr().out.splitlines())}


def test_done_needs_an_authenticated_industry_user(
        site_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notice = _ids(site_file, capsys)["immediate_notice"]
    base = ["obligations", "done", "--config", str(site_file), str(notice), "--how", "telephone", "--to", "town"]
    assert cli.main(base) == 1  # no --user: a fulfilment is the industry's statement, not the service's
    assert "give --user" in capsys.readouterr().err
    assert cli.main([*base, *J_SMITH]) == 0  # the industry's person, password checked
    assert "recorded as done" in capsys.readouterr().out


def test_done_refuses_wrong_password_operator_and_other_company(
        site_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    notice = _ids(site_file, capsys)["immediate_notice"]
    base = ["obligations", "done", "--config", str(site_file), str(notice), "--how", "telephone", "--to", "town"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("not the password\n"))
    assert cli.main([*base, *J_SMITH]) == 1
    assert "unknown user or wrong password for 'j.smith'" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO((PASSWORD + "\n") * 2))
    assert cli.main([*base, "--user", "op", "--password-stdin"]) == 1
    assert "an operator user may not record that an obligation was met" in capsys.readouterr().err
    assert cli.main([*base, "--user", "other", "--password-stdin"]) == 1
    assert "site 'acme' is not one of Other Co.'s sites" in capsys.readouterr().err
    assert cli.main(["obligations", "list", "--config", str(site_file), "--status", "done"]) == 0
    assert "no obligations (done)" in capsys.readouterr().out  # nothing was recorded


def test_a_second_fulfilment_is_refused_and_the_first_stands(
        site_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notice = _ids(site_file, capsys)["immediate_notice"]
    base = ["obligations", "done", "--config", str(site_file), str(notice), "--to", "town engineer", *J_SMITH]
    assert cli.main([*base, "--how", "telephone"]) == 0
    capsys.readouterr()
    assert cli.main([*base, "--how", "e-mail"]) == 2
    err = capsys.readouterr().err
    assert f"obligation {notice} is already recorded as done" in err and "telephone to town engineer" in err
    assert " EST" in err or " EDT" in err  # the site's local time with its zone, not UTC
    assert cli.main(["obligations", "list", "--config", str(site_file), "--status", "done"]) == 0
    out = capsys.readouterr().out
    assert "by telephone to town engineer" in out and "e-mail" not in out
