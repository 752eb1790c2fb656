"""Operator actions from the console, carried out by the running daemon through `alarms.commands.CommandQueue`.

Exactly the path `pretreat alarms ack|shelve|reset` takes: the command is queued in the daemon's file with the
console user's name, the daemon's alarm engine carries it out on its next tick and journals the action (with
that user) and the transitions it made, or journals its refusal; the answer comes back through the queue. If
nothing answers within ``wait`` seconds the daemon is not running: the command is withdrawn (cancelled), so it
can never take effect later, unseen, and the operator is told nothing was done.

Blocking (SQLite and a short poll): the API calls it from a worker thread, never on the event loop.
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alarms.commands import CommandQueue, Status
from monitor.read.times import UsageError, parse_until

DEFAULT_WAIT = 5.0  # s: the daemon applies commands on every clock tick (1 s by default)


@dataclass(frozen=True, slots=True)
class Outcome:
    """``status``: done | refused | expired | cancelled | no-answer | invalid | unavailable."""

    status: str
    detail: str = ""
    command: int | None = None
    transitions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def http_status(self) -> int:
        return {"done": 200, "invalid": 400, "no-answer": 504, "unavailable": 503}.get(self.status, 409)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "command": self.command,
                "transitions": self.transitions}


def request_values(action: str, body: dict[str, Any], now: float) -> tuple[str, float | None, str]:
    """(note, until, reason) from a request body; raises UsageError for a missing reason or a bad expiry."""
    note = str(body.get("note") or "").strip()
    reason = str(body.get("reason") or "").strip()
    until = None
    if action == "shelve":
        if not reason:
            raise UsageError("shelving needs a reason")
        text = str(body.get("until") or "").strip()
        if not text:
            raise UsageError("shelving needs an expiry: a duration such as 2h or an ISO 8601 time")
        until = parse_until(text, now)
        if not math.isfinite(until) or until <= now:
            raise UsageError("the shelve expiry must be in the future")
    if len(note) > 2000 or len(reason) > 2000:
        raise UsageError("notes and reasons are limited to 2000 characters")
    return note, until, reason


def carry_out(db: Path, *, alarm_id: str, action: str, user: str, body: dict[str, Any],
              wait: float = DEFAULT_WAIT) -> Outcome:
    """Queue the action for the daemon and wait for its answer (see the module doc)."""
    now = time.time()
    try:
        note, until, reason = request_values(action, body, now)
    except (UsageError, ValueError) as exc:
        return Outcome("invalid", str(exc))
    try:
        queue = CommandQueue(path=db, create=False)
    except (FileNotFoundError, sqlite3.Error) as exc:
        return Outcome("unavailable", f"the daemon's database cannot be opened: {exc}")
    try:
        cid = queue.submit(alarm_id=alarm_id, action=action, user=user, note=note, until=until, reason=reason,
                           ttl=wait + 30.0, now=now)
        cmd = queue.wait(cid, wait, poll=0.02)
        if not cmd.status.final and queue.cancel(cid, why=f"no answer from the daemon within {wait:g} s"):
            return Outcome("no-answer", f"no answer within {wait:g} s: the daemon does not appear to be running. "
                                        "The command was withdrawn; nothing was done.", cid)
        if not cmd.status.final:  # taken just as we gave up: its answer follows at once
            cmd = queue.wait(cid, 10.0, poll=0.02)
    except sqlite3.Error as exc:
        return Outcome("unavailable", f"the command queue cannot be used: {exc}")
    finally:
        queue.close()
    if cmd.status is Status.DONE:
        return Outcome("done", "", cid, cmd.transitions)
    return Outcome(cmd.status.value, cmd.why_not, cid)
