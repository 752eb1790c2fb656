"""The daemon guards its own record (issue 15): it checks the record at start and reports a tampered one loudly
without stopping; and when its historian file is deleted or swapped while it runs, it notices at the next
commit, does not count that commit as durable, alarms, and re-creates the file with nothing lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.journal import BREAK, Journal
from config.loader import load_config
from config.schema import SiteConfig
from monitor import cli
from monitor.health import health_path
from monitor.read.status import collect
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    by_channel,
    channel,
    duplicates,
    mqtt_notify,
    polled_rows,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.notify_servers import MqttProbe
from tests.support import PATIENCE, Mosquitto, eventually, free_port

ALARM = f"{SITE}/record/record_integrity"


@pytest.fixture
def config(tmp_path: Path) -> Iterator[SiteConfig]:
    instruments = [tcp_instrument("flow-meter", port=free_port(), poll=0.25, timeout=0.2)]
    channels = [channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000)]
    yield load_config(site_file(tmp_path, instruments=instruments, channels=channels))


def tamper(db: Path) -> int:
    """Alter a journal record (dropping the trigger that refuses it) and delete an episode row."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TRIGGER journal_no_update")
        seq = conn.execute("SELECT min(seq) FROM journal WHERE kind = 'episode_event'").fetchone()[0]
        conn.execute("UPDATE journal SET payload = replace(payload, '4.1', '5.1') WHERE seq = ?", (seq,))
        conn.execute("DELETE FROM episode_events WHERE event = 'end'")
        conn.commit()
    return int(seq)


async def test_a_tampered_record_is_reported_at_start_and_the_daemon_keeps_recording(
        config: SiteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.checks.events import EpisodeEvent
    from monitor.stores.episodes import EpisodeStore

    db = config.daemon.historian
    store = EpisodeStore(path=db)
    store.record([EpisodeEvent(1.7e9, SITE, "ph", "ph_low", "start", 4.1, 5.0, "§ 112-5A(1)(c)"),
                  EpisodeEvent(1.7e9 + 60, SITE, "ph", "ph_low", "end", 6.0, 5.0, "§ 112-5A(1)(c)", 3.9)])
    store.close()
    bad = tamper(db)
    async with SiteSimulator(config=config), InProcessDaemon(config) as daemon:
        guard = daemon.guard
        assert await eventually(lambda: guard.state != "checking", PATIENCE)
        assert guard.state == "failing"
        # the chain's finding comes first; the episodes' comparison may follow it on a loaded machine
        assert await eventually(lambda: any(f"journal record {bad} altered" in p for p in guard.problems)
                                and any("episode event missing" in p and "ph_low end" in p for p in guard.problems),
                                PATIENCE), guard.problems
        assert daemon.alarming.engine.state(ALARM).active
        written = daemon.historian.counters.samples_written
        assert await eventually(lambda: daemon.historian.counters.samples_written > written + 4, PATIENCE)  # goes on
        assert await eventually(lambda: health_path(db).exists()
                                and "record integrity" in str(collect(config).problems), PATIENCE)
    report = collect(config)  # (stopped now: status reads the last snapshot)
    journal = Journal(path=db)
    breaks = list(journal.records(kinds=[BREAK]))
    journal.close()
    assert len(breaks) == 1 and breaks[0].payload["first_bad"] == bad
    assert report.snapshot is not None and report.snapshot["record"]["state"] == "failing"
    assert cli.main(["journal", "verify", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert out.count("chain break (marked by the daemon)") == 1 and f"record {bad} altered" in out
    assert "marked break(s), intact after the last" in out  # checked again from the marker on
    # The daemon recorded events of its own after the deleted last row (its flow has no slug baseline yet):
    # they were given new ids, so the deleted end is still named. (Given the end's id, as SQLite does by
    # default, the first of them had taken its place, and the start-up check had missed the deletion when it
    # ran after that event was recorded.)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT min(id) FROM episode_events WHERE rule = 'slug_no_baseline'").fetchone()[0] > 2
    assert "episode event missing: plant/ph 2023-11-14 2023-11-14T22:14:20Z: ph_low end (id 2)" in out, out


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_the_historian_file_deleted_or_replaced_while_running_is_recreated_with_nothing_lost(
        config: SiteConfig, how: str) -> None:
    db = config.daemon.historian
    async with SiteSimulator(config=config), InProcessDaemon(config) as daemon:
        counters = daemon.historian.counters
        assert await eventually(lambda: counters.samples_written > 20, PATIENCE)
        if how == "deleted":
            db.unlink()
        else:  # an edited copy swapped in for the original
            other = db.with_name("edited.sqlite")
            with contextlib.closing(sqlite3.connect(db)) as src, contextlib.closing(sqlite3.connect(other)) as dst:
                src.backup(dst)
                dst.execute("DELETE FROM readings WHERE seq < 5")
                dst.commit()
            os.replace(other, db)
        assert await eventually(lambda: counters.file_losses == 1, PATIENCE), counters.as_dict()
        assert await eventually(lambda: daemon.guard.state == "failing", PATIENCE)
        assert any(how in p for p in daemon.guard.problems), daemon.guard.problems
        assert await eventually(lambda: daemon.alarming.engine.state(ALARM).active, PATIENCE)
        written = counters.samples_written
        assert await eventually(lambda: counters.samples_written > written + 8, PATIENCE)  # recording goes on
    rows = recorded(db)
    assert duplicates(rows) == []
    assert len(polled_rows(by_channel(rows)["flow"])) == daemon.stats[f"{SITE}/flow-meter"].polls  # nothing lost
    journal = Journal(path=db)
    why = [r.payload for r in journal.records(kinds=["historian_recreated"])]
    assert journal.verify().ok
    journal.close()
    assert len(why) == 1 and how in why[0]["reason"]
    aside = [p.name for p in db.parent.iterdir() if ".replaced-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == (1 if how == "replaced" else 0)


async def test_a_sealing_pass_anchors_the_chain_head_in_the_file_and_retained_on_mqtt(
        tmp_path: Path, mosquitto: Mosquitto) -> None:
    """A complete day recorded earlier is sealed by the daemon's pass (a worker thread); the new chain head is
    appended to the anchor file and retained on ``<prefix>/journal/head``, where a subscriber that comes later
    still finds it; `journal verify --anchor FILE` accepts the record, and fails once the tail is cut off."""
    import json
    import time

    from monitor.sample import Sample
    from monitor.stores.historian import Historian
    from monitor.stores.seal_verify import read_anchors
    from monitor.stores.seals import anchor_path

    instruments = [tcp_instrument("flow-meter", port=free_port(), poll=0.25, timeout=0.2)]
    channels = [channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000)]
    config = load_config(site_file(tmp_path, instruments=instruments, channels=channels,
                                   top=mqtt_notify(mosquitto.port)))
    db = config.daemon.historian
    old_day = (time.time() // 86_400 - 3) * 86_400
    history = Historian(path=db)
    await history.start()
    history.submit([Sample(time=old_day + i * 60, site=SITE, channel="flow", value=float(i), unit="gpm")
                    for i in range(1440)])
    await history.close()
    async with SiteSimulator(config=config), InProcessDaemon(config) as daemon:
        # the recorded day, and (once the late-data window has passed) the empty days after it: at least one
        assert await daemon.guard.seal() >= 1
        assert daemon.guard.sealer.stats.readings == 1440
        anchors = read_anchors(anchor_path(db))
        assert len(anchors) == 1
        head_topic = "pretreat/faults/journal/head"
        first = MqttProbe(mosquitto.port, [head_topic]).start()
        try:  # published (now, or when the alarm link connects)
            assert await asyncio.to_thread(first.wait_for, head_topic, 1)
        finally:
            first.stop()
        later = MqttProbe(mosquitto.port, [head_topic]).start()  # a subscriber that comes afterwards
        try:
            heads = await asyncio.to_thread(later.wait_for, head_topic, 1)
        finally:
            later.stop()
    assert heads and heads[0].retain
    head = json.loads(heads[0].payload)
    assert (head["seq"], head["hash"]) == anchors[0]
    assert cli.main(["journal", "verify", "--db", str(db), "--anchor", str(anchor_path(db))]) == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TRIGGER journal_no_delete")
        conn.execute("DELETE FROM journal WHERE seq >= ?", (anchors[0][0],))
        conn.execute("DELETE FROM alarm_state")  # a careful adversary removes this witness too
        conn.commit()
    assert cli.main(["journal", "verify", "--db", str(db), "--anchor", str(anchor_path(db))]) == 1
