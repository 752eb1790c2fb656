"""The case file store: obligations opened once per confirmed episode, fulfilment, invalidation, uploaded files,
every step in the hash-chained journal, nothing changed or deleted; and the overdue-obligation alarm inputs."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from alarms.journal import Journal
from config.schema import Site
from monitor.checks.events import END, START, EpisodeEvent
from monitor.obligation_watch import OBLIGATION_OVERDUE, ObligationWatch
from monitor.stores import casefile as store
from monitor.stores.casefile import CaseFile, CaseFileError
from tests.unit.checks_helpers import channel, load, site_toml

NY = "America/New_York"
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\n%%EOF\n"
T0 = datetime(2026, 3, 7, 15, 0, tzinfo=ZoneInfo(NY)).timestamp()


def _event(rule: str = "ph_low", *, t: float = T0, event: str = START, confirmed: float | None = None,
           site: str = "acme") -> EpisodeEvent:
    return EpisodeEvent(time=t, site=site, channel="ph", rule=rule, event=event, value=4.2, limit=5.0,
                        citation="Town of Wilson § 105-5C(1)", confirmed=confirmed)


@pytest.fixture()
def site_and_file(tmp_path: Path) -> Iterator[tuple[Site, CaseFile]]:
    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="wilson", timezone=NY))
    db = tmp_path / "pretreat.sqlite"
    cf = CaseFile(Journal(path=db))
    yield config.sites[0], cf
    cf.close()


def _kinds(cf: CaseFile) -> list[str]:
    return [r.kind for r in cf.journal.records()]


def test_a_confirmed_violation_opens_its_obligations_once_each_journaled(site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    made = cf.open_obligations(site, [_event(), _event("stale"), _event(event=END, t=T0 + 60)], T0 + 1)
    assert len(made) == 4  # Wilson's two, the CFR's two; a data-quality episode and an end open nothing
    assert cf.open_obligations(site, [_event()], T0 + 2) == []  # idempotent: a replayed start opens nothing new
    found = store.obligations(cf.journal.connection, site="acme")
    assert [(o.source, o.key) for o in found] == [("wilson", "immediate_notice"), ("federal", "notice_24h"),
                                                  ("wilson", "written_statement"), ("federal", "repeat_sampling")]
    assert {o.episode for o in found} == {"acme/ph/ph_low@2026-03-07T20:00:00Z"}
    assert _kinds(cf) == ["obligation"] * 4
    assert cf.journal.verify().ok
    assert all(o.status(T0 + 2) == "open" for o in found[1:]) and found[0].status(T0 + 2) == "outstanding"
    assert found[0].due_text == "immediately (no period stated)"  # no zero-second deadline to be late against


def test_awareness_is_the_confirmation_of_a_duration_rule(site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    cf.open_obligations(site, [_event("ph_excursion_duration", confirmed=T0 + 3600)], T0 + 3600)
    by_key = {o.key: o for o in store.obligations(cf.journal.connection)}
    assert by_key["immediate_notice"].due == T0 + 3600 and by_key["notice_24h"].due == T0 + 3600 + 86400
    assert by_key["immediate_notice"].onset == T0


def test_fulfilment_how_to_whom_when_and_the_written_report(site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    cf.open_obligations(site, [_event()], T0)
    by_key = {o.key: o for o in store.obligations(cf.journal.connection)}
    cf.fulfil(by_key["immediate_notice"].id, done_at=T0 + 600, how="telephone", recipient="Town clerk",
              user="acme", now=T0 + 700)
    with pytest.raises(CaseFileError, match="written report"):
        cf.fulfil(by_key["written_statement"].id, done_at=T0, how="letter", recipient="Town", user="acme", now=T0)
    with pytest.raises(CaseFileError, match="required"):
        cf.fulfil(by_key["notice_24h"].id, done_at=T0, how=" ", recipient="CA", user="acme", now=T0)
    report = cf.store_file(PDF, name="../../etc/statement.pdf", user="acme", now=T0)
    assert report.name == "statement.pdf" and report.sha256 == hashlib.sha256(PDF).hexdigest()
    assert store.file_path(cf.journal.path, report.sha256).read_bytes() == PDF
    cf.fulfil(by_key["written_statement"].id, done_at=T0 + 86400, how="letter", recipient="Town",
              user="acme", now=T0 + 86400, report=report.sha256)
    now = T0 + 2 * 86400
    status = {o.key: o.status(now) for o in store.obligations(cf.journal.connection)}
    assert status == {"immediate_notice": "done", "written_statement": "done", "notice_24h": "overdue",
                      "repeat_sampling": "open"}  # "immediately" states no period: met, never "done late"
    assert _kinds(cf)[-3:] == ["fulfilment", "file", "fulfilment"]
    assert cf.journal.verify().ok


def test_files_are_content_addressed_size_limited_and_typed(site_and_file: tuple[Site, CaseFile]) -> None:
    _site, cf = site_and_file
    a = cf.store_file(PDF, name="a.pdf", user="acme", now=T0)
    assert cf.store_file(PDF, name="b.pdf", user="acme", now=T0 + 1) == a  # the same bytes are the same file
    with pytest.raises(CaseFileError, match="not an accepted file"):
        cf.store_file(b"MZ\x90\x00 not a pdf", name="x.pdf", user="acme", now=T0)
    with pytest.raises(CaseFileError, match="at most"):
        cf.store_file(b"%PDF-" + b"0" * store.MAX_FILE, name="big.pdf", user="acme", now=T0)
    assert _kinds(cf) == ["file"]


def test_invalidation_stays_once_and_nothing_is_changed_or_deleted(site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    cf.open_obligations(site, [_event()], T0)
    ep = "acme/ph/ph_low@2026-03-07T20:00:00Z"
    with pytest.raises(CaseFileError, match="justification"):
        cf.invalidate(ep, site="acme", reason="  ", user="enf", now=T0)
    cf.invalidate(ep, site="acme", reason="pH probe failed its calibration check", user="enf", now=T0 + 5)
    with pytest.raises(CaseFileError, match="already"):
        cf.invalidate(ep, site="acme", reason="again, for the same reason", user="enf", now=T0 + 6)
    conn = cf.journal.connection
    assert store.invalid_episodes(conn, site="acme")[ep].reason == "pH probe failed its calibration check"
    for sql in ("UPDATE episode_invalidations SET reason = 'x'", "DELETE FROM episode_invalidations",
                "DELETE FROM obligations", "UPDATE obligations SET due = 0"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    assert _kinds(cf)[-5:] == ["invalidation"] + ["obligation_closed"] * 4 and cf.journal.verify().ok


def test_the_read_api_on_a_file_without_the_tables(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "empty.sqlite")
    assert store.obligations(conn) == [] and store.invalid_episodes(conn) == {}
    assert store.invalidation(conn, "x") is None and store.overdue_sites(conn, T0) == {}


def test_the_overdue_alarm_rises_when_a_deadline_passes_and_clears_when_done(
        site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    watch = ObligationWatch(sites=[site], journal=cf.journal)
    state = {"on": False}
    made = watch.on_episodes([_event()], T0)
    assert len(made) == 4
    first = watch.inputs(T0, lambda _id: state["on"])
    assert first == []  # due at the confirmation itself: not yet past it
    # "immediately" states no period: from the confirmation on the notice is outstanding, and the alarm says so
    raised = watch.inputs(T0 + 1, lambda _id: state["on"], force=True)
    assert [(i.site, i.channel, i.rule, i.active) for i in raised] == [("acme", "obligations", OBLIGATION_OVERDUE,
                                                                        True)]
    assert "Town of Wilson § 105-7E(8)" in raised[0].citation
    assert "notice outstanding" in raised[0].citation and "overdue" not in raised[0].citation
    state["on"] = True
    assert watch.inputs(T0 + 2, lambda _id: state["on"], force=True) == []  # unchanged: nothing to say
    ob = {o.key: o for o in store.obligations(cf.journal.connection)}
    cf.fulfil(ob["immediate_notice"].id, done_at=T0 + 1, how="telephone", recipient="Town", user="acme", now=T0 + 3)
    cleared = watch.inputs(T0 + 4, lambda _id: state["on"], force=True)
    assert [(i.rule, i.active) for i in cleared] == [(OBLIGATION_OVERDUE, False)]
    # a day and a bit later the 24-hour notice is overdue too
    again = watch.inputs(T0 + 86401, lambda _id: False, force=True)
    assert [i.active for i in again] == [True] and "403.12(g)(2)" in again[0].citation


def test_an_episode_split_by_a_data_gap_keeps_the_obligations_of_its_first_part(
        site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    watch = ObligationWatch(sites=[site], journal=cf.journal)
    assert len(watch.on_episodes([_event()], T0)) == 4
    gap_end = EpisodeEvent(time=T0 + 60, site="acme", channel="ph", rule="ph_low", event=END, value=4.3, limit=5.0,
                           citation="x", end_reason="gap")
    assert watch.on_episodes([gap_end, _event(t=T0 + 600)], T0 + 600) == []  # the same discharge, resumed
    assert len(watch.on_episodes([_event(t=T0 + 7200)], T0 + 7200)) == 4  # a new episode after a clear end


def test_a_fulfilment_before_the_episode_started_is_refused(site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    [first, *_] = cf.open_obligations(site, [_event()], T0)
    with pytest.raises(CaseFileError, match="before the episode started"):
        cf.fulfil(first, done_at=T0 - 3600, how="telephone", recipient="Town", user="acme", now=T0 + 5)
    with pytest.raises(CaseFileError, match="no obligation"):
        cf.fulfil(9999, done_at=T0, how="telephone", recipient="Town", user="acme", now=T0 + 5)


def test_a_restart_leaves_the_overdue_alarm_to_the_watch(tmp_path: Path) -> None:
    """`warmup.reconcile` brings rule alarms in line with the rebuilt episodes; the overdue alarm is no episode's,
    so a restart must neither clear it nor raise it (the watch does, on the clock tick)."""
    from alarms.engine import AlarmEngine
    from alarms.model import AlarmInput
    from monitor.checks.engine import CheckEngine
    from monitor.obligation_watch import obligation_alarm_specs
    from monitor.warmup import reconcile

    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="wilson", timezone=NY))
    engine = AlarmEngine(path=tmp_path / "a.sqlite", alarms=obligation_alarm_specs(config.sites), now=T0)
    try:
        engine.apply(AlarmInput(time=T0, site="acme", channel="obligations", rule=OBLIGATION_OVERDUE, active=True,
                                value=None, limit=None, citation="x"), T0)
        assert engine.state(f"acme/obligations/{OBLIGATION_OVERDUE}").condition
        assert reconcile(engine, CheckEngine.for_config(config), [], T0 + 60) == []
    finally:
        engine.close()


def test_a_second_fulfilment_is_refused_naming_the_first(site_and_file: tuple[Site, CaseFile]) -> None:
    """One fulfilment stands per obligation: a second would hide the first, so it is refused and says which."""
    site, cf = site_and_file
    [first, *_] = cf.open_obligations(site, [_event()], T0)
    cf.timezones["acme"] = NY
    cf.fulfil(first, done_at=T0 + 60, how="telephone", recipient="Town clerk", user="acme", now=T0 + 70)
    with pytest.raises(CaseFileError, match=r"already recorded as done \(2026-03-07 15:01:00 EST, telephone to "
                                            r"Town clerk, entered by acme\)"):
        cf.fulfil(first, done_at=T0 + 120, how="e-mail", recipient="Town", user="acme", now=T0 + 130)
    assert _kinds(cf).count("fulfilment") == 1
    [ob] = store.obligations(cf.journal.connection, ids=[first])
    assert ob.done is not None and ob.done.how == "telephone" and ob.later == ()


def test_fulfilments_recorded_twice_before_the_rule_are_all_shown(site_and_file: tuple[Site, CaseFile]) -> None:
    """A file from before the one-fulfilment rule may hold two: the first stands, the later is shown, none hidden."""
    site, cf = site_and_file
    [first, *_] = cf.open_obligations(site, [_event()], T0)
    conn = cf.journal.connection
    for how, at in (("telephone", T0 + 60), ("e-mail", T0 + 120)):
        conn.execute("INSERT INTO obligation_fulfilments (obligation, done_at, how, recipient, note, report, user, "
                     "recorded) VALUES (?, ?, ?, 'Town', '', NULL, 'acme', ?)", (first, at, how, at))
    conn.commit()
    [ob] = store.obligations(conn, ids=[first])
    assert ob.done is not None and ob.done.how == "telephone" and [f.how for f in ob.later] == ["e-mail"]
    assert [f["how"] for f in ob.to_json(T0)["later"]] == ["e-mail"]


def test_invalidation_closes_the_open_obligations_and_the_alarm_never_names_them(
        site_and_file: tuple[Site, CaseFile]) -> None:
    site, cf = site_and_file
    watch = ObligationWatch(sites=[site], journal=cf.journal)
    watch.on_episodes([_event()], T0)
    ob = {o.key: o for o in store.obligations(cf.journal.connection)}
    cf.fulfil(ob["immediate_notice"].id, done_at=T0, how="telephone", recipient="Town", user="acme", now=T0 + 1)
    ep = "acme/ph/ph_low@2026-03-07T20:00:00Z"
    with pytest.raises(CaseFileError, match="at least 10 characters"):
        cf.invalidate(ep, site="acme", reason="x", user="enf", now=T0 + 2)
    # the invalidation is permanent: ten characters of anything are no reason
    for mark, why in (("aaaaaaaaaa", "one repeated character"), ("a a a a a a a a", "one repeated character"),
                      ("calibration-failed", "at least 3 words"), ("ok ok 1234567", "at least 3 words"),
                      ("x y z w v u t s", "at least 3 words")):
        with pytest.raises(CaseFileError, match=why):
            cf.invalidate(ep, site="acme", reason=mark, user="enf", now=T0 + 2)
    assert store.invalidation(cf.journal.connection, ep) is None  # nothing was marked by the refusals
    cf.invalidate(ep, site="acme", reason="probe failed calibration 7 Mar", user="enf", now=T0 + 2)
    later = T0 + 40 * 86400  # every deadline long past
    status = {o.key: o.status(later) for o in store.obligations(cf.journal.connection)}
    assert status == {"immediate_notice": "done", "notice_24h": "not required", "written_statement": "not required",
                      "repeat_sampling": "not required"}
    closed = [o.closed for o in store.obligations(cf.journal.connection) if o.key != "immediate_notice"]
    assert closed == ["not required: episode invalidated (probe failed calibration 7 Mar)"] * 3
    closures = [r.payload for r in cf.journal.records() if r.kind == "obligation_closed"]
    assert sorted(c["obligation"] for c in closures) == sorted(o.id for k, o in ob.items() if k != "immediate_notice")
    assert store.overdue_sites(cf.journal.connection, later) == {}
    assert watch.inputs(later, lambda _id: False, force=True) == []  # never raised for a closed obligation


def test_the_overdue_alarm_names_the_obligation_due_time_and_citation_and_follows_fulfilment(
        site_and_file: tuple[Site, CaseFile]) -> None:
    from alarms.model import Kind, Priority, State, Transition
    from alarms.notifiers.base import Notice
    from monitor.logtext import transition_message

    site, cf = site_and_file
    watch = ObligationWatch(sites=[site], journal=cf.journal)
    watch.on_episodes([_event()], T0)
    ob = {o.key: o for o in store.obligations(cf.journal.connection)}
    now = T0 + 86400 + 60  # the immediate notice and the 24-hour notice are both overdue
    [raised] = watch.inputs(now, lambda _id: False, force=True)
    first = raised.citation
    assert first.startswith(f"obligation #{ob['immediate_notice'].id} notice outstanding: ")
    assert "since 2026-03-07 15:00:00 EST" in first and "Town of Wilson § 105-7E(8)" in first
    assert "(immediately (no period stated))" in first and "accidental" in first
    assert "1 more outstanding or overdue" in first
    t = Transition(time=now, alarm_id=f"acme/obligations/{OBLIGATION_OVERDUE}", kind=Kind.RAISE,
                   from_state=State.NORMAL, to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH, who="system",
                   why="", value=None, limit=None, citation=first, seq=7)
    assert "no reading" not in transition_message(t, "ALARM") and first in transition_message(t, "ALARM")
    notice = Notice.of(t, target="ops@example.org", site_name="Acme", timezone=NY)
    assert "no reading" not in notice.headline() and first in notice.headline()
    # the named obligation is met while the 24-hour notice stays overdue: the alarm text moves on to it
    cf.fulfil(ob["immediate_notice"].id, done_at=T0 + 30, how="telephone", recipient="Town", user="acme", now=now)
    [renamed] = watch.inputs(now + 20, lambda _id: True, force=True)
    assert renamed.active and f"#{ob['notice_24h'].id}" in renamed.citation
    assert f"#{ob['immediate_notice'].id}" not in renamed.citation and "403.12(g)(2)" in renamed.citation
    assert watch.inputs(now + 30, lambda _id: True, force=True) == []  # unchanged: nothing more to say


def test_the_report_and_notice_read_every_fulfilment_and_the_closure(site_and_file: tuple[Site, CaseFile]) -> None:
    """What the report's obligations timeline and the NOV read (`monitor.reports.enforcement`): the first
    fulfilment stands with any later one named beside it, and an invalidated episode's unmet obligations are
    "not required", not overdue."""
    from monitor.reports.enforcement import open_record

    site, cf = site_and_file
    [first, *_] = cf.open_obligations(site, [_event()], T0)
    conn = cf.journal.connection
    for how, at in (("telephone", T0 + 60), ("e-mail", T0 + 120)):  # as a file from before the rule may hold
        conn.execute("INSERT INTO obligation_fulfilments (obligation, done_at, how, recipient, note, report, user, "
                     "recorded) VALUES (?, ?, ?, 'Town', '', NULL, 'acme', ?)", (first, at, how, at))
    conn.commit()
    ep = "acme/ph/ph_low@2026-03-07T20:00:00Z"
    cf.invalidate(ep, site="acme", reason="probe failed calibration 7 Mar", user="enf", now=T0 + 200)
    lines = open_record(cf.journal.path).obligations([ep])
    [met] = [x for x in lines if x.fulfilled is not None]
    assert met.fulfilled == T0 + 60 and met.how == "telephone to Town; also recorded: e-mail to Town"
    rest = [x for x in lines if x.fulfilled is None]
    assert len(rest) == 3 and {x.status(T0 + 40 * 86400) for x in rest} == {"not required"}
    assert {x.how for x in rest} == {"not required: episode invalidated (probe failed calibration 7 Mar)"}
