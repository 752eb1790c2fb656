"""`pretreat exceedances` over a real daemon file: episodes from the real EpisodeStore, readings through the
real Historian, the site file through the real loader. Pairing, completeness, peaks, evidence, formats."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_config
from monitor import cli
from monitor.checks.events import EpisodeEvent
from monitor.checks.revisions import Revision
from monitor.exceedances import report
from monitor.exceedances_render import iso
from monitor.read.episodes import find_episodes
from monitor.sample import Quality, Sample
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from monitor.stores.readonly import connect_readonly
from tests.unit.checks_helpers import SCHEMA_1

T0 = 1_767_571_200.0  # 2026-01-05T00:00:00Z
SITE = "acme-plating"
CITE = "Town of Southeast § 112-5A(1)(c)"
SITE_FILE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme-plating"
jurisdiction = "southeast"
timezone = "America/New_York"

[[site.instrument]]
id = "ph-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
register_map = "ph_meter"
poll_interval = 1.0

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
poll_interval = 2.0

[[site.channel]]
id = "ph"
instrument = "ph-meter"
point = "ph"
kind = "ph"
unit = "pH"
resolution = 0.01

[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "mh1/lel"
field = "lel"
kind = "lel"
unit = "%LEL"
"""


def ev(t: float, rule: str, event: str, value: float | None = None, peak: float | None = None,
       channel: str = "ph", limit: float | None = 9.0) -> EpisodeEvent:
    return EpisodeEvent(t, SITE, channel, rule, event, value, limit, CITE, peak)


def good(t: float, v: float, channel: str = "ph", unit: str = "pH") -> Sample:
    return Sample(time=t, site=SITE, channel=channel, value=v, unit=unit)


def bad(t: float, channel: str = "ph", unit: str = "pH") -> Sample:
    return Sample.bad(time=t, site=SITE, channel=channel, unit=unit, quality=Quality.COMM_FAILURE,
                      reason="ph-meter: timeout")


@pytest.fixture
def site_file(tmp_path: Path) -> Path:
    p = tmp_path / "site.toml"
    p.write_text(SITE_FILE, encoding="utf-8")
    return p


async def record(db: Path, events: Sequence[EpisodeEvent], samples: Sequence[Sample] = ()) -> None:
    h = Historian(path=db, commit_interval=0.01)
    await h.start()
    h.submit(list(samples))
    await h.close()
    store = EpisodeStore(path=db)
    store.record(list(events))
    store.close()


def args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(site=None, rule=None, channel=None, format="table", evidence=False,
                                   data_quality=False, limit=None)
    return argparse.Namespace(**{**base, **kw})


def run_report(db: Path, site_file: Path | None, now: float, start: float | None = None,
               end: float | None = None, **kw: object) -> str:
    out = io.StringIO()
    conn = connect_readonly(db)
    try:
        report(conn, out, config=load_config(site_file) if site_file else None, args=args(**kw), start=start,
               end=end, now=now)
    finally:
        conn.close()
    return out.getvalue()


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def cli_registered() -> Iterator[None]:
    """`pretreat exceedances` is routed by monitor/cli.py's SUBCOMMANDS."""
    assert "exceedances" in cli.SUBCOMMANDS
    yield


async def test_pairs_starts_with_their_ends_and_keeps_every_odd_case(tmp_path: Path, site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    await record(db, [
        ev(T0 + 100, "ph_high", "start", 9.4), ev(T0 + 110, "ph_high", "end", 8.9, peak=9.8),
        ev(T0 + 200, "ph_high", "start", 9.2),  # its end was never recorded ...
        ev(T0 + 300, "ph_high", "start", 9.3),  # ... because another start follows; this one is still open
        ev(T0 + 50, "ph_low", "end", 5.2, limit=5.0),  # an end whose start is not in the file
        ev(T0 + 400, "stale", "start", limit=None), ev(T0 + 405, "stale", "end", 7.0, limit=None),
    ])
    rows = jsonl(run_report(db, site_file, now=T0 + 1000, format="json"))
    assert [(r["rule"], r["status"], r["start"], r["end"]) for r in rows] == [
        ("ph_low", "start not recorded", None, iso(T0 + 50)),
        ("ph_high", "closed", iso(T0 + 100), iso(T0 + 110)),
        ("ph_high", "end not recorded", iso(T0 + 200), None),
        ("ph_high", "ongoing", iso(T0 + 300), None),
    ]
    closed, ongoing = rows[1], rows[3]
    assert (closed["duration_s"], closed["peak"], closed["limit"], closed["citation"]) == (10, 9.8, 9.0, CITE)
    assert (closed["start_value"], closed["end_value"], closed["unit"]) == (9.4, 8.9, "pH")
    assert ongoing["duration_s"] == 700  # measured to now
    # data-quality episodes are not discharge exceedances: only on request
    dq = jsonl(run_report(db, site_file, now=T0 + 1000, format="json", data_quality=True))
    assert [r["rule"] for r in dq].count("stale") == 1
    assert [r["status"] for r in jsonl(run_report(db, site_file, now=T0 + 1000, format="json",
                                                 rule="stale"))] == ["closed"]


async def test_transitions_at_one_time_pair_whatever_order_they_were_stored_in(tmp_path: Path,
                                                                              site_file: Path) -> None:
    """An episode of one reading whose end a correction stored before its start is one closed episode, not an
    end without a start and an hour-long ongoing one; at a month's end the end still closes the episode open
    before the start at the same reading, even when that start was stored first."""
    db = tmp_path / "pretreat.sqlite"
    await record(db, [ev(T0 + 60, "ph_low", "end", 3.0, limit=5.0), ev(T0 + 60, "ph_low", "start", 3.0, limit=5.0),
                      ev(T0 + 100, "ph_high", "start", 9.4), ev(T0 + 200, "ph_high", "start", 9.5),
                      ev(T0 + 200, "ph_high", "end", 9.5)])
    rows = jsonl(run_report(db, site_file, now=T0 + 3600, format="json"))
    assert [(r["rule"], r["status"], r["start"], r["end"]) for r in rows] == [
        ("ph_low", "closed", iso(T0 + 60), iso(T0 + 60)),
        ("ph_high", "closed", iso(T0 + 100), iso(T0 + 200)),
        ("ph_high", "ongoing", iso(T0 + 200), None),
    ]


async def test_the_table_says_an_episode_was_retracted_and_does_not_count_it_a_violation(
        tmp_path: Path, site_file: Path) -> None:
    """A start that a correction after late readings withdrew (the episode never happened) is listed as such,
    with no duration or completeness, and the total says it is no violation."""
    db = tmp_path / "pretreat.sqlite"
    start = ev(T0 + 100, "ph_high", "start", 9.4)
    await record(db, [start, ev(T0 + 200, "ph_high", "start", 9.5), ev(T0 + 210, "ph_high", "end", 8.9)])
    store = EpisodeStore(path=db)
    store.revise([Revision(SITE, "ph", "ph_high", withdrawn=(start,), added=(), late=T0 + 99, active=False)],
                 recorded=T0 + 300)
    store.close()
    text = run_report(db, site_file, now=T0 + 3600)
    (row,) = [line for line in text.splitlines() if "RETRACTED" in line and "ph_high" in line]
    assert "[RETRACTED after late readings: never happened]" in row and "%" not in row, row
    assert "2 episodes, 0 ongoing, 1 of those shown retracted after late readings" in text, text


async def test_a_revision_says_how_old_the_late_reading_behind_it_was(tmp_path: Path, site_file: Path) -> None:
    """Readings are honoured however old; the history says so: a correction made from a reading taken 2 h
    before it was judged reads "late reading of <its time>, 2 h old when judged" under the episode it moved."""
    db = tmp_path / "pretreat.sqlite"
    old_end, new_end = ev(T0 + 200, "ph_high", "end", 8.9), ev(T0 + 260, "ph_high", "end", 8.8)
    await record(db, [ev(T0 + 100, "ph_high", "start", 9.4), old_end])
    store = EpisodeStore(path=db)
    store.revise([Revision(SITE, "ph", "ph_high", withdrawn=(old_end,), added=(new_end,), late=T0 + 230,
                           active=False)], recorded=T0 + 230 + 7200)
    store.close()
    text = run_report(db, site_file, now=T0 + 9000)
    (line,) = [x for x in text.splitlines() if "revised" in x]
    assert line.strip() == (f"revised {iso(T0 + 7430)}: end moved {iso(T0 + 200)} -> {iso(T0 + 260)} "
                            f"(late reading of {iso(T0 + 230)}, 2 h old when judged)"), line


@pytest.mark.parametrize("fraction", [0.37017, 0.3706])  # the stored ms rounds down, and up
async def test_a_retracted_episode_lists_its_revision_whatever_its_time_below_the_millisecond(
        tmp_path: Path, site_file: Path, fraction: float) -> None:
    """A revision's times are stored to the millisecond, an episode's exactly: the retracted episode (one
    instant) of a reading stamped 19:04:34.37017 still shows the revision that withdrew it and how old the
    late reading was."""
    db = tmp_path / "pretreat.sqlite"
    start = ev(T0 + 100 + fraction, "ph_high", "start", 9.4)
    await record(db, [start])
    store = EpisodeStore(path=db)
    store.revise([Revision(SITE, "ph", "ph_high", withdrawn=(start,), added=(), late=T0 + 99.5, active=False)],
                 recorded=T0 + 103.5)
    store.close()
    text = run_report(db, site_file, now=T0 + 3600)
    assert "RETRACTED" in text, text
    (line,) = [x for x in text.splitlines() if "revised" in x]
    assert "withdrawn (late reading of" in line and "4 s old when judged" in line, line
    (row,) = jsonl(run_report(db, site_file, now=T0 + 3600, format="json"))
    assert row["status"] == "retracted" and len(row["revisions"]) == 1, row


async def test_from_to_keep_episodes_that_overlap_the_range(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    await record(db, [
        ev(T0, "ph_high", "start", 9.4), ev(T0 + 3600, "ph_high", "end", 8.9, peak=9.5),  # spans the boundary
        ev(T0 + 7200, "ph_high", "start", 9.4), ev(T0 + 7300, "ph_high", "end", 8.9, peak=9.5),
        ev(T0 + 9000, "ph_high", "start", 9.4), ev(T0 + 9100, "ph_high", "end", 8.9, peak=9.5),
    ])
    conn = sqlite3.connect(db)
    try:
        found = find_episodes(conn, now=T0 + 10_000, start=T0 + 1800, end=T0 + 9000)
        assert [f[0] for f in found] == [T0, T0 + 7200]  # the one starting exactly at --to is out
        assert find_episodes(conn, now=T0 + 10_000, start=T0 + 3601, end=T0 + 7200) == []
        assert len(find_episodes(conn, now=T0 + 10_000, start=T0 + 3600, end=T0 + 3601)) == 1  # end inclusive
        assert find_episodes(conn, now=T0, site="elsewhere") == []
    finally:
        conn.close()


async def test_completeness_counts_good_readings_against_the_poll_interval(tmp_path: Path,
                                                                         site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    # pH polled at 1 s; episode [T0+100, T0+110]: 11 readings expected; 2 missing, 1 bad -> 8 good
    samples = [good(T0 + 100 + k, 9.5) for k in range(11) if k not in (3, 4, 6)] + [bad(T0 + 106)]
    samples += [good(T0 + 99, 8.0), good(T0 + 111, 8.0)]  # outside the episode: not counted
    # LEL published every 2 s; episode [T0+200, T0+220]: 11 expected, all there
    samples += [good(T0 + 200 + 2 * k, 12.0, "lel", "%LEL") for k in range(11)]
    await record(db, [
        ev(T0 + 100, "ph_high", "start", 9.5), ev(T0 + 110, "ph_high", "end", 8.5, peak=9.5),
        ev(T0 + 200, "lel_single", "start", 12.0, channel="lel", limit=10.0),
        ev(T0 + 220, "lel_single", "end", 4.0, peak=12.0, channel="lel", limit=10.0),
    ], samples)
    rows = jsonl(run_report(db, site_file, now=T0 + 1000, format="json"))
    assert [(r["readings_good"], r["readings_expected"], r["completeness_pct"]) for r in rows] == [
        (8, 11, 72.7), (11, 11, 100.0)]
    # the table says the same, and without a site file there is no interval to judge against
    assert "72.7%" in run_report(db, site_file, now=T0 + 1000)
    plain = jsonl(run_report(db, None, now=T0 + 1000, format="json"))
    assert [r["completeness_pct"] for r in plain] == [None, None] and plain[0]["peak"] == 9.5


async def test_peak_of_an_open_episode_comes_from_the_good_readings(tmp_path: Path, site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    samples = [good(T0 + 10, 9.3), good(T0 + 11, 10.4), bad(T0 + 12), good(T0 + 13, 9.9),
               good(T0 + 60, 4.6), good(T0 + 61, 3.9), good(T0 + 62, 4.2), good(T0 + 300, 11.0)]
    await record(db, [ev(T0 + 10, "ph_high", "start", 9.3),
                      ev(T0 + 60, "ph_low", "start", 4.6, limit=5.0)], samples)
    rows = jsonl(run_report(db, site_file, now=T0 + 100, format="json"))
    by_rule = {r["rule"]: r for r in rows}
    assert by_rule["ph_high"]["status"] == "ongoing"
    assert by_rule["ph_high"]["peak"] == 10.4  # the highest over [start, now]; the bad reading is no number
    assert by_rule["ph_low"]["peak"] == 3.9  # a low limit: the lowest
    assert by_rule["ph_low"]["readings_good"] == 3 and by_rule["ph_low"]["readings_expected"] == 41


async def test_evidence_is_every_reading_from_an_hour_before_to_an_hour_after(tmp_path: Path,
                                                                              site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    samples = [good(T0 + 1000 - 3601, 7.0), good(T0 + 1000 - 3600, 7.1), good(T0 + 1000, 9.5), bad(T0 + 1005),
               good(T0 + 1010, 8.0), good(T0 + 1010 + 3600, 7.2), good(T0 + 1010 + 3601, 7.3)]
    await record(db, [ev(T0 + 1000, "ph_high", "start", 9.5), ev(T0 + 1010, "ph_high", "end", 8.0, peak=9.5)],
                 samples)
    (row,) = jsonl(run_report(db, site_file, now=T0 + 9000, format="json", evidence=True))
    assert [(e["time"], e["value"], e["quality"]) for e in row["evidence"]] == [
        (iso(T0 + 1000 - 3600), 7.1, "good"), (iso(T0 + 1000), 9.5, "good"),
        (iso(T0 + 1005), None, "comm_failure"), (iso(T0 + 1010), 8.0, "good"),
        (iso(T0 + 1010 + 3600), 7.2, "good")]
    assert row["evidence"][2]["reason"] == "ph-meter: timeout"
    lines = list(csv.DictReader(io.StringIO(run_report(db, site_file, now=T0 + 9000, format="csv",
                                                       evidence=True))))
    assert len(lines) == 5 and {r["n"] for r in lines} == {"1"}
    assert lines[2]["evidence_quality"] == "comm_failure" and lines[2]["evidence_value"] == ""
    table = run_report(db, site_file, now=T0 + 9000, evidence=True)
    assert "COMM_FAILURE: ph-meter: timeout" in table


async def test_table_in_local_time_at_the_channels_resolution(tmp_path: Path, site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    await record(db, [ev(T0 + 1000, "ph_high", "start", 9.5), ev(T0 + 1010, "ph_high", "end", 8.0, peak=9.5)],
                 [good(T0 + 1000, 9.5), bad(T0 + 1005), good(T0 + 1010, 8.0)])
    table = run_report(db, site_file, now=T0 + 9000, evidence=True)
    row = table.splitlines()[1]
    # 2026-01-05T00:16:40Z is 19:16:40 EST the day before; the pH meter's resolution is 0.01
    assert row.split()[1:4] == ["2026-01-04", "19:16:40", "EST"] and "9.50 pH" in row and "9.00 pH" in row
    assert table.splitlines()[2].strip() == f"episode {SITE}/ph/ph_high@2026-01-05T00:16:40Z"  # as nov names it
    assert table.splitlines()[3].strip().startswith("no calibration")  # the episode's calibration status, then
    evidence = table.splitlines()[4:8]  # the evidence under its header
    assert evidence[0].split() == ["TIME", "(local", "time)", "CHANNEL", "VALUE", "QUALITY", "/", "REASON"]
    assert evidence[1].split() == ["2026-01-04", "19:16:40", "EST", "ph", "9.50", "pH", "good"]
    assert "COMM_FAILURE: ph-meter: timeout" in evidence[2]
    utc = run_report(db, site_file, now=T0 + 9000, utc=True).splitlines()
    assert utc[0].startswith("#  START (UTC)") and utc[1].split()[1] == "2026-01-05T00:16:40Z"
    bare = run_report(db, None, now=T0 + 9000).splitlines()  # no site file: no zone, no resolution
    assert bare[1].split()[1] == "2026-01-05T00:16:40Z" and bare[1].split()[6:8] == ["9.5", "9"]


async def test_the_table_prints_the_stable_episode_id_and_rounds_milliseconds_as_it_does(
        tmp_path: Path, site_file: Path) -> None:
    """The id `pretreat nov --episode` and `report annotate` take is printed under each row, and the local
    time of the same moment shows the same millisecond (rounded, not truncated)."""
    db = tmp_path / "pretreat.sqlite"
    t = T0 + 1000.4567  # 00:16:40.4567Z: the id rounds to .457
    await record(db, [ev(t, "ph_high", "start", 9.5), ev(t + 10, "ph_high", "end", 8.0, peak=9.5)])
    lines = run_report(db, site_file, now=T0 + 9000).splitlines()
    assert lines[1].split()[1:4] == ["2026-01-04", "19:16:40.457", "EST"]
    assert lines[2].strip() == f"episode {SITE}/ph/ph_high@2026-01-05T00:16:40.457Z"
    [row] = jsonl(run_report(db, site_file, now=T0 + 9000, format="json"))
    assert row["episode_id"] == f"{SITE}/ph/ph_high@2026-01-05T00:16:40.457Z"


def test_a_channel_without_a_resolution_shows_four_significant_digits(tmp_path: Path, site_file: Path) -> None:
    """No resolution stated (a float register, MQTT): no invented precision, as the log lines show it."""
    from monitor.cli_render import Render

    r = Render(load_config(site_file))
    assert r.number(7.199999999, SITE, "nowhere") == "7.2" and r.number(1234.5678, SITE, "nowhere") == "1235"
    assert r.number(7.199999999, SITE, "ph") == "7.20"  # the pH meter's 0.01


async def test_table_shows_the_latest_episodes_and_says_how_many_more(tmp_path: Path, site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    events = []
    for k in range(12):
        events += [ev(T0 + 100 * k, "ph_high", "start", 9.4), ev(T0 + 100 * k + 30, "ph_high", "end", 8.0, 9.6)]
    await record(db, events)
    text = run_report(db, site_file, now=T0 + 5000, limit=5)
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["#", "START", "(local", "time)", "END", "DURATION"]
    rows = [ln for ln in lines[1:-1] if not ln.startswith(" ")]  # indented: each episode's id, calibration
    assert [ln.split()[0] for ln in rows] == ["8", "9", "10", "11", "12"]  # the latest, oldest first
    assert lines[2].strip().startswith("episode acme-plating/ph/ph_high@")
    assert lines[3].strip() == "no calibration interval stated: no calibration recorded"
    assert lines[-1] == "12 episodes, 0 ongoing; the 7 earlier ones are not shown (--limit 0 shows all)"
    assert len(list(csv.DictReader(io.StringIO(run_report(db, site_file, now=T0, format="csv"))))) == 12


async def test_the_command_end_to_end(tmp_path: Path, site_file: Path, cli_registered: None,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "pretreat.sqlite"
    await record(db, [ev(T0 + 100, "ph_high", "start", 9.4), ev(T0 + 110, "ph_high", "end", 8.9, peak=9.8)],
                 [good(T0 + 100 + k, 9.5) for k in range(11)])
    assert cli.main(["exceedances", "--config", str(site_file), "--format", "csv",
                     "--from", "2026-01-05", "--to", "2026-01-06T00:00:00Z"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert (row["rule"], row["peak"], row["completeness_pct"], row["duration_s"]) == ("ph_high", "9.8", "100.0",
                                                                                       "10.0")
    assert cli.main(["exceedances", "--db", str(db), "--site", "nowhere"]) == 0
    assert capsys.readouterr().out.strip().endswith("0 episodes, 0 ongoing")


def test_usage_errors_exit_2(tmp_path: Path, site_file: Path, cli_registered: None,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["exceedances", "--config", str(site_file)]) == 2  # the daemon never ran: no file
    assert "no database" in capsys.readouterr().err
    (tmp_path / "pretreat.sqlite").touch()
    assert cli.main(["exceedances", "--config", str(site_file), "--from", "2026-01-05T10:00"]) == 2
    assert "no UTC offset" in capsys.readouterr().err
    assert cli.main(["exceedances", "--config", str(site_file), "--from", "2026-01-06",
                     "--to", "2026-01-05"]) == 2
    assert cli.main(["exceedances"]) == 2
    # an empty file (nothing recorded yet) is an empty report, not an error
    assert cli.main(["exceedances", "--config", str(site_file)]) == 0
    assert "0 episodes" in capsys.readouterr().out


async def test_ph_episodes_are_marked_permitted_excursions_where_the_permit_adopts_401_17(tmp_path: Path) -> None:
    """40 CFR 401.17: excursions within its allowances "are permitted"; ph_low/ph_high episodes at such a site
    say so, the single-excursion rule stays a violation."""
    site_file = tmp_path / "site.toml"
    site_file.write_text(SITE_FILE + '\n[site.permit]\nid = "SE-3"\nadopt = ["ph_excursion_single"]\n',
                         encoding="utf-8")
    db = tmp_path / "pretreat.sqlite"
    await record(db, [ev(T0 + 10, "ph_low", "start", 4.6, limit=5.0), ev(T0 + 20, "ph_low", "end", 5.5, 4.6),
                      # a later excursion, apart from the first, goes beyond the single-excursion allowance
                      EpisodeEvent(T0 + 100, SITE, "ph", "ph_excursion_duration", "start", 4.6, 3600.0, CITE,
                                   confirmed=T0 + 3701)])
    rows = {r["rule"]: r for r in jsonl(run_report(db, site_file, now=T0 + 4000, format="json"))}
    assert rows["ph_low"]["citation"].endswith("[permitted excursion under 40 CFR 401.17, adopted by the permit: "
                                               "not a violation]")
    assert "permitted" not in rows["ph_excursion_duration"]["citation"]
    # the flag apart from the citation, and `confirmed` (the onset is the start) for the duration rule
    assert (rows["ph_low"]["permitted"], rows["ph_excursion_duration"]["permitted"]) == ("40 CFR 401.17", None)
    assert (rows["ph_excursion_duration"]["start"], rows["ph_excursion_duration"]["confirmed"]) == (
        iso(T0 + 100), iso(T0 + 3701))
    assert rows["ph_low"]["confirmed"] is None
    csv_rows = {r["rule"]: r for r in csv.DictReader(io.StringIO(run_report(db, site_file, now=T0 + 4000,
                                                                            format="csv")))}
    assert (csv_rows["ph_low"]["permitted"], csv_rows["ph_excursion_duration"]["confirmed"]) == (
        "40 CFR 401.17", iso(T0 + 3701))
    # the table lists the violation first and the permitted excursion under its own heading, never among them
    table = run_report(db, site_file, now=T0 + 4000).splitlines()
    heading = next(i for i, line in enumerate(table) if line.startswith("PERMITTED pH EXCURSIONS"))
    assert heading == next(i for i, line in enumerate(table) if "ph_low" in line) - 1
    assert next(i for i, line in enumerate(table) if "ph_excursion_duration" in line) < heading
    assert any(line.strip().startswith("confirmed ") for line in table[:heading])
    assert table[-1].endswith("1 of those shown permitted pH excursions (not violations)")


async def test_an_excursion_beyond_401_17s_allowances_is_a_violation_saying_why(tmp_path: Path) -> None:
    """40 CFR 401.17 permits only excursions within its allowances: pH 9.4 for 70 minutes is one
    ph_excursion_duration violation, and its ph_high episode is listed with the violations, saying why, never
    as a permitted excursion; a 10-minute excursion the same day stays permitted."""
    site_file = tmp_path / "site.toml"
    site_file.write_text(SITE_FILE + '\n[site.permit]\nid = "SE-3"\nadopt = ["ph_excursion_single"]\n',
                         encoding="utf-8")
    db = tmp_path / "pretreat.sqlite"
    await record(db, [ev(T0 + 10, "ph_high", "start", 9.4), ev(T0 + 4210, "ph_high", "end", 8.9, peak=9.4),
                      EpisodeEvent(T0 + 10, SITE, "ph", "ph_excursion_duration", "start", 9.4, 3600.0, CITE,
                                   confirmed=T0 + 3611),
                      EpisodeEvent(T0 + 4210, SITE, "ph", "ph_excursion_duration", "end", 8.9, 3600.0, CITE),
                      ev(T0 + 5000, "ph_high", "start", 9.3), ev(T0 + 5600, "ph_high", "end", 8.9, peak=9.3)])
    rows = jsonl(run_report(db, site_file, now=T0 + 6000, format="json"))
    long, short = (r for r in rows if r["rule"] == "ph_high")
    assert long["permitted"] is None and short["permitted"] == "40 CFR 401.17"
    assert "not a violation" not in long["citation"]
    assert long["citation"].endswith("[beyond 40 CFR 401.17's allowances (no single excursion longer than 60 "
                                     f"minutes): part of the ph_excursion_duration violation from {iso(T0 + 10)}, "
                                     "so not a permitted excursion]")
    table = run_report(db, site_file, now=T0 + 6000).splitlines()
    heading = next(i for i, line in enumerate(table) if line.startswith("PERMITTED pH EXCURSIONS"))
    assert next(i for i, line in enumerate(table) if "ph_high" in line and "9.4" in line) < heading
    assert table[-1].endswith("1 of those shown permitted pH excursions (not violations)")


async def test_measured_and_unmeasured_seconds_end_reason_and_censoring_are_shown(tmp_path: Path,
                                                                                  site_file: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    await record(db, [
        ev(T0 + 100, "ph_high", "start", 9.4),
        EpisodeEvent(T0 + 160, SITE, "ph", "ph_high", "end", 9.5, 9.0, CITE, 9.8, "gap", 60.0, 0.0),
        EpisodeEvent(T0 + 200, SITE, "lel", "lel_single", "start", 100.0, 10.0, CITE, censored=True),
        EpisodeEvent(T0 + 7400, SITE, "lel", "lel_single", "end", 2.0, 10.0, CITE, 100.0, "cleared", 3600.0,
                     3600.0),
    ])
    rows = jsonl(run_report(db, site_file, now=T0 + 9000, format="json"))
    assert [(r["rule"], r["end_reason"], r["measured_s"], r["unmeasured_s"], r["censored"]) for r in rows] == [
        ("ph_high", "gap", 60.0, 0.0, False), ("lel_single", "cleared", 3600.0, 3600.0, True)]
    table = run_report(db, site_file, now=T0 + 9000)
    assert "(gap)" in table and "1h00m00s +1h00m00s unmeasured" in table and "100 %LEL (censored)" in table
    csv_rows = list(csv.DictReader(io.StringIO(run_report(db, site_file, now=T0 + 9000, format="csv"))))
    assert [(r["end_reason"], r["measured_s"], r["unmeasured_s"], r["censored"]) for r in csv_rows] == [
        ("gap", "60", "0", "false"), ("cleared", "3600", "3600", "true")]


async def test_maintenance_seconds_are_stored_and_shown_beside_measured_and_unmeasured(tmp_path: Path,
                                                                                        site_file: Path) -> None:
    """An episode that ended at an instrument's calibration ("maintenance") and one spanning a short one: the
    maintenance time is its own figure in every format, never added to the measured one."""
    db = tmp_path / "pretreat.sqlite"
    await record(db, [
        ev(T0 + 100, "lel_single", "start", 12.0, channel="lel", limit=10.0),
        EpisodeEvent(T0 + 160, SITE, "lel", "lel_single", "end", 12.0, 10.0, CITE, 12.0, "maintenance", 60.0, 0.0),
        ev(T0 + 4000, "lel_single", "start", 12.0, channel="lel", limit=10.0),
        EpisodeEvent(T0 + 4240, SITE, "lel", "lel_single", "end", 2.0, 10.0, CITE, 12.5, "cleared", 180.0, 0.0,
                     maintenance=60.0),
    ])
    rows = jsonl(run_report(db, site_file, now=T0 + 9000, format="json"))
    assert [(r["end_reason"], r["measured_s"], r["unmeasured_s"], r["maintenance_s"]) for r in rows] == [
        ("maintenance", 60.0, 0.0, None), ("cleared", 180.0, 0.0, 60.0)]
    table = run_report(db, site_file, now=T0 + 9000)
    assert "(maintenance)" in table and "3m00s +1m00s maintenance" in table
    csv_rows = list(csv.DictReader(io.StringIO(run_report(db, site_file, now=T0 + 9000, format="csv"))))
    assert [(r["end_reason"], r["measured_s"], r["maintenance_s"]) for r in csv_rows] == [
        ("maintenance", "60", ""), ("cleared", "180", "60")]


def test_a_file_recorded_before_coverage_was_kept_reads_with_those_columns_empty(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA_1.replace("'acme'", f"'{SITE}'"))
    (row,) = jsonl(run_report(db, None, now=T0, format="json"))  # read-only: not migrated
    assert (row["peak"], row["end_reason"], row["measured_s"], row["censored"]) == (3.5, None, None, False)
