"""Server-side downsampling for the console's charts, checked against a real historian file: every bucket's
min/max equals the readings', bad-quality slices are gaps, missing slices are absent; limits and episodes
come from the site's rules and the episode store; alarms are listed in display order."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.events import EpisodeEvent
from monitor.console import queries
from monitor.console.trends import trend
from monitor.read.readings import site_summary
from monitor.sample import Quality, Sample
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from tests.browser.harness import ACME, write_site

T0 = 1_790_000_000.0


def ph(t: float) -> float:
    return 7.0 + math.sin(t / 97.0) + (3.0 if 1000 <= t - T0 < 1010 else 0.0)  # a 10-second spike to ~10


@pytest.fixture
async def recorded(tmp_path: Path) -> SiteConfig:
    config = load_config(write_site(tmp_path))
    hist = Historian(path=config.daemon.historian, commit_interval=0.05)
    await hist.start()
    samples = []
    for i in range(7200):  # two hours at 1 s; 30 minutes of comm failures in the second hour; none after 6600 s
        t = T0 + i
        if 4000 <= i < 5800:
            samples.append(Sample.bad(time=t, site=ACME, channel="ph", unit="pH", quality=Quality.COMM_FAILURE,
                                      reason="timeout"))
        elif i < 6600:
            samples.append(Sample(time=t, site=ACME, channel="ph", value=ph(t), unit="pH"))
    hist.submit(samples)
    await hist.close()
    store = EpisodeStore(path=config.daemon.historian)
    store.record([EpisodeEvent(T0 + 1000, ACME, "ph", "ph_high", "start", 10.0, 9.0, "§ 112-5A(1)(c)"),
                  EpisodeEvent(T0 + 1010, ACME, "ph", "ph_high", "end", 8.9, 9.0, "§ 112-5A(1)(c)", 10.1)])
    store.close()
    return config


def test_buckets_hold_the_true_min_and_max_and_mark_gaps(recorded: SiteConfig) -> None:
    conn = queries.connect(recorded.daemon.historian)
    assert conn is not None
    site = recorded.site(ACME)
    out = trend(conn, recorded, site, "ph", start=T0, end=T0 + 7200, buckets=12, now=T0 + 7200)
    assert out["bucket_s"] == 600
    by_start = {round(t - T0): i for i, t in enumerate(out["t"])}
    assert sorted(by_start) == [i * 600 for i in range(11)]  # the 12th slice (6600 s on) has no reading
    for k in range(11):
        i = by_start[k * 600]
        good = [ph(T0 + s) for s in range(k * 600, (k + 1) * 600) if not 4000 <= s < 5800 and s < 6600]
        assert out["good"][i] == len(good) and out["total"][i] == 600
        assert (out["min"][i], out["max"][i]) == ((min(good), max(good)) if good else (None, None))
    assert out["max"][by_start[600]] == max(ph(T0 + s) for s in range(1000, 1010)) > 9  # the spike survives
    assert out["good"][by_start[4200]] == 0  # all bad: a data-quality gap, not a number
    assert [(e["rule"], e["status"], e["start"], e["end"]) for e in out["episodes"]] == [
        ("ph_high", "closed", T0 + 1000, T0 + 1010)]
    assert [(x["rule"], x["value"], x["side"]) for x in out["limits"]] == [("ph_low", 5.0, "low"),
                                                                           ("ph_high", 9.0, "high")]
    c = out["completeness"]
    assert (c["good"], c["expected"]) == (7200 - 1800 - 600, 7201)
    conn.close()


def test_a_window_is_bounded_and_ordered(recorded: SiteConfig) -> None:
    conn = queries.connect(recorded.daemon.historian)
    site = recorded.site(ACME)
    with pytest.raises(ValueError, match="after its start"):
        trend(conn, recorded, site, "ph", start=T0, end=T0, buckets=10, now=T0)
    with pytest.raises(ValueError, match="at most 31 days"):
        trend(conn, recorded, site, "ph", start=T0, end=T0 + 40 * 86400, buckets=10, now=T0)
    one = trend(conn, recorded, site, "ph", start=T0 + 10, end=T0 + 20, buckets=4000, now=T0 + 7200)
    assert one["good"] == [1] * 10 and one["min"] == one["max"]  # fine zoom: the readings themselves
    if conn is not None:
        conn.close()


def test_alarm_display_order() -> None:
    rows = [{"alarm": a, "state": s, "priority": p, "since": t} for a, s, p, t in [
        ("s/a/normal", "normal", "critical", 9.0), ("s/b/acked", "active-acknowledged", "critical", 8.0),
        ("s/c/old", "active-unacknowledged", "high", 1.0), ("s/d/new", "active-unacknowledged", "high", 5.0),
        ("s/e/crit", "active-unacknowledged", "critical", 0.5), ("s/f/shelved", "shelved", "critical", 7.0),
        ("s/g/latched", "latched-unacknowledged", "low", 3.0)]]
    assert [r["alarm"].split("/")[2] for r in sorted(rows, key=queries.alarm_sort_key)] == [
        "crit", "new", "old", "latched", "acked", "shelved", "normal"]


def test_missing_file_reads_as_nothing_recorded(tmp_path: Path) -> None:
    config = load_config(write_site(tmp_path))
    assert queries.connect(config.daemon.historian) is None
    summary = site_summary(None, config, config.site(ACME), now=T0)
    assert [c["last"] for c in summary["channels"]] == [None] * 4
    assert summary["sampler"] == {"sampler_temperature": ["sampler_temperature"], "sampler_count": ["sampler_count"]}
    out = trend(None, config, config.site(ACME), "ph", start=T0, end=T0 + 60, buckets=10, now=T0 + 60)
    assert out["t"] == [] and out["episodes"] == []
    sqlite3.connect(config.daemon.historian).close()
