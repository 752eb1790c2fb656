"""The episode store: every episode transition, in SQLite, in the historian's file beside the readings.

Tables (its own; ``PRAGMA user_version`` belongs to the historian and is never touched here):

- ``episode_events(id, time, site, channel, rule, event, value, limit_value, peak, citation, data_quality)``,
  ``STRICT``, unique on (site, channel, rule, event, time, end reason) (`_KEY`). The end reason is part of the
  key since schema 6: two ends of one rule can fall at one instant, for another reason each, where a rule ends
  an episode at the instant another of its episodes began and ended (until 2026-12-04 the sampler check did:
  a sample cleared an overdue interval at 08:01, the next interval's onset was that sample, and when the count
  channel then fell silent past its ``max_gap`` that interval ended by the gap at 08:01 too; records from then
  hold such pairs). Keyed without it, the second overwrote the first and the record showed an episode open for
  ever.
  Recording is idempotent: after a restart the daemon can replay recent history through a fresh engine to rebuild
  rule state (a slug baseline needs 24 h, the monthly pH rule the month so far) and record what it emits;
  transitions already stored are ignored, not duplicated; a *withdrawn* transition emitted again stands again with
  the figures it is emitted with, kept as a revision of its own (`JUDGED_AGAIN`, `EpisodeStore.record_events`).
  ``data_quality`` (0/1) keeps instrument faults apart from discharge exceedances in queries.
  Since schema 2 each transition also has ``end_reason`` (``cleared``, ``gap``, ``month_end``; ends only),
  ``measured`` and ``unmeasured`` (seconds of the episode's span covered and not covered by readings, ends
  only, `monitor.checks.coverage`) and ``censored`` (0/1: caused by an over-range reading judged as the span's
  top). A schema-1 file gains these columns when opened (NULL/0 in its old rows, shown as unknown).
  Since schema 4 a duration rule's ``start`` has ``confirmed``: the moment its duration was exceeded (``time``
  is the onset; the live alarm fired at confirmation). Older files gain the column, NULL in their old rows
  (shown as not recorded); it is journaled only when set (`monitor.stores.seals.OPTIONAL_EPISODE_COLUMNS`).
  Since schema 5 ends also have ``maintenance`` (seconds of the span the instrument reported service or
  calibration: neither measured nor unmeasured, `monitor.checks.coverage`); NULL in rows recorded before, and
  journaled only when set, as ``confirmed`` is.
- ``episode_meta(key, value)``: ``schema_version`` (a file written by a newer version is refused), and
  ``last_id``: the highest ``episode_events`` id ever given. A new row's id is one past it (and past the
  table's highest), never SQLite's default of one past the rows left: an id is never given twice, so a deleted
  last row cannot be papered over by the next event taking its id and its journal record's place (the record
  check compares each id's newest journal record with its row), and the county hub, which keys episode events
  by the edge's id, is never told a new event under an old event's id. Each time the store opens, it is set
  from what the journal proves was given (its ``episode_event`` records' ids and the ``sealing_started``
  record's ``max_id``) and the table's highest, never kept from the file: a value wound back while the daemon
  was stopped would let a replay record a deleted transition again under its old id (its new figures the id's
  newest record, the deleted ones unnamed), and one raised past SQLite's largest integer would leave no id to
  give (`monitor.stores.seal_verify` names a value past every id given).
- ``episode_revisions(id, recorded, site, channel, rule, reason, late, changes, withdrawn, added)``: every
  correction the engine made after a late reading (`monitor.checks.revisions`), in order. A withdrawn
  transition stays in ``episode_events`` with ``withdrawn = 1`` (the record shows what was announced and
  why it no longer stands); queries of episodes skip it. Version 1 files gain the column and the table.

Own connection, WAL (readers, the historian's writer and this one proceed together), ``synchronous=FULL``:
episodes are rare and they are the evidence an enforcement notice rests on, so each commit is fsynced.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from alarms.journal import ensure_schema as ensure_journal
from config.rules import is_data_quality
from monitor.checks.coverage import END_GAP, end_order
from monitor.checks.events import END, START, EpisodeEvent
from monitor.checks.revisions import JUDGED_AGAIN, Revision
from monitor.stores.seals import (
    EPISODE_COLUMNS,
    OPTIONAL_EPISODE_COLUMNS,
    journal_episode_events,
    journal_revision,
    journal_withdrawn,
    start_sealing,
)

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6  # 2: end_reason, measured, unmeasured, censored; 3: withdrawn, episode_revisions; 4: confirmed;
# 5: maintenance; 6: the end reason in the unique key (the table rebuilt: SQLite cannot drop a UNIQUE constraint)
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS episode_events (
        id INTEGER PRIMARY KEY,
        time REAL NOT NULL,
        site TEXT NOT NULL,
        channel TEXT NOT NULL,
        rule TEXT NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('start', 'end')),
        value REAL,
        limit_value REAL,
        peak REAL,
        citation TEXT NOT NULL,
        data_quality INTEGER NOT NULL,
        end_reason TEXT,
        measured REAL,
        unmeasured REAL,
        censored INTEGER NOT NULL DEFAULT 0,
        maintenance REAL,
        withdrawn INTEGER NOT NULL DEFAULT 0,
        confirmed REAL
    ) STRICT""",
    "CREATE INDEX IF NOT EXISTS episode_events_time ON episode_events (time)",
    "CREATE INDEX IF NOT EXISTS episode_events_site_rule ON episode_events (site, rule, time)",
    "CREATE TABLE IF NOT EXISTS episode_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT",
    """CREATE TABLE IF NOT EXISTS episode_revisions (
        id INTEGER PRIMARY KEY,
        recorded REAL NOT NULL,
        site TEXT NOT NULL,
        channel TEXT NOT NULL,
        rule TEXT NOT NULL,
        reason TEXT NOT NULL,
        late REAL NOT NULL,
        changes TEXT NOT NULL,
        withdrawn TEXT NOT NULL,
        added TEXT NOT NULL
    ) STRICT""",
    "CREATE INDEX IF NOT EXISTS episode_revisions_key ON episode_revisions (site, channel, rule, id)",
)
# The unique key, made once the table has its schema-6 shape (a schema-1 table has no end_reason yet). coalesce:
# a start has no end reason, and a UNIQUE index holds NULLs distinct.
_KEY_INDEX = ("CREATE UNIQUE INDEX IF NOT EXISTS episode_events_key ON episode_events "
              "(site, channel, rule, event, time, coalesce(end_reason, ''))")
_COLUMNS = ("time, site, channel, rule, event, value, limit_value, citation, peak, "
            "end_reason, measured, unmeasured, censored, confirmed, maintenance")
_ADDED = (  # schema 2: columns a schema-1 file lacks
    ("end_reason", "TEXT"), ("measured", "REAL"), ("unmeasured", "REAL"),
    ("censored", "INTEGER NOT NULL DEFAULT 0"),
)


class EpisodeStoreError(Exception):
    """The file cannot hold episodes (written by a newer version, or not a database)."""


@dataclass(frozen=True, slots=True)
class Episode:
    """A start paired with its end (``end`` None while open): what an exceedance report lists."""

    site: str
    channel: str
    rule: str
    start: float
    end: float | None
    start_value: float | None
    end_value: float | None
    limit: float | None
    peak: float | None
    citation: str

    end_reason: str | None = None  # cleared, gap, month_end; None while open or recorded before schema 2
    measured: float | None = None  # s of the span covered by readings (None: open, or recorded before schema 2)
    unmeasured: float | None = None  # s of the span not covered (the worst case adds it to measured)
    censored: bool = False  # its start or end was an over-range reading judged as the span's top
    confirmed: float | None = None  # duration rules: when the duration was exceeded (start is the onset)
    maintenance: float | None = None  # s of the span the instrument was in service/calibration (coverage)

    @property
    def duration(self) -> float | None:
        return None if self.end is None else self.end - self.start


def _migrate(conn: sqlite3.Connection) -> None:
    """Schema 1 → 2: add the coverage columns (old rows keep NULL: their coverage was never computed).
    → 3: the ``withdrawn`` flag (nothing was withdrawn before); ``episode_revisions`` is created by _SCHEMA.
    → 4: ``confirmed`` (NULL in old rows: not recorded then). → 5: ``maintenance`` (NULL in old rows).
    → 6: the end reason joins the unique key. The table is rebuilt (SQLite's documented way to drop a
    constraint: a new table, the rows copied with their ids, the old one dropped, the new one renamed), inside
    the caller's transaction; every row keeps every value, so the journal's records still match them."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(episode_events)")}
    for name, decl in (*_ADDED, ("withdrawn", "INTEGER NOT NULL DEFAULT 0"), ("confirmed", "REAL"),
                       ("maintenance", "REAL")):  # 5: NULL in rows recorded before (none was counted then)
        if name not in have:
            conn.execute(f"ALTER TABLE episode_events ADD COLUMN {name} {decl}")
    if _has_old_key(conn):
        columns = ", ".join(row[1] for row in conn.execute("PRAGMA table_info(episode_events)"))
        conn.execute(_SCHEMA[0].replace("CREATE TABLE IF NOT EXISTS episode_events", "CREATE TABLE episode_events_6"))
        conn.execute(f"INSERT INTO episode_events_6 ({columns}) SELECT {columns} FROM episode_events")
        conn.execute("DROP TABLE episode_events")
        conn.execute("ALTER TABLE episode_events_6 RENAME TO episode_events")
        for ddl in _SCHEMA[1:3]:  # the indexes went with the old table (the key's: the caller's next step)
            conn.execute(ddl)
    conn.execute("UPDATE episode_meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))


def _has_old_key(conn: sqlite3.Connection) -> bool:
    """Whether ``episode_events`` still has the schema-5 key, UNIQUE (site, channel, rule, event, time): a
    constraint's index is named ``sqlite_autoindex_…``; the schema-6 key is the ``episode_events_key`` index."""
    return any(name.startswith("sqlite_autoindex_episode_events") and unique
               for _seq, name, unique, *_ in conn.execute("PRAGMA index_list(episode_events)"))


def _event(row: tuple[Any, ...]) -> EpisodeEvent:
    """A stored row (``_COLUMNS`` order, the dataclass's field order) as an event; censored is stored 0/1."""
    t, site, channel, rule, event, value, limit, citation, peak, reason, measured, unmeasured, censored, conf, \
        maint = row
    return EpisodeEvent(t, site, channel, rule, event, value, limit, citation, peak, reason, measured, unmeasured,
                        bool(censored), conf, maintenance=maint or None)


class EpisodeStore:
    """Records and queries episode transitions. Thread-safe (one lock); each `record` is one transaction."""

    def __init__(self, *, path: Path, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._open()

    def reopen(self) -> None:
        """Connect to the path again: the file was re-created (`monitor.stores.historian_file`)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._open()

    def _open(self) -> None:
        self._conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._ensure_schema()
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _ensure_schema(self) -> None:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for ddl in _SCHEMA:
                conn.execute(ddl)
            ensure_journal(conn)  # episode events are journaled as they are recorded (seals)
            conn.execute(
                "INSERT OR IGNORE INTO episode_meta (key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )
            version = conn.execute("SELECT value FROM episode_meta WHERE key = 'schema_version'").fetchone()[
                0
            ]
            if version > SCHEMA_VERSION:
                raise EpisodeStoreError(
                    f"{self.path}: episode tables are version {version}, newer than this "
                    f"program understands ({SCHEMA_VERSION}); upgrade pretreat-monitor"
                )
            if version < SCHEMA_VERSION:
                _migrate(conn)
            conn.execute(_KEY_INDEX)
            conn.execute(_SEED_LAST_ID)
            conn.execute("CREATE INDEX IF NOT EXISTS episode_events_withdrawn ON episode_events (id) "
                         "WHERE withdrawn = 1")
            start_sealing(conn, time.time())  # after the migration: it digests every column of the rows
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise EpisodeStoreError(f"{self.path}: episode store is closed")
        return self._conn

    def record(self, events: Sequence[EpisodeEvent]) -> list[int | None]:
        """`record_events` without the restorations: each event's new row id, or None for one already stored."""
        return self.record_events(events, recorded=time.time()).ids

    def record_events(self, events: Sequence[EpisodeEvent], *, recorded: float) -> Recorded:
        """Store transitions in one transaction. Ones already stored (same site/channel/rule/event/time) are kept:
        recording is idempotent (a restart's warm-up records what it finds again). A *withdrawn* one emitted
        again stands again with the figures it is emitted with (the live engine found it anew: a start whose
        onset is the same but whose duration was exceeded later has a later ``confirmed``), and that
        restoration is kept as a revision (`JUDGED_AGAIN`, ``recorded`` epoch s) so the record says why it
        stands again and the hub's copy, whose withdrawn flags follow revisions, is corrected the same way.
        Returns each event's new row id (increasing), or None for one already stored (the uplink keys the
        episode events it publishes by it), and the restorations as applied revisions."""
        if not events:
            return Recorded([], [])
        with self._lock:
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids: list[int | None] = []
                restored: list[AppliedRevision] = []
                for e in events:  # one at a time: each new or restored row is journaled (seals)
                    found = _find(conn, e)
                    ids.append(_put(conn, e, found, update=bool(found and found[1])))
                    if found and found[1]:
                        r = Revision(e.site, e.channel, e.rule, (), (e,), e.time, e.event == START, JUDGED_AGAIN)
                        restored.append(AppliedRevision(_revision_row(conn, r, recorded), r, recorded, (), (),
                                                        ((e, int(found[0])),)))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return Recorded(ids, restored)

    def revise(self, revisions: Sequence[Revision], *, recorded: float) -> list[AppliedRevision]:
        """Apply corrections in one transaction: withdraw, then add (with the new values), and keep each
        revision with its reason. ``recorded``: when (epoch s, the daemon's clock). Returns each revision as
        applied, in order: its ``episode_revisions`` row id and the episode rows it withdrew, added and updated
        (what the uplink sends on, as for `record`: the hub's copy applies the same corrections)."""
        if not revisions:
            return []
        out: list[AppliedRevision] = []
        with self._lock:
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for r in revisions:
                    gone = [i for e in r.withdrawn if (i := _withdraw(conn, e)) is not None]
                    added: list[tuple[EpisodeEvent, int]] = []
                    updated: list[tuple[EpisodeEvent, int]] = []
                    for e in r.added:
                        if (rid := _put(conn, e, _find(conn, e), update=True)) is not None:
                            added.append((e, rid))
                        else:
                            updated.append((e, _row_id(conn, e)))
                    out.append(AppliedRevision(_revision_row(conn, r, recorded), r, recorded, tuple(gone),
                                               tuple(added), tuple(updated)))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return out

    def revisions(self, *, site: str | None = None, channel: str | None = None,
                  rule: str | None = None) -> list[StoredRevision]:
        """Stored revisions in the order they were made."""
        where, args = _filters(site=site, rule=rule, channel=channel, start=None, end=None, withdrawn=True)
        with self._lock:
            rows = self._db().execute(
                f"SELECT recorded, site, channel, rule, reason, late, changes, withdrawn, added "
                f"FROM episode_revisions{where} ORDER BY id", args).fetchall()
        return [StoredRevision(rec, s, c, r, why, late, tuple(json.loads(ch)),
                               tuple(EpisodeEvent.from_dict(d) for d in json.loads(w)),
                               tuple(EpisodeEvent.from_dict(d) for d in json.loads(a)))
                for rec, s, c, r, why, late, ch, w, a in rows]

    def events(
        self,
        *,
        site: str | None = None,
        rule: str | None = None,
        channel: str | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> list[EpisodeEvent]:
        """Transitions in time order (then recording order); ``start`` inclusive, ``end`` exclusive."""
        where, args = _filters(site=site, rule=rule, channel=channel, start=start, end=end)
        with self._lock:
            rows = (
                self._db()
                .execute(f"SELECT {_COLUMNS} FROM episode_events{where} ORDER BY time, id", args)
                .fetchall()
            )
        return [_event(r) for r in rows]

    def episodes(
        self,
        *,
        site: str | None = None,
        rule: str | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> list[Episode]:
        """Episodes that started in [start, end), each paired with its end if recorded, in start order."""
        where, args = _filters(site=site, rule=rule, channel=None, start=None, end=None)
        with self._lock:
            rows = (
                self._db()
                .execute(
                    f"SELECT {_COLUMNS} FROM episode_events{where} ORDER BY site, channel, rule, time, id",
                    args,
                )
                .fetchall()
            )
        out = [_episode(s, e) for s, e in pair_transitions(_event(r) for r in rows)]
        out = [ep for ep in out if (start is None or ep.start >= start) and (end is None or ep.start < end)]
        return sorted(out, key=lambda ep: (ep.start, ep.site, ep.channel, ep.rule))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def pair_transitions(events: Iterable[EpisodeEvent], *,
                     unended: bool = False) -> list[tuple[EpisodeEvent, EpisodeEvent | None]]:
    """Each start with the end that follows it (None while open), from transitions in (site, channel, rule,
    time) order. At one instant an end is taken first while an episode is open and a start first while none is
    (as `monitor.read.episodes` pairs them: a cleared end, the next onset and its gap end at one reading; an
    episode of one reading whose end a correction stored before its start), and ends in `end_order`, not in row
    order. An end with no start before it is left out, and so is a start followed by another before any end unless
    ``unended`` (the audit compares it); the exceedance history lists both."""
    out: list[tuple[EpisodeEvent, EpisodeEvent | None]] = []
    open_: dict[tuple[str, str, str], EpisodeEvent] = {}
    for (site, channel, rule, _t), group in groupby(events, key=lambda e: (e.site, e.channel, e.rule, e.time)):
        key = (site, channel, rule)
        same = sorted(group, key=lambda x: end_order(x.end_reason) if x.event == END else 0)
        while same:
            e = next((x for x in same if (x.event == END) == (key in open_)), same[0])
            same.remove(e)
            if e.event == START:
                if unended and key in open_:
                    out.append((open_[key], None))
                open_[key] = e
            elif key in open_:
                out.append((open_.pop(key), e))
    out.extend((s, None) for s in open_.values())
    return out


def _rows_by_id(conn: sqlite3.Connection, ids: list[int | None]) -> list[tuple[object, ...]]:
    """The rows just inserted, read back (so what is journaled is what is stored)."""
    sql = f"SELECT {', '.join((*EPISODE_COLUMNS, *OPTIONAL_EPISODE_COLUMNS))} FROM episode_events WHERE id = ?"
    return [conn.execute(sql, (i,)).fetchone() for i in ids]


def _episode(s: EpisodeEvent, e: EpisodeEvent | None) -> Episode:
    return Episode(
        site=s.site,
        channel=s.channel,
        rule=s.rule,
        start=s.time,
        end=e.time if e else None,
        start_value=s.value,
        end_value=e.value if e else None,
        limit=s.limit,
        peak=e.peak if e else None,
        citation=s.citation,
        end_reason=e.end_reason if e else None,
        measured=e.measured if e else None,
        unmeasured=e.unmeasured if e else None,
        censored=s.censored or (e.censored if e else False),
        confirmed=s.confirmed,
        maintenance=e.maintenance if e else None,
    )


@dataclass(frozen=True, slots=True)
class StoredRevision:
    """A revision as stored: when it was made, why, and what it withdrew and added."""

    recorded: float
    site: str
    channel: str
    rule: str
    reason: str
    late: float
    changes: tuple[str, ...]
    withdrawn: tuple[EpisodeEvent, ...]
    added: tuple[EpisodeEvent, ...]

    def touches(self, ep: Episode) -> bool:
        """Whether this revision moved, found or withdrew a transition of ``ep`` (same rule and channel)."""
        if (self.site, self.channel, self.rule) != (ep.site, ep.channel, ep.rule):
            return False
        times = {e.time for e in (*self.withdrawn, *self.added)}
        end = ep.end if ep.end is not None else float("inf")
        return any(ep.start <= t <= end for t in times)


@dataclass(frozen=True, slots=True)
class AppliedRevision:
    """A revision as `EpisodeStore.revise` stored it: what the uplink sends so the hub's copy of the record
    applies the same correction (`monitor.uplink.events.revision_event`). Row ids are ``episode_events`` ids;
    ``updated``: rows already stored that the revision judged again, with the figures they now hold (a
    withdrawn one, or one withdrawn earlier in the same revision, stands again)."""

    row_id: int  # the episode_revisions row (increasing: the order revisions were made in)
    revision: Revision
    recorded: float
    withdrawn: tuple[int, ...]
    added: tuple[tuple[EpisodeEvent, int], ...]  # new rows, with their ids
    updated: tuple[tuple[EpisodeEvent, int], ...]


@dataclass(frozen=True, slots=True)
class Recorded:
    """What `EpisodeStore.record_events` stored: each event's new row id (None: already stored), and the
    withdrawn transitions it restored, each as the revision it kept (what the uplink sends on)."""

    ids: list[int | None]
    restored: list[AppliedRevision]


_INSERT = (f"INSERT INTO episode_events (id, {_COLUMNS}, data_quality) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
# A new row's id: past every id given before (``last_id``) and past the rows there are (rows written by hand
# or by an older version that did not keep ``last_id``).
_NEXT_ID = ("SELECT max(coalesce((SELECT value FROM episode_meta WHERE key = 'last_id'), 0), "
            "coalesce((SELECT max(id) FROM episode_events), 0)) + 1")
# ``last_id`` as the store opens, whatever the file held: the highest id in the table, given by the journal's
# records (a deleted last row's id is still in its record) or covered by the pre-sealing record (``max_id``).
_SEED_LAST_ID = ("INSERT INTO episode_meta (key, value) VALUES ('last_id', max("
                 "coalesce((SELECT max(id) FROM episode_events), 0), "
                 "coalesce((SELECT max(CAST(json_extract(payload, '$.id') AS INTEGER)) FROM journal "
                 "WHERE kind = 'episode_event'), 0), "
                 "coalesce((SELECT CAST(json_extract(payload, '$.max_id') AS INTEGER) FROM journal "
                 "WHERE kind = 'sealing_started' ORDER BY seq LIMIT 1), 0))) "  # one record, near the start
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE value != excluded.value")
_MAX_ID = 2**63 - 1  # SQLite's largest integer
# The unique key (`episode_events_key`): an event's row is found by these, the end reason as `_key` gives it
_KEY = "site = ? AND channel = ? AND rule = ? AND event = ? AND time = ? AND coalesce(end_reason, '') = ?"
_FIND = f"SELECT id, withdrawn FROM episode_events WHERE {_KEY}"
_LAST_START_BEFORE = ("SELECT max(time) FROM episode_events WHERE site = ? AND channel = ? AND rule = ? "
                      "AND event = 'start' AND time < ? AND withdrawn = 0")
_END_BETWEEN = ("SELECT 1 FROM episode_events WHERE site = ? AND channel = ? AND rule = ? AND event = 'end' "
                "AND time >= ? AND time < ? AND withdrawn = 0 LIMIT 1")
_FIND_START = ("SELECT 1 FROM episode_events WHERE site = ? AND channel = ? AND rule = ? AND event = 'start' "
               "AND time = ? AND withdrawn = 0")
_FIND_NO_REASON = ("SELECT id, withdrawn FROM episode_events WHERE site = ? AND channel = ? AND rule = ? "
                   "AND event = 'end' AND time = ? AND end_reason IS NULL")
_UPDATE = ("UPDATE episode_events SET withdrawn = 0, value = ?, limit_value = ?, citation = ?, peak = ?, "
           "end_reason = ?, measured = ?, unmeasured = ?, censored = ?, confirmed = ?, maintenance = ? WHERE id = ?")


def _row(e: EpisodeEvent) -> tuple[object, ...]:
    return (e.time, e.site, e.channel, e.rule, e.event, e.value, e.limit, e.citation, e.peak, e.end_reason,
            e.measured, e.unmeasured, int(e.censored), e.confirmed, e.maintenance, int(is_data_quality(e.rule)))


def _key(e: EpisodeEvent) -> tuple[str, str, str, str, float, str]:
    """``e``'s place in the store's unique key (`_KEY`)."""
    return e.site, e.channel, e.rule, e.event, e.time, e.end_reason or ""


def _find(conn: sqlite3.Connection, e: EpisodeEvent) -> tuple[int, int] | None:
    """``e``'s row as (id, withdrawn), None when it is not stored (the store's unique key). An end recorded before
    schema 2 has no reason; it is the end at its instant (the key then held one), so an end judged again there
    (a warm-up after the upgrade) is that row, not a second end."""
    row = conn.execute(_FIND, _key(e)).fetchone()
    if row is None and e.event == END and e.end_reason is not None:
        row = _no_reason_end(conn, e)
    return None if row is None else (int(row[0]), int(row[1]))


def _no_reason_end(conn: sqlite3.Connection, e: EpisodeEvent) -> tuple[int, int] | None:
    """The reasonless end at ``e``'s instant if it is ``e``: the old key held one end an instant, so it is, unless
    an episode was open before the instant and another began at it, where the old row closed the one before and
    an end known later (a gap, `end_order`) is the new episode's own."""
    k = (e.site, e.channel, e.rule)
    row = conn.execute(_FIND_NO_REASON, (*k, e.time)).fetchone()
    if row is None or end_order(e.end_reason) < end_order(END_GAP):
        return row
    before = conn.execute(_LAST_START_BEFORE, (*k, e.time)).fetchone()[0]
    open_before = before is not None and conn.execute(_END_BETWEEN, (*k, before, e.time)).fetchone() is None
    began_here = conn.execute(_FIND_START, (*k, e.time)).fetchone() is not None
    return None if open_before and began_here else row


def _put(conn: sqlite3.Connection, e: EpisodeEvent, found: tuple[int, int] | None, *, update: bool) -> int | None:
    """Inside a write transaction: store ``e``, journaling what changes (seals). New: inserted and journaled.
    Already stored: with ``update`` (a revision, or a withdrawn row emitted again) its values become ``e``'s,
    journaled as the row's new record when they differ, and a withdrawn one stands again (its flag change
    journaled); without, it is left as it is. ``found``: the row as `_find` gives it. Returns the new row's id,
    None when it was already stored."""
    if found is None:
        rid = int(conn.execute(_NEXT_ID).fetchone()[0])
        if rid > _MAX_ID:  # last_id raised by hand while the store was open: set again from what is proven
            log.error("episode_meta.last_id was set past the largest id SQLite holds (by hand: the store never "
                      "does); set again from the journal's records so that episodes are still recorded")
            conn.execute(_SEED_LAST_ID)
            rid = int(conn.execute(_NEXT_ID).fetchone()[0])
        conn.execute(_INSERT, (rid, *_row(e)))
        conn.execute("UPDATE episode_meta SET value = ? WHERE key = 'last_id'", (rid,))
        journal_episode_events(conn, _rows_by_id(conn, [rid]))
        return rid
    rid, withdrawn = found
    if update:
        before = _rows_by_id(conn, [rid])
        conn.execute(_UPDATE, (e.value, e.limit, e.citation, e.peak, e.end_reason, e.measured, e.unmeasured,
                               int(e.censored), e.confirmed, e.maintenance, rid))
        after = _rows_by_id(conn, [rid])
        if after != before:
            journal_episode_events(conn, after)
        if withdrawn:
            journal_withdrawn(conn, rid, False, e.time)
    return None


def _revision_row(conn: sqlite3.Connection, r: Revision, recorded: float) -> int:
    """Keep the revision with its reason, journaled (seals) in the same transaction; returns its row id."""
    cols = {"recorded": recorded, "site": r.site, "channel": r.channel, "rule": r.rule, "reason": r.reason,
            "late": r.late, "changes": json.dumps(r.changes()),
            "withdrawn": json.dumps([e.to_dict() for e in r.withdrawn], ensure_ascii=False),
            "added": json.dumps([e.to_dict() for e in r.added], ensure_ascii=False)}
    cur = conn.execute(f"INSERT INTO episode_revisions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                       tuple(cols.values()))
    rid = int(cur.lastrowid or 0)
    journal_revision(conn, rid, cols, recorded)
    return rid


def _withdraw(conn: sqlite3.Connection, e: EpisodeEvent) -> int | None:
    """Mark ``e``'s row withdrawn; returns its id (withdrawn now or before), None when it is not stored."""
    found = _find(conn, e)
    if found is None:
        return None
    if not found[1]:
        conn.execute("UPDATE episode_events SET withdrawn = 1 WHERE id = ?", (found[0],))
        journal_withdrawn(conn, found[0], True, e.time)
    return int(found[0])


def _row_id(conn: sqlite3.Connection, e: EpisodeEvent) -> int:
    return int(conn.execute(_FIND, _key(e)).fetchone()[0])


def _filters(
    *, site: str | None, rule: str | None, channel: str | None, start: float | None, end: float | None,
    withdrawn: bool = False,
) -> tuple[str, list[object]]:
    clauses: list[str] = [] if withdrawn else ["withdrawn = 0"]
    args: list[object] = []
    for column, value in (("site", site), ("rule", rule), ("channel", channel)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if start is not None:
        clauses.append("time >= ?")
        args.append(start)
    if end is not None:
        clauses.append("time < ?")
        args.append(end)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args
