"""Evidence before verdict, with a poll returning mid-round: an episode is recorded (and its alarm raised) only
once the flush that committed its reading has returned. A reading ingested while a round awaits its flush
makes its verdict wait for the next round; recorded in this one, a kill right after left an alarm whose
reading was never in the record, and the restart's reconcile cleared it (what the kill test once saw)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from config.loader import load_config
from monitor.app import Daemon
from monitor.sample import Sample
from monitor.stores.readonly import connect_readonly
from tests.faults.harness import SITE, channel, site_file, tcp_instrument
from tests.support import free_port


def recorded_rules(path: Path) -> list[tuple[str, str]]:
    conn = connect_readonly(path)
    try:
        return [(r, e) for r, e in conn.execute("SELECT rule, event FROM episode_events ORDER BY id")]
    finally:
        conn.close()


def committed(path: Path, ch: str) -> int:
    conn = connect_readonly(path)
    try:
        return int(conn.execute("SELECT count(*) FROM readings r JOIN channels c ON c.id = r.channel_id "
                                "WHERE c.channel = ?", (ch,)).fetchone()[0])
    finally:
        conn.close()


async def test_a_verdict_of_a_reading_ingested_during_the_flush_waits_for_the_next_round(tmp_path: Path) -> None:
    site = site_file(tmp_path, commit_interval=30.0,  # the writer commits when a flush asks, not on its own
                     instruments=[tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter"),
                                  tcp_instrument("flow-meter", port=free_port())],
                     channels=[channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01),
                               channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate")])
    config = load_config(site)
    daemon = Daemon(config=config)
    db = config.daemon.historian
    await daemon.historian.start()
    try:
        t = time.time()
        daemon.ingest([Sample(t, SITE, "ph", 4.4, "pH")])  # pH below 5.0: ph_low starts
        task = asyncio.create_task(daemon._deliver_verdicts())
        await asyncio.sleep(0)  # the round runs until it awaits the flush of the pH reading
        assert not task.done()
        daemon.ingest([Sample(t + 0.5, SITE, "flow", 12.0, "gpm")])  # the slug's no-baseline notice starts
        await task
        assert recorded_rules(db) == [("ph_low", "start")]  # the flow verdict waits: its reading may not be in
        assert committed(db, "ph") == 1
        await daemon._deliver_verdicts()
        assert recorded_rules(db) == [("ph_low", "start"), ("slug_no_baseline", "start")]
        assert committed(db, "flow") == 1
    finally:
        await daemon.historian.close()
        daemon.aggregates.close()
        await daemon.alarming.stop()
