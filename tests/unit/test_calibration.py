"""The calibration log: intervals from the permit or the site (never invented), entries validated and journaled,
status and overdue spans over time, `pretreat calibration add|list`, and the daemon's watch raising and clearing
``calibration_overdue``."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from alarms.journal import Journal
from alarms.model import AlarmInput
from config.calibration import NO_INTERVAL, SITE_SETTING
from config.errors import ConfigErrors
from config.loader import load_config
from monitor.calibration import CalibrationWatch, episode_calibration, statuses
from monitor.checks.events import parse_iso
from monitor.cli import main
from monitor.stores.calibration import (
    LATER,
    OK,
    OVERDUE,
    UNRECORDED,
    Calibration,
    CalibrationError,
    add,
    during,
    known_overdue_spans,
    overdue_spans,
    read_entries,
    status_at,
)

DAY = 86400.0
T0 = parse_iso("2026-03-01T00:00:00Z")
NOW = T0 + 100 * DAY  # when the record is read (an open episode is judged up to it)

SITE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme"
jurisdiction = "southeast"
timezone = "UTC"
{site_extra}

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"
poll_interval = 60

[[site.channel]]
id = "ph"
instrument = "m"
topic = "mh1/ph"
payload = "number"
kind = "ph"
unit = "pH"

[[site.channel]]
id = "flow"
instrument = "m"
topic = "mh1/flow"
payload = "number"
kind = "flow"
unit = "gpm"

[[site.channel]]
id = "temperature"
instrument = "m"
topic = "mh1/t"
payload = "number"
kind = "temperature"
unit = "degC"
location = "discharge"
{tables}
"""

PERMIT = """
[site.permit]
id = "IU-7"

[site.permit.calibration]
cite = "Permit IU-7, Part III.B"
ph = 30
flow = 365
"""


def site_file(tmp_path: Path, tables: str = PERMIT, site_extra: str = "") -> Path:
    path = tmp_path / "site.toml"
    path.write_text(SITE.format(tables=tables, site_extra=site_extra))
    return path


def entry(t: float, *, channel: str = "ph", next_due: float | None = None, who: str = "J. Smith") -> Calibration:
    return Calibration(site="acme", channel=channel, time=t, who=who, method="ph_two_buffer",
                       as_found=((4.01, 4.10), (7.00, 7.06)), as_left=((4.01, 4.01), (7.00, 7.00)),
                       next_due=next_due, entered=t + 60)


def test_intervals_come_from_the_permit_or_the_site_and_the_shorter_binds(tmp_path: Path) -> None:
    config = load_config(site_file(tmp_path, PERMIT + "\n[site.calibration]\nph = 14\nflow = 400\n"))
    policy = config.sites[0].calibration
    assert policy is not None
    ph, flow = policy.interval("ph"), policy.interval("flow")
    assert ph is not None and (ph.days, ph.source) == (14.0, SITE_SETTING)  # the site calibrates more often
    assert flow is not None and (flow.days, flow.source) == (365.0, "Permit IU-7, Part III.B")  # the permit binds
    assert policy.interval("temperature") is None  # neither states one: none is invented


def test_a_channel_id_wins_over_its_kind(tmp_path: Path) -> None:
    text = SITE.format(tables="[site.calibration]\ntemperature = 90\nt-out = 7\n", site_extra="")
    (tmp_path / "ids.toml").write_text(text.replace('id = "temperature"', 'id = "t-out"'))
    cal = load_config(tmp_path / "ids.toml").sites[0].calibration
    assert cal is not None and cal.interval("t-out") is not None
    assert cal.interval("t-out").days == 7.0  # type: ignore[union-attr]
    (tmp_path / "kind.toml").write_text(text.replace('id = "temperature"', 'id = "t-out"').replace("t-out = 7\n", ""))
    cal = load_config(tmp_path / "kind.toml").sites[0].calibration
    assert cal is not None and cal.interval("t-out").days == 90.0  # type: ignore[union-attr]


@pytest.mark.parametrize(("tables", "needle"), [
    ("[site.permit]\nid = \"IU-7\"\n[site.permit.calibration]\nph = 30\n", "calibration.cite"),
    ("[site.permit]\nid = \"IU-7\"\n[site.permit.calibration]\ncite = \"Part III\"\nph = 30\n", "naming the permit"),
    ("[site.calibration]\nphh = 30\n", "channel id of this site"),
    ("[site.calibration]\nph = 0\n", "a number > 0"),
    ("[site.calibration]\nph = \"monthly\"\n", "a number"),
])
def test_mistakes_are_named(tmp_path: Path, tables: str, needle: str) -> None:
    with pytest.raises(ConfigErrors) as info:
        load_config(site_file(tmp_path, tables))
    assert needle in str(info.value), str(info.value)


def test_status_over_time() -> None:
    from config.calibration import Interval

    every = Interval(30.0, "Permit IU-7, Part III.B")
    log = [entry(T0), entry(T0 + 40 * DAY, next_due=T0 + 50 * DAY)]
    assert status_at(log, every, T0 - 1).state == UNRECORDED  # an interval in force, nothing recorded yet
    st = status_at(log, every, T0 + 10 * DAY)
    assert (st.state, st.due) == (OK, T0 + 30 * DAY)
    st = status_at(log, every, T0 + 30 * DAY)  # due time itself: overdue (inclusive)
    assert (st.state, st.since) == (OVERDUE, T0 + 30 * DAY) and "OVERDUE since 2026-03-31T00:00:00Z" in st.text()
    st = status_at(log, every, T0 + 45 * DAY)
    assert (st.state, st.due) == (OK, T0 + 50 * DAY)  # the technician's earlier due date binds
    assert overdue_spans(log, every) == [(-math.inf, T0, UNRECORDED), (T0 + 30 * DAY, T0 + 40 * DAY, OVERDUE),
                                         (T0 + 50 * DAY, math.inf, OVERDUE)]
    # neither an interval nor a technician's due date: nothing is due, never overdue
    assert status_at([entry(T0)], None, T0 + 900 * DAY).text() == f"{NO_INTERVAL}: last calibrated " \
        "2026-03-01T00:00:00Z by J. Smith"
    assert status_at([], None, T0).state == NO_INTERVAL and not status_at([], None, T0).overdue
    assert overdue_spans([entry(T0)], None) == []
    # over an episode: in date at its start, overdue during it
    text = during(log, every, T0 + 29 * DAY, T0 + 31 * DAY, now=NOW)
    assert text.startswith("calibration in date") and "became OVERDUE at 2026-03-31T00:00:00Z" in text
    assert during(log, every, T0 + 31 * DAY, None, now=NOW).startswith("calibration OVERDUE since")


def test_a_backdated_entry_never_rewrites_the_status_as_known_during_a_past_episode() -> None:
    """An entry keeps its date and when it was entered. An episode on day 40 happened while the record said
    OVERDUE (due day 30); a calibration dated day 35 entered on day 60 does not make the enforcement record say
    "in date" then: both are shown, the status as known at the time first."""
    from config.calibration import Interval

    every = Interval(30.0, "Permit IU-7, Part III.B")
    backdated = Calibration(**{**_fields(entry(T0 + 35 * DAY)), "entered": T0 + 60 * DAY})
    log = [entry(T0), backdated]
    text = during(log, every, T0 + 40 * DAY, T0 + 41 * DAY, now=NOW)
    assert text.startswith("calibration OVERDUE since 2026-03-31T00:00:00Z: last calibrated 2026-03-01T00:00:00Z")
    assert "(as known at the time); a calibration dated 2026-04-05T00:00:00Z was entered on 2026-04-30T00:00:00Z; " \
        "by the record as it stands: calibration in date (due 2026-05-05T00:00:00Z)" in text, text
    assert during([entry(T0)], every, T0 + 40 * DAY, T0 + 41 * DAY, now=NOW) == text.split(" (as known at the time)")[0]
    # an episode after the entry was made: known then, one status
    assert during(log, every, T0 + 61 * DAY, None, now=NOW).startswith("calibration in date (due 2026-05-05")
    assert "as known" not in during(log, every, T0 + 61 * DAY, None, now=NOW)
    # the spans the readings export marks: as known at each moment, saying where a later entry differs
    assert known_overdue_spans(log, every) == [
        (-math.inf, T0, UNRECORDED), (T0, T0 + 60, f"{UNRECORDED} {LATER}"), (T0 + 30 * DAY, T0 + 35 * DAY, OVERDUE),
        (T0 + 35 * DAY, T0 + 60 * DAY, f"{OVERDUE} {LATER}"), (T0 + 65 * DAY, math.inf, OVERDUE)]
    prompt = [Calibration(**{**_fields(c), "entered": c.time}) for c in log]  # entered as done: the same spans
    assert known_overdue_spans(prompt, every) == overdue_spans(prompt, every)
    # an entry made during an open episode for a calibration after its start changes nothing at its start
    late = Calibration(**{**_fields(entry(T0 + 50 * DAY)), "entered": T0 + 50 * DAY + 60})
    assert "as known" not in during([entry(T0), late], every, T0 + 40 * DAY, None, now=NOW)


def test_entries_are_validated(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    e = entry(T0)
    bad = [
        (Calibration(**{**_fields(e), "method": "guess"}), "ph", "expected one of"),
        (Calibration(**{**_fields(e), "method": "flow_reference"}), "ph", "for a flow channel"),
        (Calibration(**{**_fields(e), "as_found": ((7.0, 7.1),)}), "ph", r"2 as found point\(s\)"),
        (Calibration(**{**_fields(e), "as_found": ((7.0, 7.1), (7.0, 7.2))}), "ph", "two different buffers"),
        (Calibration(**{**_fields(e), "who": " "}), "ph", "who calibrated"),
        (Calibration(**{**_fields(e), "as_left": ((4.0, math.nan), (7.0, 7.0))}), "ph", "finite"),
        (Calibration(**{**_fields(e), "next_due": T0 - 1}), "ph", "not after the calibration"),
    ]
    for c, kind, needle in bad:
        with pytest.raises(CalibrationError, match=needle):
            add(db, c, kind)
    assert read_entries(db) == []


def _fields(c: Calibration) -> dict[str, object]:
    return {k: getattr(c, k) for k in c.__dataclass_fields__}


def test_an_entry_is_stored_and_journaled_in_the_chain(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    seq = add(db, entry(T0), "ph")
    assert read_entries(db) == [entry(T0)]
    j = Journal(path=db)
    try:
        (rec,) = [r for r in j.records() if r.seq == seq]
        assert rec.kind == "calibration" and rec.payload["as_found"] == [[4.01, 4.1], [7.0, 7.06]]
        assert rec.payload["who"] == "J. Smith" and rec.payload["time"] == "2026-03-01T00:00:00Z"
        assert j.verify().ok
    finally:
        j.close()
    with sqlite3.connect(db) as conn, pytest.raises(sqlite3.DatabaseError):
        conn.execute("DELETE FROM journal")


def test_cli_add_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = site_file(tmp_path)
    assert main(["calibration", "add", "--config", str(path), "--site", "acme", "--channel", "ph",
                 "--date", "2026-03-01T09:00:00Z", "--who", "J. Smith, ACME", "--method", "ph_two_buffer",
                 "--found", "4.01:4.12", "--found", "7.00:7.08", "--left", "4.01:4.01", "--left", "7.00:7.00",
                 "--note", "probe cleaned"]) == 0
    assert "recorded: acme/ph calibrated 2026-03-01 09:00:00 UTC (2026-03-01T09:00:00Z) by J. Smith, ACME" in \
        capsys.readouterr().out
    assert main(["calibration", "list", "--config", str(path), "--at", "2026-04-15T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "acme/ph: calibration OVERDUE since 2026-03-31 09:00:00 UTC: last calibrated 2026-03-01 09:00:00 UTC" in out
    assert "every 30 days (Permit IU-7, Part III.B)" in out
    assert "acme/flow: calibration OVERDUE: no calibration recorded; every 365 days" in out
    assert f"acme/temperature: {NO_INTERVAL}: no calibration recorded" in out
    assert "as found 4.01 read 4.12, 7 read 7.08; as left 4.01 read 4.01, 7 read 7; probe cleaned" in out
    assert main(["calibration", "list", "--config", str(path), "--channel", "ph", "--format", "json",
                 "--at", "2026-03-10T00:00:00Z"]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (row["status"], row["overdue"], row["due"]) == (OK, False, "2026-03-31T09:00:00Z")
    # refused: a flow check on a pH channel, a missing point, an unknown channel
    for extra, needle in ((["--method", "flow_reference", "--found", "10:11", "--left", "10:10"], "flow channel"),
                          (["--method", "ph_two_buffer", "--found", "7:7.1", "--left", "7:7"], "2 as found"),
                          (["--method", "ph_two_buffer", "--found", "4.01", "--left", "7:7"], "REFERENCE:READING")):
        assert main(["calibration", "add", "--config", str(path), "--site", "acme", "--channel", "ph", "--date",
                     "2026-03-02T09:00:00Z", "--who", "x", *extra]) == 2
        assert needle in capsys.readouterr().err
    assert main(["calibration", "add", "--config", str(path), "--site", "acme", "--channel", "nope", "--date",
                 "2026-03-02", "--who", "x", "--method", "reference_check", "--found", "1:1", "--left", "1:1"]) == 2
    assert "known: ['flow', 'ph', 'temperature']" in capsys.readouterr().err
    assert len(read_entries(tmp_path / "pretreat.sqlite")) == 1


def test_a_date_alone_is_midnight_at_the_site_and_the_list_speaks_the_sites_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A technician in New York types the day: it is that day's midnight in New York (05:00 UTC in winter), not
    midnight UTC (the evening before, there); `calibration list` prints the site's local time with its zone,
    and when each entry was entered; --help says how a date alone is taken."""
    path = site_file(tmp_path)
    path.write_text(path.read_text().replace('timezone = "UTC"', 'timezone = "America/New_York"'))
    assert main(["calibration", "add", "--config", str(path), "--site", "acme", "--channel", "ph", "--date",
                 "2026-03-02", "--who", "J. Smith", "--method", "ph_two_buffer", "--found", "4.01:4.1",
                 "--found", "7:7.1", "--left", "4.01:4.01", "--left", "7:7", "--next-due", "2026-03-20"]) == 0
    assert "calibrated 2026-03-02 00:00:00 EST (2026-03-02T05:00:00Z)" in capsys.readouterr().out
    [c] = read_entries(tmp_path / "pretreat.sqlite")
    assert (c.time, c.next_due) == (parse_iso("2026-03-02T05:00:00Z"), parse_iso("2026-03-20T04:00:00Z"))  # EDT
    assert main(["calibration", "list", "--config", str(path), "--channel", "ph", "--at",
                 "2026-03-10T12:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "calibration status at 2026-03-10 08:00:00 EDT" in out
    assert "acme/ph: calibration in date (due 2026-03-20 00:00:00 EDT): last calibrated 2026-03-02 00:00:00 EST" in out
    assert "  2026-03-02 00:00:00 EST J. Smith: pH two-buffer check" in out and "(entered 20" in out
    assert "T05:00:00Z" not in out
    with pytest.raises(SystemExit):
        main(["calibration", "add", "--help"])
    assert "midnight in the site's time zone" in " ".join(capsys.readouterr().out.split())


def test_episode_calibration_names_each_input(tmp_path: Path) -> None:
    config = load_config(site_file(tmp_path))
    site = config.sites[0]
    found = {("acme", "ph"): [entry(T0)]}
    assert episode_calibration(site, found, "ph", T0 + DAY, T0 + 2 * DAY, now=NOW).startswith("calibration in date")
    both = episode_calibration(site, found, "flow*ph", T0 + DAY, None, now=NOW)
    assert both.startswith("flow: calibration OVERDUE: no calibration recorded") and "; ph: calibration in" in both
    assert episode_calibration(None, found, "ph", T0, None, now=NOW) == ""
    assert [(c, s.state) for _s, c, s in statuses(config, T0 + DAY)] == [
        ("ph", UNRECORDED), ("flow", UNRECORDED), ("temperature", NO_INTERVAL)]  # nothing recorded in the file


def test_the_watch_raises_and_clears_when_the_log_changes(tmp_path: Path) -> None:
    config = load_config(site_file(tmp_path))
    db = config.daemon.historian
    got: list[AlarmInput] = []
    conn = sqlite3.connect(db)
    watch = CalibrationWatch(config, lambda inputs, _t: got.extend(inputs), lambda: conn)
    now = T0 + 10 * DAY
    watch.tick(now)  # nothing recorded: both watched channels are overdue
    assert sorted((a.channel, a.rule, a.active) for a in got) == [
        ("flow", "calibration_overdue", True), ("ph", "calibration_overdue", True)]
    assert all("no calibration recorded" in a.citation for a in got)
    got.clear()
    watch.tick(now + 1)
    assert got == []  # nothing changed: nothing said
    add(db, entry(now + 1), "ph")
    watch.tick(now + 2)  # the new entry is noticed at the next tick, not a minute later
    assert [(a.channel, a.active, a.time) for a in got] == [("ph", False, now + 2)]
    got.clear()
    watch.tick(now + 2 + 30 * DAY)  # time passes: due again
    assert [(a.channel, a.active) for a in got] == [("ph", True)] and "OVERDUE since" in got[0].citation
    conn.close()


def test_an_open_episode_is_judged_up_to_now_never_into_the_future() -> None:
    """An episode still open on day 20 of a 30-day interval: the instrument is in date, and the record does not
    say it "became OVERDUE ... during the episode" at a due date still to come; once the due date has passed
    (asked on day 35) it does."""
    from config.calibration import Interval

    every = Interval(30.0, "Permit IU-7, Part III.B")
    log = [entry(T0)]
    text = during(log, every, T0 + 10 * DAY, None, now=T0 + 20 * DAY)
    assert text.startswith("calibration in date (due 2026-03-31T00:00:00Z)") and "became OVERDUE" not in text, text
    later = during(log, every, T0 + 10 * DAY, None, now=T0 + 35 * DAY)
    assert "became OVERDUE at 2026-03-31T00:00:00Z, during the episode" in later
    closed = during(log, every, T0 + 10 * DAY, T0 + 20 * DAY, now=T0 + 90 * DAY)  # a closed one: its own end
    assert "became OVERDUE" not in closed


def test_due_dates_are_calendar_days_in_the_sites_zone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """30 days from 2026-11-01 00:00 EDT is 2026-12-01 00:00 EST (the same local clock time), not 30 × 86,400 s
    later (2026-11-30 23:00 EST): in the status, the overdue spans, `calibration list` and the daemon's alarm."""
    from config.calibration import Interval

    done = parse_iso("2026-11-01T04:00:00Z")  # midnight EDT
    due = parse_iso("2026-12-01T05:00:00Z")  # midnight EST
    assert Interval(30.0, "x", "America/New_York").due_from(done) == due
    assert Interval(30.0, "x", "UTC").due_from(done) == done + 30 * DAY
    path = site_file(tmp_path)
    path.write_text(path.read_text().replace('timezone = "UTC"', 'timezone = "America/New_York"'))
    config = load_config(path)
    interval = config.sites[0].calibration.interval("ph")  # type: ignore[union-attr]
    assert interval is not None and interval.zone == "America/New_York"
    log = [entry(done)]
    assert status_at(log, interval, due - 1).state == OK and status_at(log, interval, due).state == OVERDUE
    assert overdue_spans(log, interval)[1] == (due, math.inf, OVERDUE)
    add(config.daemon.historian, entry(done), "ph")
    assert main(["calibration", "list", "--config", str(path), "--channel", "ph", "--at", "2026-11-15T00:00:00Z"]) == 0
    assert "calibration in date (due 2026-12-01 00:00:00 EST)" in capsys.readouterr().out


def test_times_in_tables_and_the_alarm_are_the_sites_local_time(tmp_path: Path) -> None:
    """The episode's calibration line in tables and reports (``local``) and the daemon's alarm give the site's
    local time with its zone, as `calibration list` does; the CSV/JSON form keeps ISO 8601 UTC."""
    path = site_file(tmp_path)
    path.write_text(path.read_text().replace('timezone = "UTC"', 'timezone = "America/New_York"'))
    config = load_config(path)
    site = config.sites[0]
    found = {("acme", "ph"): [entry(parse_iso("2026-11-01T04:00:00Z"))]}
    start = parse_iso("2026-12-02T12:00:00Z")
    local = episode_calibration(site, found, "ph", start, None, now=start + DAY, local=True)
    assert local.startswith("calibration OVERDUE since 2026-12-01 00:00:00 EST: last calibrated 2026-11-01 "
                            "00:00:00 EDT by J. Smith"), local
    assert "Z" not in local.split(";")[0]
    utc = episode_calibration(site, found, "ph", start, None, now=start + DAY)
    assert utc.startswith("calibration OVERDUE since 2026-12-01T05:00:00Z: last calibrated 2026-11-01T04:00:00Z")
    db = config.daemon.historian
    add(db, entry(parse_iso("2026-11-01T04:00:00Z")), "ph")
    got: list[AlarmInput] = []
    conn = sqlite3.connect(db)
    try:
        CalibrationWatch(config, lambda inputs, _t: got.extend(inputs), lambda: conn).tick(start)
    finally:
        conn.close()
    (ph,) = [a for a in got if a.channel == "ph"]
    assert "OVERDUE since 2026-12-01 00:00:00 EST: last calibrated 2026-11-01 00:00:00 EDT" in ph.citation


def test_add_messages_name_the_sites_midnight_and_the_methods_of_the_channels_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = site_file(tmp_path)
    path.write_text(path.read_text().replace('timezone = "UTC"', 'timezone = "America/New_York"'))
    common = ["calibration", "add", "--config", str(path), "--site", "acme", "--who", "x"]
    assert main([*common, "--channel", "ph", "--date", "11/01/2026", "--method", "ph_two_buffer",
                 "--found", "4.01:4.1", "--found", "7:7.1", "--left", "4.01:4.01", "--left", "7:7"]) == 2
    err = capsys.readouterr().err
    assert "midnight at the site (America/New_York)" in err and "midnight UTC" not in err, err
    assert main([*common, "--channel", "flow", "--date", "2026-11-01", "--method", "ph_two_buffer",
                 "--found", "4.01:4.1", "--found", "7:7.1", "--left", "4.01:4.01", "--left", "7:7"]) == 2
    assert "a flow channel (use flow_reference or reference_check)" in capsys.readouterr().err
    assert main([*common, "--channel", "temperature", "--date", "2026-11-01", "--method", "flow_reference",
                 "--found", "10:11", "--left", "10:10"]) == 2
    assert "a temperature channel (use reference_check)" in capsys.readouterr().err
    assert read_entries(tmp_path / "pretreat.sqlite") == []
