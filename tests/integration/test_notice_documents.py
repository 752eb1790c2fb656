"""Notice-of-violation drafts end to end: readings recorded through the real stores, the draft written by
`pretreat nov` as PDF (pages rendered to PNG with pdftoppm, saved under tests/artifacts/nov/ for review, the
text read back with pdftotext), Markdown and Word, and checked for the section violated with its quote, the
notice section with its correction deadline, and the facts of the episode."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import zipfile
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor import cli
from monitor.notices.cli import write_notice
from monitor.notices.facts import NoticeError, gather
from monitor.reports.compliance import fmt_minutes
from monitor.reports.days import zone
from monitor.sample import Quality, Sample
from tests.support import require_binary
from tests.unit.report_scenarios import record

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "nov"
TZ = zone("America/New_York")
DAY = date(2026, 11, 10)
EPISODE = "acme/ph/ph_low@2026-11-10T15:00:00Z"  # 10:00 EST
SITE_TOML = """
[daemon]
historian = "{db}"

[[site]]
id = "acme"
name = "ACME Plating Co."
company = "ACME Plating Co."
address = "12 Route 22, Brewster, NY 10509"
jurisdiction = "southeast"
timezone = "America/New_York"

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"
poll_interval = 60.0

[[site.channel]]
id = "ph"
instrument = "m"
topic = "mh1/ph"
payload = "number"
kind = "ph"
unit = "pH"
valid_min = 0
valid_max = 14
resolution = 0.01

[[site.channel]]
id = "fridge"
instrument = "m"
topic = "mh1/fridge"
payload = "number"
kind = "sampler_temperature"
unit = "degC"
valid_min = -20
valid_max = 50
resolution = 0.1

[site.permit]
id = "SE-IU-2025-07"
issued = 2025-04-01
expires = 2030-03-31
categorical = "40 CFR 433 (Metal Finishing)"

[site.permit.limits.sampler_temperature]
setpoint_c = 4.0
tolerance_c = 2.0
wording = "4 °C plus or minus 2 °C: 2 °C and 6 °C comply"
cite = "Permit SE-IU-2025-07, Part III.B.2"
quote = "The composite sampler shall keep the sample at four degrees Celsius, plus or minus two degrees Celsius"
"""
FRIDGE = "acme/fridge/sampler_temperature@2026-11-10T16:00:00Z"  # 11:00 EST


def _local(hh: int, mm: int) -> float:
    return datetime(DAY.year, DAY.month, DAY.day, hh, mm, tzinfo=TZ).timestamp()


def _samples() -> list[Sample]:
    """A day of pH 7.20 once a minute; 4.20 from 10:00 to 10:30 with the meter silent 10:10–10:12 (shorter than
    the channel's max_gap: the episode goes on)."""
    out = []
    t = _local(6, 0)
    while t < _local(14, 0):
        if _local(10, 10) <= t < _local(10, 12):
            out.append(Sample.bad(time=t, site="acme", channel="ph", unit="pH", quality=Quality.COMM_FAILURE,
                                  reason="pH meter: no reply"))
        else:
            out.append(Sample(t, "acme", "ph", 4.2 if _local(10, 0) <= t < _local(10, 30) else 7.2, "pH"))
        out.append(Sample(t, "acme", "fridge", 9.0 if _local(11, 0) <= t < _local(11, 40) else 4.0, "degC"))
        t += 60.0
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[SiteConfig, Path]:
    tmp = tmp_path_factory.mktemp("nov")
    (tmp / "site.toml").write_text(SITE_TOML.format(db=tmp / "pretreat.sqlite"))
    config = load_config(tmp / "site.toml")
    asyncio.run(record(config, _samples(), aggregate=False))
    return config, tmp


def _pdftext(pdf: Path) -> str:
    pdftotext = require_binary("pdftotext")
    return subprocess.run([pdftotext, "-layout", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def test_facts_of_the_episode(site: tuple[SiteConfig, Path]) -> None:
    config, _tmp = site
    f = gather(config, EPISODE, now=_local(13, 0))
    e = f.episode
    assert (e.start, e.end, e.peak) == (_local(10, 0), _local(10, 30), 4.2)
    assert f.confirmed == e.start  # a single reading below 5.0 violates: confirmed at onset
    # a silence shorter than the channel's max_gap is bridged: the whole half hour counts as measured
    assert (e.measured, e.unmeasured, e.end_reason) == (1800.0, 0.0, "cleared")
    assert f.section == "Town of Southeast § 112-5A(1)(c)"
    assert f.quote == "Any wastewater having a pH less than 5.0 or higher than 9.0"
    assert f.correction_due == date(2026, 12, 10)
    assert not f.obligations and f.invalidation is None
    with pytest.raises(NoticeError, match="no episode"):
        gather(config, "acme/ph/ph_low@2026-11-10T15:00:01Z", now=_local(13, 0))


def test_a_correction_after_late_readings_is_what_the_notice_states(site: tuple[SiteConfig, Path],
                                                                     tmp_path: Path) -> None:
    """A late reading moved the episode's end: the notice states the corrected end, never the withdrawn one.
    A late reading that withdrew the episode altogether: no notice, and the refusal says why."""
    from dataclasses import replace

    from monitor.checks.revisions import Revision
    from monitor.stores.episodes import EpisodeStore

    config, tmp = site
    shutil.copy(tmp / "pretreat.sqlite", tmp_path / "pretreat.sqlite")
    (tmp_path / "site.toml").write_text(SITE_TOML.format(db=tmp_path / "pretreat.sqlite"))
    copy = load_config(tmp_path / "site.toml")
    store = EpisodeStore(path=tmp_path / "pretreat.sqlite")
    try:
        start, end = [e for e in store.events(site="acme", rule="ph_low") if e.time in (_local(10, 0), _local(10, 30))]
        moved = replace(end, time=_local(10, 31))
        store.revise([Revision("acme", "ph", "ph_low", withdrawn=(end,), added=(moved,), late=_local(10, 30) + 30,
                               active=False)], recorded=_local(12, 0))
        assert gather(copy, EPISODE, now=_local(13, 0)).episode.end == _local(10, 31)
        store.revise([Revision("acme", "ph", "ph_low", withdrawn=(start, moved), added=(), late=_local(9, 59),
                               active=False)], recorded=_local(12, 30))
    finally:
        store.close()
    with pytest.raises(NoticeError, match="was retracted after late readings"):
        gather(copy, EPISODE, now=_local(13, 0))
    assert gather(config, EPISODE, now=_local(13, 0)).episode.end == _local(10, 30)  # the fixture's own file


def test_an_episode_with_maintenance_time_states_it_apart_from_measured_time(site: tuple[SiteConfig, Path]) -> None:
    """The instrument's service/calibration time is its own line of the notice, never measured time; an episode
    without any has no such line."""
    from dataclasses import replace

    from monitor.notices.document import fact_rows

    config, _tmp = site
    f = gather(config, EPISODE, now=_local(13, 0))
    assert not any(k.startswith("Maintenance time") for k, _v in fact_rows(f))
    rows = dict(fact_rows(replace(f, episode=replace(f.episode, measured=1200.0, maintenance=600.0))))
    assert rows["Maintenance time (the instrument in service or calibration: not judged, not a gap)"] == \
        fmt_minutes(600.0)
    assert rows["Measured time"] == fmt_minutes(1200.0)


def test_pdf_draft_pages_and_words(site: tuple[SiteConfig, Path]) -> None:
    pdftoppm = require_binary("pdftoppm")
    config, tmp = site
    pdf = tmp / "nov.pdf"
    assert write_notice(config, EPISODE, "pdf", pdf, now=_local(13, 0)) == [pdf]
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    subprocess.run([pdftoppm, "-r", "70", "-png", str(pdf), str(ARTIFACTS / "page")], check=True, timeout=60)
    pngs = sorted(ARTIFACTS.glob("page-*.png"))
    assert 1 <= len(pngs) <= 3 and all(p.stat().st_size > 10_000 for p in pngs)
    shutil.copy(pdf, ARTIFACTS / "nov.pdf")
    text = " ".join(_pdftext(pdf).split())
    for words in ("DRAFT: Notice of Violation", "Town of Southeast", "ACME Plating Co.", "12 Route 22, Brewster",
                  "SE-IU-2025-07 (issued 2025-04-01, expires 2030-03-31)",
                  "Town of Southeast § 112-5A(1)(c)", "Any wastewater having a pH less than 5.0 or higher than 9.0",
                  "2026-11-10 10:00:00 EST", "2026-11-10 10:30:00 EST", "4.20 pH", "30 min",
                  "Town of Southeast § 112-11", "Within 30 days of the date of this notice", "None recorded", EPISODE):
        assert words in text, words
    assert "Unmeasured time" in text
    assert "local time from 2026-11-10 (America/New_York, EST)" in text  # the chart's axis


def test_markdown_and_word_drafts_carry_the_same_facts(site: tuple[SiteConfig, Path]) -> None:
    config, tmp = site
    md, png = write_notice(config, EPISODE, "md", tmp / "nov.md", now=_local(13, 0))
    text = md.read_text()
    assert png.read_bytes().startswith(b"\x89PNG") and f"]({png.name})" in text
    assert "| Onset | 2026-11-10 10:00:00 EST (reading 4.20 pH) |" in text
    # the whole clause violated, not the snippet the rule is listed by
    assert ('"Any wastewater having a pH less than 5.0 or higher than 9.0 or wastewater having any other corrosive '
            'property capable of causing damage or hazard to structures, equipment and/or personnel of a POTW."'
            in text)
    pytest.importorskip("docx", reason="python-docx is in the test extras")
    docx = tmp / "nov.docx"
    write_notice(config, EPISODE, "docx", docx, now=_local(13, 0))
    with zipfile.ZipFile(docx) as z:
        body = z.read("word/document.xml").decode()
        assert any(n.startswith("word/media/") for n in z.namelist())  # the chart
    for words in ("Town of Southeast § 112-5A(1)(c)", "Within 30 days of the date of this notice",
                  "2026-11-10 10:00:00 EST"):
        assert words in body, words


def test_cli(site: tuple[SiteConfig, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _config, tmp = site
    out = tmp_path / "draft.pdf"
    assert cli.main(["nov", "--config", str(tmp / "site.toml"), "--episode", EPISODE, "--output", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF")
    today = datetime.now(TZ).date()
    due = today + timedelta(days=30)
    text = " ".join(_pdftext(out).split())
    # the period runs from the notice as served, not from the draft: no date computed from the draft's
    assert f"{due:%B} {due.day}, {due.year}" not in text and "Within 30 days of the date of this notice" in text
    assert cli.main(["nov", "--config", str(tmp / "site.toml"), "--episode", "acme/ph/nope@x",
                     "--format", "md"]) == 2
    assert "episode id" in capsys.readouterr().err


def test_no_notice_for_the_plants_own_influent_episode(site: tuple[SiteConfig, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A notice of violation goes to an industry: an episode of a site of kind "plant" (the plant's own influent
    monitoring point) is refused with the reason, by the library and by `pretreat nov`."""
    _config, tmp = site
    plant = tmp_path / "plant.toml"
    plant.write_text(SITE_TOML.format(db=tmp / "pretreat.sqlite").replace('id = "acme"\n',
                                                                          'id = "acme"\nkind = "plant"\n', 1))
    assert load_config(plant).sites[0].kind == "plant"
    with pytest.raises(NoticeError, match=r"plant's own influent monitoring point.*goes to an industry user"):
        gather(load_config(plant), EPISODE, now=_local(13, 0))
    out = tmp_path / "nov.pdf"
    assert cli.main(["nov", "--config", str(plant), "--episode", EPISODE, "--output", str(out)]) == 2
    assert "goes to an industry user" in capsys.readouterr().err and not out.exists()


def test_every_cause_and_corrective_action_entry_with_who_and_when(site: tuple[SiteConfig, Path],
                                                                    tmp_path: Path) -> None:
    """A later annotation does not hide an earlier one: the notice lists each, with who and when (site zone)."""
    from monitor.reports.annotations import annotate

    config, _tmp = site
    db = Path(config.daemon.historian)
    annotate(db, episode=EPISODE, cause="acid tank valve left open", action="valve locked out",
             user="j.smith", now=_local(11, 0))
    annotate(db, episode=EPISODE, cause="valve seat worn (found on inspection)", action="valve replaced",
             user="a.jones", now=_local(12, 15))
    md, _png = write_notice(config, EPISODE, "md", tmp_path / "nov.md", now=_local(13, 0))
    text = md.read_text()
    for words in ("| 2026-11-10 11:00 EST | j.smith | acid tank valve left open | valve locked out |",
                  "| 2026-11-10 12:15 EST | a.jones | valve seat worn (found on inspection) | valve replaced |"):
        assert words in text, text


def test_a_sampler_fridge_notice_speaks_of_the_monitoring_equipment_and_the_permits_words(
        site: tuple[SiteConfig, Path], tmp_path: Path) -> None:
    """The fridge band is a permit condition on the monitoring equipment, not a discharge limit: the notice
    must not say that the discharge violated it, nor call the permit's words the ordinance's."""
    config, _tmp = site
    md, _png = write_notice(config, FRIDGE, "md", tmp_path / "fridge.md", now=_local(13, 0))
    text = md.read_text()
    assert ("shows that the monitoring equipment at ACME Plating Co. (fridge) did not meet the condition of "
            "Permit SE-IU-2025-07, Part III.B.2") in text, text
    assert "the discharge from" not in text and "ordinance's words" not in text
    assert "Reading of the permit's words in force" in text and "Condition not met when" in text
