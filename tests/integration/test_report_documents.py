"""The periodic compliance report end to end: scenario data recorded through the real stores, an episode
annotated through the CLI (journaled, chain verifies), lab results imported, then the report rendered as PDF
(pages rendered to PNG with pdftoppm and saved under tests/artifacts/report/ for review), HTML and CSV with the
same figures, and the scheduled jobs writing into a reports directory."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import re
import shutil
import subprocess
import sys
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from alarms.journal import Journal
from config.schema import SiteConfig
from monitor.reports import cli
from monitor.reports.compliance import build_report
from monitor.reports.periods import Period, latest_period, period_for_due
from monitor.reports.render_csv import render_csv
from monitor.reports.render_html import render_html
from monitor.reports.render_pdf import render_pdf
from monitor.reports.schedule import list_reports, schedule_reports, write_daily
from tests.support import require_binary, run_on_terminal
from tests.unit.report_scenarios import SITE, TZ, record, scenario, site_config

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "report"
EPISODE = "acme/ph/ph_low@2026-03-02T01:00:00Z"  # 20:00 EST on 1 March
NOW = datetime(2026, 3, 20, 9, 0, tzinfo=TZ).timestamp()


PASSWORD = "a long enough password"
J_SMITH = ("--user", "j.smith", "--password-stdin")  # the industry's person, authenticated (monitor.cli_auth)


def _users(tmp: Path) -> None:
    """Console users beside the site file (as `pretreat user add` writes them): the industry's j.smith (the
    golden site's company, set here: it names none) and a plant operator."""
    from monitor.console.users import Role, User, default_users_path, hash_password, save_users

    site_file = tmp / "site.toml"
    site_file.write_text(site_file.read_text().replace('id = "acme"\n', 'id = "acme"\ncompany = "ACME"\n', 1))
    save_users(default_users_path(site_file.resolve()), {
        "j.smith": User("j.smith", Role.INDUSTRY, "ACME", hash_password(PASSWORD)),
        "op": User("op", Role.OPERATOR, "", hash_password(PASSWORD))})


def run_cli(adder: str, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="pretreat")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in (("report", cli.add_report), ("labs", cli.add_labs), ("snc", cli.add_snc)):
        add(sub.add_parser(name))
    args = parser.parse_args([adder, *argv])
    return int(args.func(args))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[SiteConfig, Path]:
    tmp = tmp_path_factory.mktemp("report")
    config = site_config(tmp)
    asyncio.run(record(config, scenario(date(2026, 3, 1), 10)))
    _users(tmp)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
        assert run_cli("report", "annotate", "--config", str(tmp / "site.toml"), "--episode", EPISODE,
                       "--cause", "Caustic dosing pump tripped on overload", "--action",
                       "Pump motor replaced; dosing alarm added to the operator's round", *J_SMITH) == 0
    labs = tmp / "labs.csv"
    labs.write_text("site,sample_date,parameter,value,unit,sample_id\n"
                    "acme,2026-03-03,BOD,250,mg/L,C1\nacme,2026-03-05,TSS,180,mg/L,C2\n")
    return config, tmp


def test_annotate_through_the_cli_is_journaled(site: tuple[SiteConfig, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config, tmp = site
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdin", io.StringIO((PASSWORD + "\n") * 3))
        assert run_cli("report", "annotate", "--config", str(tmp / "site.toml"), "--episode",
                       "acme/ph/ph_low@2026-03-02T01:00:01Z", "--cause", "x", "--action", "y", *J_SMITH) == 2
        assert "no episode" in capsys.readouterr().err
        # the industry speaks for itself: an unauthenticated name or a plant operator is refused
        assert run_cli("report", "annotate", "--config", str(tmp / "site.toml"), "--episode", EPISODE,
                       "--cause", "x", "--action", "y", "--user", "z", "--password-stdin") == 1
        assert "unknown user or wrong password for 'z'" in capsys.readouterr().err
        assert run_cli("report", "annotate", "--config", str(tmp / "site.toml"), "--episode", EPISODE,
                       "--cause", "x", "--action", "y", "--user", "op", "--password-stdin") == 1
        assert "an operator user may not enter the cause" in capsys.readouterr().err
    assert run_cli("report", "annotate", "--config", str(tmp / "site.toml"), "--episode", EPISODE,
                   "--cause", "x", "--action", "y") == 1
    assert "give --user" in capsys.readouterr().err
    journal = Journal(path=config.daemon.historian)
    try:
        assert journal.verify().ok
        [rec] = [r for r in journal.records() if r.kind == "annotation"]
        assert rec.payload["episode"] == EPISODE and rec.payload["user"] == "j.smith"
    finally:
        journal.close()


def test_pdf_renders_and_pages_are_saved(site: tuple[SiteConfig, Path]) -> None:
    pdftoppm = require_binary("pdftoppm")
    config, tmp = site
    assert run_cli("labs", "import", "--config", str(tmp / "site.toml"), str(tmp / "labs.csv")) == 0
    period = Period(date(2026, 3, 1), date(2026, 3, 10), date(2026, 3, 15), "test period")
    report = build_report(config, SITE, period, now=NOW)
    # the permit adopts 40 CFR 401.17: pH low/high episodes are permitted excursions, listed apart from violations
    assert len(report.days) == 10 and len(report.exceedances) + len(report.permitted_excursions) + len(
        report.monitoring_deviations) >= 40
    assert report.permitted_excursions and all(e.rule in ("ph_low", "ph_high") for e in report.permitted_excursions)
    pdf = tmp / "report.pdf"
    pages = render_pdf(report, pdf)
    assert pdf.read_bytes().startswith(b"%PDF") and pages >= 4
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    subprocess.run([pdftoppm, "-r", "70", "-png", str(pdf), str(ARTIFACTS / "page")], check=True, timeout=60)
    pngs = sorted(ARTIFACTS.glob("page-*.png"))
    assert len(pngs) == pages
    assert all(p.stat().st_size > 10_000 for p in pngs)  # not blank pages
    for png in pngs[:-1]:  # no near-blank page: every page but the last is used below its middle
        assert _inked_to(png) > 0.55, f"{png.name} is near blank"
    shutil.copy(pdf, ARTIFACTS / "report.pdf")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=False).stdout if shutil.which("pdftotext") else ""
    if text:
        assert "Periodic Compliance Report" in text and "Page 1 of" in text
        assert "Caustic dosing pump" in text and "Signature" in text


def _inked_to(png: Path) -> float:
    """How far down the page (0..1) the lowest line of ink above the footer reaches."""
    from matplotlib.image import imread

    pixels = imread(png)
    body = pixels[: int(pixels.shape[0] * 0.9), :, :3]  # above the footer
    rows = (body.min(axis=2) < 0.8).any(axis=1).nonzero()[0]
    return float(rows[-1]) / pixels.shape[0] if len(rows) else 0.0


def test_html_and_csv_carry_the_same_figures(site: tuple[SiteConfig, Path]) -> None:
    config, _tmp = site
    report = build_report(config, SITE, Period(date(2026, 3, 1), date(2026, 3, 10), date(2026, 3, 15), "t"),
                          now=NOW)
    html, csv_text = render_html(report), render_csv(report)
    for figure in ("168,000", "155,900", "7.2 !", "Permit PJSC-IU-2026-03", "Caustic dosing pump tripped",
                   "40 CFR 401.17(a)(1)", "Town of Pawling", "BOD (lab)", "200 mg/L",
                   "Permit PJSC-IU-2026-03, Part I.B"):  # the permit's lab limit and its citation
        assert figure in html and figure in csv_text, figure
    assert html.count("<svg") == 5  # every monitored channel: flow, pH, temperature, LEL and the fridge
    assert "# Daily summary" in csv_text and "2026-03-08,23," in csv_text  # the 23-hour day


def test_cli_report_default_formats(site: tuple[SiteConfig, Path], tmp_path: Path) -> None:
    _config, tmp = site
    for fmt in ("pdf", "html", "csv"):
        out = tmp_path / f"r.{fmt}"
        assert run_cli("report", "--config", str(tmp / "site.toml"), "--from", "2026-03-02", "--to", "2026-03-04",
                       "--format", fmt, "--output", str(out)) == 0
        assert out.stat().st_size > 1000
    assert not (tmp_path / ".pretreat-report").exists()
    # a period of chosen days is due on the jurisdiction's next report date, with the schedule's citation
    assert "2026-03-15: Town of Pawling sewer use chapter" in (tmp_path / "r.csv").read_text()
    assert run_cli("report", "--config", str(tmp / "site.toml"), "--from", "2026-03-04", "--to", "2026-03-02") == 2


def test_snc_cli(site: tuple[SiteConfig, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _config, tmp = site
    run_cli("labs", "import", "--config", str(tmp / "site.toml"), str(tmp / "labs.csv"))
    capsys.readouterr()
    assert run_cli("snc", "--config", str(tmp / "site.toml"), "--to", "2026-06-30", "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["window"] == ["2026-01-01", "2026-06-30"]
    # Pawling prints no concentration limits: BOD is screened against the permit's 200 mg/L (250: 1 of 1
    # exceeds, chronic; under 200 × 1.4 = 280, no TRC), TSS against nothing (unscreened)
    [bod] = out["screens"]
    assert (bod["parameter"], bod["limit"], bod["results"], bod["exceeding"], bod["at_trc"]) == (
        "bod", "200 mg/L", 1, 1, 0)
    assert (bod["chronic"], bod["trc_violation"], bod["citation"]) == (True, False, "Permit PJSC-IU-2026-03, Part I.B")
    assert out["in_snc"] == ["acme"]
    assert run_cli("snc", "--config", str(tmp / "site.toml"), "--to", "2026-06-30") == 0
    table = capsys.readouterr().out
    assert "limit 200 mg/L" in table and "(Permit PJSC-IU-2026-03, Part I.B)" in table and "In SNC: acme" in table


def test_pawling_periods_and_schedule(site: tuple[SiteConfig, Path], tmp_path: Path) -> None:
    config, _tmp = site
    s = config.site(SITE)
    assert period_for_due(s, date(2026, 3, 15)) == Period(date(2025, 12, 1), date(2026, 2, 28), date(2026, 3, 15),
                                                          period_for_due(s, date(2026, 3, 15)).basis)
    assert (period_for_due(s, date(2026, 9, 15)).first, period_for_due(s, date(2026, 9, 15)).last) == (
        date(2026, 3, 1), date(2026, 8, 31))
    assert (period_for_due(s, date(2026, 12, 15)).first, period_for_due(s, date(2026, 12, 15)).last) == (
        date(2026, 9, 1), date(2026, 11, 30))
    assert latest_period(s, date(2026, 3, 20)).due == date(2026, 3, 15)
    assert "fifteenth day" in period_for_due(s, date(2026, 3, 15)).basis

    async def jobs() -> dict[str, datetime]:
        scheduler = AsyncIOScheduler()
        ids = schedule_reports(scheduler, config, tmp_path / "reports", clock=lambda: NOW)
        scheduler.start(paused=True)
        try:
            return {i: scheduler.get_job(i).next_run_time for i in ids}
        finally:
            scheduler.shutdown(wait=False)

    before = datetime.now(UTC)
    runs = asyncio.run(jobs())
    # the catch-up a minute after start, on the real clock (not the reports' ``clock``): never with the first
    # round's connects (monitor.reports.schedule)
    assert 59 <= (runs["report-catch-up"] - before).total_seconds() <= 60 + (datetime.now(UTC) - before).total_seconds()
    daily = runs[f"report-daily:{SITE}"].astimezone(TZ)
    periodic = runs[f"report-periodic:{SITE}"].astimezone(TZ)
    assert (daily.hour, daily.minute) == (1, 0)
    assert (periodic.month in (3, 9, 12), periodic.day, periodic.hour) == (True, 15, 2)


def test_daily_job_writes_and_console_lists(site: tuple[SiteConfig, Path], tmp_path: Path) -> None:
    config, _tmp = site
    paths = write_daily(config, config.site(SITE), date(2026, 3, 8), tmp_path, now=NOW)
    [summary] = json.loads(paths[0].read_text())
    assert summary["hours"] == 23.0 and summary["headline"]["total_flow"] == 162_000.0
    listed = list_reports(tmp_path)
    assert {r.name for r in listed} == {"2026-03-08.json", "2026-03-08.csv"}
    assert all(r.kind == "daily" and r.site == SITE for r in listed)


def test_regulator_items(site: tuple[SiteConfig, Path]) -> None:
    config, _tmp = site
    report = build_report(config, SITE, Period(date(2026, 3, 1), date(2026, 3, 10), date(2026, 3, 15), "t"),
                          now=NOW)
    html = render_html(report)
    for words in ("Compliance verdict", "NOT IN COMPLIANCE", "days out of compliance",
                  "permitted pH excursion(s) under 40 CFR 401.17, not violations", "Control authority",
                  "Town of Pawling", "40 Dutcher Avenue, Pawling", "PJSC-IU-2026-03 (issued 2026-01-15, expires "
                  "2031-01-14)", "40 CFR 433 (Metal Finishing)", "Flow total (gal)", "Peak (gpm)",
                  "T max (degC)", "LEL max (%LEL)", "Obligations timeline",
                  "None recorded. (no obligations record in this monitoring database)"):
        assert words in html, words
    # every day of the scenario has a violation (the 70-minute pH excursion): each daily row is highlighted
    assert html.count("<tr class='violation'>") == 10
    from monitor.reports.verdict import verdict

    rules, days = verdict(report)
    assert days == 10 and {v.rule for v in rules} >= {"ph_excursion_duration"}
    assert sum(v.violations for v in rules) == len(report.exceedances)


def test_obligations_and_invalidations_are_read_where_recorded(site: tuple[SiteConfig, Path],
                                                               tmp_path: Path) -> None:
    import sqlite3

    config, _tmp = site
    db = tmp_path / "copy.sqlite"
    src = sqlite3.connect(config.daemon.historian)
    dst = sqlite3.connect(db)
    src.backup(dst)
    src.close()
    period = Period(date(2026, 3, 1), date(2026, 3, 10), date(2026, 3, 15), "t")
    before = build_report(config, SITE, period, now=NOW, db=db)
    victim, other = before.exceedances[0], before.exceedances[1]
    # the columns the case file store (monitor.stores.casefile) writes and monitor.reports.enforcement reads
    dst.executescript("""CREATE TABLE obligations (id INTEGER PRIMARY KEY, episode TEXT, action TEXT,
                             recipient TEXT, citation TEXT, due REAL, due_text TEXT);
                         CREATE TABLE obligation_fulfilments (id INTEGER PRIMARY KEY, obligation INTEGER,
                             done_at REAL, how TEXT, recipient TEXT);
                         CREATE TABLE episode_invalidations (id INTEGER PRIMARY KEY, episode TEXT, site TEXT,
                             reason TEXT, user TEXT, time REAL);""")
    dst.execute("INSERT INTO episode_invalidations (episode, site, reason, user, time) VALUES (?, ?, ?, ?, ?)",
                (victim.id, SITE, "pH probe failed its calibration check that morning", "e.jones", NOW))
    dst.executemany("INSERT INTO obligations (episode, action, recipient, citation, due, due_text) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(other.id, "Written report", "the Town", "Town of Pawling item X", other.start + 5 * 86400,
                      "within 5 days"),
                     (other.id, "Telephone notice", "the plant", "Town of Pawling item Y", other.start + 3600,
                      "within an hour")])
    dst.execute("INSERT INTO obligation_fulfilments (obligation, done_at, how, recipient) VALUES (2, ?, ?, ?)",
                (other.start + 1800, "telephone", "J. Smith, plant operator"))
    dst.commit()
    dst.close()
    after = build_report(config, SITE, period, now=NOW, db=db)
    assert len(after.exceedances) == len(before.exceedances) - 1
    assert [e.id for e in after.invalidated] == [victim.id]
    html = render_html(after)
    assert "pH probe failed its calibration check that morning" in html and "e.jones" in html
    assert "Episodes marked invalid by the control authority (not violations)" in html
    assert "Written report to the Town" in html and "overdue" in html  # due 5 days after, not done by NOW
    assert "Telephone notice to the plant" in html and "telephone to J. Smith, plant operator" in html
    assert "<td>done</td>" in html


def test_chart_axis_names_only_the_period() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from monitor.reports.charts import Series, draw

    days = tuple(date(2026, 11, d) for d in range(1, 31))
    s = Series("pH (ph, pH)", "ph", "pH", days, (6.5,) * 30, (8.0,) * 30, (7.2,) * 30, ((5.0, "ph_low < 5"),), (),
               "2026-11-01 to 2026-11-30")
    fig = Figure(figsize=(9, 2.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw(ax, s)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()] + [ax.xaxis.get_offset_text().get_text()]
    assert not any("Dec" in x for x in labels), labels
    assert ax.get_xlabel() == "local days, 2026-11-01 to 2026-11-30" and ax.get_ylabel() == "pH"


def test_rebuild_takes_site_after_the_subcommand_and_shows_progress_on_a_terminal(
        site: tuple[SiteConfig, Path], capsys: pytest.CaptureFixture[str]) -> None:

    _config, tmp = site
    argv = ["report", "rebuild", "--config", str(tmp / "site.toml"), "--site", SITE, "--from", "2026-03-02",
            "--to", "2026-03-03"]
    assert run_cli(*argv) == 0
    out = capsys.readouterr()
    assert out.out.startswith("rebuilt 14 channel-days") and out.err == ""  # no terminal: no bar
    assert run_cli(*argv[:-6], "--site", "nowhere", *argv[-4:]) == 2
    # standard error on a terminal: the bar with percent and rate
    done, text = run_on_terminal(argv, Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.startswith("rebuilt 14 channel-days")
    # percent, rate and time left ("[elapsed<left, rate]"); the bar refreshes at most every 0.1 s, so which
    # percentages show depends on the machine's speed, not that they do: a rebuild done within 0.1 s shows only
    # the first drawing, whose time left and rate are not known yet ("<?, ?channel/s")
    assert re.search(r"rebuilding: +\d+%\|", text) and re.search(r"<(\d\d:\d\d|\?), +[\d.?]+channel/s", text), text


def test_notice_of_a_duration_rule_states_onset_and_confirmation(site: tuple[SiteConfig, Path],
                                                                 tmp_path: Path) -> None:
    """Pawling, permit adopting 40 CFR 401.17: the pH excursion from 20:00 to 21:10 on 1 March is a single
    excursion over 60 minutes, confirmed at the first reading past the hour; Pawling's notice clause sets a
    ceiling of 30 days for the correction."""
    from monitor.notices.cli import write_notice
    from monitor.notices.document import build, correction_text
    from monitor.notices.facts import gather

    config, _tmp = site
    ident = "acme/ph/ph_excursion_duration@2026-03-02T01:00:00Z"
    f = gather(config, ident, now=NOW)
    assert f.confirmed == datetime(2026, 3, 1, 21, 1, tzinfo=TZ).timestamp()  # the first reading past 60 min
    assert f.section.startswith("40 CFR 401.17(a)(2)") and f.correction_due == date(2026, 4, 19)
    assert "not exceeding 30 days" in correction_text(f) and "a shorter one may be set" in correction_text(f)
    md = write_notice(config, ident, "md", tmp_path / "nov.md", now=NOW)[0].read_text()
    assert "| Confirmed | 2026-03-01 21:01:00 EST |" in md and "| Onset | 2026-03-01 20:00:00 EST" in md
    assert "| Peak | 70 min |" in md and "| Limit | 60 min |" in md
    assert "Town of Pawling sewer use chapter, item C(1)" in md and "within 30 days of the date of the notice" in md
    assert "April 19, 2026" not in md  # no correction date computed from the draft's date
    assert not [b for b in build("$nonsense\n", f) if "nonsense" not in b.text]  # an unknown name stays visible


def test_catch_up_ends_between_reports_when_the_daemon_stops(site: tuple[SiteConfig, Path], tmp_path: Path) -> None:
    """The daemon's stop sets ``stopping``: the catch-up writes no further report (the next start writes what
    is missing), so the stop need not cancel it mid-file (monitor.jobs)."""
    from monitor.reports.schedule import CATCH_UP_DAYS

    config, _tmp = site
    stopping = threading.Event()

    def catch_up(out: Path) -> None:
        scheduler = AsyncIOScheduler()
        schedule_reports(scheduler, config, out, clock=lambda: NOW, stopping=stopping)
        scheduler.get_job("report-catch-up").func()

    stopping.set()
    catch_up(tmp_path / "stopped")
    assert list_reports(tmp_path / "stopped") == []
    stopping.clear()
    catch_up(tmp_path / "running")
    days = {r.name for r in list_reports(tmp_path / "running") if r.name.endswith(".json")}
    assert len(days) == CATCH_UP_DAYS


def test_scheduled_daily_summaries_begin_with_the_record(site: tuple[SiteConfig, Path], tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """The record begins on 1 March (the scenario's first reading): a catch-up three days later writes 1-3 March
    and not the four days before, which would show every channel down all day before anything was monitored;
    the 01:00 job does not write the day before the record either. A site with nothing recorded gets none."""
    config, _tmp = site
    begins = datetime(2026, 3, 1, tzinfo=TZ)

    def jobs(out: Path, now: float, which: str, cfg: SiteConfig = config) -> list[str]:
        scheduler = AsyncIOScheduler()
        schedule_reports(scheduler, cfg, out, clock=lambda: now)
        job = scheduler.get_job(which)
        job.func(*job.args)
        return sorted(r.name for r in list_reports(out) if r.name.endswith(".json"))

    three_days_on = begins.replace(day=4, hour=9).timestamp()
    assert jobs(tmp_path / "a", three_days_on, "report-catch-up") == ["2026-03-01.json", "2026-03-02.json",
                                                                       "2026-03-03.json"]
    with caplog.at_level("INFO", logger="monitor.reports.schedule"):
        assert jobs(tmp_path / "b", begins.replace(hour=1).timestamp(), f"report-daily:{SITE}") == []
    assert f"no daily summary of {SITE} for 2026-02-28: the site's record begins 2026-03-01" in caplog.text
    assert jobs(tmp_path / "c", begins.replace(day=2, hour=1).timestamp(), f"report-daily:{SITE}") == [
        "2026-03-01.json"]
    fresh = site_config(tmp_path / "fresh")  # the same site, nothing recorded yet (a first start)
    assert jobs(tmp_path / "d", three_days_on, "report-catch-up", fresh) == []
    assert jobs(tmp_path / "e", three_days_on, f"report-daily:{SITE}", fresh) == []


def test_the_catch_up_looks_up_every_site_on_one_connection_and_the_jobs_compile_the_plans_once(
        site: tuple[SiteConfig, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A configuration of many sites (a utility polling 1,000 control manholes): the catch-up found where each
    site's record begins on a connection of its own, and looked its channels up among all of the configuration's,
    ~3 s of CPU at 1,000 sites a minute after every start; and it compiled every channel's plan again for each
    day it wrote. Here two sites, one with three days to write and one with no record yet."""
    from monitor.reports import schedule

    config, _tmp = site
    config = dataclasses.replace(config, sites=(*config.sites, dataclasses.replace(config.sites[0], id="other")))
    opened: list[str] = []
    compiled: list[int] = []
    connect, compile_plans = schedule.connect, schedule.compile_plans
    monkeypatch.setattr(schedule, "connect", lambda *a, **k: opened.append("conn") or connect(*a, **k))
    monkeypatch.setattr(schedule, "compile_plans", lambda *a, **k: compiled.append(1) or compile_plans(*a, **k))
    scheduler = AsyncIOScheduler()
    now = datetime(2026, 3, 4, 9, tzinfo=TZ).timestamp()
    schedule_reports(scheduler, config, tmp_path, clock=lambda: now)
    scheduler.get_job("report-catch-up").func()
    assert sorted(r.name for r in list_reports(tmp_path) if r.name.endswith(".json")) == [
        "2026-03-01.json", "2026-03-02.json", "2026-03-03.json"]
    assert len(opened) == 1 + 3  # the look-ups, then one a summary written
    assert compiled == [1]
    scheduler.get_job(f"report-daily:{SITE}").func(config.sites[0])  # the 01:00 job: the same plans
    assert compiled == [1]
