"""The operator command queue: how `pretreat alarms ack|shelve|reset …` reaches the running daemon's engine.

The CLI is another process; the alarm engine lives in the daemon and is not thread-safe. They meet in the
daemon's SQLite file (the one holding the journal and ``alarm_state``), in a durable queue table::

    operator_commands(id, alarm_id, action, user, note, until, reason, requested_at, expires_at,
                      status, result, taken_at, done_at)

Life of a command (``status``):

- ``pending``: inserted by `CommandQueue.submit` (the CLI).
- ``taken``: claimed atomically by the daemon's `CommandQueue.take_pending` (one UPDATE … RETURNING), so a
  command is carried out at most once even if two ticks or two daemons race for it.
- ``done`` / ``refused``: set by `CommandQueue.complete` with ``result``, JSON: ``{"transitions": [...]}``
  (each `Transition.to_payload()` with its journal ``seq``) or ``{"refusal": Refusal.to_payload()}``.
  The engine journals the action or the refusal itself; this table only carries the answer back.
- ``expired``: the daemon picked it up after ``expires_at`` (it was down, or busy): it is *not* carried out.
  An acknowledgement applied minutes or hours after it was typed would acknowledge an occurrence the
  operator never saw (ISA-18.2: an acknowledgement is of what was displayed), so a late command is refused.
- ``cancelled``: the requester withdrew it while still pending (`cancel`). The CLI does this when nothing
  answers within its wait (default 5 s): the daemon does not appear to be running, and a command that
  silently takes effect whenever the daemon next starts would surprise the operator. ``--no-wait`` leaves a
  command queued instead, until its ``expires_at`` (the CLI's ``--ttl``).

A daemon killed between carrying out a command and recording the answer leaves it ``taken``; the first
`take_pending` of the next daemon marks such commands ``refused`` with a reason pointing at the journal,
which holds the truth (the engine commits the action before the answer is written). Nothing is re-applied.

Times are epoch seconds UTC (``until``: shelve expiry). Rows are never deleted: the table is a small audit
trail of its own, next to the journal.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alarms.model import (
    ACTION_NAMES,
    Ack,
    Action,
    Comment,
    InService,
    OutOfService,
    Refusal,
    Reset,
    Seen,
    Shelve,
    Transition,
    Unshelve,
)

if TYPE_CHECKING:
    from alarms.engine import AlarmEngine

log = logging.getLogger(__name__)

ACTIONS = tuple(ACTION_NAMES.values())  # ack, shelve, unshelve, reset, out-of-service, in-service, seen, comment
DEFAULT_TTL = 60.0  # s a submitted command stays valid unless the requester says otherwise


class Status(StrEnum):
    PENDING = "pending"
    TAKEN = "taken"
    DONE = "done"
    REFUSED = "refused"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self not in (Status.PENDING, Status.TAKEN)


_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS operator_commands (
    id INTEGER PRIMARY KEY,
    alarm_id TEXT NOT NULL,               -- site/channel/rule as typed (the engine judges it)
    action TEXT NOT NULL CHECK (action IN ({', '.join(repr(a) for a in ACTIONS)})),
    user TEXT NOT NULL,
    note TEXT NOT NULL,
    until REAL,                           -- shelve expiry, epoch s UTC
    reason TEXT NOT NULL,                 -- shelve / out-of-service reason
    requested_at REAL NOT NULL,           -- epoch s UTC
    expires_at REAL NOT NULL,             -- not carried out if picked up later than this
    status TEXT NOT NULL CHECK (status IN ({', '.join(repr(s.value) for s in Status)})),
    result TEXT,                          -- JSON answer once final
    taken_at REAL,
    done_at REAL
);
CREATE INDEX IF NOT EXISTS operator_commands_open ON operator_commands (status) WHERE status IN ('pending', 'taken');
"""
_COLUMNS = ("id, alarm_id, action, user, note, until, reason, requested_at, expires_at, status, result, "
            "taken_at, done_at")


@dataclass(frozen=True, slots=True)
class Command:
    """One queued operator command, as stored. ``result`` is the parsed JSON answer (None until final)."""

    id: int
    alarm_id: str
    action: str
    user: str
    note: str
    until: float | None
    reason: str
    requested_at: float
    expires_at: float
    status: Status
    result: dict[str, Any] | None
    taken_at: float | None
    done_at: float | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Command:
        (cid, alarm_id, action, user, note, until, reason, requested, expires, status, result, taken,
         done) = row
        return cls(id=int(cid), alarm_id=alarm_id, action=action, user=user, note=note, until=until,
                   reason=reason, requested_at=requested, expires_at=expires, status=Status(status),
                   result=json.loads(result) if result else None, taken_at=taken, done_at=done)

    def to_action(self) -> Action:
        """The engine's action object; ValueError if the command cannot be one (no shelve expiry)."""
        if self.action == "ack":
            return Ack(user=self.user, note=self.note)
        if self.action == "shelve":
            if self.until is None:
                raise ValueError("a shelve command needs an expiry (until)")
            return Shelve(user=self.user, until=self.until, reason=self.reason)
        if self.action == "unshelve":
            return Unshelve(user=self.user, note=self.note)
        if self.action == "reset":
            return Reset(user=self.user, note=self.note)
        if self.action == "out-of-service":
            return OutOfService(user=self.user, reason=self.reason)
        if self.action == "in-service":
            return InService(user=self.user, note=self.note)
        if self.action == "seen":
            return Seen(user=self.user, note=self.note)
        if self.action == "comment":
            return Comment(user=self.user, note=self.note)
        raise ValueError(f"unknown action {self.action!r}")

    def refusal(self, reason: str) -> Refusal:
        return Refusal(alarm_id=self.alarm_id, action=self.action, user=self.user, reason=reason)

    @property
    def transitions(self) -> list[dict[str, Any]]:
        """The transitions the daemon made for this command (journal payloads with ``seq``), if done."""
        return list((self.result or {}).get("transitions", []))

    @property
    def why_not(self) -> str:
        """Why the command was not carried out (refused, expired, cancelled); empty if it was or is open."""
        r = self.result or {}
        return str(r.get("refusal", {}).get("reason", "") or r.get("reason", ""))


class CommandQueue:
    """Both ends of the queue over the SQLite file at ``path`` (its own connection, WAL, autocommit).

    The CLI calls `submit`, `wait`, `cancel`; the daemon calls `take_pending` and `complete` (or simply
    `apply_pending`) from its event loop on each clock tick. ``clock`` gives "now" when a caller passes none.
    With ``create=False`` a missing file is an error (a CLI must not create the daemon's database).
    """

    def __init__(self, *, path: Path, busy_timeout: float = 5.0, create: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise FileNotFoundError(f"no database at {self.path}: has the daemon ever run with this site file?")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._recovered = False
        self._db = sqlite3.connect(str(self.path), isolation_level=None, timeout=busy_timeout)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a queued command survives a power cut
            self._db.executescript(_SCHEMA)
            _widen_actions(self._db)
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CommandQueue:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- the requester's side (CLI) ------------------------------------------------------------------

    def submit(self, *, alarm_id: str, action: str, user: str, note: str = "", until: float | None = None,
               reason: str = "", ttl: float = DEFAULT_TTL, now: float | None = None) -> int:
        """Queue a command; returns its id. ValueError for an unknown action or a non-positive ``ttl``
        (whether the alarm exists and the action is allowed is for the engine to judge)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        if until is not None and not math.isfinite(until):
            raise ValueError(f"until must be a finite time, got {until!r}")
        t = self._clock() if now is None else now
        cur = self._db.execute(
            "INSERT INTO operator_commands (alarm_id, action, user, note, until, reason, requested_at, "
            "expires_at, status) VALUES (?,?,?,?,?,?,?,?,?)",
            (alarm_id, action, user, note, until, reason, t, t + ttl, Status.PENDING.value))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def get(self, command_id: int) -> Command:
        """The command as stored now; KeyError if there is no such command."""
        row = self._db.execute(f"SELECT {_COLUMNS} FROM operator_commands WHERE id = ?",
                               (command_id,)).fetchone()
        if row is None:
            raise KeyError(command_id)
        return Command.from_row(row)

    def wait(self, command_id: int, timeout: float, *, poll: float = 0.05) -> Command:
        """Poll until the command is final or ``timeout`` (s) has passed; returns it as it then stands
        (check ``status``). Blocking: for the CLI, not the daemon's event loop."""
        deadline = time.monotonic() + timeout
        while True:
            cmd = self.get(command_id)
            if cmd.status.final or time.monotonic() >= deadline:
                return cmd
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))

    def cancel(self, command_id: int, *, why: str = "withdrawn by the requester",
               now: float | None = None) -> bool:
        """Withdraw a command still pending; False if the daemon has already taken it (or it is final)."""
        t = self._clock() if now is None else now
        cur = self._db.execute(
            "UPDATE operator_commands SET status = ?, result = ?, done_at = ? WHERE id = ? AND status = ?",
            (Status.CANCELLED.value, _dumps({"reason": why}), t, command_id, Status.PENDING.value))
        return cur.rowcount == 1

    # ---- the daemon's side -----------------------------------------------------------------------------

    def take_pending(self, now: float | None = None) -> list[Command]:
        """Claim every pending command (oldest first) and return them, status ``taken``.

        Cheap when there is nothing to do (one indexed read, no write lock), so it can run on every tick.
        The first call also settles commands an earlier daemon left ``taken`` (see the module doc), so a
        daemon keeps one queue for its whole life and only one daemon serves a file.
        """
        t = self._clock() if now is None else now
        if not self._recovered:
            self._recovered = True
            self._settle_interrupted(t)
        if self._db.execute("SELECT 1 FROM operator_commands WHERE status = ? LIMIT 1",
                            (Status.PENDING.value,)).fetchone() is None:
            return []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            rows = self._db.execute(
                f"UPDATE operator_commands SET status = ?, taken_at = ? WHERE status = ? RETURNING {_COLUMNS}",
                (Status.TAKEN.value, t, Status.PENDING.value)).fetchall()
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return sorted((Command.from_row(r) for r in rows), key=lambda c: c.id)  # RETURNING has no order

    def complete(self, command_id: int, outcome: Sequence[Transition] | Refusal, *,
                 expired: bool = False, now: float | None = None) -> None:
        """Record the answer to a taken command: the transitions it made (``done``, possibly none) or the
        refusal (``refused``, or ``expired`` when ``expired``)."""
        t = self._clock() if now is None else now
        if isinstance(outcome, Refusal):
            status = Status.EXPIRED if expired else Status.REFUSED
            result: dict[str, Any] = {"refusal": outcome.to_payload()}
        else:
            status = Status.DONE
            result = {"transitions": [{**tr.to_payload(), "seq": tr.seq} for tr in outcome]}
        cur = self._db.execute(
            "UPDATE operator_commands SET status = ?, result = ?, done_at = ? WHERE id = ? AND status = ?",
            (status.value, _dumps(result), t, command_id, Status.TAKEN.value))
        if cur.rowcount != 1:
            raise KeyError(f"command {command_id} is not taken: complete() answers commands from take_pending()")

    def _settle_interrupted(self, now: float) -> None:
        why = ("the daemon stopped while carrying out this command: whether it took effect is in the journal "
               "(pretreat alarms watch / the journal's action records)")
        rows = self._db.execute("SELECT id, alarm_id, action, user FROM operator_commands WHERE status = ?",
                                (Status.TAKEN.value,)).fetchall()
        for cid, alarm_id, action, user in rows:
            log.warning("operator command %d (%s %s by %s) was interrupted by a daemon stop; marked refused",
                        cid, action, alarm_id, user)
            refusal = Refusal(alarm_id=alarm_id, action=action, user=user, reason=why)
            self._db.execute("UPDATE operator_commands SET status = ?, result = ?, done_at = ? "
                             "WHERE id = ? AND status = ?",
                             (Status.REFUSED.value, _dumps({"refusal": refusal.to_payload()}), now, cid,
                              Status.TAKEN.value))


def apply_pending(queue: CommandQueue, engine: AlarmEngine, now: float) -> list[Transition]:
    """The daemon's tick step: claim pending commands, carry each out with ``engine.act(alarm_id, action,
    now)``, record each answer, and return every transition made (committed, with journal ``seq``) for the
    delivery layer and the Modbus gateway.

    A command picked up after its ``expires_at`` is not carried out (status ``expired``, reason given). A
    write failure of the engine (disk full) is logged and answered as a refusal; the other commands still
    run, and the tick goes on (a queue that cannot be read this tick is read on the next).
    """
    made: list[Transition] = []
    try:
        taken = queue.take_pending(now)
    except sqlite3.Error as exc:  # the file is locked or unwritable: the commands wait for the next tick
        log.error("operator commands not read this tick: %s", exc)
        return made
    for cmd in taken:
        expired = now > cmd.expires_at
        outcome = _carry_out(cmd, engine, now, expired=expired)
        if not isinstance(outcome, Refusal):
            made += outcome
        try:
            queue.complete(cmd.id, outcome, expired=expired, now=now)
        except sqlite3.Error as exc:  # left "taken": the next daemon start settles it
            log.error("operator command %d: answer not recorded: %s", cmd.id, exc)
    return made


def _carry_out(cmd: Command, engine: AlarmEngine, now: float, *, expired: bool) -> list[Transition] | Refusal:
    """``engine.act`` for one command; a command refused before reaching the engine (expired, malformed)
    is journaled as a refusal here, as the engine journals its own, so the journal lists every request."""
    if expired:
        refusal = cmd.refusal(f"expired: requested at {cmd.requested_at:.3f}, valid until "
                              f"{cmd.expires_at:.3f}, picked up at {now:.3f}; not carried out")
    else:
        try:
            action = cmd.to_action()
        except ValueError as exc:
            refusal = cmd.refusal(str(exc))
        else:
            try:
                return engine.act(cmd.alarm_id, action, now)
            except sqlite3.Error as exc:
                log.error("operator command %d (%s %s) could not be recorded: %s", cmd.id, cmd.action,
                          cmd.alarm_id, exc)
                return cmd.refusal(f"the daemon could not record it: {exc}")
    log.warning("operator command %d (%s %s by %s) refused: %s", cmd.id, cmd.action, cmd.alarm_id, cmd.user,
                refusal.reason)
    engine.counters["refusals"] += 1
    try:
        engine.journal.append("refusal", {**refusal.to_payload(), "command": cmd.id}, now)
    except sqlite3.Error as exc:
        log.error("operator command %d: refusal not journaled: %s", cmd.id, exc)
    return refusal


def _widen_actions(db: sqlite3.Connection) -> None:
    """A queue table made by an older daemon checks ``action`` against the actions it knew: rebuild it (rows
    kept, ids kept) so that newer actions (``seen``, ``comment``) can be queued. SQLite cannot alter a CHECK
    constraint in place; the copy runs in one transaction, so a crash leaves either table whole."""
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'operator_commands'").fetchone()
    if row is None or all(repr(a) in row[0] for a in ACTIONS):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("ALTER TABLE operator_commands RENAME TO operator_commands_old")
        db.execute("DROP INDEX IF EXISTS operator_commands_open")
        for statement in _SCHEMA.strip().split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"INSERT INTO operator_commands ({_COLUMNS}) SELECT {_COLUMNS} FROM operator_commands_old")
        db.execute("DROP TABLE operator_commands_old")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
