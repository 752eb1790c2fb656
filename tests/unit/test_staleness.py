"""Staleness is judged on the clock tick, including for a channel that never reported."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from config.loader import SITES_DIR, load_config
from monitor import staleness
from monitor.checks.engine import CheckEngine
from monitor.sample import Quality, Sample
from monitor.staleness import StalenessTracker
from tests.unit.checks_helpers import Record


def test_quiet_channel_goes_stale_once_and_recovers() -> None:
    cfg = load_config(SITES_DIR / "demo.toml")
    t0 = 1_000_000.0
    tr = StalenessTracker(config=cfg, now=t0)
    window = tr.window("acme-plating", "ph")
    assert window == 3.0  # 1 s poll interval x 3 polls (daemon default)
    good = Sample(time=t0, site="acme-plating", channel="ph", value=7.0, unit="pH")
    # every channel reports except ph; at exactly the window nothing is stale (strictly more than)
    others = [Sample(time=t0, site=c.site, channel=c.id, value=1.0, unit=c.unit)
              for c in cfg.channels if c.id != "ph"]
    tr.observe(others, t0 + window)
    assert tr.tick(t0 + window) == []
    out = tr.tick(t0 + window + 0.1)
    assert [(s.channel, s.quality) for s in out] == [("ph", Quality.STALE)]
    assert out[0].value is None and "no good reading" in out[0].reason
    assert tr.tick(t0 + window + 5) == [] or all(s.channel != "ph" for s in tr.tick(t0 + window + 5))
    # a bad sample does not clear staleness; a good one does
    tr.observe([Sample.bad(time=t0, site="acme-plating", channel="ph", unit="pH",
                           quality=Quality.COMM_FAILURE, reason="timeout")], t0 + 10)
    assert ("acme-plating", "ph") in tr.stale_channels()
    tr.observe([good], t0 + 11)
    assert ("acme-plating", "ph") not in tr.stale_channels()


def test_windows_count_from_the_start_of_polling_not_from_construction() -> None:
    """Start-up rebuilds rule state from the record before the first poll; on a large record that takes longer
    than a window, and every channel used to go stale before it had been polled once."""
    cfg = load_config(SITES_DIR / "demo.toml")
    built = 1_000_000.0
    tr = StalenessTracker(config=cfg, now=built)
    polling = built + 60.0  # a minute of warm-up
    tr.restart(polling)
    assert tr.tick(polling + 1.0) == []
    stale = tr.tick(polling + tr.window("acme-plating", "ph") + 0.1)
    assert ("acme-plating", "ph") in {(s.site, s.channel) for s in stale}


def test_an_lel_meter_saturated_above_its_span_is_reporting_not_stale() -> None:
    cfg = load_config(SITES_DIR / "demo.toml")
    t0 = 1_000_000.0
    tr = StalenessTracker(config=cfg, now=t0)
    window = tr.window("acme-plating", "lel")
    others = [Sample(time=t0, site=c.site, channel=c.id, value=1.0, unit=c.unit)
              for c in cfg.channels if c.id != "lel"]
    for k in range(1, 6):  # 120 % LEL every second for five seconds: longer than the window
        tr.observe([*others, Sample(time=t0 + k, site="acme-plating", channel="lel", value=120.0, unit="%LEL",
                                    quality=Quality.OVER_RANGE, reason="above the span")], t0 + k)
        assert tr.tick(t0 + k + 0.5) == [], k
    assert window < 5


def test_an_instrument_in_maintenance_is_answering_not_stale_but_a_fault_is_no_reading() -> None:
    """A calibration longer than the window is the device saying so, not silence; a fault bit is no reading."""
    cfg = load_config(SITES_DIR / "demo.toml")
    t0 = 1_000_000.0
    tr = StalenessTracker(config=cfg, now=t0)
    window = tr.window("acme-plating", "ph")
    others = [Sample(time=t0, site=c.site, channel=c.id, value=1.0, unit=c.unit)
              for c in cfg.channels if c.id != "ph"]
    for k in range(1, 6):  # five seconds of calibration: longer than the window
        tr.observe([*others, Sample.bad(time=t0 + k, site="acme-plating", channel="ph", unit="pH",
                                        quality=Quality.MAINTENANCE, reason="instrument in maintenance")], t0 + k)
        assert tr.tick(t0 + k + 0.5) == [], k
    assert window < 5
    for k in range(6, 11):
        tr.observe([*others, Sample.bad(time=t0 + k, site="acme-plating", channel="ph", unit="pH",
                                        quality=Quality.DEVICE_FAULT, reason="instrument fault")], t0 + k)
    assert ("acme-plating", "ph") in {(s.site, s.channel) for s in tr.tick(t0 + 10.5)}


def test_many_channels_stale_at_once_log_a_few_lines_and_a_summary_but_record_every_one(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """1,000 devices whose first replies come late make 10,000 channels stale at one tick: one warning line
    each held the event loop for seconds. The first LOG_EACH are logged, then one line with the count; every
    channel still gets its STALE sample (the record is complete, the log is for the operator)."""
    monkeypatch.setattr(staleness, "LOG_EACH", 2)
    cfg = load_config(SITES_DIR / "demo.toml")
    assert len(cfg.channels) > 3
    tr = StalenessTracker(config=cfg, now=0.0)
    with caplog.at_level(logging.WARNING, logger="monitor.staleness"):
        out = tr.tick(10_000.0)
    assert {(s.site, s.channel) for s in out} == {(c.site, c.id) for c in cfg.channels}
    assert all(s.quality is Quality.STALE for s in out)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert all(" stale: no good reading for " in line for line in lines[:2])
    assert lines[2].startswith(f"{len(out) - 2} more channels stale ({len(out)} in all")


# A device clock ahead of the daemon's (MQTT readings up to 300 s ahead are honoured and judged at their time).
# The two clocks are unrelated numbers on purpose: the tracker measures arrival on one and stamps with the other.
MONO = 5_000.0  # the daemon's monotonic clock when the pH channel's last readings arrive
WALL = 1_790_000_000.0  # its wall clock at that moment
AHEAD = 64.0  # the last reading's stamp leads the wall clock by this much


def _ph(t: float) -> Sample:
    return Sample(time=t, site="acme-plating", channel="ph", value=7.0, unit="pH")


def _ph_stale(out: Sequence[Sample]) -> list[Sample]:
    return [s for s in out if s.channel == "ph"]


def _future_then_silence(tr: StalenessTracker) -> list[Sample]:
    """Readings at WALL..WALL+3 arriving on time, then one stamped WALL+64 arriving a second later, then
    nothing; ticks every 0.5 s for 100 s on both clocks (they advance together). Returns the pH STALE samples."""
    for k in range(4):
        tr.observe([_ph(WALL + k)], MONO + k)
    tr.observe([_ph(WALL + AHEAD)], MONO + 4)
    out: list[Sample] = []
    for i in range(9, 200):
        out += _ph_stale(tr.tick(MONO + i / 2, stamp=WALL + i / 2))
    return out


def test_a_reading_stamped_ahead_holds_the_channel_fresh_only_until_its_own_time_plus_the_window() -> None:
    """The STALE sample the arrival clock makes is stamped before the future reading, so the record's stale
    episode ends at that reading: once the wall clock is past its time by the window the channel is stale
    again, with a second STALE sample stamped then (and no third while it stays silent)."""
    cfg = load_config(SITES_DIR / "demo.toml")
    tr = StalenessTracker(config=cfg, now=MONO)
    window = tr.window("acme-plating", "ph")
    out = _future_then_silence(tr)
    assert [s.quality for s in out] == [Quality.STALE, Quality.STALE]
    first, second = out
    # by arrival: the last reading came at MONO + 4; the first tick more than a window later
    assert first.time == WALL + 4 + window + 0.5
    assert first.time < WALL + AHEAD
    # by the reading's own time: the first tick more than a window past it
    assert second.time == WALL + AHEAD + window + 0.5
    assert "newest reading's own time" in second.reason and f"window {window:g} s" in second.reason
    assert ("acme-plating", "ph") in tr.stale_channels()


def test_readings_on_time_or_behind_make_one_stale_sample_only() -> None:
    """A device clock that lags (or one on time) is judged on arrival alone: one STALE sample, however long the
    silence, and the wall clock does not make it stale sooner (readings stamped a minute behind, arriving)."""
    cfg = load_config(SITES_DIR / "demo.toml")
    tr = StalenessTracker(config=cfg, now=MONO)
    window = tr.window("acme-plating", "ph")
    for k in range(10):
        tr.observe([_ph(WALL + k - 60)], MONO + k)
        assert _ph_stale(tr.tick(MONO + k + 0.5, stamp=WALL + k + 0.5)) == []
    out: list[Sample] = []
    for i in range(20, 400):
        out += _ph_stale(tr.tick(MONO + i / 2, stamp=WALL + i / 2))
    assert [s.time for s in out] == [WALL + 9 + window + 0.5]


def test_a_good_reading_clears_a_stale_channel_and_a_new_future_one_starts_the_judgement_again() -> None:
    cfg = load_config(SITES_DIR / "demo.toml")
    tr = StalenessTracker(config=cfg, now=MONO)
    window = tr.window("acme-plating", "ph")
    tr.observe([_ph(WALL + AHEAD)], MONO)
    assert len(_ph_stale(tr.tick(MONO + window + 1, stamp=WALL + window + 1))) == 1
    # another reading from ahead, arriving while the channel is stale: reporting again
    tr.observe([_ph(WALL + 2 * AHEAD)], MONO + window + 2)
    assert ("acme-plating", "ph") not in tr.stale_channels()
    # it is past the first future reading's time plus the window: no STALE sample for that one any more
    assert _ph_stale(tr.tick(MONO + window + 3, stamp=WALL + AHEAD + window + 3)) == []
    # stale by arrival a window later, then again after the newer reading's own time
    again = _ph_stale(tr.tick(MONO + 2 * window + 3, stamp=WALL + 2 * window + 3))
    assert [s.time for s in again] == [WALL + 2 * window + 3]
    assert _ph_stale(tr.tick(MONO + 200, stamp=WALL + 2 * AHEAD + window)) == []  # at exactly the window: not
    last = _ph_stale(tr.tick(MONO + 201, stamp=WALL + 2 * AHEAD + window + 0.1))
    assert [s.time for s in last] == [WALL + 2 * AHEAD + window + 0.1]


def test_the_stale_episode_opens_again_after_the_future_reading() -> None:
    """Through the daemon's check engine (judging every reading at its own time): the first STALE sample is
    judged before the future reading, whose time ends that episode; the second opens one that stays open."""
    cfg = load_config(SITES_DIR / "demo.toml")
    tr = StalenessTracker(config=cfg, now=MONO)
    window = tr.window("acme-plating", "ph")
    engine = CheckEngine.for_config(cfg, live=True)
    rec = Record()
    for k in range(4):
        tr.observe([_ph(WALL + k)], MONO + k)
        rec.record(engine.process_many([_ph(WALL + k)]))
    tr.observe([_ph(WALL + AHEAD)], MONO + 4)
    rec.record(engine.process_many([_ph(WALL + AHEAD)]))
    for i in range(9, 200):
        stale = _ph_stale(tr.tick(MONO + i / 2, stamp=WALL + i / 2))
        rec.record(engine.process_many(stale))  # the daemon: STALE samples go through ingest
        rec.revise(engine.drain_revisions())
    episodes = sorted(((e.event, e.time) for e in rec.events() if e.channel == "ph" and e.rule == "stale"),
                      key=lambda ev: ev[1])
    assert episodes == [("start", WALL + 4 + window + 0.5), ("end", WALL + AHEAD),
                        ("start", WALL + AHEAD + window + 0.5)]
