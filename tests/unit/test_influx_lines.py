"""The line-protocol schema: exact lines for readings, bad readings, annotations and health."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.schema import ChannelKind
from monitor.sample import Quality, Sample
from monitor.stores.influx_lines import (
    EventRecord,
    SampleFormatter,
    alarm_record,
    episode_record,
    event_line,
    health_record,
    to_ms,
)

T = 1_764_460_800.123  # 2025-11-30T00:00:00.123Z
INSTRUMENTS = {("acme", "ph"): ("ph-meter", ChannelKind.PH), ("acme", "flow"): ("flow meter", "flow")}


def fmt() -> SampleFormatter:
    return SampleFormatter(instruments=INSTRUMENTS)


def test_good_sample_line_is_exact() -> None:
    line = fmt().line(Sample(time=T, site="acme", channel="ph", value=7.12, unit="pH"))
    assert line == ('ph,channel=ph,instrument=ph-meter,site=acme,unit=pH value=7.12,quality="good" '
                    '1764460800123')


def test_bad_sample_has_no_value_field_and_carries_quality_and_reason() -> None:
    s = Sample.bad(time=T, site="acme", channel="ph", unit="pH", quality=Quality.COMM_FAILURE,
                   reason='timeout after 0.5 s "read holding"\nretrying')
    line = fmt().line(s)
    assert "value=" not in line
    assert line == ('ph,channel=ph,instrument=ph-meter,site=acme,unit=pH quality="comm_failure",'
                    'reason="timeout after 0.5 s \\"read holding\\"\\nretrying" 1764460800123')


def test_an_over_range_reading_keeps_its_number_beside_its_quality() -> None:
    s = Sample(time=T, site="acme", channel="ph", value=120.0, unit="pH", quality=Quality.OVER_RANGE,
               reason="above the span")
    assert fmt().line(s) == ('ph,channel=ph,instrument=ph-meter,site=acme,unit=pH quality="over_range",'
                             'reason="above the span",value=120.0 1764460800123')


def test_tags_with_spaces_commas_and_equals_are_escaped() -> None:
    line = fmt().line(Sample(time=T, site="acme", channel="flow", value=1.0, unit="m3/h, a=b"))
    assert line.startswith(
        "flow,channel=flow,instrument=flow\\ meter,site=acme,unit=m3/h\\,\\ a\\=b value=1.0,")


def test_backslash_in_a_tag_is_literal_and_line_breaks_are_spelled_out() -> None:
    # as influxdb-client's serializer does: InfluxDB and VictoriaMetrics keep a tag's backslash as is
    line = fmt().line(Sample(time=T, site="acme", channel="flow", value=1.0, unit="a\\b\tc\nd"))
    assert line.startswith("flow,channel=flow,instrument=flow\\ meter,site=acme,unit=a\\b\\tc\\nd value=1.0,")


def test_unknown_channel_is_written_as_other_and_counted() -> None:
    f = fmt()
    line = f.line(Sample(time=T, site="acme", channel="mystery", value=3.0, unit="x"))
    assert line.startswith("other,channel=mystery,site=acme,unit=x value=3.0,")
    assert f.unknown_channels == 1


def test_a_good_sample_with_a_non_finite_value_becomes_bad_value_not_a_number() -> None:
    f = fmt()
    line = f.line(Sample(time=T, site="acme", channel="ph", value=float("nan"), unit="pH"))
    assert line.startswith('ph,channel=ph,instrument=ph-meter,site=acme,unit=pH quality="bad_value",reason="')
    assert f.invalid_values == 1


def test_timestamps_are_milliseconds_and_deterministic() -> None:
    assert to_ms(T) == 1_764_460_800_123
    assert to_ms(0.0005) == 0 and to_ms(0.0016) == 2
    # the same float always gives the same line (backfill overwrites instead of duplicating)
    s = Sample(time=T, site="acme", channel="ph", value=7.0, unit="pH")
    assert fmt().line(s) == fmt().line(s)


def test_event_line_types_and_omissions() -> None:
    rec = EventRecord(measurement="pretreat_alarm", tags={"site": "acme", "rule": "ph low", "empty": ""},
                      fields={"count": 3, "active": True, "note": 'a "b"', "gone": None,
                              "nan": float("nan")}, time=T)
    assert event_line(rec) == ('pretreat_alarm,rule=ph\\ low,site=acme count=3.0,active=true,'
                               'note="a \\"b\\"" 1764460800123')
    with pytest.raises(ValueError, match="no writable field"):
        event_line(EventRecord(measurement="m", tags={}, fields={"x": None}, time=T))


@dataclass
class Episode:
    time: float
    site: str
    channel: str
    rule: str
    event: str
    value: float | None
    limit: float | None
    citation: str


def test_episode_alarm_and_health_records() -> None:
    ep = Episode(T, "acme", "ph", "ph_min", "start", 4.9, 5.0, "§ 112-5A(2)")
    assert event_line(episode_record(ep)) == (
        'pretreat_episode,channel=ph,event=start,rule=ph_min,site=acme value=4.9,limit=5.0,'
        'citation="§ 112-5A(2)" 1764460800123')
    al = alarm_record(time=T, site="acme", channel="ph", rule="ph_min", priority="high",
                      from_state="normal", to_state="unack", value=4.9)
    assert event_line(al) == ('pretreat_alarm,channel=ph,priority=high,rule=ph_min,site=acme '
                              'from_state="normal",to_state="unack",user="system",note="",value=4.9 '
                              '1764460800123')
    h = health_record(component="influx", counters={"queue_depth": 5, "server_up": True, "last": "x"},
                      time=T)
    assert event_line(h) == "pretreat_health,component=influx queue_depth=5.0,server_up=1.0 1764460800123"


@given(text=st.text(max_size=40), unit=st.text(max_size=10))
def test_any_text_stays_on_one_line_with_a_parsable_timestamp(text: str, unit: str) -> None:
    s = Sample.bad(time=T, site="acme", channel="ph", unit=unit, quality=Quality.DECODE_ERROR, reason=text)
    line = fmt().line(s)
    assert "\n" not in line and "\r" not in line
    assert line.rsplit(" ", 1)[1] == "1764460800123"
