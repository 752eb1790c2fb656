"""The episode store: SQLite beside the historian, idempotent recording, queries, pairing."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from monitor.checks.events import EpisodeEvent, iso_utc
from monitor.stores.episodes import SCHEMA_VERSION, EpisodeStore, EpisodeStoreError
from tests.unit.checks_helpers import SCHEMA_1

CITE = "Town of Southeast § 112-5A(1)(c)"


def ev(
    t: float,
    event: str,
    *,
    rule: str = "ph_low",
    channel: str = "ph",
    site: str = "acme",
    value: float | None = 4.0,
    peak: float | None = None,
) -> EpisodeEvent:
    return EpisodeEvent(t, site, channel, rule, event, value, 5.0, CITE, peak)


@pytest.fixture
def store(tmp_path: Path) -> EpisodeStore:
    s = EpisodeStore(path=tmp_path / "var" / "pretreat.sqlite")
    yield s  # type: ignore[misc]
    s.close()


def test_round_trip_in_time_order(store: EpisodeStore) -> None:
    events = [
        ev(20.0, "end", value=7.0, peak=3.5),
        ev(10.0, "start"),
        ev(15.0, "start", rule="lel_single", channel="lel", value=12.0),
    ]
    store.record(events)
    assert store.events() == sorted(events, key=lambda e: e.time)


def test_recording_is_idempotent(store: EpisodeStore) -> None:
    store.record([ev(10.0, "start")])
    store.record([ev(10.0, "start"), ev(20.0, "end", value=7.0, peak=3.0)])  # replayed after a restart
    assert [(e.time, e.event) for e in store.events()] == [(10.0, "start"), (20.0, "end")]


def test_filters(store: EpisodeStore) -> None:
    store.record(
        [
            ev(10.0, "start"),
            ev(11.0, "start", rule="stale", value=None),
            ev(12.0, "start", site="other"),
            ev(30.0, "end", value=7.0),
        ]
    )
    assert [e.time for e in store.events(site="acme", rule="ph_low")] == [10.0, 30.0]
    assert [e.time for e in store.events(start=10.0, end=30.0)] == [10.0, 11.0, 12.0]  # end exclusive
    assert [e.rule for e in store.events(channel="ph", site="acme", start=11.0)] == ["stale", "ph_low"]


def test_episodes_pair_starts_with_ends(store: EpisodeStore) -> None:
    store.record([ev(10.0, "start"), ev(70.0, "end", value=7.0, peak=3.0), ev(100.0, "start", value=4.5)])
    eps = store.episodes(site="acme")
    assert [(e.start, e.end, e.duration, e.peak, e.start_value, e.end_value) for e in eps] == [
        (10.0, 70.0, 60.0, 3.0, 4.0, 7.0),
        (100.0, None, None, None, 4.5, None),
    ]
    assert store.episodes(start=50.0)[0].start == 100.0


def test_data_quality_is_kept_apart_in_the_table(store: EpisodeStore) -> None:
    store.record([ev(10.0, "start"), ev(11.0, "start", rule="sensor_fault", value=None)])
    with sqlite3.connect(store.path) as conn:
        rows = conn.execute("SELECT rule, data_quality FROM episode_events ORDER BY time").fetchall()
    assert rows == [("ph_low", 0), ("sensor_fault", 1)]


def test_shares_the_historian_file_without_touching_user_version(store: EpisodeStore) -> None:
    store.record([ev(10.0, "start")])
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    EpisodeStore(path=path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE episode_meta SET value = 99 WHERE key = 'schema_version'")
    with pytest.raises(EpisodeStoreError, match="newer"):
        EpisodeStore(path=path)


def test_reopen_keeps_events_and_close_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    s = EpisodeStore(path=path)
    s.record([ev(10.0, "start")])
    s.close()
    s.close()
    with pytest.raises(EpisodeStoreError, match="closed"):
        s.record([ev(11.0, "end")])
    s2 = EpisodeStore(path=path)
    assert len(s2.events()) == 1
    s2.close()


def test_concurrent_writers_from_threads(store: EpisodeStore, tmp_path: Path) -> None:
    def work(k: int) -> None:
        store.record([ev(float(k * 100 + i), "start", channel=f"c{k}") for i in range(50)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.events()) == 200


async def test_lives_beside_a_running_historian_in_one_file(tmp_path: Path) -> None:
    from monitor.sample import Sample
    from monitor.stores.historian import Historian

    path = tmp_path / "pretreat.sqlite"
    episodes = EpisodeStore(path=path)  # created first, as the daemon does
    historian = Historian(path=path, commit_interval=0.05)
    await historian.start()
    try:
        historian.submit(
            [Sample(time=float(i), site="acme", channel="ph", value=7.0, unit="pH") for i in range(100)]
        )
        episodes.record([ev(5.0, "start")])
        await historian.flush()
        assert len(list(historian.query(site="acme", channel="ph"))) == 100
        assert len(episodes.events()) == 1
    finally:
        await historian.close()
        episodes.close()


def test_a_schema_1_file_gains_the_coverage_columns_and_its_old_episodes_read_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    store = EpisodeStore(path=path)
    try:
        (old,) = store.episodes()
        assert (old.start, old.end, old.peak) == (10.0, 20.0, 3.5)
        assert (old.end_reason, old.measured, old.unmeasured, old.censored) == (None, None, None, False)
        new_end = EpisodeEvent(40.0, "acme", "lel", "lel_single", "end", 4.0, 10.0, "c", 100.0, "gap", 5.0, 0.0)
        store.record([EpisodeEvent(35.0, "acme", "lel", "lel_single", "start", 100.0, 10.0, "c",
                                   censored=True), new_end])
        assert store.events(channel="lel")[1] == new_end
        ep = store.episodes(rule="lel_single")[0]
        assert (ep.end_reason, ep.measured, ep.unmeasured, ep.censored) == ("gap", 5.0, 0.0, True)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM episode_meta WHERE key = 'schema_version'").fetchone()
        assert version == (SCHEMA_VERSION,)


def test_revisions_are_journaled_so_the_seals_still_verify_and_a_flipped_flag_does_not(tmp_path: Path) -> None:
    """A withdrawal, a moved end (a row's values replaced) and the restored transition are
    each journaled with their row, so `journal verify` passes; setting the flag behind the store's back is
    reported as an altered episode event."""
    from monitor.checks.revisions import JUDGED_AGAIN, Revision
    from monitor.stores.seal_verify import verify_seals

    path = tmp_path / "e.sqlite"
    store = EpisodeStore(path=path)
    start = EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 4.0, 5.0, "c")
    end = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 4.5, 5.0, "c", 4.0, "cleared", 10.0, 0.0)
    moved = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 4.4, 5.0, "c", 3.9, "cleared", 8.0, 2.0)
    try:
        store.record([start, end])
        store.revise([Revision("acme", "ph", "ph_low", (end,), (moved,), 15.0, False)], recorded=30.0)
        store.revise([Revision("acme", "ph", "ph_low", (start, moved), (), 12.0, False)], recorded=31.0)
        assert store.events() == []
        store.record([start])  # judged again: it stands again, and the record keeps why
        assert store.events() == [start]
        assert [r.reason for r in store.revisions()][2:] == [JUDGED_AGAIN]
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        report = verify_seals(conn)
        assert report.findings == [] and report.episode_events == 2
        kinds = [k for (k,) in conn.execute("SELECT kind FROM journal ORDER BY seq")]
        assert kinds.count("episode_withdrawn") == 5 and kinds.count("episode_revision") == 3
        conn.execute("UPDATE episode_events SET withdrawn = 0 WHERE event = 'end'")
        conn.commit()
        (finding,) = verify_seals(conn).findings
        assert finding.how == "altered" and "withdrawn" in finding.detail


def test_confirmed_is_stored_an_older_file_gains_it_and_the_seals_cover_it(tmp_path: Path) -> None:
    """A duration rule's start keeps ``confirmed`` (when the duration was exceeded; time is the onset). A file
    written before schema 4 opens, its old starts read ``confirmed`` None, and its journal records (made without
    the column) still verify; a new start's ``confirmed`` is sealed, so changing it behind the store is found."""
    from monitor.stores.seal_verify import verify_seals

    path = tmp_path / "e.sqlite"
    old = EpisodeEvent(100.0, "acme", "ph", "ph_excursion_duration", "start", 4.0, 3600.0, "c")
    store = EpisodeStore(path=path)
    store.record([old])
    store.close()
    with sqlite3.connect(path) as conn:  # as a schema-3 program left it: no column, version 3
        conn.execute("ALTER TABLE episode_events DROP COLUMN confirmed")
        conn.execute("UPDATE episode_meta SET value = 3 WHERE key = 'schema_version'")
    onset = EpisodeEvent(7 * 3600 + 29 * 60.0, "acme", "flow", "slug", "start", 60.0, 50.0, "c",
                         confirmed=7 * 3600 + 44 * 60.0)
    end = EpisodeEvent(7 * 3600 + 56 * 60.0, "acme", "flow", "slug", "end", 5.0, 50.0, "c", 60.0, "cleared",
                       1620.0, 0.0)
    store = EpisodeStore(path=path)
    try:
        assert store.events() == [old]
        store.record([onset, end])
        assert store.events(rule="slug") == [onset, end]
        (ep,) = store.episodes(rule="slug")
        assert (ep.start, ep.confirmed, ep.end) == (onset.time, onset.confirmed, end.time)
        assert store.episodes(rule="ph_excursion_duration")[0].confirmed is None
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM episode_meta WHERE key = 'schema_version'").fetchone()
        assert version == (SCHEMA_VERSION,)
        report = verify_seals(conn)
        assert report.findings == [] and report.episode_events == 3
        conn.execute("UPDATE episode_events SET confirmed = confirmed + 60 WHERE rule = 'slug'")
        conn.commit()
        (finding,) = verify_seals(conn).findings
        assert finding.how == "altered" and "slug start" in finding.detail


def test_revise_returns_what_it_withdrew_added_and_updated_with_row_ids(tmp_path: Path) -> None:
    """What a correction changed goes to the hub (`Daemon._record_revisions`, `revision_event`): `revise` names,
    per revision, its ``episode_revisions`` row id, the rows it withdrew, the new rows it added (with ids) and
    the rows already stored that it judged again (with their ids and new figures); applied again, nothing is
    new and the rows are named again."""
    from monitor.checks.revisions import Revision

    store = EpisodeStore(path=tmp_path / "e.sqlite")
    start = EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 4.0, 5.0, "c")
    end = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 4.5, 5.0, "c", 4.0, "cleared", 10.0, 0.0)
    moved = EpisodeEvent(25.0, "acme", "ph", "ph_low", "end", 4.6, 5.0, "c", 3.5, "cleared", 15.0, 0.0)
    refigured = EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 3.9, 5.0, "c")
    found = EpisodeEvent(5.0, "acme", "ph", "ph_low", "start", 3.0, 5.0, "c")
    found_end = EpisodeEvent(6.0, "acme", "ph", "ph_low", "end", 6.0, 5.0, "c", 3.0, "cleared", 1.0, 0.0)
    try:
        start_id, end_id = store.record([start, end])
        found_rev = Revision("acme", "ph", "ph_low", (), (found, found_end), 5.0, True)
        (a,) = store.revise([found_rev], recorded=30.0)
        assert (a.revision, a.recorded, a.withdrawn, a.updated) == (found_rev, 30.0, (), ())
        assert [e for e, _i in a.added] == [found, found_end] and len({i for _e, i in a.added}) == 2
        found_ids = tuple(i for _e, i in a.added)
        again, move, retract = store.revise([found_rev, Revision("acme", "ph", "ph_low", (end,), (moved, refigured),
                                                                  15.0, False),
                                             Revision("acme", "ph", "ph_low", (found, found_end), (), 5.5, False)],
                                            recorded=31.0)
        assert again.added == () and again.updated == ((found, found_ids[0]), (found_end, found_ids[1]))
        assert move.withdrawn == (end_id,) and move.updated == ((refigured, start_id),)
        (moved_row,) = move.added
        assert moved_row[0] == moved and moved_row[1] > max(found_ids)
        assert retract.withdrawn == found_ids and retract.added == retract.updated == ()
        assert a.row_id < again.row_id < move.row_id < retract.row_id
        assert len(store.revisions()) == 4
        assert store.events() == [refigured, moved]
        # withdrawn and re-added by one revision: it stands again (named in both)
        (same,) = store.revise([Revision("acme", "ph", "ph_low", (moved,), (moved,), 16.0, False)], recorded=32.0)
        assert same.withdrawn == (moved_row[1],) and same.updated == (moved_row,) and same.added == ()
        assert store.events() == [refigured, moved]
    finally:
        store.close()


# The schema-5 table: the unique key without the end reason (tests the rebuild to schema 6)
_SCHEMA_5_TABLE = """CREATE TABLE episode_events (
    id INTEGER PRIMARY KEY, time REAL NOT NULL, site TEXT NOT NULL, channel TEXT NOT NULL, rule TEXT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('start', 'end')), value REAL, limit_value REAL, peak REAL,
    citation TEXT NOT NULL, data_quality INTEGER NOT NULL, end_reason TEXT, measured REAL, unmeasured REAL,
    censored INTEGER NOT NULL DEFAULT 0, maintenance REAL, withdrawn INTEGER NOT NULL DEFAULT 0, confirmed REAL,
    UNIQUE (site, channel, rule, event, time)) STRICT"""


def test_two_ends_of_one_rule_at_one_instant_both_stand_and_a_schema_5_file_is_rebuilt_with_its_seals(
        tmp_path: Path) -> None:
    """A cleared end and a gap end of one rule at one time (a sample clears an overdue interval; the next
    interval's onset is that sample and it ends by a gap in the count there too) are two transitions. Keyed by
    (site, channel, rule, event, time) the second overwrote the first, and the record showed the second episode
    open for ever. A file written with that key is rebuilt when opened: ids, values and seals kept."""
    from monitor.stores.seal_verify import verify_seals

    path = tmp_path / "e.sqlite"
    s1 = EpisodeEvent(600.0, "acme", "count", "sampler_interval", "start", 100.0, 900.0, "c", confirmed=1500.0)
    cleared = EpisodeEvent(3670.0, "acme", "count", "sampler_interval", "end", 101.0, 900.0, "c", None,
                           "cleared", 3070.0, 0.0)
    s2 = EpisodeEvent(3670.0, "acme", "count", "sampler_interval", "start", 101.0, 900.0, "c", confirmed=9740.0)
    gap = EpisodeEvent(3670.0, "acme", "count", "sampler_interval", "end", 101.0, 900.0, "c", None, "gap", 0.0,
                       0.0)
    store = EpisodeStore(path=path)
    try:
        store.record([s1, cleared])
    finally:
        store.close()
    with sqlite3.connect(path) as conn:  # the file as schema 5 wrote it
        columns = ", ".join(r[1] for r in conn.execute("PRAGMA table_info(episode_events)"))
        conn.execute("ALTER TABLE episode_events RENAME TO e6")
        conn.execute(_SCHEMA_5_TABLE)
        conn.execute(f"INSERT INTO episode_events ({columns}) SELECT {columns} FROM e6")
        conn.execute("DROP TABLE e6")
        conn.execute("UPDATE episode_meta SET value = 5 WHERE key = 'schema_version'")
        ids = conn.execute("SELECT id, time, event FROM episode_events ORDER BY id").fetchall()
        with pytest.raises(sqlite3.IntegrityError):  # what the old key did to the second end
            conn.execute("INSERT INTO episode_events (time, site, channel, rule, event, citation, data_quality, "
                         "end_reason) VALUES (3670.0, 'acme', 'count', 'sampler_interval', 'end', 'c', 0, 'gap')")
    store = EpisodeStore(path=path)
    try:
        assert store.record([s2, gap])[1] is not None  # stored, not taken for the cleared end
        assert store.record([gap, cleared]) == [None, None]  # still idempotent
        assert store.events() == [s1, cleared, s2, gap]
        assert [(e.start, e.end, e.end_reason) for e in store.episodes()] == [(600.0, 3670.0, "cleared"),
                                                                             (3670.0, 3670.0, "gap")]
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, time, event FROM episode_events WHERE id <= ? ORDER BY id",
                            (ids[-1][0],)).fetchall() == ids
        assert conn.execute("SELECT value FROM episode_meta WHERE key = 'schema_version'").fetchone() == (6,)
        assert verify_seals(conn).findings == []
        names = {r[1] for r in conn.execute("PRAGMA index_list(episode_events)")}
        assert "episode_events_key" in names and not any(n.startswith("sqlite_autoindex") for n in names)


def test_two_ends_at_one_instant_pair_by_reason_whatever_order_they_were_stored_in(tmp_path: Path) -> None:
    """A correction after late readings can store an instant's second end (the gap that ended the episode begun
    there) before its first (the sample that cleared the episode before). Pairing by row id then gave each
    episode the other's end: the history, the audit, the hub's copy and a notice's facts all read them. Ends at
    one instant pair in `end_order`; every reader of the record agrees."""
    from monitor.audit import episodes as audit_episodes
    from monitor.audit import recorded_events
    from monitor.notices.facts import _find as notice_episode
    from monitor.read.episodes import episode_start, find_episodes

    path = tmp_path / "e.sqlite"
    t0 = 1_741_000_000.0
    s1 = EpisodeEvent(t0 + 600, "acme", "count", "sampler_interval", "start", 100.0, 900.0, "c", confirmed=t0 + 1500)
    cleared = EpisodeEvent(t0 + 3670, "acme", "count", "sampler_interval", "end", 101.0, 900.0, "c", 3070.0,
                           "cleared", 3070.0, 0.0)
    s2 = EpisodeEvent(t0 + 3670, "acme", "count", "sampler_interval", "start", 101.0, 900.0, "c",
                      confirmed=t0 + 9740)
    gap = EpisodeEvent(t0 + 3670, "acme", "count", "sampler_interval", "end", 101.0, 900.0, "c", 0.0, "gap", 0.0,
                       0.0)
    store = EpisodeStore(path=path)
    try:
        store.record([s1, gap])  # the gap end first: a lower id than the end it follows
        store.record([cleared, s2])
        want = [(t0 + 600, t0 + 3670, "cleared", 3070.0), (t0 + 3670, t0 + 3670, "gap", 0.0)]
        assert [(e.start, e.end, e.end_reason, e.peak) for e in store.episodes()] == want
        assert [(e.start, e.end, e.values[2]) for e in audit_episodes(store.events())] == [w[:2] + w[3:]
                                                                                          for w in want]
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        ids = dict(conn.execute("SELECT end_reason, id FROM episode_events WHERE event = 'end'").fetchall())
        found = find_episodes(conn, now=t0 + 10_000, data_quality=True)
        # the console's links from an end to its episode (casefile, notice): by the history's pairing
        starts = {r: episode_start(conn, i, now=t0 + 10_000) for r, i in ids.items()}
    assert ids["gap"] < ids["cleared"]
    assert [(f[4], f[6]) for f in found] == [("closed", ids["cleared"]), ("closed", ids["gap"])]
    assert starts == {"cleared": ("acme", "count", "sampler_interval", t0 + 600),
                      "gap": ("acme", "count", "sampler_interval", t0 + 3670)}
    # `pretreat audit` reads the record itself (the reasons too) before pairing it
    assert [(e.start, e.end, e.values[2]) for e in audit_episodes(recorded_events(path))] == [w[:2] + w[3:]
                                                                                            for w in want]
    for start, reason in ((t0 + 600, "cleared"), (t0 + 3670, "gap")):
        ident = f"acme/count/sampler_interval@{iso_utc(start)}"
        assert notice_episode(path, ident).end_reason == reason


def test_an_end_recorded_before_reasons_were_kept_is_the_end_judged_again_at_its_instant(tmp_path: Path) -> None:
    """A schema-1 file's ends have no reason. A warm-up after the upgrade judges the recent readings again and
    emits the end with its reason: that is the stored end, not a second one (which the history showed as an
    episode whose start was not recorded)."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    store = EpisodeStore(path=path)
    try:
        again = [EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 4.0, 5.0, "cite"),
                 EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 7.0, 5.0, "cite", 3.5, "cleared", 10.0, 0.0)]
        assert store.record_events(again, recorded=30.0).ids == [None, None]
        assert [(e.event, e.end_reason) for e in store.events()] == [("start", None), ("end", None)]
        assert [(e.start, e.end) for e in store.episodes()] == [(10.0, 20.0)]
    finally:
        store.close()


def test_a_reasonless_old_end_is_not_taken_for_the_gap_end_of_an_episode_begun_at_its_instant(
        tmp_path: Path) -> None:
    """A schema-1 file: an episode cleared at 20 s and the next begun there, still open. After the upgrade the new
    episode's gap end at 20 s is its own end, not the old reasonless row (which closed the one before); the
    cleared end judged again at 20 s is that old row."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
        conn.execute("INSERT INTO episode_events (time, site, channel, rule, event, value, limit_value, peak, "
                     "citation, data_quality) "
                     "VALUES (20.0, 'acme', 'ph', 'ph_low', 'start', 4.0, 5.0, NULL, 'cite', 0)")
    store = EpisodeStore(path=path)
    try:
        cleared = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 7.0, 5.0, "cite", 3.5, "cleared", 10.0, 0.0)
        gap = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 4.0, 5.0, "cite", 4.0, "gap", 0.0, 0.0)
        assert store.record_events([cleared], recorded=30.0).ids == [None]
        assert store.record_events([gap], recorded=30.0).ids[0] is not None
        assert [(e.start, e.end, e.end_reason) for e in store.episodes()] == [(10.0, 20.0, None),
                                                                             (20.0, 20.0, "gap")]
    finally:
        store.close()
