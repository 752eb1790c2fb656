"""The calibration log of each channel, kept in the site's SQLite record and journaled in the hash chain.

An entry says when an instrument was calibrated, by whom, how, what it read before adjustment (*as found*) and
after (*as left*), and when the technician says it is next due. Methods:

- ``ph_two_buffer``: a pH probe checked in two buffers; each point is (buffer pH, the probe's reading);
- ``flow_reference``: a flow meter verified against a reference (a portable meter, a timed volume); each point
  is (reference flow, the meter's reading), in the channel's unit;
- ``reference_check``: any other channel against a reference standard (a reference thermometer, a calibration
  gas), each point (reference, reading).

Entries are never edited or deleted: a mistaken entry is corrected by a later one, and both stay in the table
and in the journal (kind ``calibration``), which is the record that the calibration was entered, by whom and
when (an industry's lawyer asks for it first). Each entry keeps both its date (``time``, when the instrument was
calibrated) and when it was entered (``entered``, the recorded-at time): an entry made today for a calibration
of last month (backdated) does not rewrite what the record said then. The status shown for a past episode is
the status as known at its start (`during`), with the later entries beside it where they change it.

**Due and overdue.** After a calibration at ``c`` the instrument is due at the earliest of ``c`` + the interval
in force (`config.calibration`: the permit's or the site's, in calendar days of the site's time zone, so the
same local clock time across a daylight-saving change) and the entry's own ``next_due``. It is *overdue*
from its due time (inclusive) until the next calibration (exclusive). With an interval in force and no
calibration recorded before a time, the instrument is *unrecorded* then (the record cannot show it was in
calibration). With neither an interval nor a technician's due date nothing is due: "no calibration interval
stated", never an invented interval.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from config.calibration import NO_INTERVAL, Interval
from monitor.checks.events import iso_utc
from monitor.stores.readonly import connect_readonly, has_table

METHODS = {
    "ph_two_buffer": "pH two-buffer check",
    "flow_reference": "flow verification against a reference",
    "reference_check": "check against a reference standard",
}
POINTS_NEEDED = {"ph_two_buffer": 2, "flow_reference": 1, "reference_check": 1}
METHOD_KINDS = {"ph_two_buffer": ("ph",), "flow_reference": ("flow",)}  # reference_check: any kind

_SCHEMA = """CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY,
    site TEXT NOT NULL, channel TEXT NOT NULL,
    time REAL NOT NULL,           -- when the calibration was done (epoch s UTC)
    who TEXT NOT NULL, method TEXT NOT NULL,
    as_found TEXT NOT NULL,       -- JSON [[reference, reading], ...]
    as_left TEXT NOT NULL,        -- JSON [[reference, reading], ...]
    next_due REAL,                -- the technician's next due date (epoch s UTC), if stated
    note TEXT NOT NULL,
    entered REAL NOT NULL,        -- when it was entered (epoch s UTC)
    journal_seq INTEGER           -- the journal record that carries it
) STRICT"""

OK, OVERDUE, UNRECORDED, NO_DUE = "in date", "overdue", "no calibration recorded", NO_INTERVAL
Point = tuple[float, float]


class CalibrationError(ValueError):
    """An entry that cannot be recorded as given; the message says what is expected."""


@dataclass(frozen=True, slots=True)
class Calibration:
    site: str
    channel: str
    time: float
    who: str
    method: str
    as_found: tuple[Point, ...]
    as_left: tuple[Point, ...]
    next_due: float | None = None
    note: str = ""
    entered: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"site": self.site, "channel": self.channel, "time": iso_utc(self.time), "who": self.who,
                "method": self.method, "as_found": [list(p) for p in self.as_found],
                "as_left": [list(p) for p in self.as_left],
                "next_due": None if self.next_due is None else iso_utc(self.next_due), "note": self.note,
                "entered": iso_utc(self.entered)}


@dataclass(frozen=True, slots=True)
class Status:
    """A channel's calibration status at one time: ``state`` is `OK`, `OVERDUE`, `UNRECORDED` or `NO_DUE`;
    ``since`` when that state began (the due time when overdue), ``due`` the due time in force."""

    state: str
    last: Calibration | None
    due: float | None
    since: float | None
    interval: Interval | None

    @property
    def overdue(self) -> bool:
        return self.state in (OVERDUE, UNRECORDED)

    def text(self, when: Callable[[float], str] = iso_utc) -> str:
        """One line for a report, a table cell or an alarm's explanation; ``when`` writes its times (ISO 8601
        UTC by default; `pretreat calibration list` gives the site's local time with its zone)."""
        last = (f"last calibrated {when(self.last.time)} by {self.last.who}" if self.last
                else "no calibration recorded")
        every = f"every {self.interval.days:g} days ({self.interval.source})" if self.interval else NO_INTERVAL
        if self.state == OVERDUE:
            return f"calibration OVERDUE since {when(self.due or 0.0)}: {last}; {every}"
        if self.state == UNRECORDED:
            return f"calibration OVERDUE: no calibration recorded; {every}"
        if self.state == OK:
            return f"calibration in date (due {when(self.due or 0.0)}): {last}; {every}"
        return f"{NO_INTERVAL}: {last}"


def methods_for(kind: str) -> list[str]:
    """The methods a channel of ``kind`` takes: its own (``flow_reference`` for flow), then ``reference_check``."""
    return sorted((m for m, kinds in METHOD_KINDS.items() if kind in kinds)) + [
        m for m in METHODS if m not in METHOD_KINDS]


def validate(c: Calibration, kind: str) -> None:
    """Refuse an entry that does not say what its method needs."""
    if c.method not in METHODS:
        raise CalibrationError(f"method {c.method!r}: expected one of {sorted(METHODS)}")
    kinds = METHOD_KINDS.get(c.method)
    if kinds is not None and kind not in kinds:
        fits = " or ".join(methods_for(kind))
        raise CalibrationError(f"method {c.method} is for a {' or '.join(kinds)} channel; {c.site}/{c.channel} is "
                               f"a {kind} channel (use {fits})")
    if not c.who.strip():
        raise CalibrationError("who calibrated is required")
    need = POINTS_NEEDED[c.method]
    for name, pts in (("as found", c.as_found), ("as left", c.as_left)):
        if len(pts) < need:
            raise CalibrationError(f"{METHODS[c.method]}: {need} {name} point(s) (reference:reading), got {len(pts)}")
        if not all(math.isfinite(x) for p in pts for x in p):
            raise CalibrationError(f"{name}: every reference and reading must be a finite number")
    if c.method == "ph_two_buffer" and len({p[0] for p in c.as_found}) < 2:
        raise CalibrationError("pH two-buffer check: two different buffers as found (e.g. 4.01:4.05 7.00:7.02)")
    if c.next_due is not None and c.next_due <= c.time:
        raise CalibrationError(f"next due {iso_utc(c.next_due)} is not after the calibration {iso_utc(c.time)}")


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(_SCHEMA)


def add(path: Path, c: Calibration, kind: str) -> int:
    """Validate and record one entry, journaled in the same transaction; returns its journal sequence number."""
    from alarms.journal import Entry, Journal

    validate(c, kind)
    journal = Journal(path=path)
    try:
        ensure_schema(journal.connection)
        payload = {k: v for k, v in c.to_dict().items() if k != "entered"}

        def row(seqs: list[int]) -> list[tuple[str, list[tuple[object, ...]]]]:
            return [("INSERT INTO calibrations (site, channel, time, who, method, as_found, as_left, next_due, note, "
                     "entered, journal_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [(c.site, c.channel, c.time, c.who, c.method, json.dumps(c.as_found), json.dumps(c.as_left),
                       c.next_due, c.note, c.entered, seqs[0])])]

        return journal.append_many([Entry("calibration", payload, c.entered)], also=row)[0]
    finally:
        journal.close()


def entries(conn: sqlite3.Connection, site: str | None = None, channel: str | None = None) -> list[Calibration]:
    """Every entry (of a site, of a channel), oldest calibration first; [] when the table does not exist yet."""
    if not has_table(conn, "calibrations"):
        return []
    rows = conn.execute(
        "SELECT site, channel, time, who, method, as_found, as_left, next_due, note, entered FROM calibrations "
        "WHERE (? IS NULL OR site = ?) AND (? IS NULL OR channel = ?) ORDER BY time, id",
        (site, site, channel, channel))
    return [Calibration(r[0], r[1], r[2], r[3], r[4], tuple(map(tuple, json.loads(r[5]))),
                        tuple(map(tuple, json.loads(r[6]))), r[7], r[8], r[9]) for r in rows]


def latest_id(conn: sqlite3.Connection) -> int:
    """The newest entry's id (0 when none): a cheap way to notice a new entry."""
    if not has_table(conn, "calibrations"):
        return 0
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM calibrations").fetchone()[0])


def read_entries(path: Path, site: str | None = None) -> list[Calibration]:
    """`entries` through a read-only connection (beside a running daemon); [] when the file does not exist."""
    if not Path(path).exists():
        return []
    conn = connect_readonly(path)
    try:
        return entries(conn, site)
    finally:
        conn.close()


def due_after(c: Calibration, interval: Interval | None) -> float | None:
    """When the instrument calibrated by ``c`` is next due: the earlier of the interval's and the entry's."""
    dues = [d for d in (interval.due_from(c.time) if interval else None, c.next_due) if d is not None]
    return min(dues) if dues else None


def status_at(log: Sequence[Calibration], interval: Interval | None, t: float) -> Status:
    """The status at time ``t`` of one channel whose log (oldest first) is ``log``."""
    last = None
    for c in log:
        if c.time > t:
            break
        last = c
    if last is None:
        if interval is None:
            return Status(NO_DUE, None, None, None, None)
        return Status(UNRECORDED, None, None, None, interval)
    due = due_after(last, interval)
    if due is None:
        return Status(NO_DUE, last, None, None, None)
    if t >= due:
        return Status(OVERDUE, last, due, due, interval)
    return Status(OK, last, due, last.time, interval)


def overdue_spans(log: Sequence[Calibration], interval: Interval | None) -> list[tuple[float, float, str]]:
    """The [start, end) spans (epoch s) during which the channel was overdue (`OVERDUE`) or had an interval in
    force and no calibration recorded yet (`UNRECORDED`), in time order; ``inf`` for an open end."""
    spans: list[tuple[float, float, str]] = []
    if interval is not None:
        spans.append((-math.inf, log[0].time if log else math.inf, UNRECORDED))
    for i, c in enumerate(log):
        due = due_after(c, interval)
        nxt = log[i + 1].time if i + 1 < len(log) else math.inf
        if due is not None and due < nxt:
            spans.append((due, nxt, OVERDUE))
    return spans


LATER = "at the time; in date by an entry made later"  # joined to the state word: "overdue at the time; ..."


def known_overdue_spans(log: Sequence[Calibration], interval: Interval | None) -> list[tuple[float, float, str]]:
    """`overdue_spans` as known at each moment: the [start, end) spans in which the channel was overdue (or had
    no calibration recorded) by the entries entered by then, with the word for each: the state (`OVERDUE`,
    `UNRECORDED`), followed by `LATER` where an entry made later (backdated) says the instrument was in date.
    This is what the readings export marks and the report's Calibration section lists: a later entry never
    rewrites what the record said when a reading was taken. The status can change only at an entry's date,
    its due time or when it was entered, so it is judged at each of those moments."""
    moments = sorted({-math.inf} | {t for c in log for t in (c.time, c.entered, due_after(c, interval))
                                     if t is not None})
    spans: list[tuple[float, float, str]] = []
    for i, t in enumerate(moments):
        at = t if math.isfinite(t) else (moments[1] - 1.0 if len(moments) > 1 else 0.0)
        then = status_at(known_at(log, at), interval, at)
        word = ""
        if then.overdue:
            word = then.state if status_at(log, interval, at).overdue else f"{then.state} {LATER}"
        end = moments[i + 1] if i + 1 < len(moments) else math.inf
        if spans and spans[-1][2] == word and spans[-1][1] == t:
            spans[-1] = (spans[-1][0], end, word)
        elif word:
            spans.append((t, end, word))
    return spans


def known_at(log: Sequence[Calibration], t: float) -> list[Calibration]:
    """The entries of ``log`` that had been entered by ``t``: the log as anyone could have read it then."""
    return [c for c in log if c.entered <= t]


def during(log: Sequence[Calibration], interval: Interval | None, start: float, end: float | None, *,
           now: float, when: Callable[[float], str] = iso_utc) -> str:
    """The calibration status over an episode [start, end] (end None: still open, judged up to ``now``, the
    time of asking, never into the future), for the enforcement record: the status at its start, and an
    overdue time that began inside it, **as known at the time** (from the entries entered by the episode's
    start). An entry entered later (backdated) never rewrites it: where the log as it stands now says
    otherwise, both are given, with the later entries' dates and when they were entered ("... (as known at
    the time); a calibration dated D was entered on E; by the record as it stands: ..."). ``when`` writes the
    times (ISO 8601 UTC by default; tables, reports and the daemon's log give the site's local time)."""
    stop = end if end is not None else max(start, now)
    then = _during(known_at(log, start), interval, start, stop, when)
    current = _during(log, interval, start, stop, when)
    if then == current:
        return then
    later = [c for c in log if c.entered > start and c.time <= stop]
    dated = "; ".join(f"a calibration dated {when(c.time)} was entered on {when(c.entered)}" for c in later)
    return f"{then} (as known at the time); {dated}; by the record as it stands: {current}"


def _during(log: Sequence[Calibration], interval: Interval | None, start: float, stop: float,
            when: Callable[[float], str]) -> str:
    at_start = status_at(log, interval, start)
    text = at_start.text(when)
    later = [s for s, _e, _why in overdue_spans(log, interval) if start < s <= stop]
    if not at_start.overdue and later:
        text += f"; became OVERDUE at {when(later[0])}, during the episode"
    return text
