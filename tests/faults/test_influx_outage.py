"""The InfluxDB-protocol server (a real VictoriaMetrics) goes down for a few seconds and comes back while the
daemon records readings and raises an alarm: every reading the historian holds reaches the server exactly once
(VictoriaMetrics keeps duplicate points, so a point sent twice would show), and so does every alarm
transition; the historian, the record of evidence, never waited for the server."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from alarms.journal import Journal
from config.loader import load_config
from simulators.playback import Hold
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    by_channel,
    channel,
    duplicates,
    polled_rows,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.support import VictoriaMetrics, eventually, free_port


def influx_site(tmp_path: Path, url: str) -> Path:
    instruments = [tcp_instrument("flow-meter", port=free_port(), poll=0.5, timeout=0.3),
                   tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.5, timeout=0.3)]
    channels = [channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate", valid_min=0,
                        valid_max=2000),
                channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    top = (f'[influx]\nurl = "{url}"\nbucket = "pretreat"\nflush_interval = 0.1\nmax_backoff = 0.5\n'
           "timeout = 2.0\n")
    return site_file(tmp_path, instruments=instruments, channels=channels, top=top)


@pytest.mark.slow  # ~6 s; the sink's own outage test (tests/integration/test_influx_sink.py) runs by default
async def test_server_down_and_back_every_reading_and_alarm_arrives_once(tmp_path: Path,
                                                                         victoria: VictoriaMetrics) -> None:
    config = load_config(influx_site(tmp_path, victoria.url))
    async with SiteSimulator(config=config) as sim, InProcessDaemon(config) as daemon:
        sink = daemon.influx
        assert sink is not None
        await asyncio.sleep(1.5)
        victoria.stop()
        sim.playback.overrides.setdefault(SITE, {})["ph"] = Hold(4.2)  # an alarm raised during the outage
        await asyncio.sleep(3.0)
        written_during = daemon.historian.counters.samples_written
        c = sink.counters  # a snapshot
        assert c.write_errors > 0 and not c.server_up and c.queue_depth > 0, c
        victoria.start()
        sim.playback.overrides[SITE].pop("ph")
        assert await eventually(lambda: sink.counters.server_up and sink.counters.queue_depth == 0, 30)
        await asyncio.sleep(1.0)
    assert written_during > 0  # the historian kept recording while the server was away
    rows = recorded(config.daemon.historian)
    assert duplicates(rows) == []
    channels = by_channel(rows)
    for cid, inst in (("flow", "flow-meter"), ("ph", "ph-meter")):
        assert len(polled_rows(channels[cid])) == daemon.stats[f"{SITE}/{inst}"].polls

    # every reading, good or bad, as one point (its `quality` field) at its millisecond, once
    series = victoria.wait_for_points('{__name__=~"(flow|ph)_quality"}', len(rows))
    sent = Counter((s["metric"]["channel"], ts) for s in series for ts in s["timestamps"])
    expected = Counter((r.channel, round(r.time * 1000)) for r in rows)
    assert sent == expected, (len(sent), len(expected), list((sent - expected).items())[:3],
                              list((expected - sent).items())[:3])
    # good values arrive as numbers, bad readings without one
    values = {(s["metric"]["channel"], ts): v for s in victoria.export('{__name__=~"(flow|ph)_value"}')
              for ts, v in zip(s["timestamps"], s["values"], strict=True)}
    assert {k for k in values} == {(r.channel, round(r.time * 1000)) for r in rows if r.good}

    journal = Journal(path=config.daemon.historian)
    transitions = list(journal.records(kinds=["transition"]))
    journal.close()
    assert any(r.payload["alarm"] == f"{SITE}/ph/ph_low" and r.payload["kind"] == "raise" for r in transitions)
    alarms = victoria.wait_for_points('{__name__="pretreat_alarm_to_state"}', len(transitions))
    assert sum(len(s["timestamps"]) for s in alarms) == len(transitions)
