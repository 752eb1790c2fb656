"""The append-only, hash-chained journal of episodes, alarm transitions and operator actions (SQLite, WAL).

Enforcement staff rely on this record, so it must show whether it has been altered. Each record carries the
SHA-256 of the previous record; its own hash is the SHA-256 of its canonical JSON encoding::

    {"kind":K,"payload":P,"prev":H,"seq":N,"time":T}

keys sorted, no whitespace, UTF-8 (not ASCII-escaped), where P is the payload exactly as stored in the
``payload`` column (itself canonical JSON), H the previous record's hash in lowercase hex (64 zeros before the
first record), N the sequence number (1, 2, 3, … without gaps) and T the time as the shortest decimal that
reads back as the same double (Python's ``repr``; JavaScript's ``String`` gives the same for epoch seconds).
Anyone can re-check the chain from a copy of the file with that description and nothing else.

Defence in depth: SQL triggers refuse UPDATE and DELETE on the journal, so a mistaken statement fails
loudly; someone editing the file itself (or dropping the triggers) is still caught by `Journal.verify`, which
names the first altered, missing or reordered record. A hash chain cannot by itself reveal records cut off
the *end*: keep `Journal.head` somewhere else (a report, an email) and pass it back as ``anchor`` to check
that too (the daemon does: `monitor.stores.seals` anchors, ``alarm_state.seq``). A break the daemon found at
start is marked by a `BREAK` record; verification reports it once and checks again from the marker.

The chain also seals the evidence outside it (episode events, channel-days of readings): see
`monitor.stores.seals`.

There is deliberately no purge code: 40 CFR 403.12(o) requires monitoring records be kept at least 3 years
(longer during enforcement), and a journal that can delete cannot be trusted not to.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

GENESIS = "0" * 64

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY,      -- 1, 2, 3, ... without gaps
    time REAL NOT NULL,           -- epoch s UTC of the event the record describes
    kind TEXT NOT NULL,           -- episode | transition | action | refusal | engine | ...
    payload TEXT NOT NULL,        -- canonical JSON object
    prev TEXT NOT NULL,           -- hash of the record before (64 zeros for the first)
    hash TEXT NOT NULL            -- SHA-256 of this record's canonical encoding
);
CREATE INDEX IF NOT EXISTS journal_kind ON journal (kind, seq);
CREATE TRIGGER IF NOT EXISTS journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only: records cannot be changed'); END;
CREATE TRIGGER IF NOT EXISTS journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only: records cannot be deleted (40 CFR 403.12(o))'); END;
"""


def canonical(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 text, and no NaN/Infinity (not JSON)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_hash(*, seq: int, time: float, kind: str, payload_text: str, prev: str) -> str:
    """The hash of one record, from its stored columns (the payload text is used verbatim)."""
    # Built by hand rather than by canonical({...}) so the stored payload bytes, not a re-encoding of them,
    # are what is hashed; the result equals canonical() of the record whenever the payload is canonical.
    text = (f'{{"kind":{_kind_json(kind)},"payload":{payload_text},"prev":"{prev}",'
            f'"seq":{seq},"time":{float(time)!r}}}')
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=64)
def _kind_json(kind: str) -> str:  # a handful of kinds, encoded once each
    return canonical(kind)


class Entry(NamedTuple):
    """A record to append: what kind it is, its JSON-serialisable payload, and when it happened (epoch s)."""

    kind: str
    payload: Mapping[str, Any]
    time: float


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    time: float
    kind: str
    payload: dict[str, Any]
    prev: str
    hash: str


Problem = Literal["altered", "missing", "reordered"]
Also = Callable[[list[int]], Iterable[tuple[str, Sequence[Sequence[Any]]]]]


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """``ok`` when every record checks out; otherwise ``first_bad`` is the sequence number where the chain
    first fails, ``problem`` says how, ``detail`` says it in words for the report. ``records`` is how many
    records were read; ``head`` the last good (seq, hash) before the problem (or of the whole journal)."""

    ok: bool
    records: int
    head: tuple[int, str]
    first_bad: int | None = None
    problem: Problem | None = None
    detail: str = ""
    breaks: tuple[str, ...] = ()  # breaks marked by a later `BREAK` record, reported once each


class Journal:
    """One writer's handle on the journal table of a SQLite file (which may hold other tables too).

    ``synchronous="FULL"`` (default) makes every committed record survive a power cut; "NORMAL" survives a
    crash of the daemon but may lose the last commits on power loss, for more throughput (see bench/).
    Each append reads the chain head inside its own write transaction, so several processes may append to
    the same file without forking the chain.
    """

    def __init__(self, *, path: Path, synchronous: Literal["FULL", "NORMAL"] = "FULL",
                 busy_timeout: float = 5.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._settings = (synchronous, busy_timeout)
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        synchronous, busy_timeout = self._settings
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves, so a transaction is exactly
        # one append_many and the write lock is taken before the head is read.
        db = sqlite3.connect(str(self.path), isolation_level=None, timeout=busy_timeout)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.executescript(SCHEMA)
        return db

    def reopen(self) -> None:
        """Connect to the path again: the file was re-created (`monitor.stores.historian_file`)."""
        self._db.close()
        self._db = self._connect()

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection, for tables kept in step with the journal (the alarm engine's current state).
        Write to them only through ``append_many(..., also=...)`` so they commit with the records."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def append(self, kind: str, payload: Mapping[str, Any], time: float) -> int:
        """Append one record in its own transaction; returns its sequence number."""
        return self.append_many([Entry(kind, payload, time)])[0]

    def append_many(self, entries: Iterable[Entry], *, also: Also | None = None) -> list[int]:
        """Append records in one transaction; returns their sequence numbers.

        ``also``, if given, is called inside the transaction with those sequence numbers and returns SQL
        statements, each with a list of parameter rows (run with ``executemany``), to execute in the same
        transaction: a table derived from the journal (the alarm engine's current state) then commits
        together with the records, or not at all.
        """
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            seqs = append_in_transaction(db, entries)
            if also is not None:
                for sql, param_rows in also(seqs):
                    db.executemany(sql, param_rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return seqs

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last record; (0, 64 zeros) when empty. Keep it elsewhere as an anchor."""
        return head_of(self._db)

    def records(self, *, after: int = 0, kinds: Sequence[str] | None = None,
                limit: int | None = None) -> Iterator[Record]:
        """Records with seq > ``after`` in order, optionally only some kinds."""
        sql = "SELECT seq, time, kind, payload, prev, hash FROM journal WHERE seq > ?"
        params: list[Any] = [after]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        for seq, time, kind, text, prev, h in self._db.execute(sql, params):
            yield Record(seq, time, kind, json.loads(text), prev, h)

    def verify(self, *, anchor: tuple[int, str] | None = None) -> VerifyResult:
        """Re-check every record's hash and link, in sequence order; stop at the first problem."""
        return verify_connection(self._db, anchor=anchor)


def ensure_schema(db: sqlite3.Connection) -> None:
    """Create the journal table and its triggers if missing, inside the caller's transaction (for stores
    that append in their own transactions, see `append_in_transaction`)."""
    for statement in SCHEMA.split(";\nCREATE"):
        statement = statement.strip()
        if statement:
            db.execute(statement if statement.startswith("CREATE") else "CREATE " + statement)


def head_of(db: sqlite3.Connection) -> tuple[int, str]:
    """(seq, hash) of the last record of the journal reachable through ``db``; (0, 64 zeros) when empty."""
    row = db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def append_in_transaction(db: sqlite3.Connection, entries: Iterable[Entry]) -> list[int]:
    """Append records through ``db`` inside the write transaction the caller holds (``BEGIN IMMEDIATE``),
    so a store's own rows and the records that seal them commit together or not at all (the episode store
    journals each episode event this way). Returns their sequence numbers."""
    rows: list[tuple[int, float, str, str, str, str]] = []
    seq, prev = head_of(db)
    for kind, payload, time in entries:
        if not kind:
            raise ValueError("a journal record needs a kind")
        text = canonical(dict(payload))
        seq += 1
        h = record_hash(seq=seq, time=time, kind=kind, payload_text=text, prev=prev)
        rows.append((seq, float(time), kind, text, prev, h))
        prev = h
    db.executemany("INSERT INTO journal(seq, time, kind, payload, prev, hash) VALUES (?,?,?,?,?,?)", rows)
    return [r[0] for r in rows]


BREAK = "chain_break"
"""The kind of the record the daemon appends when it finds the chain broken at start: its payload names the
first bad record (``first_bad``) and what was wrong. `verify_connection` reports such a marked break once
and checks the chain again from the marker on, so one old break does not hide later tampering."""


def verify_connection(db: sqlite3.Connection, *, anchor: tuple[int, str] | None = None) -> VerifyResult:
    """Verify the journal table reachable through ``db`` (a read-only connection will do).

    A break marked by a later `BREAK` record is reported (``breaks``), and checking resumes at the marker;
    the result is then not ``ok`` (the record stays altered) unless nothing else is wrong, in which case
    ``problem`` is that of the first marked break and ``detail`` says it was marked."""
    head = (0, GENESIS)
    count = 0
    breaks: list[str] = []
    first: VerifyResult | None = None
    after = 0
    while True:
        bad = _scan(db, head, after)
        count += bad[0]
        head = bad[1]
        if bad[2] is None:
            break
        result = _diagnose(db, count, head, *bad[2])
        marker = _marker_after(db, result.first_bad or head[0] + 1)
        if marker is None:
            return _with_breaks(result, breaks)
        breaks.append(f"record {result.first_bad} {result.problem}: {result.detail} "
                      f"(break marked by record {marker[0]})")
        first = first or result
        head, after = marker, marker[0]
    if first is not None:
        return VerifyResult(False, count, head, first.first_bad, first.problem,
                            f"{first.detail}; marked as a break, intact after it", tuple(breaks))
    if anchor is not None:
        a_seq, a_hash = anchor
        row = db.execute("SELECT hash FROM journal WHERE seq = ?", (a_seq,)).fetchone()
        if row is None:
            return VerifyResult(False, count, head, a_seq, "missing",
                                f"record {a_seq} named by the anchor is missing (journal ends at {head[0]})")
        if row[0] != a_hash:
            return VerifyResult(False, count, head, a_seq, "altered",
                                f"record {a_seq} does not carry the anchor's hash")
    return VerifyResult(True, count, head)


def _scan(db: sqlite3.Connection, head: tuple[int, str], after: int
          ) -> tuple[int, tuple[int, str], tuple[int, str, bool] | None]:
    """Check records with seq > ``after`` from ``head``: (records read, last good head, the first bad
    record's (seq, prev, content_ok) or None)."""
    count = 0
    cur = db.execute("SELECT seq, time, kind, payload, prev, hash FROM journal WHERE seq > ? ORDER BY seq",
                     (after,))
    for seq, time, kind, text, prev, stored in cur:
        count += 1
        content_ok = record_hash(seq=seq, time=time, kind=kind, payload_text=text, prev=prev) == stored
        if content_ok and prev == head[1] and seq == head[0] + 1:
            head = (seq, stored)
            continue
        cur.close()
        return count, head, (seq, prev, content_ok)
    return count, head, None


def _marker_after(db: sqlite3.Connection, first_bad: int) -> tuple[int, str] | None:
    """The first intact `BREAK` record after ``first_bad`` that names a record at or before it."""
    for seq, time, text, prev, stored in db.execute(
            "SELECT seq, time, payload, prev, hash FROM journal WHERE kind = ? AND seq > ? ORDER BY seq",
            (BREAK, first_bad)):
        if record_hash(seq=seq, time=time, kind=BREAK, payload_text=text, prev=prev) != stored:
            continue
        named = json.loads(text).get("first_bad")
        if isinstance(named, int) and named <= first_bad:
            return int(seq), str(stored)
    return None


def _with_breaks(result: VerifyResult, breaks: list[str]) -> VerifyResult:
    if not breaks:
        return result
    return VerifyResult(result.ok, result.records, result.head, result.first_bad, result.problem,
                        result.detail, tuple(breaks))


def _diagnose(db: sqlite3.Connection, count: int, head: tuple[int, str], seq: int, prev: str,
              content_ok: bool) -> VerifyResult:
    """Name the first bad record. ``head`` is the last good record; the row at ``seq`` failed."""
    expected = head[0] + 1
    if seq != expected:
        return VerifyResult(False, count, head, expected, "missing",
                            f"record {expected} is missing (next present is {seq})")
    if prev != head[1]:
        owner = db.execute("SELECT seq FROM journal WHERE hash = ? LIMIT 1", (prev,)).fetchone()
        if owner is not None and owner[0] != head[0]:
            return VerifyResult(False, count, head, seq, "reordered",
                                f"record at {seq} follows the one now at {owner[0]}: records were reordered")
        if content_ok and head[0] > 0:
            # this record is intact but the one before no longer carries the hash it was chained to: that
            # record's content was changed and its hash recomputed to hide it
            before = db.execute("SELECT hash FROM journal WHERE seq = ?", (head[0] - 1,)).fetchone()
            last_good = (head[0] - 1, str(before[0]) if before else GENESIS)
            return VerifyResult(False, count, last_good, head[0], "altered",
                                f"record {head[0]} was altered and re-hashed: {seq} no longer links to it")
        return VerifyResult(False, count, head, seq, "missing",
                            f"the record {seq} was chained to is gone: records removed and renumbered")
    return VerifyResult(False, count, head, seq, "altered",
                        f"record {seq} was altered: its content no longer matches its hash")
