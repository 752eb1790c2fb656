"""Obligations follow corrections of the episode record after late readings (`ObligationWatch.on_revisions`,
called by `Alarming.on_revisions`): an episode found late opens its obligations, a retracted one's are closed as
withdrawn and never overdue, a moved start's go to the corrected episode; every step journaled, nothing deleted.
The stores are the real SQLite files."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from alarms.journal import Journal
from config.schema import Site
from monitor.alarming import Alarming
from monitor.checks.events import END, START, EpisodeEvent
from monitor.checks.revisions import Revision
from monitor.obligation_watch import OBLIGATION_OVERDUE, RETRACTED, ObligationWatch
from monitor.stores import casefile as store
from tests.unit.checks_helpers import channel, load, site_toml

NY = "America/New_York"
T0 = datetime(2026, 3, 7, 15, 0, tzinfo=ZoneInfo(NY)).timestamp()
EP0 = "acme/ph/ph_low@2026-03-07T20:00:00Z"  # the episode starting at T0
LATER = T0 + 40 * 86400  # every deadline long past
OVERDUE_ID = f"acme/obligations/{OBLIGATION_OVERDUE}"


def _event(t: float, event: str = START) -> EpisodeEvent:
    return EpisodeEvent(time=t, site="acme", channel="ph", rule="ph_low", event=event, value=4.2, limit=5.0,
                        citation="Town of Wilson § 105-5C(1)")


def _revision(withdrawn: list[EpisodeEvent], added: list[EpisodeEvent], *, active: bool = False) -> Revision:
    return Revision("acme", "ph", "ph_low", withdrawn=tuple(withdrawn), added=tuple(added), late=T0, active=active)


@pytest.fixture()
def watched(tmp_path: Path) -> Iterator[tuple[Site, ObligationWatch]]:
    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="wilson", timezone=NY))
    journal = Journal(path=tmp_path / "pretreat.sqlite")
    yield config.sites[0], ObligationWatch(sites=config.sites, journal=journal)
    journal.close()


def _by_episode(conn: sqlite3.Connection, now: float) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for o in store.obligations(conn):
        out.setdefault(o.episode, []).append(o.status(now))
    return out


def _episode_with_notice_given(watch: ObligationWatch, recipient: str) -> dict[str, store.Obligation]:
    """The episode at T0 opened live, its immediate notice given a minute later: its obligations by key."""
    watch.on_episodes([_event(T0)], T0)
    ob = {o.key: o for o in store.obligations(watch.casefile.journal.connection)}
    watch.casefile.fulfil(ob["immediate_notice"].id, done_at=T0 + 60, how="telephone", recipient=recipient,
                          user="acme", now=T0 + 70)
    return ob


def test_an_episode_found_late_opens_its_obligations_once(watched: tuple[Site, ObligationWatch]) -> None:
    _, watch = watched
    conn = watch.casefile.journal.connection
    found = _revision([], [_event(T0), _event(T0 + 600, END)])
    opened, closed = watch.on_revisions([found], T0 + 3600)
    assert len(opened) == 4 and closed == []  # Wilson's two, the CFR's two, as a live start opens
    assert watch.on_revisions([found], T0 + 3601) == ([], [])  # replayed: nothing more
    assert list(_by_episode(conn, LATER)) == [EP0]
    # its deadlines run from the episode, so once past them the overdue alarm rises as for any episode
    raised = watch.inputs(LATER, lambda _id: False, force=True)
    assert [(i.rule, i.active) for i in raised] == [(OBLIGATION_OVERDUE, True)]
    assert watch.casefile.journal.verify().ok


def test_a_retracted_episode_closes_its_open_obligations_as_withdrawn_and_the_alarm_clears(
        watched: tuple[Site, ObligationWatch]) -> None:
    _, watch = watched
    cf = watch.casefile
    conn = cf.journal.connection
    ob = _episode_with_notice_given(watch, "Town")
    raised = watch.inputs(T0 + 2 * 86400, lambda _id: False, force=True)
    assert [i.active for i in raised] == [True]  # the 24-hour notice is overdue
    opened, closed = watch.on_revisions([_revision([_event(T0)], [])], T0 + 2 * 86400 + 5)
    assert opened == [] and sorted(closed) == sorted(o.id for k, o in ob.items() if k != "immediate_notice")
    after = {o.key: o for o in store.obligations(conn)}
    assert {k: o.status(LATER) for k, o in after.items()} == {
        "immediate_notice": "done", "notice_24h": "not required", "written_statement": "not required",
        "repeat_sampling": "not required"}  # the notice given stays on the record as given
    assert after["notice_24h"].closed == f"not required: episode withdrawn ({RETRACTED})"
    assert store.overdue_sites(conn, LATER) == {}
    cleared = watch.inputs(T0 + 2 * 86400 + 6, lambda _id: True)  # no force: the correction asks for a look now
    assert [i.active for i in cleared] == [False]
    kinds = [r.kind for r in cf.journal.records()]
    assert kinds.count("withdrawal") == 1 and kinds.count("obligation_closed") == 3
    assert len(store.obligations(conn)) == 4  # nothing deleted
    assert watch.on_revisions([_revision([_event(T0)], [])], LATER) == ([], [])  # replayed: nothing more
    assert cf.journal.verify().ok
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM episode_withdrawals")
    # the enforcement documents read the same closure from the file
    from monitor.reports.enforcement import open_record

    lines = {o.duty.split(" to ")[0]: o for o in open_record(cf.journal.path).obligations([EP0])}
    assert sorted(o.status(LATER) for o in lines.values()) == ["done", "not required", "not required",
                                                               "not required"]
    assert {o.closed for o in lines.values() if o.fulfilled is None} == {
        f"not required: episode withdrawn ({RETRACTED})"}


def test_a_moved_start_withdraws_the_old_episode_and_opens_the_corrected_one_carrying_the_notice_given(
        watched: tuple[Site, ObligationWatch]) -> None:
    _, watch = watched
    cf = watch.casefile
    conn = cf.journal.connection
    ob = _episode_with_notice_given(watch, "Town clerk")
    earlier = T0 - 1800  # late readings show the discharge began half an hour before
    opened, closed = watch.on_revisions([_revision([_event(T0)], [_event(earlier)], active=True)], T0 + 600)
    assert len(opened) == 4 and len(closed) == 3
    new_ep = "acme/ph/ph_low@2026-03-07T19:30:00Z"
    statuses = _by_episode(conn, LATER)
    assert sorted(statuses[EP0]) == ["done", "not required", "not required", "not required"]
    assert sorted(statuses[new_ep]) == ["done", "overdue", "overdue", "overdue"]
    moved = {o.key: o for o in store.obligations(conn, episode=new_ep)}
    assert moved["notice_24h"].onset == earlier and moved["notice_24h"].due == earlier + 86400  # from the new start
    notice = moved["immediate_notice"].done
    assert notice is not None and (notice.done_at, notice.how, notice.recipient, notice.user) == (
        T0 + 60, "telephone", "Town clerk", "acme")
    assert f"carried from obligation #{ob['immediate_notice'].id} of episode {EP0}" in notice.note
    old = {o.key: o for o in store.obligations(conn, episode=EP0)}
    assert old["notice_24h"].closed is not None and new_ep in old["notice_24h"].closed
    overdue = store.overdue_sites(conn, LATER)["acme"]
    assert {o.episode for o in overdue} == {new_ep}  # the alarm names the corrected episode only
    assert cf.journal.verify().ok


def test_a_retracted_episode_found_again_reopens_its_obligations(watched: tuple[Site, ObligationWatch]) -> None:
    _, watch = watched
    conn = watch.casefile.journal.connection
    watch.on_episodes([_event(T0)], T0)
    watch.on_revisions([_revision([_event(T0)], [])], T0 + 60)
    assert set(_by_episode(conn, LATER)[EP0]) == {"not required"}
    opened, closed = watch.on_revisions([_revision([], [_event(T0)])], T0 + 120)
    assert opened == [] and closed == []  # the same episode's obligations, not new ones
    assert sorted(_by_episode(conn, LATER)[EP0]) == ["outstanding", "overdue", "overdue", "overdue"]
    assert [r.kind for r in watch.casefile.journal.records()].count("reinstatement") == 1


def test_alarming_applies_revisions_to_obligations_first(tmp_path: Path) -> None:
    """The daemon's path: `Alarming.on_revisions` closes a retracted episode's obligations, and the overdue
    alarm, raised for them, clears at the next tick."""
    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="wilson", timezone=NY))
    alarming = Alarming(config=config, now=T0, influx=None)
    try:
        alarming.on_episodes([_event(T0)], T0)
        alarming.tick(T0 + 2 * 86400)
        assert alarming.engine.state(OVERDUE_ID).condition
        alarming.on_revisions([_revision([_event(T0)], [])], T0 + 2 * 86400 + 5)
        assert not alarming.engine.state("acme/ph/ph_low").condition  # the rule alarm: it never happened
        assert {o.status(LATER) for o in store.obligations(alarming.engine.journal.connection)} == {"not required"}
        alarming.tick(T0 + 2 * 86400 + 6)
        assert not alarming.engine.state(OVERDUE_ID).condition
        # and an episode found late opens obligations through the same path
        alarming.on_revisions([_revision([], [_event(T0 + 7200), _event(T0 + 7800, END)])], T0 + 2 * 86400 + 10)
        assert "acme/ph/ph_low@2026-03-07T22:00:00Z" in _by_episode(alarming.engine.journal.connection, LATER)
    finally:
        alarming.engine.close()
        alarming.commands.close()
