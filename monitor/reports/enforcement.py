"""What enforcement documents read about the steps that follow an episode: its obligations (notification,
written report, repeat sampling, each with a due time and whether and how it was met) and whether the episode
was invalidated (by enforcement, with a justification).

The obligations and invalidations are recorded by the case file store (`monitor.stores.casefile`). The
reports and notice drafts read them only through `EnforcementRecord`: `open_record` returns a reader of the
store's tables when they exist in the historian's file and `NO_RECORD` otherwise, and every document then says
"none recorded" rather than implying that an obligation was met or an episode is valid by default.

Tables read (by column name, so added columns do not matter), as the case file store (`monitor.stores.casefile`)
writes them: ``obligations`` (``id``, ``episode`` as ``site/channel/rule@start``, ``action``, ``recipient``,
``citation``, ``due`` in epoch s UTC, ``due_text``), ``obligation_fulfilments`` (``obligation``, ``done_at``,
``how``, ``recipient``; the first row of an obligation stands, and any later one, recorded before a second
fulfilment was refused, is named beside it, never hidden) and
``episode_invalidations`` (``episode``, ``reason``, ``user``, ``time``; the first one stands) and
``episode_withdrawals`` (``episode``, ``withdrawn``, ``reason``, ``time``; the latest row stands: late readings
showed the episode never happened or started at another time). A table without these columns is treated as
absent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from config.obligations import is_immediate

NONE_RECORDED = "None recorded."


@dataclass(frozen=True, slots=True)
class ObligationLine:
    episode: str  # site/channel/rule@start
    duty: str  # what is owed, to whom ("telephone notice to the Town")
    citation: str
    due: float | None  # epoch s UTC; None: no computable time
    fulfilled: float | None  # when it was done, as the industry states it; None: not (yet)
    how: str = ""  # how, to whom, as the industry recorded it
    due_text: str = ""  # the deadline in the law's words ("immediately", "within 5 days")
    closed: str = ""  # "not required: episode invalidated (...)" / "... withdrawn (...)": closed while unmet

    def status(self, now: float) -> str:
        """``done`` (at or before the due time), ``done late``, ``not required`` (its episode was invalidated
        or withdrawn before it was met), ``overdue`` or ``open``."""
        immediate = is_immediate(self.due_text)
        if self.fulfilled is not None:
            late = self.due is not None and self.fulfilled > self.due and not immediate
            return "done late" if late else "done"
        if self.closed:
            return "not required"
        if immediate:
            return "outstanding"
        return "overdue" if self.due is not None and now > self.due else "open"


@dataclass(frozen=True, slots=True)
class InvalidationLine:
    episode: str
    reason: str  # enforcement's justification
    user: str
    time: float  # when it was marked invalid, epoch s UTC


class EnforcementRecord(Protocol):
    available: bool  # False: no obligations store in this file (documents say "none recorded")

    def obligations(self, episodes: Sequence[str]) -> list[ObligationLine]: ...

    def invalidations(self, episodes: Sequence[str]) -> list[InvalidationLine]: ...


class _NoRecord:
    available = False

    def obligations(self, episodes: Sequence[str]) -> list[ObligationLine]:
        return []

    def invalidations(self, episodes: Sequence[str]) -> list[InvalidationLine]:
        return []


NO_RECORD: EnforcementRecord = _NoRecord()
_OBLIGATION_COLUMNS = ("id", "episode", "action", "recipient", "citation", "due", "due_text")
_FULFILMENT_COLUMNS = ("obligation", "done_at", "how", "recipient")
_INVALIDATION_COLUMNS = ("episode", "reason", "user", "time")
_WITHDRAWAL_COLUMNS = ("episode", "withdrawn", "reason", "time")


class _TableRecord:
    """Reads the two tables of an obligations store in the historian's file (read-only connection)."""

    available = True

    def __init__(self, path: Path, has_obligations: bool, has_fulfilments: bool, has_invalidations: bool) -> None:
        self.path, self._obl, self._done, self._inv = path, has_obligations, has_fulfilments, has_invalidations

    def _rows(self, table: str, columns: Sequence[str], key: str, values: Sequence[object],
              order: str = "rowid") -> list[tuple[object, ...]]:
        if not values:
            return []
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            marks = ", ".join("?" for _ in values)
            return conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({marks}) "
                                f"ORDER BY {order}", tuple(values)).fetchall()
        finally:
            conn.close()

    def obligations(self, episodes: Sequence[str]) -> list[ObligationLine]:
        if not self._obl:
            return []
        rows = self._rows("obligations", _OBLIGATION_COLUMNS, "episode", episodes)
        done: dict[object, list[tuple[object, ...]]] = {}
        if self._done:  # every fulfilment of each obligation, first recorded first: the first stands
            for r in self._rows("obligation_fulfilments", _FULFILMENT_COLUMNS, "obligation", [r[0] for r in rows]):
                done.setdefault(r[0], []).append(r)
        invalid = {i.episode: i.reason for i in self.invalidations(sorted({str(r[1]) for r in rows}))}
        withdrawn = self._withdrawn(sorted({str(r[1]) for r in rows}))
        out = []
        for oid, episode, action, recipient, citation, due, due_text in rows:
            ds = done.get(oid, [])
            d = ds[0] if ds else None
            how = "; also recorded: ".join(f"{x[2]} to {x[3]}" if x[3] else str(x[2]) for x in ds)
            duty = f"{action} to {recipient}" if recipient else str(action)
            closed = "" if d is not None else (
                f"not required: episode invalidated ({invalid[str(episode)]})" if str(episode) in invalid else
                f"not required: episode withdrawn ({withdrawn[str(episode)]})" if str(episode) in withdrawn else "")
            out.append(ObligationLine(str(episode), duty, str(citation or ""), _num(due),
                                      _num(d[1]) if d is not None else None, how or closed, str(due_text or ""),
                                      closed))
        return sorted(out, key=lambda o: (o.episode, o.due if o.due is not None else 0.0, o.duty))

    def _withdrawn(self, episodes: Sequence[str]) -> dict[str, str]:
        """The episodes among these the corrected record no longer holds, with why (the latest row stands)."""
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            if not _has(conn, "episode_withdrawals", _WITHDRAWAL_COLUMNS):
                return {}
        finally:
            conn.close()
        latest: dict[str, tuple[bool, str]] = {}
        for e, w, r, _t in self._rows("episode_withdrawals", _WITHDRAWAL_COLUMNS, "episode", episodes,
                                  order="time, rowid"):
            latest[str(e)] = (bool(w), str(r))
        return {e: r for e, (w, r) in latest.items() if w}

    def invalidations(self, episodes: Sequence[str]) -> list[InvalidationLine]:
        if not self._inv:
            return []
        first: dict[str, InvalidationLine] = {}
        for e, r, u, t in self._rows("episode_invalidations", _INVALIDATION_COLUMNS, "episode", episodes,
                                     order="time, rowid"):
            first.setdefault(str(e), InvalidationLine(str(e), str(r), str(u), float(t)))  # type: ignore[arg-type]
        return list(first.values())


def _num(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


def _has(conn: sqlite3.Connection, table: str, columns: Sequence[str]) -> bool:
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    return set(columns) <= have


def open_record(path: Path) -> EnforcementRecord:
    """The obligations store's record in ``path`` if its tables are there, else `NO_RECORD`."""
    if not Path(path).exists():
        return NO_RECORD
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            obl = _has(conn, "obligations", _OBLIGATION_COLUMNS)
            done = _has(conn, "obligation_fulfilments", _FULFILMENT_COLUMNS)
            inv = _has(conn, "episode_invalidations", _INVALIDATION_COLUMNS)
        finally:
            conn.close()
    except sqlite3.Error:
        return NO_RECORD
    return _TableRecord(Path(path), obl, done, inv) if obl or inv else NO_RECORD
