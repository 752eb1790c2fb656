"""The report's pages show the calibration status beside each episode: the golden report site with a site
setting of a 3-day pH calibration interval, calibrated on 28 February (due 3 March 12:00 UTC) and again on
4 March; the episodes of 3 March fall in the overdue time, those before and after do not. Checked in the report
object, the HTML and CSV, and the PDF's text (pages saved as PNG under tests/artifacts/report_calibration/);
`pretreat exceedances` and the readings export say the same."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import shutil
import sqlite3
import subprocess
import time
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.events import parse_iso
from monitor.cli import main
from monitor.reports.compliance import build_report
from monitor.reports.periods import Period
from monitor.reports.render_csv import render_csv
from monitor.reports.render_html import render_html
from monitor.reports.render_pdf import render_pdf
from monitor.stores.calibration import Calibration, add
from tests.support import require_binary
from tests.unit.report_scenarios import CASE, SITE, record, scenario

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "report_calibration"
PERIOD = Period(date(2026, 3, 1), date(2026, 3, 4), date(2026, 3, 15), "calibration test period")
DUE = "2026-03-03T12:00:00Z"
DUE_LOCAL = "2026-03-03 07:00:00 EST"  # the same in the site's time (America/New_York): the report's tables


def _calibration(t: str) -> Calibration:
    when = parse_iso(t)
    return Calibration(site=SITE, channel="ph", time=when, who="J. Smith", method="ph_two_buffer",
                       as_found=((4.01, 4.2), (7.0, 7.1)), as_left=((4.01, 4.01), (7.0, 7.0)), entered=when + 60)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[SiteConfig, Path]:
    tmp = tmp_path_factory.mktemp("calreport")
    text = (CASE / "site.toml").read_text().replace('historian = "var/pretreat.sqlite"',
                                                     f'historian = "{tmp / "pretreat.sqlite"}"')
    (tmp / "site.toml").write_text(text + "\n[site.calibration]\nph = 3\n")
    config = load_config(tmp / "site.toml")
    asyncio.run(record(config, scenario(date(2026, 3, 1), 4)))
    add(config.daemon.historian, _calibration("2026-02-28T12:00:00Z"), "ph")
    add(config.daemon.historian, _calibration("2026-03-04T00:00:00Z"), "ph")
    return config, tmp


def test_each_episode_carries_the_calibration_status_during_it(site: tuple[SiteConfig, Path]) -> None:
    config, _tmp = site
    report = build_report(config, SITE, PERIOD, now=parse_iso("2026-03-20T00:00:00Z"))
    ph = [e for e in report.episodes if e.channel == "ph"]
    assert len(ph) >= 8
    for e in ph:
        day = e.id.split("@")[1][:10]
        overdue = parse_iso(DUE) <= e.start < parse_iso("2026-03-04T00:00:00Z")
        if overdue:
            assert e.calibration.startswith(f"calibration OVERDUE since {DUE_LOCAL}"), (e.id, e.calibration)
        elif day <= "2026-03-03":
            assert e.calibration.startswith(f"calibration in date (due {DUE_LOCAL})"), (e.id, e.calibration)
        else:
            assert e.calibration.startswith("calibration in date (due 2026-03-06 19:00:00 EST)"), (e.id, e.calibration)
        assert "every 3 days (site setting [site.calibration])" in e.calibration
    assert any(e.calibration.startswith("calibration OVERDUE") for e in ph)
    flow = next(e for e in report.faults if e.channel == "flow") if report.faults else None
    if flow is not None:
        assert flow.calibration.startswith("no calibration interval stated")
    status = dict(reversed(report.calibration))  # each channel's first row: its status at the period's end
    assert status["ph"].startswith("calibration in date (due 2026-03-06 19:00:00 EST)")
    assert status["flow"] == "no calibration interval stated: no calibration recorded"
    assert [text for ch, text in report.calibration if ch == "ph"][1:] == [
        f"readings from {DUE_LOCAL} to 2026-03-03 19:00:00 EST: taken while overdue for calibration",
        # the calibration of 00:00 UTC was entered at 00:01: overdue as the record stood for that minute
        "readings from 2026-03-03 19:00:00 EST to 2026-03-03 19:01:00 EST: taken while overdue for calibration (as "
        "known then; an entry made later says in date)"]
    assert not any("Z:" in text or "Z " in text for _ch, text in report.calibration)  # no UTC among local tables


def test_pages_show_it_beside_each_episode(site: tuple[SiteConfig, Path]) -> None:
    config, tmp = site
    report = build_report(config, SITE, PERIOD, now=parse_iso("2026-03-20T00:00:00Z"))
    html, csv_text = render_html(report), render_csv(report)
    for text in (html, csv_text):
        assert "Calibration during the episode" in text and "Instrument calibration" in text
        assert f"calibration OVERDUE since {DUE_LOCAL}" in text
    rows = [r for r in csv.reader(io.StringIO(csv_text)) if r and r[0].startswith("acme/ph/")]
    assert rows and all(r[-1].startswith("calibration ") for r in rows)  # the last column, on each episode's row
    pdftoppm = require_binary("pdftoppm")
    pdf = tmp / "report.pdf"
    pages = render_pdf(report, pdf)
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    subprocess.run([pdftoppm, "-r", "70", "-png", str(pdf), str(ARTIFACTS / "page")], check=True, timeout=60)
    assert len(list(ARTIFACTS.glob("page-*.png"))) == pages
    pdftotext = require_binary("pdftotext")
    text = subprocess.run([pdftotext, str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    flat = " ".join(text.split())
    assert "Calibration during" in flat and "OVERDUE since" in flat and "Instrument calibration" in flat


def test_exceedances_and_the_export_say_the_same(site: tuple[SiteConfig, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _config, tmp = site
    assert main(["exceedances", "--config", str(tmp / "site.toml"), "--channel", "ph", "--format", "csv",
                 "--from", "2026-03-01", "--to", "2026-03-05"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and all(r["calibration"] for r in rows)
    overdue = [r for r in rows if r["calibration"].startswith("calibration OVERDUE")]
    assert overdue and all(DUE <= r["start"] < "2026-03-04" for r in overdue)
    assert all(r["calibration"].startswith(f"calibration OVERDUE since {DUE}:") for r in overdue)  # CSV: UTC
    assert main(["exceedances", "--config", str(tmp / "site.toml"), "--channel", "ph",
                 "--from", "2026-03-01", "--to", "2026-03-05"]) == 0
    table = capsys.readouterr().out  # the table: the site's local time, as its other columns
    assert f"calibration OVERDUE since {DUE_LOCAL}: last calibrated 2026-02-28 07:00:00 EST" in table
    assert "OVERDUE since 2026-03-03T" not in table and "last calibrated 2026-02-28T" not in table
    assert main(["readings", "--config", str(tmp / "site.toml"), "--site", SITE, "--channel", "ph",
                 "--from", "2026-03-03T11:58:00Z", "--to", "2026-03-03T12:02:00Z"]) == 0
    marks = [(r["time"], r["calibration"]) for r in csv.DictReader(io.StringIO(capsys.readouterr().out))]
    assert marks == [("2026-03-03T11:58:00Z", ""), ("2026-03-03T11:59:00Z", ""), ("2026-03-03T12:00:00Z", "overdue"),
                     ("2026-03-03T12:01:00Z", "overdue")]


def test_an_open_episode_is_judged_up_to_now_not_into_the_future(
        site: tuple[SiteConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An episode still open is judged up to now: with a 3650-day interval the instrument calibrated on 4 March
    is due in 2036, and the record must not say it "became OVERDUE at 2036-..., during the episode" (a date to
    come) in `pretreat exceedances --format json` nor in the report."""
    config, tmp = site
    db = tmp_path / "pretreat.sqlite"
    with sqlite3.connect(config.daemon.historian) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    text = (tmp / "site.toml").read_text().replace(str(tmp / "pretreat.sqlite"), str(db))
    (tmp_path / "site.toml").write_text(text.replace("[site.calibration]\nph = 3\n", "[site.calibration]\nph = 3650\n"))
    now = time.time()
    with sqlite3.connect(db) as conn:  # a ph episode left open after the last one, as a daemon stopped mid-episode
        conn.execute("INSERT INTO episode_events (time, site, channel, rule, event, value, limit_value, peak, "
                     "citation, data_quality) SELECT ?, site, channel, rule, 'start', value, limit_value, peak, "
                     "citation, data_quality FROM episode_events WHERE channel = 'ph' AND rule = 'ph_high' AND "
                     "event = 'start' ORDER BY time DESC LIMIT 1", (parse_iso("2026-03-04T20:00:00Z"),))
    assert main(["exceedances", "--config", str(tmp_path / "site.toml"), "--channel", "ph", "--format", "json",
                 "--from", "2026-03-01", "--to", "2026-03-05"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    open_rows = [r for r in rows if r.get("end") is None]
    assert open_rows, [(r["start"], r["end"], r["status"]) for r in rows][-3:]
    for r in open_rows:
        assert "became OVERDUE" not in (r["calibration"] or ""), r["calibration"]
    report = build_report(load_config(tmp_path / "site.toml"), SITE, PERIOD, now=now)
    still = [e for e in report.episodes + report.faults if e.end is None and e.channel == "ph"]
    assert still and all("became OVERDUE" not in e.calibration for e in still)


def test_a_backdated_calibration_does_not_rewrite_the_status_known_during_past_episodes(
        site: tuple[SiteConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pretreat calibration add` today for a calibration dated 3 March 13:00 (in the overdue time): the episodes
    of 3 March after it still say OVERDUE as known at the time, with the entry's date and the day it was entered,
    then the status by the record as it stands; in `pretreat exceedances` and in the report."""
    config, tmp = site
    db = tmp_path / "pretreat.sqlite"
    with sqlite3.connect(config.daemon.historian) as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # a copy: the module's other tests keep their record
    (tmp_path / "site.toml").write_text((tmp / "site.toml").read_text().replace(str(tmp / "pretreat.sqlite"), str(db)))
    entered = time.time()
    assert main(["calibration", "add", "--config", str(tmp_path / "site.toml"), "--site", SITE, "--channel", "ph",
                 "--date", "2026-03-03T13:00:00Z", "--who", "J. Smith", "--method", "ph_two_buffer",
                 "--found", "4.01:4.3", "--found", "7:7.2", "--left", "4.01:4.01", "--left", "7:7"]) == 0
    capsys.readouterr()
    assert main(["exceedances", "--config", str(tmp_path / "site.toml"), "--channel", "ph", "--format", "csv",
                 "--from", "2026-03-03", "--to", "2026-03-04"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    after = [r for r in rows if "2026-03-03T13:00:00Z" < r["start"] < "2026-03-04"]
    assert after, "episodes after the backdated calibration's date"
    day = time.strftime("%Y-%m-%d", time.gmtime(entered))
    for r in after:
        text = r["calibration"]
        assert text.startswith(f"calibration OVERDUE since {DUE}"), text  # what the record said then
        assert "(as known at the time); a calibration dated 2026-03-03T13:00:00Z was entered on " + day in text
        assert "by the record as it stands: calibration in date (due 2026-03-06T13:00:00Z)" in text
    report = build_report(load_config(tmp_path / "site.toml"), SITE, PERIOD, now=entered)
    lines = [e for e in report.episodes if e.channel == "ph" and parse_iso("2026-03-03T13:00:00Z") < e.start
             < parse_iso("2026-03-04T00:00:00Z")]
    # the report writes the entry's day in the site's time: from 00:00 to 05:00 UTC that is the day before UTC's
    local_day = datetime.fromtimestamp(entered, ZoneInfo("America/New_York")).strftime("%Y-%m-%d")
    assert lines and all(e.calibration.startswith(f"calibration OVERDUE since {DUE_LOCAL}") and
                         "was entered on " + local_day in e.calibration for e in lines)
    # the readings export marks the readings as the record stood when they were taken, and says what changed
    assert main(["readings", "--config", str(tmp_path / "site.toml"), "--site", SITE, "--channel", "ph",
                 "--from", "2026-03-03T12:59:00Z", "--to", "2026-03-03T13:01:00Z"]) == 0
    marks = [(r["time"], r["calibration"]) for r in csv.DictReader(io.StringIO(capsys.readouterr().out))]
    assert marks == [("2026-03-03T12:59:00Z", "overdue"),
                     ("2026-03-03T13:00:00Z", "overdue at the time; in date by an entry made later")]
