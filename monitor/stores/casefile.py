"""The case file of each exceedance episode: its obligations and their fulfilment, the industry's cause and
corrective action (`monitor.reports.annotations`), enforcement's invalidation, and the files uploaded for them.

Everything lives in the historian's SQLite file beside the episodes and is written through the hash-chained
journal (`alarms.journal`), each row in the same transaction as the journal record that carries it, so the
record guard's chain covers every step: ``obligation`` (created when an episode is confirmed), ``fulfilment``,
``invalidation`` (with one ``obligation_closed`` record for each obligation of the episode still open then),
``withdrawal`` and ``reinstatement`` (`CaseFile.withdraw`, likewise with ``obligation_closed`` records),
``file`` (and ``annotation``). Nothing is ever changed or deleted: SQL triggers refuse UPDATE and DELETE on
these tables. An obligation is fulfilled once: a second fulfilment is refused with the first one's details
(a file written before that rule may hold more than one; all are kept and shown, the first standing).

An episode is named as the reports name it, ``site/channel/rule@start`` (`annotations.episode_id`).
Invalidation is enforcement's decision (the console and this module's callers check the role): an invalidated
episode stays in the record, shown struck through with the reason, and is left out of violation counts
(`invalid_episodes`); its obligations not met by then are closed as "not required: episode invalidated
(<justification>)" (`Obligation.closed`), so they are never overdue. A justification has at least
`MIN_JUSTIFICATION` characters and three words of two letters or more (`justification_problem`): a reason a
reader can check, not a mark.

Withdrawal is the record's own correction, not anyone's decision: late readings re-judged in time order
(`monitor.checks.revisions`) showed that an announced episode never happened, or that it started at another
time (the episode id carries its start, so a moved start is another episode). Its obligations not met by then
are closed as "not required: episode withdrawn (<why>)" and are never overdue; met ones keep their fulfilment.
The rows stay: the record shows what was asked and why it no longer is. Should later readings bring the episode
back, a ``reinstatement`` row reopens them (the latest row of an episode in ``episode_withdrawals`` stands).

Uploaded files (a written report as PDF, attachments) are stored content-addressed under
``<historian>.files/<first two hex digits>/<sha256>``, at most `MAX_FILE` bytes, with their name and media type
in ``casefile_files``.

Read API (a plain ``sqlite3.Connection``, read-only is enough; missing tables read as empty): `obligations`,
`fulfilments`, `invalid_episodes`, `invalidation`, `file_info`, `file_path`.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from alarms.journal import Entry, Journal
from config.obligations import ObligationRule, is_immediate, obligations_of, obliges
from config.schema import Site
from monitor.checks.events import START, EpisodeEvent, iso_utc
from monitor.stores.readonly import has_table

MAX_FILE = 10 * 1024 * 1024  # bytes: a written report or a photo; more belongs in the program's document system
MEDIA = {b"%PDF-": "application/pdf", b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg"}
MAX_TEXT = 4000  # characters of a free-text field
MIN_JUSTIFICATION = 10  # characters: "calibration failed 3 Dec" is a reason, "x" is not
MIN_JUSTIFICATION_WORDS = 3  # words of at least two letters each: "aaaaaaaaaa" is ten characters, not a reason


def justification_problem(reason: str) -> str | None:
    """Why ``reason`` is no justification for a permanent invalidation, or None: it needs at least
    `MIN_JUSTIFICATION` characters, `MIN_JUSTIFICATION_WORDS` words of at least two letters each (digits and
    punctuation do not count as letters), and more than one repeated character."""
    example = " (e.g. \"calibration failed 3 Dec, probe replaced\": what failed, and when)"
    text = reason.strip()
    if len(text) < MIN_JUSTIFICATION:
        return f"the justification must say why in at least {MIN_JUSTIFICATION} characters{example}"
    if len(set(re.sub(r"\s", "", text).lower())) <= 1:
        return f"the justification is one repeated character, not a reason{example}"
    words = re.findall(r"[^\W\d_]{2,}", text)
    if len(words) < MIN_JUSTIFICATION_WORDS:
        return (f"the justification must say why in at least {MIN_JUSTIFICATION_WORDS} words of at least two "
                f"letters each (found {len(words)}){example}")
    return None

_TABLES = ("obligations", "obligation_fulfilments", "episode_invalidations", "episode_withdrawals", "casefile_files")
_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS obligations (
        id INTEGER PRIMARY KEY, episode TEXT NOT NULL, site TEXT NOT NULL, channel TEXT NOT NULL,
        rule TEXT NOT NULL, onset REAL NOT NULL, aware REAL NOT NULL, key TEXT NOT NULL, source TEXT NOT NULL,
        action TEXT NOT NULL, recipient TEXT NOT NULL, written INTEGER NOT NULL, citation TEXT NOT NULL,
        quote TEXT NOT NULL, due REAL NOT NULL, due_text TEXT NOT NULL, created REAL NOT NULL,
        journal_seq INTEGER, UNIQUE (episode, source, key)) STRICT""",
    "CREATE INDEX IF NOT EXISTS obligations_due ON obligations (site, due)",
    """CREATE TABLE IF NOT EXISTS obligation_fulfilments (
        id INTEGER PRIMARY KEY, obligation INTEGER NOT NULL, done_at REAL NOT NULL, how TEXT NOT NULL,
        recipient TEXT NOT NULL, note TEXT NOT NULL, report TEXT, user TEXT NOT NULL, recorded REAL NOT NULL,
        journal_seq INTEGER) STRICT""",
    """CREATE TABLE IF NOT EXISTS episode_invalidations (
        id INTEGER PRIMARY KEY, episode TEXT NOT NULL, site TEXT NOT NULL, reason TEXT NOT NULL,
        user TEXT NOT NULL, time REAL NOT NULL, journal_seq INTEGER) STRICT""",
    """CREATE TABLE IF NOT EXISTS episode_withdrawals (
        id INTEGER PRIMARY KEY, episode TEXT NOT NULL, site TEXT NOT NULL, withdrawn INTEGER NOT NULL,
        reason TEXT NOT NULL, time REAL NOT NULL, journal_seq INTEGER) STRICT""",
    """CREATE TABLE IF NOT EXISTS casefile_files (
        sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, media TEXT NOT NULL, size INTEGER NOT NULL,
        user TEXT NOT NULL, time REAL NOT NULL, journal_seq INTEGER) STRICT""",
    *(f"""CREATE TRIGGER IF NOT EXISTS {t}_no_update BEFORE UPDATE ON {t}
        BEGIN SELECT RAISE(ABORT, 'the case file is append-only: {t} rows cannot be changed'); END"""
      for t in _TABLES),
    *(f"""CREATE TRIGGER IF NOT EXISTS {t}_no_delete BEFORE DELETE ON {t}
        BEGIN SELECT RAISE(ABORT, 'the case file is append-only: {t} rows cannot be deleted'); END"""
      for t in _TABLES),
]


class CaseFileError(ValueError):
    """A request the case file refuses (says why: unknown obligation, empty reason, not a PDF ...)."""


@dataclass(frozen=True, slots=True)
class Fulfilment:
    obligation: int
    done_at: float  # when the industry did it (epoch s UTC), as it states
    how: str  # telephone, e-mail, letter, written report ...
    recipient: str  # to whom
    note: str
    report: str | None  # sha256 of the uploaded written report, if any
    user: str
    recorded: float  # when it was entered


@dataclass(frozen=True, slots=True)
class Obligation:
    """One obligation of one episode, with its latest fulfilment. `status` is judged at a given time."""

    id: int
    episode: str
    site: str
    channel: str
    rule: str
    onset: float
    aware: float
    key: str
    source: str
    action: str
    recipient: str
    written: bool
    citation: str
    quote: str
    due: float
    due_text: str
    done: Fulfilment | None = None  # the fulfilment that stands (the first recorded)
    later: tuple[Fulfilment, ...] = ()  # further fulfilments a file from before the one-fulfilment rule holds
    closed: str | None = None  # "not required: episode invalidated (...)" or "... withdrawn (...)", while unmet

    @property
    def immediate(self) -> bool:
        """An "immediately" duty (no period stated): never judged late or overdue, outstanding until met."""
        return is_immediate(self.due_text)

    def status(self, now: float) -> str:
        """``done`` (on time: at or before the due time), ``done late``, ``not required`` (its episode was
        invalidated or withdrawn before it was met), ``overdue`` or ``open``; an "immediately" duty is ``done`` once met
        and ``outstanding`` until then (`config.obligations.is_immediate`)."""
        if self.done is not None:
            return "done" if self.immediate or self.done.done_at <= self.due else "done late"
        if self.closed is not None:
            return "not required"
        if self.immediate:
            return "outstanding"
        return "overdue" if now > self.due else "open"

    def to_json(self, now: float) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("id", "episode", "site", "channel", "rule", "onset", "aware", "key",
                                             "source", "action", "recipient", "written", "citation", "quote",
                                             "due", "due_text")}
        out["status"] = self.status(now)
        out["done"] = None if self.done is None else _fulfilment_json(self.done)
        out["later"] = [_fulfilment_json(f) for f in self.later]
        out["closed"] = self.closed
        return out


def _fulfilment_json(f: Fulfilment) -> dict[str, Any]:
    return {k: getattr(f, k) for k in ("done_at", "how", "recipient", "note", "report", "user", "recorded")}


def closed_text(reason: str) -> str:
    """What an obligation of an invalidated episode says instead of a due time passing."""
    return f"not required: episode invalidated ({reason})"


def withdrawn_text(reason: str) -> str:
    """What an obligation of an episode the corrected record no longer holds says (`CaseFile.withdraw`)."""
    return f"not required: episode withdrawn ({reason})"


@dataclass(frozen=True, slots=True)
class Invalidation:
    episode: str
    site: str
    reason: str
    user: str
    time: float


@dataclass(frozen=True, slots=True)
class StoredFile:
    sha256: str
    name: str
    media: str
    size: int
    user: str
    time: float


def episode_key(site: str, channel: str, rule: str, start: float) -> str:
    """The episode's id as the reports print it (`monitor.reports.annotations.episode_id`)."""
    return f"{site}/{channel}/{rule}@{iso_utc(start)}"


def ensure_schema(conn: sqlite3.Connection) -> None:
    for sql in _SCHEMA:
        conn.execute(sql)


def files_dir(historian: Path) -> Path:
    return historian.with_name(historian.name + ".files")


def file_path(historian: Path, sha256: str) -> Path:
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise CaseFileError(f"not a file id: {sha256!r}")
    return files_dir(historian) / sha256[:2] / sha256


# ---- reading ---------------------------------------------------------------------------------------------

def _has(conn: sqlite3.Connection, table: str) -> bool:
    return has_table(conn, table)  # the hub's database too (`monitor.stores.readonly`)


_OB_COLUMNS = ("id, episode, site, channel, rule, onset, aware, key, source, action, recipient, written, citation, "
               "quote, due, due_text")


def obligations(conn: sqlite3.Connection, *, site: str | None = None, sites: Iterable[str] | None = None,
                episode: str | None = None, ids: Sequence[int] | None = None) -> list[Obligation]:
    """Obligations (each with its latest fulfilment), by due time; filtered by site(s), episode or ids."""
    if not _has(conn, "obligations"):
        return []
    where, params = _where(site=site, sites=sites, episode=episode)
    if ids is not None:
        where.append(f"id IN ({','.join('?' * len(ids))})")
        params += list(ids)
    sql = f"SELECT {_OB_COLUMNS} FROM obligations"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = conn.execute(sql + " ORDER BY due, id", params).fetchall()
    done = all_fulfilments(conn, [int(r[0]) for r in rows])
    invalid = invalid_episodes(conn) if rows else {}
    gone = withdrawn_episodes(conn) if rows else {}
    return [_obligation(r, done.get(int(r[0]), []), invalid.get(r[1]), gone.get(r[1])) for r in rows]


def _obligation(r: Sequence[Any], done: Sequence[Fulfilment], inv: Invalidation | None,
                withdrawn: str | None) -> Obligation:
    closed = (None if done else closed_text(inv.reason) if inv is not None
              else withdrawn_text(withdrawn) if withdrawn is not None else None)
    return Obligation(id=int(r[0]), episode=r[1], site=r[2], channel=r[3], rule=r[4], onset=r[5], aware=r[6],
                      key=r[7], source=r[8], action=r[9], recipient=r[10], written=bool(r[11]), citation=r[12],
                      quote=r[13], due=r[14], due_text=r[15], done=done[0] if done else None,
                      later=tuple(done[1:]), closed=closed)


def _where(*, site: str | None, sites: Iterable[str] | None, episode: str | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if site is not None:
        where.append("site = ?")
        params.append(site)
    if sites is not None:
        wanted = sorted(sites)
        where.append(f"site IN ({','.join('?' * len(wanted))})")
        params += wanted
    if episode is not None:
        where.append("episode = ?")
        params.append(episode)
    return where, params


def all_fulfilments(conn: sqlite3.Connection, obligation_ids: Sequence[int]) -> dict[int, list[Fulfilment]]:
    """Every fulfilment recorded for each of these obligations, first recorded first."""
    if not obligation_ids or not _has(conn, "obligation_fulfilments"):
        return {}
    rows = conn.execute(
        "SELECT obligation, done_at, how, recipient, note, report, user, recorded FROM obligation_fulfilments "
        f"WHERE obligation IN ({','.join('?' * len(obligation_ids))}) ORDER BY recorded, id", list(obligation_ids))
    out: dict[int, list[Fulfilment]] = {}
    for r in rows:
        out.setdefault(int(r[0]), []).append(Fulfilment(*r))
    return out


def fulfilments(conn: sqlite3.Connection, obligation_ids: Sequence[int]) -> dict[int, Fulfilment]:
    """The fulfilment that stands for each of these obligations: the first recorded."""
    return {k: v[0] for k, v in all_fulfilments(conn, obligation_ids).items()}


def invalid_episodes(conn: sqlite3.Connection, *, site: str | None = None) -> dict[str, Invalidation]:
    """Every invalidated episode (by id), with enforcement's reason: left out of violation counts."""
    if not _has(conn, "episode_invalidations"):
        return {}
    where, params = _where(site=site, sites=None, episode=None)
    sql = "SELECT episode, site, reason, user, time FROM episode_invalidations"
    rows = conn.execute(sql + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY time, id", params)
    return {r[0]: Invalidation(*r) for r in rows}


def withdrawn_episodes(conn: sqlite3.Connection) -> dict[str, str]:
    """Every episode the corrected record no longer holds (by id), with why: the latest row of each stands."""
    if not _has(conn, "episode_withdrawals"):
        return {}
    latest: dict[str, tuple[bool, str]] = {}
    for episode, withdrawn, reason in conn.execute(
            "SELECT episode, withdrawn, reason FROM episode_withdrawals ORDER BY time, id"):
        latest[episode] = (bool(withdrawn), reason)
    return {k: reason for k, (withdrawn, reason) in latest.items() if withdrawn}


def invalidation(conn: sqlite3.Connection, episode: str) -> Invalidation | None:
    if not _has(conn, "episode_invalidations"):
        return None
    r = conn.execute("SELECT episode, site, reason, user, time FROM episode_invalidations WHERE episode = ? "
                     "ORDER BY time, id LIMIT 1", (episode,)).fetchone()
    return None if r is None else Invalidation(*r)


def file_info(conn: sqlite3.Connection, sha256: str) -> StoredFile | None:
    if not _has(conn, "casefile_files"):
        return None
    r = conn.execute("SELECT sha256, name, media, size, user, time FROM casefile_files WHERE sha256 = ?",
                     (sha256,)).fetchone()
    return None if r is None else StoredFile(*r)


def overdue_sites(conn: sqlite3.Connection, now: float) -> dict[str, list[Obligation]]:
    """The sites with obligations past due, not fulfilled and not closed by an invalidation of their episode,
    and those obligations (by due time); "immediately" duties not yet met (``outstanding``) among them, the
    alarm naming them "notice outstanding" rather than overdue."""
    if not _has(conn, "obligations"):
        return {}
    out: dict[str, list[Obligation]] = {}
    ids = [int(r[0]) for r in conn.execute(
        "SELECT id FROM obligations WHERE due < ? AND id NOT IN (SELECT obligation FROM obligation_fulfilments)",
        (now,))]
    for o in obligations(conn, ids=ids) if ids else []:
        if o.status(now) in ("overdue", "outstanding"):
            out.setdefault(o.site, []).append(o)
    return out


# ---- writing ---------------------------------------------------------------------------------------------

class CaseFile:
    """Writes to the case file through a journal (the daemon's own, or one opened for a console or CLI call)."""

    def __init__(self, journal: Journal, timezones: dict[str, str] | None = None) -> None:
        self.journal = journal
        self.timezones = dict(timezones or {})  # site id -> IANA zone, for times in messages
        ensure_schema(journal.connection)

    @classmethod
    def open(cls, path: Path, timezones: dict[str, str] | None = None) -> CaseFile:
        return cls(Journal(path=path), timezones)

    def close(self) -> None:
        self.journal.close()

    def open_obligations(self, site: Site, events: Sequence[EpisodeEvent], now: float) -> list[int]:
        """Create the obligations of every violation episode that starts among ``events`` (idempotent: an
        episode's obligations are created once). Returns the new obligations' ids."""
        rules = obligations_of(site)
        new: list[tuple[EpisodeEvent, ObligationRule]] = [
            (e, r) for e in events if e.event == START and e.site == site.id and obliges(site, e.channel, e.rule)
            for r in rules]
        if not new:
            return []
        conn = self.journal.connection
        fresh = [(e, r) for e, r in new if conn.execute(
            "SELECT 1 FROM obligations WHERE episode = ? AND source = ? AND key = ?",
            (episode_key(e.site, e.channel, e.rule, e.time), r.source, r.key)).fetchone() is None]
        rows = [_obligation_row(site, e, r, now) for e, r in fresh]
        if not rows:
            return []
        entries = [Entry("obligation", {k: v for k, v in row.items() if k != "created"}, now) for row in rows]

        def insert(seqs: list[int]) -> list[tuple[str, Sequence[Sequence[Any]]]]:
            cols = [*rows[0], "journal_seq"]
            return [(f"INSERT INTO obligations ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                     [[*row.values(), seq] for row, seq in zip(rows, seqs, strict=True)])]

        self.journal.append_many(entries, also=insert)
        return [int(r[0]) for r in conn.execute(
            f"SELECT id FROM obligations ORDER BY id DESC LIMIT {len(rows)}").fetchall()][::-1]

    def fulfil(self, obligation: int, *, done_at: float, how: str, recipient: str, user: str, now: float,
               note: str = "", report: str | None = None) -> Fulfilment:
        """Record that the industry did what the obligation asks (how, to whom, when; the written report's file
        id where the obligation is a written report)."""
        found = obligations(self.journal.connection, ids=[obligation])
        if not found:
            raise CaseFileError(f"no obligation {obligation}")
        how, recipient, note = _text(how, "how", True), _text(recipient, "to whom", True), _text(note, "note", False)
        if report is not None and file_info(self.journal.connection, report) is None:
            raise CaseFileError(f"no uploaded file {report}")
        if found[0].written and report is None:
            raise CaseFileError(f"{found[0].citation} asks for a written report: upload it (PDF) with the fulfilment")
        if done_at > now + 300:
            raise CaseFileError("the time it was done is in the future")
        if done_at < found[0].onset:
            raise CaseFileError(f"the time it was done is before the episode started ({self._local(found[0])})")
        if found[0].done is not None:
            d = found[0].done
            raise CaseFileError(
                f"obligation {obligation} is already recorded as done ({self._local(found[0], d.done_at)}, "
                f"{d.how} to {d.recipient}, entered by {d.user}); the record keeps that one: a correction "
                "belongs in the episode's cause and corrective action")
        f = Fulfilment(obligation, done_at, how, recipient, note, report, user, now)
        payload = {"obligation": obligation, "episode": found[0].episode, "done_at": done_at, "how": how,
                   "recipient": recipient, "note": note, "report": report, "user": user}
        self.journal.append_many([Entry("fulfilment", payload, now)], also=lambda seqs: [(
            "INSERT INTO obligation_fulfilments (obligation, done_at, how, recipient, note, report, user, recorded, "
            "journal_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [[*(getattr(f, k) for k in (
                "obligation", "done_at", "how", "recipient", "note", "report", "user", "recorded")), seqs[0]]])])
        return f

    def _local(self, o: Obligation, t: float | None = None) -> str:
        """A time for a message, in the site's zone when the obligation's site is known (`timezone`)."""
        from monitor.logtext import local_time

        zone = self.timezones.get(o.site)
        return local_time(o.onset if t is None else t, ZoneInfo(zone)) if zone else iso_utc(
            o.onset if t is None else t)

    def invalidate(self, episode: str, *, site: str, reason: str, user: str, now: float) -> Invalidation:
        """Mark an episode invalid (enforcement's decision; the caller checks the role). Once: it stays. Its
        obligations not met by now are closed as not required, one journal record each, in the same
        transaction."""
        reason = _text(reason, "justification", True)
        if invalidation(self.journal.connection, episode) is not None:
            raise CaseFileError(f"episode {episode} is already marked invalid")
        problem = justification_problem(reason)
        if problem:
            raise CaseFileError(problem)
        inv = Invalidation(episode, site, reason, user, now)
        still_open = [o for o in obligations(self.journal.connection, episode=episode) if o.done is None]
        entries = [Entry("invalidation", {"episode": episode, "site": site, "reason": reason, "user": user}, now),
                   *(Entry("obligation_closed", {"obligation": o.id, "episode": episode,
                                                 "status": closed_text(reason), "user": user}, now)
                     for o in still_open)]
        self.journal.append_many(
            entries,
            also=lambda seqs: [("INSERT INTO episode_invalidations (episode, site, reason, user, time, journal_seq) "
                                "VALUES (?, ?, ?, ?, ?, ?)", [[episode, site, reason, user, now, seqs[0]]])])
        return inv

    def withdraw(self, episode: str, *, site: str, reason: str, now: float) -> list[int]:
        """The corrected record no longer holds ``episode`` (late readings, `monitor.checks.revisions`): its
        obligations not met and not already closed are closed as not required (`withdrawn_text`), one
        ``obligation_closed`` record each, in the transaction of the ``withdrawal`` record; the ids closed.
        Nothing is deleted; an episode already withdrawn, or with no obligations, is left as it is."""
        conn = self.journal.connection
        if episode in withdrawn_episodes(conn):
            return []
        found = obligations(conn, episode=episode)
        if not found:
            return []
        still_open = [o for o in found if o.done is None and o.closed is None]
        entries = [Entry("withdrawal", {"episode": episode, "site": site, "reason": reason}, now),
                   *(Entry("obligation_closed", {"obligation": o.id, "episode": episode,
                                                 "status": withdrawn_text(reason), "user": "pretreat"}, now)
                     for o in still_open)]
        self.journal.append_many(entries, also=lambda seqs: [(
            "INSERT INTO episode_withdrawals (episode, site, withdrawn, reason, time, journal_seq) "
            "VALUES (?, ?, 1, ?, ?, ?)", [[episode, site, reason, now, seqs[0]]])])
        return [o.id for o in still_open]

    def reinstate(self, episode: str, *, site: str, reason: str, now: float) -> bool:
        """Later readings bring a withdrawn episode back: its obligations stand again (their due times are
        those of the episode, as before). False when the episode is not withdrawn."""
        if episode not in withdrawn_episodes(self.journal.connection):
            return False
        self.journal.append_many(
            [Entry("reinstatement", {"episode": episode, "site": site, "reason": reason}, now)],
            also=lambda seqs: [("INSERT INTO episode_withdrawals (episode, site, withdrawn, reason, time, "
                                "journal_seq) VALUES (?, ?, 0, ?, ?, ?)", [[episode, site, reason, now, seqs[0]]])])
        return True

    def carry_fulfilments(self, old: str, new: str, *, now: float) -> list[int]:
        """The fulfilments of ``old``'s obligations recorded again on ``new``'s of the same source and key (an
        episode whose start moved: the notice already given was given for this discharge and is not asked
        twice). Each keeps what the industry stated (when, how, to whom, who entered it) and says where it came
        from; it is judged against the new due time, so a notice given after a start found earlier may read
        ``done late``. The ids of the new obligations that got one."""
        conn = self.journal.connection
        met = {(o.source, o.key): o for o in obligations(conn, episode=old) if o.done is not None}
        targets = [(o, met[(o.source, o.key)]) for o in obligations(conn, episode=new)
                   if o.done is None and (o.source, o.key) in met]
        if not targets:
            return []
        rows = []
        for o, was in targets:
            d = was.done
            assert d is not None
            note = f"carried from obligation #{was.id} of episode {old} (its start corrected)"
            rows.append((o, Fulfilment(o.id, d.done_at, d.how, d.recipient, f"{d.note}; {note}" if d.note else note,
                                       d.report, d.user, now)))
        fields = ("obligation", "done_at", "how", "recipient", "note", "report", "user", "recorded")
        entries = [Entry("fulfilment", {"obligation": f.obligation, "episode": o.episode, "done_at": f.done_at,
                                        "how": f.how, "recipient": f.recipient, "note": f.note,
                                        "report": f.report, "user": f.user}, now) for o, f in rows]
        self.journal.append_many(entries, also=lambda seqs: [(
            f"INSERT INTO obligation_fulfilments ({', '.join(fields)}, journal_seq) VALUES "
            f"({', '.join('?' * (len(fields) + 1))})",
            [[*(getattr(f, k) for k in fields), seq] for (_, f), seq in zip(rows, seqs, strict=True)])])
        return [o.id for o, _ in rows]

    def store_file(self, data: bytes, *, name: str, user: str, now: float,
                   media: Iterable[str] = ("application/pdf",)) -> StoredFile:
        """Keep an uploaded file, content-addressed; the same bytes uploaded again are the same file."""
        if len(data) > MAX_FILE:
            raise CaseFileError(f"the file is {len(data)} bytes; at most {MAX_FILE} are accepted")
        kind = next((m for magic, m in MEDIA.items() if data.startswith(magic)), None)
        allowed = tuple(media)
        if kind not in allowed:
            raise CaseFileError(f"not an accepted file ({', '.join(allowed)}): {name!r}")
        sha = hashlib.sha256(data).hexdigest()
        known = file_info(self.journal.connection, sha)
        if known is not None:
            return known
        path = file_path(self.journal.path, sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        clean = os.path.basename(name.replace("\\", "/"))[:200] or "upload"
        stored = StoredFile(sha, clean, kind or "", len(data), user, now)
        self.journal.append_many(
            [Entry("file", {"sha256": sha, "name": clean, "media": stored.media, "size": len(data), "user": user},
                   now)],
            also=lambda seqs: [("INSERT INTO casefile_files (sha256, name, media, size, user, time, journal_seq) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?)", [[sha, clean, stored.media, len(data), user, now,
                                                                  seqs[0]]])])
        return stored


def _obligation_row(site: Site, e: EpisodeEvent, r: ObligationRule, now: float) -> dict[str, Any]:
    aware = e.confirmed if e.confirmed is not None else e.time
    return {"episode": episode_key(e.site, e.channel, e.rule, e.time), "site": e.site, "channel": e.channel,
            "rule": e.rule, "onset": e.time, "aware": aware, "key": r.key, "source": r.source, "action": r.action,
            "recipient": r.to, "written": int(r.written), "citation": r.citation, "quote": r.quote,
            "due": r.due(onset=e.time, aware=aware, timezone=site.timezone), "due_text": r.due_text,
            "created": now}


def _text(value: object, what: str, required: bool) -> str:
    text = str(value or "").strip()
    if required and not text:
        raise CaseFileError(f"{what} is required")
    if len(text) > MAX_TEXT:
        raise CaseFileError(f"{what} is limited to {MAX_TEXT} characters")
    return text

