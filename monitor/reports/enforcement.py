"""What enforcement documents read about the steps that follow an episode: its obligations (notification,
written report, repeat sampling, each with a due time and whether and how it was met) and whether the episode
was invalidated (by enforcement, with a justification).

The obligations and invalidations are recorded by the obligations store (issue 17 part A), which is built
beside this. The reports and notice drafts read them only through `EnforcementRecord`, so either side can
change without the other: `open_record` returns a reader of the store's tables when they exist in the
historian's file and `NO_RECORD` otherwise, and every document then says "none recorded" rather than
implying that an obligation was met or an episode is valid by default.

Tables read (by column name, so added columns do not matter): ``obligations`` (``episode`` as
``site/channel/rule@start``, ``duty``, ``citation``, ``due`` and ``fulfilled`` in epoch s UTC, ``how``) and
``episode_invalidations`` (``episode``, ``reason``, ``user``, ``time``). A table with other columns is treated
as absent and the document says that the record could not be read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

NONE_RECORDED = "None recorded."


@dataclass(frozen=True, slots=True)
class ObligationLine:
    episode: str  # site/channel/rule@start
    duty: str  # what is owed ("Telephone notice to the Town", "Written report")
    citation: str
    due: float | None  # epoch s UTC; None: "immediately" with no computable time
    fulfilled: float | None  # when it was met; None: not (yet)
    how: str = ""  # how, to whom, as the industry recorded it

    def status(self, now: float) -> str:
        if self.fulfilled is not None:
            late = self.due is not None and self.fulfilled > self.due
            return "met late" if late else "met"
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
_OBLIGATION_COLUMNS = ("episode", "duty", "citation", "due", "fulfilled", "how")
_INVALIDATION_COLUMNS = ("episode", "reason", "user", "time")


class _TableRecord:
    """Reads the two tables of an obligations store in the historian's file (read-only connection)."""

    available = True

    def __init__(self, path: Path, has_obligations: bool, has_invalidations: bool) -> None:
        self.path, self._obl, self._inv = path, has_obligations, has_invalidations

    def _rows(self, table: str, columns: Sequence[str], episodes: Sequence[str]) -> list[tuple[object, ...]]:
        if not episodes:
            return []
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            marks = ", ".join("?" for _ in episodes)
            return conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE episode IN ({marks})",
                                tuple(episodes)).fetchall()
        finally:
            conn.close()

    def obligations(self, episodes: Sequence[str]) -> list[ObligationLine]:
        if not self._obl:
            return []
        return sorted((ObligationLine(str(e), str(d), str(c or ""), _num(due), _num(done), str(how or ""))
                       for e, d, c, due, done, how in self._rows("obligations", _OBLIGATION_COLUMNS, episodes)),
                      key=lambda o: (o.episode, o.due if o.due is not None else 0.0, o.duty))

    def invalidations(self, episodes: Sequence[str]) -> list[InvalidationLine]:
        if not self._inv:
            return []
        return [InvalidationLine(str(e), str(r), str(u), float(t))  # type: ignore[arg-type]
                for e, r, u, t in self._rows("episode_invalidations", _INVALIDATION_COLUMNS, episodes)]


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
            inv = _has(conn, "episode_invalidations", _INVALIDATION_COLUMNS)
        finally:
            conn.close()
    except sqlite3.Error:
        return NO_RECORD
    return _TableRecord(Path(path), obl, inv) if obl or inv else NO_RECORD
