"""What the KPI and history pages need of the alarm journal, read incrementally: raises, acknowledgements and
the industries' ``seen`` per alarm, each list in time order.

Why: the journal (`alarms.journal`) has no time index, and its ``time`` is the time of the event a record
describes, not of its append, so a period cannot be cut out of it by a key range. It is append-only (triggers
refuse UPDATE and DELETE) and numbered 1, 2, 3, … without gaps, so the console reads each record once: a
request reads only the records appended since the last one (a search of the ``seq`` key), parses the
transitions and actions among them, and files them here. A KPI period or a history page then picks its
span out of the sorted per-alarm lists by bisection. The head's hash is checked on each refresh; a journal
whose record at the remembered head has another hash (a file re-created, another file at the same path) is
read again from the start.

Memory: three floats per raise and acknowledgement (arrays of doubles) plus the acknowledgement's user and
note; a journal of a million transitions is some tens of MiB.
"""

from __future__ import annotations

import bisect
import json
import threading
from array import array
from dataclasses import dataclass, field
from typing import Any

from monitor.stores.readonly import has_table

Marks = dict[str, tuple[list[float], list[dict[str, Any]]]]  # alarm -> (times, records), in time order


@dataclass
class JournalIndex:
    """One journal's records as the pages use them. ``raises``/``kpi_acks``: the record times (epoch s) of
    each alarm's ``raise`` transitions and of its plant acknowledgements (``ack``, or ``reset`` of an
    unacknowledged alarm); ``acks``/``seen``: those acknowledgements (at the transition's own time) and the
    industries' ``seen`` actions with who and why, for the history page. ``seq``/``head``: the last record
    read and its hash."""

    raises: dict[str, array] = field(default_factory=dict)
    kpi_acks: dict[str, array] = field(default_factory=dict)
    acks: Marks = field(default_factory=dict)
    seen: Marks = field(default_factory=dict)
    seq: int = 0
    head: str = ""

    def add(self, t: float, kind: str, payload: dict[str, Any]) -> None:
        alarm = str(payload.get("alarm", ""))
        if kind == "transition":
            what = payload.get("kind")
            if what == "raise":
                bisect.insort(self.raises.setdefault(alarm, array("d")), t)
            elif what == "ack" or (what == "reset" and str(payload.get("from", "")).endswith("unacknowledged")):
                bisect.insort(self.kpi_acks.setdefault(alarm, array("d")), t)
                _file(self.acks, alarm, {"user": payload.get("who", ""), "time": float(payload.get("time", t)),
                                         "note": payload.get("why", "")})
        elif kind == "action" and payload.get("action") == "seen":
            _file(self.seen, alarm, {"user": payload.get("user", ""), "time": t, "note": payload.get("note", "")})


def _file(marks: Marks, alarm: str, rec: dict[str, Any]) -> None:
    """Insert ``rec`` in time order (after any of the same time: the order the journal has them in)."""
    times, recs = marks.setdefault(alarm, ([], []))
    i = bisect.bisect_right(times, rec["time"])
    times.insert(i, rec["time"])
    recs.insert(i, rec)


def between(times: array | list[float], start: float, end: float = float("inf")) -> list[float]:
    """The times in [start, end) of a sorted list."""
    return list(times[bisect.bisect_left(times, start):bisect.bisect_left(times, end)])


class JournalIndexes:
    """The indexes of the journals a console reads, by source (the daemon's file path). Thread-safe: a
    refresh holds the lock, so two requests never file the same records twice."""

    def __init__(self) -> None:
        self._by_source: dict[str, JournalIndex] = {}
        self._lock = threading.Lock()

    def current(self, conn: Any, source: str) -> JournalIndex:
        """The index of ``source``'s journal brought up to date through ``conn``. Without a ``source``, a
        one-off index read from the start (nothing kept)."""
        with self._lock:
            idx = self._by_source.get(source) if source else None
            if idx is None or not _same_journal(conn, idx):
                idx = JournalIndex()
            _read_since(conn, idx)
            if source:
                self._by_source[source] = idx
            return idx


def _same_journal(conn: Any, idx: JournalIndex) -> bool:
    if idx.seq == 0:
        return True
    row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (idx.seq,)).fetchone()
    return row is not None and str(row[0]) == idx.head


def _read_since(conn: Any, idx: JournalIndex) -> None:
    if not has_table(conn, "journal"):
        return
    row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    if row is None or int(row[0]) <= idx.seq:
        return
    last, head = int(row[0]), str(row[1])
    for t, kind, text in conn.execute("SELECT time, kind, payload FROM journal WHERE seq > ? AND seq <= ? "
                                      "AND kind IN ('transition', 'action') ORDER BY seq", (idx.seq, last)):
        idx.add(float(t), str(kind), json.loads(text))
    idx.seq, idx.head = last, head


JOURNAL = JournalIndexes()
