"""The console's live follower (`monitor.console.events.Hub`) on a real alarm engine's SQLite file: after its
first read it rebuilds only the rows of the alarms that changed (and of one an industry saw), and what it holds
then equals a whole fresh read; a snapshot can leave the normal alarms out and is encoded once until a row
changes; an ongoing episode's peak is followed as readings arrive, without any alarm change."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.engine import AlarmEngine
from alarms.model import AlarmInput, Seen
from config.alarms import alarm_specs
from config.schema import SiteConfig
from monitor.checks.events import START, EpisodeEvent
from monitor.console import events as live
from monitor.console import queries
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian_db import open_for_writing
from tests.browser.harness import ACME, ACME_PH_HIGH, BOLT, BOLT_PH_HIGH, load, write_site

SITES = frozenset({ACME, BOLT})
CITATION = "§ 112-5A(1)(c)"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    config = load(write_site(tmp_path))
    db = config.daemon.historian
    now = time.time()
    conn = open_for_writing(db, busy_timeout=5.0)
    conn.execute("INSERT INTO channels (site, channel, unit) VALUES (?, 'ph', 'pH')", (ACME,))
    conn.close()
    store = EpisodeStore(path=db)
    store.record([EpisodeEvent(now - 600, ACME, "ph", "ph_high", START, 9.5, 9.0, citation=CITATION)])
    store.close()
    reading(db, now - 600, 9.5)
    engine = AlarmEngine(path=db, alarms=alarm_specs(config.sites, config.alarms), now=now)
    engine.apply(raise_(ACME, now - 600), now - 600)
    hub = live.Hub(db=db, config=config)
    hub.prime()
    try:
        yield {"config": config, "db": db, "engine": engine, "hub": hub, "now": now}
    finally:
        hub.close()
        engine.close()


def raise_(site: str, t: float) -> AlarmInput:
    return AlarmInput(time=t, site=site, channel="ph", rule="ph_high", active=True, value=9.5, limit=9.0,
                      citation=CITATION)


def reading(db: Path, t: float, value: float) -> None:
    conn = open_for_writing(db, busy_timeout=5.0)
    try:
        cid = conn.execute("SELECT id FROM channels WHERE site = ? AND channel = 'ph'", (ACME,)).fetchone()[0]
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM readings").fetchone()[0]
        conn.execute("INSERT INTO readings VALUES (?, ?, ?, ?, 0, '')", (cid, t, seq, value))
    finally:
        conn.close()


def whole(env: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every row as a fresh read of the whole list gives it."""
    conn = queries.connect(env["db"])
    assert conn is not None
    try:
        config: SiteConfig = env["config"]
        return {r["alarm"]: r for r in queries.alarms(conn, config, SITES)}
    finally:
        conn.close()


def sent(sub: live.Subscriber) -> list[tuple[str, Any]]:
    out = []
    while not sub.queue.empty():
        kind, data = sub.queue.get_nowait().decode().split("\n", 2)[:2]
        out.append((kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_only_the_changed_alarms_are_rebuilt_and_the_result_equals_a_whole_read(env: dict[str, Any]) -> None:
    hub, engine, now = env["hub"], env["engine"], env["now"]
    assert hub.rows == whole(env) and hub.rows[ACME_PH_HIGH]["state"] == "active-unacknowledged"
    sub, _ = hub.subscribe(sites=SITES)
    engine.apply(raise_(BOLT, now), now)
    changes = hub._poll(frozenset())
    assert changes.rows is None, "read whole again"
    assert [r["alarm"] for r in changes.updated] == [BOLT_PH_HIGH]
    hub._publish(changes)
    alarms = [d for k, d in sent(sub) if k == "alarm"]
    assert [(d["alarm"], d["state"]) for d in alarms] == [(BOLT_PH_HIGH, "active-unacknowledged")]
    engine.ack(ACME_PH_HIGH, user="op", now=now + 1)
    engine.act(BOLT_PH_HIGH, Seen(user="bolt"), now + 2)  # a remark: alarm_state does not change
    changes = hub._poll(frozenset())
    assert changes.rows is None and sorted(r["alarm"] for r in changes.updated) == [ACME_PH_HIGH, BOLT_PH_HIGH]
    hub._publish(changes)
    assert hub.rows == whole(env)
    assert hub.rows[ACME_PH_HIGH]["state"] == "active-acknowledged"
    assert [s["user"] for s in hub.rows[BOLT_PH_HIGH]["seen"]] == ["bolt"]
    assert hub._poll(frozenset()).updated == []  # nothing new


def test_a_snapshot_without_normal_alarms_encoded_once_until_a_row_changes(env: dict[str, Any]) -> None:
    hub, engine, now = env["hub"], env["engine"], env["now"]
    _, full = hub.subscribe(sites=SITES)
    _, standing = hub.subscribe(sites=SITES, normal=False)
    rows = json.loads(standing.decode().split("data: ", 1)[1])["alarms"]
    assert [r["alarm"] for r in rows] == [ACME_PH_HIGH]
    every = json.loads(full.decode().split("data: ", 1)[1])["alarms"]
    assert len(every) == len(hub.rows) > 1 and {r["state"] for r in every} >= {"normal"}
    assert hub.subscribe(sites=SITES, normal=False)[1] is standing  # kept, not encoded again
    _, acme = hub.subscribe(sites=frozenset({ACME}), normal=False)
    assert acme is not standing
    engine.apply(raise_(BOLT, now), now)
    hub._publish(hub._poll(frozenset()))
    again = hub.subscribe(sites=SITES, normal=False)[1]
    assert [r["alarm"] for r in json.loads(again.decode().split("data: ", 1)[1])["alarms"]] == [
        BOLT_PH_HIGH, ACME_PH_HIGH]  # both high, unacknowledged: the newest first


def test_the_peak_of_an_ongoing_episode_is_followed_without_an_alarm_change(env: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    hub, now = env["hub"], env["now"]
    assert hub.rows[ACME_PH_HIGH]["peak"] == 9.5
    sub, _ = hub.subscribe(sites=SITES)
    reading(env["db"], now - 300, 9.9)
    monkeypatch.setattr(live, "PEAK_INTERVAL", 0.0)
    changes = hub._poll(frozenset())
    assert changes.rows is None and [r["alarm"] for r in changes.updated] == [ACME_PH_HIGH]
    hub._publish(changes)
    assert [(d["alarm"], d["peak"]) for k, d in sent(sub) if k == "alarm"] == [(ACME_PH_HIGH, 9.9)]
    assert hub.rows == whole(env)


def test_a_fresh_record_at_the_same_path_is_followed(env: dict[str, Any], tmp_path: Path) -> None:
    """The daemon restarted on a fresh record (the old file moved aside, a new one made at the path): the
    alarm list follows the new file, not the old one the follower's connection still has open."""
    hub, config, db = env["hub"], env["config"], env["db"]
    assert hub.rows[ACME_PH_HIGH]["state"] == "active-unacknowledged"
    env["engine"].close()
    aside = tmp_path / "aside"
    aside.mkdir()
    for f in db.parent.glob(db.name + "*"):
        f.rename(aside / f.name)
    conn = open_for_writing(db, busy_timeout=5.0)
    conn.execute("INSERT INTO channels (site, channel, unit) VALUES (?, 'ph', 'pH')", (ACME,))
    conn.close()
    now = time.time()
    env["engine"] = engine = AlarmEngine(path=db, alarms=alarm_specs(config.sites, config.alarms), now=now)
    engine.apply(raise_(BOLT, now), now)
    hub._publish(hub._poll(frozenset()))
    assert hub.rows == whole(env)
    assert (hub.rows[ACME_PH_HIGH]["state"], hub.rows[BOLT_PH_HIGH]["state"]) == ("normal", "active-unacknowledged")
