"""Staleness is judged on the clock tick, including for a channel that never reported."""

from __future__ import annotations

import logging

import pytest

from config.loader import SITES_DIR, load_config
from monitor import staleness
from monitor.sample import Quality, Sample
from monitor.staleness import StalenessTracker


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
