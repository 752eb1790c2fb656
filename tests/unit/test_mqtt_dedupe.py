"""`RecentReadings`: the same reading (channel, device time, what it says) is a repeat, whatever the bytes; another
value at the same instant is a conflict, recorded as BAD_VALUE; the filter can be seeded from the record."""

from __future__ import annotations

from drivers.mqtt.dedupe import CONFLICT, RecentReadings
from monitor.sample import Quality, Sample


def reading(t: float, v: float, channel: str = "lel") -> Sample:
    return Sample(time=t, site="acme", channel=channel, value=v, unit="%LEL")


def test_the_same_reading_is_a_repeat_and_another_channel_or_time_is_not() -> None:
    r = RecentReadings()
    assert r.judge([reading(1.0, 2.0)]) == ([reading(1.0, 2.0)], 0)
    assert r.judge([reading(1.0, 2.0)]) == ([], 1)
    assert r.judge([reading(1.0, 2.0, "lel2")]) == ([reading(1.0, 2.0, "lel2")], 0)
    assert r.judge([reading(2.0, 2.0)]) == ([reading(2.0, 2.0)], 0)


def test_another_value_at_the_same_instant_is_kept_as_a_bad_value_once() -> None:
    r = RecentReadings()
    r.judge([reading(1.0, 2.0)])
    (bad,), repeats = r.judge([reading(1.0, 3.0)])
    assert repeats == 0 and bad.quality is Quality.BAD_VALUE and bad.value is None and bad.time == 1.0
    assert bad.reason.startswith(CONFLICT) and "3.0" in bad.reason and "2.0 was recorded" in bad.reason
    assert r.judge([reading(1.0, 3.0)]) == ([], 1)  # the conflicting message again: already recorded


def test_seeded_from_the_record_a_redelivered_reading_is_a_repeat() -> None:
    r = RecentReadings()
    r.seed([reading(5.0, 1.5)])
    assert r.judge([reading(5.0, 1.5)]) == ([], 1)


def test_memory_is_bounded_to_the_last_size_readings() -> None:
    r = RecentReadings(size=3)
    for i in range(5):
        assert r.judge([reading(float(i), 1.0)])[1] == 0
    assert len(r._seen) == 3
    assert r.judge([reading(4.0, 1.0)])[1] == 1 and r.judge([reading(2.0, 1.0)])[1] == 1
    assert r.judge([reading(0.0, 1.0)])[1] == 0  # forgotten: long past any redelivery window
