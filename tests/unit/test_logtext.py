"""What operators read in the daemon's log: the site's local time with its zone (both sides of a daylight
saving change), readings at their channel's resolution, "no reading" instead of None, durations in words;
and the JSON form keeping the values as measured."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from alarms.model import Kind, Priority, State, Transition
from config.loader import load_config
from monitor import logtext
from monitor.checks.events import END, START, EpisodeEvent
from monitor.logs import StructuredFormatter
from monitor.logtext import (
    duration,
    episode_message,
    local_time,
    number,
    reading,
    spoken,
    transition_message,
    use_site_config,
)

NEW_YORK = ZoneInfo("America/New_York")
SITE = """
[daemon]
historian = "h.sqlite"
[[site]]
id = "acme"
timezone = "America/New_York"
jurisdiction = "southeast"
[[site.instrument]]
id = "ph-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
register_map = "ph_meter"
[[site.instrument]]
id = "fm"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 5021
register_map = "flow_meter"
[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
[[site.channel]]
id = "ph"
instrument = "ph-meter"
point = "ph"
kind = "ph"
unit = "pH"
scale = 0.01
[[site.channel]]
id = "temp"
instrument = "ph-meter"
point = "temperature"
kind = "temperature"
unit = "degC"
location = "discharge"
resolution = 0.5
[[site.channel]]
id = "flow"
instrument = "fm"
point = "flow_rate"
kind = "flow"
unit = "gpm"
[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "mh/lel"
field = "lel"
kind = "lel"
unit = "%LEL"
"""


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[None]:
    """The log set up for the site above; the process-wide settings put back afterwards."""
    (tmp_path / "site.toml").write_text(SITE)
    saved = (logtext.SETTINGS.zone, logtext.SETTINGS.channels)
    use_site_config(load_config(tmp_path / "site.toml"))
    yield
    logtext.SETTINGS.zone, logtext.SETTINGS.channels = saved


@pytest.mark.parametrize(("t", "shown"), [
    (utc(2026, 3, 8, 6, 59, 59), "2026-03-08 01:59:59 EST"),  # the last second of standard time
    (utc(2026, 3, 8, 7, 0, 0), "2026-03-08 03:00:00 EDT"),  # spring forward: 02:00 never happens
    (utc(2026, 11, 1, 5, 30), "2026-11-01 01:30:00 EDT"),  # fall back: 01:30 happens twice...
    (utc(2026, 11, 1, 6, 30), "2026-11-01 01:30:00 EST"),  # ...and the zone tells the two apart
    (utc(2026, 12, 1, 21, 4, 5), "2026-12-01 16:04:05 EST"),
])
def test_local_time_carries_the_zone_across_daylight_saving_changes(t: float, shown: str) -> None:
    assert local_time(t, NEW_YORK) == shown


def test_text_lines_start_with_the_sites_local_time_and_zone(site: None) -> None:
    record = logging.getLogger("monitor.app").makeRecord("monitor.app", logging.WARNING, __file__, 1,
                                                         "link %s down", ("tcp:10.0.0.5:502",), None)
    record.created = utc(2026, 11, 1, 6, 30, 7)
    line = StructuredFormatter(fmt="text").format(record)
    assert line == "2026-11-01 01:30:07 EST WARNING link tcp:10.0.0.5:502 down"
    paris = StructuredFormatter(fmt="text", zone=ZoneInfo("Europe/Paris")).format(record)
    assert paris.startswith("2026-11-01 07:30:07 CET WARNING")
    journal = StructuredFormatter(fmt="text", journal=True).format(record)
    assert journal == "<4>WARNING link tcp:10.0.0.5:502 down"  # journald stamps the time itself


def test_a_text_line_with_a_traceback_stays_one_line_and_masks_secrets() -> None:
    try:
        raise RuntimeError("token=s3cr3t-value\nsecond line")
    except RuntimeError:
        record = logging.getLogger("x").makeRecord("x", logging.ERROR, __file__, 1, "write failed", (),
                                                   sys.exc_info())
    line = StructuredFormatter(fmt="text", zone=NEW_YORK).format(record)
    assert "\n" not in line and " ERROR write failed | Traceback" in line and "s3cr3t-value" not in line


def test_sites_in_different_zones_log_in_utc(tmp_path: Path) -> None:
    west = ('[[site]]\nid = "west"\ntimezone = "America/Los_Angeles"\njurisdiction = "southeast"\n'
            '[[site.instrument]]\nid = "fm"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\nport = 5022\n'
            'register_map = "flow_meter"\n[[site.channel]]\nid = "flow"\ninstrument = "fm"\npoint = "flow_rate"\n'
            'kind = "flow"\nunit = "gpm"\n')
    (tmp_path / "site.toml").write_text(SITE + west)
    saved = (logtext.SETTINGS.zone, logtext.SETTINGS.channels)
    try:
        use_site_config(load_config(tmp_path / "site.toml"))
        assert local_time(utc(2026, 12, 1, 21, 4, 5)) == "2026-12-01 21:04:05 UTC"
    finally:
        logtext.SETTINGS.zone, logtext.SETTINGS.channels = saved


def test_readings_are_rounded_to_the_channels_resolution(site: None) -> None:
    assert reading(4.8199999, site="acme", channel="ph") == "4.82 pH"  # scale 0.01: hundredths
    assert reading(7.0, site="acme", channel="ph") == "7.00 pH"
    assert reading(31.26, site="acme", channel="temp") == "31.3 degC"  # resolution 0.5 configured: tenths
    assert reading(-0.001, site="acme", channel="ph") == "0.00 pH"  # never "-0.00"
    # a float register and an MQTT value have no known resolution: four significant digits, no padding
    assert reading(0.8732134, site="acme", channel="lel") == "0.8732 %LEL"
    assert reading(1234.567, site="acme", channel="flow") == "1235 gpm"
    assert reading(4.2, site="acme", channel="lel") == "4.2 %LEL"


def test_none_is_never_printed(site: None) -> None:
    assert reading(None, site="acme", channel="ph") == "no reading"
    assert number(None) == "no reading"
    stale = EpisodeEvent(time=utc(2026, 12, 1, 21, 4, 5), site="acme", channel="ph", rule="stale",
                         event=START, value=None, limit=None, citation="data quality")
    text = episode_message(stale)
    assert text == "episode started: acme ph stale at 2026-12-01 16:04:05 EST, no reading (data quality)"
    t = Transition(time=utc(2026, 12, 1, 21, 4, 5), alarm_id="acme/ph/stale", kind=Kind.RAISE,
                   from_state=State.NORMAL, to_state=State.ACTIVE_UNACKED, priority=Priority.LOW, who="system",
                   why="", value=None, limit=None, citation="")
    assert transition_message(t, "ALARM") == "ALARM [low] acme ph stale: no reading"
    # the slug rule's notice has no value because there is no baseline, not because the meter is silent
    notice = EpisodeEvent(time=utc(2026, 12, 1, 21, 4, 5), site="acme", channel="ph", rule="slug_no_baseline",
                          event=START, value=None, limit=None, citation="data quality")
    assert episode_message(notice).endswith(", no baseline yet (data quality)")
    raised = Transition(time=t.time, alarm_id="acme/ph/slug_no_baseline", kind=Kind.RAISE,
                        from_state=State.NORMAL, to_state=State.ACTIVE_UNACKED, priority=Priority.LOW,
                        who="system", why="", value=None, limit=None, citation="")
    assert transition_message(raised, "ALARM") == "ALARM [low] acme ph slug_no_baseline: no baseline yet"


@pytest.mark.parametrize(("seconds", "shown"), [
    (10.0521, "10 s"), (0.4, "0.4 s"), (0.05, "0.05 s"), (59.6, "1 min"), (125.05, "2 min 5 s"),
    (3600, "1 h"), (3661, "1 h 1 min"), (10830, "3 h"), (86400 + 4 * 3600 + 5, "1 d 4 h"), (-5, "-5 s"),
])
def test_durations_are_said_in_words(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_episode_and_alarm_lines_say_value_limit_and_time_for_people(site: None) -> None:
    t0 = utc(2026, 12, 1, 21, 4, 3)
    start = EpisodeEvent(time=t0, site="acme", channel="ph", rule="ph_low", event=START, value=4.8199999,
                         limit=5.0, citation="Town of Southeast § 112-5A(1)(c)")
    assert episode_message(start) == ("episode started: acme ph ph_low at 2026-12-01 16:04:03 EST, 4.82 pH "
                                      "(limit 5.00 pH; Town of Southeast § 112-5A(1)(c))")
    long = EpisodeEvent(time=t0, site="acme", channel="ph", rule="ph_excursion_duration", event=END, value=6.51,
                        limit=3600.0, citation="40 CFR 401.17(a)(2)", peak=3725.2)
    assert episode_message(long).endswith("6.51 pH (limit 1 h; 40 CFR 401.17(a)(2)), peak 1 h 2 min")
    raised = Transition(time=t0, alarm_id="acme/ph/ph_low", kind=Kind.REALARM, from_state=State.ACTIVE_UNACKED,
                        to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH, who="system",
                        why="still unacknowledged after 900 s", value=4.8199999, limit=5.0, citation="")
    assert transition_message(raised, "REMINDER") == \
        "REMINDER [high] acme ph ph_low: 4.82 pH (limit 5.00 pH): still unacknowledged after 15 min"
    assert spoken(f"condition started at {t0:.3f}") == "condition started at 2026-12-01 16:04:03 EST"


def test_json_keeps_the_structured_fields_as_measured(site: None) -> None:
    record = logging.getLogger("monitor.app").makeRecord(
        "monitor.app", logging.WARNING, __file__, 1, "%s", ("episode started: ...",), None,
        extra={"site": "acme", "channel": "ph", "value": 4.8199999, "quiet_s": 10.0521})
    record.created = utc(2026, 12, 1, 21, 4, 5) + 0.25
    doc = json.loads(StructuredFormatter(fmt="json").format(record))
    assert doc == {"time": "2026-12-01T21:04:05.250Z", "level": "warning", "logger": "monitor.app",
                   "message": "episode started: ...", "site": "acme", "channel": "ph", "value": 4.8199999,
                   "quiet_s": 10.0521}


def test_a_tamper_signs_count_is_said_as_a_count_never_as_a_limit_in_the_channels_unit(site: None) -> None:
    """ph_frozen's, span_pinned's and flatline's "limit" is how many readings in a row, flow_zero_sampling's how
    many samples: "limit 5.00 pH" would read as a pH limit of 5."""
    from alarms.notifiers.base import Notice, value_vs_limit

    t0 = utc(2026, 12, 1, 21, 4, 3)
    frozen = EpisodeEvent(time=t0, site="acme", channel="ph", rule="ph_frozen", event=START, value=7.0, limit=5.0,
                          citation="data quality: tamper sign")
    assert "(limit 5 identical readings in a row; data quality" in episode_message(frozen)
    assert "pH;" not in episode_message(frozen) and "5.00" not in episode_message(frozen)
    pinned = Transition(time=t0, alarm_id="acme/flow/span_pinned", kind=Kind.RAISE, from_state=State.NORMAL,
                        to_state=State.ACTIVE_UNACKED, priority=Priority.LOW, who="system", why="", value=500.0,
                        limit=10.0, citation="")
    assert "500 gpm (limit 10 readings in a row at the span limit)" in transition_message(pinned, "ALARM")
    zero = Notice(seq=1, alarm="acme/flow/flow_zero_sampling", kind=Kind.RAISE, from_state=State.NORMAL,
                  state=State.ACTIVE_UNACKED, priority=Priority.LOW, time=t0, who="system", why="", value=0.0,
                  limit=3.0, citation="", level=0, unit="gpm")
    assert value_vs_limit(zero) == "0 gpm (after 3 samples counted while the flow read zero)"
    low = Notice(seq=2, alarm="acme/ph/ph_low", kind=Kind.RAISE, from_state=State.NORMAL, state=State.ACTIVE_UNACKED,
                 priority=Priority.HIGH, time=t0, who="system", why="", value=4.8, limit=5.0, citation="", level=0,
                 unit="pH")
    assert value_vs_limit(low) == "4.8 pH (limit 5 pH)"  # a real limit keeps its unit
    # `pretreat exceedances`' LIMIT column says the same
    import io

    from monitor.exceedances_render import write_table
    from monitor.read.episodes import Episode

    out = io.StringIO()
    write_table(out, [(1, Episode(site="acme", channel="ph", rule="ph_frozen", status="closed", start=t0, end=t0 + 60,
                                  until=t0 + 60, start_value=7.0, end_value=7.1, limit=5.0, peak=None,
                                  citation="tamper sign", unit="pH"))], total=1, evidence=False)
    assert "5 identical readings in a row" in out.getvalue() and "5 pH" not in out.getvalue()
