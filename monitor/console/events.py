"""Live updates for the browser: one follower of the daemon's file, fanned out as server-sent events.

The console never talks to the daemon; it follows what the daemon commits. One task polls the file every
``interval`` (0.05 s: on average half of it passes between a commit and its event) through a read-only
connection; ``PRAGMA data_version`` tells it cheaply whether any other connection committed since the last
look, so an idle system costs one pragma per poll. When something changed it reads:

* ``alarm_state`` (the engine's current states): the rows whose ``seq`` (the journal record that last wrote
  them) is above the highest one read before are rebuilt with `monitor.console.queries.alarms` (the rows the
  API and `pretreat alarms list` give), and so are the rows of alarms an industry saw or commented on; each
  changed row is an ``alarm`` event. Rebuilding only these keeps an update's cost independent of how many
  alarms are configured (the whole list of 4,400 alarms with 1,000 active episodes takes ~0.4 s of CPU,
  one changed alarm ~1 ms). The whole list is read at the first poll, after a read error, when the table's
  highest ``seq`` or row count went down (another file), when more than `INCREMENTAL_MAX` alarms changed at
  once, and on the county hub's database (whose ``seq`` is not in commit order);
* the peaks of ongoing episodes, which grow with readings without any alarm change: at most once a second,
  the next `PEAKS_PER_POLL` rows with an episode under way are rebuilt in turn at a poll without alarm
  changes (the peak is read incrementally, `alarm_view`), so 1,000 ongoing episodes each show a peak at most
  ~20 s old, for ~15 ms of CPU a second;
* ``journal``: transition, action and refusal records after the last one seen, each a ``journal`` event
  (the page's event log, and the new-critical-alarm cue on a ``raise`` of priority ``critical``);
* ``readings``: for the sites someone is watching, each channel's readings newer than the last one sent, as
  ``readings`` events (display only: a reading committed late with an older timestamp is not sent live; it
  is in the trend at the next load).

Each event is encoded once and put on the queue of every subscriber allowed to see its site. A stream opens
with a ``snapshot`` event (the subscriber's alarm rows as they stand), taken on the event loop together with
the subscription, so no change falls between the snapshot and the first delta; after a reconnect the
browser gets a fresh snapshot. A subscriber too slow to keep up (its queue of 2,000 events full) is
disconnected rather than allowed to grow without bound; its browser reconnects and re-synchronises.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.schema import SiteConfig
from monitor.console.queries import alarm_sort_key, alarms, connect, spoken
from monitor.console.remarks import is_remark
from monitor.read.alarms import JOURNAL_KINDS
from monitor.read.readings import reading
from monitor.stores.readonly import dialect, has_table

log = logging.getLogger(__name__)

QUEUE_LIMIT = 2000
READINGS_PER_POLL = 500  # per channel and poll: beyond that the page reloads its trend instead
INCREMENTAL_MAX = 500  # changed alarms rebuilt one by one at a poll; more than that: the whole list
PEAKS_PER_POLL = 50  # rows of ongoing episodes whose peak is looked at again (~0.3 ms each), at most once a second
PEAK_INTERVAL = 1.0  # s
SNAPSHOTS_KEPT = 64  # encoded snapshots (one per set of sites seen and normal rows or not)


def sse(kind: str, data: Any) -> bytes:
    """One server-sent event; JSON never contains a bare newline, so one ``data:`` line suffices."""
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'), allow_nan=False)}\n\n".encode()


@dataclass(eq=False, slots=True)
class Subscriber:
    sites: frozenset[str]
    readings_site: str | None
    queue: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    overflowed: bool = False

    def offer(self, event: bytes) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True


@dataclass(slots=True)
class _Changes:
    rows: list[dict[str, Any]] | None = None  # the full alarm list, when it was read whole
    updated: list[dict[str, Any]] = field(default_factory=list)  # rows of the alarms rebuilt one by one
    journal: list[dict[str, Any]] = field(default_factory=list)
    readings: dict[tuple[str, str], list[list[Any]]] = field(default_factory=dict)


class Hub:
    """The follower and its subscribers. Start `run` as a task; set `closing` to end every stream."""

    def __init__(self, *, db: Path | str, config: SiteConfig, interval: float = 0.05) -> None:
        self.db = db
        self.config = config
        self.interval = interval
        self.closing = False  # read by every stream once a second: ends them for a shutdown
        self._lock = threading.Lock()  # one poll at a time, and never a close during a poll
        self.rows: dict[str, dict[str, Any]] = {}
        self.polls = 0
        self._subs: set[Subscriber] = set()
        self._conn: sqlite3.Connection | None = None
        self._version: int | None = None
        self._alarm_mark: tuple[Any, ...] | None = None  # ("seq", highest seq, rows) of alarm_state, as read
        self._rows_version = 0  # counts the changes of `rows`
        self._snapshots: dict[tuple[frozenset[str], bool], tuple[int, bytes]] = {}  # encoded, with their version
        self._ongoing: collections.deque[str] = collections.deque()  # alarms whose peak is looked at in turn
        self._peaks_at = float("-inf")  # monotonic s of the last look
        self._journal_seq: int | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file the connection has open
        self._reading_marks: dict[int, float] = {}  # series id -> time of the last reading sent
        self._watched: frozenset[str] = frozenset()  # sites watched at the previous poll
        self._all_sites = frozenset(s.id for s in config.sites)

    # ---- subscribers (event loop) ------------------------------------------------------------------------

    def subscribe(self, *, sites: frozenset[str], readings_site: str | None = None,
                  normal: bool = True) -> tuple[Subscriber, bytes]:
        """A new subscriber and its opening ``snapshot`` event: its alarm rows in display order, without the
        normal ones unless ``normal`` (the alarm list shows them only when asked: of 4,400 configured alarms
        with 1,000 active, they are three quarters of a 3 MB snapshot). Later ``alarm`` events cover every
        alarm. The encoded snapshot is kept until the rows change, so consoles opening together (50 after a
        restart of the console) cost one encoding."""
        sub = Subscriber(sites=sites, readings_site=readings_site)
        self._subs.add(sub)
        key = (sites, normal)
        kept = self._snapshots.get(key)
        if kept is not None and kept[0] == self._rows_version:
            return sub, kept[1]
        rows = sorted((r for r in self.rows.values() if r["site"] in sites and (normal or r["state"] != "normal")),
                      key=alarm_sort_key)
        event = sse("snapshot", {"alarms": rows})
        if len(self._snapshots) >= SNAPSHOTS_KEPT:
            self._snapshots.clear()
        self._snapshots[key] = (self._rows_version, event)
        return sub, event

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subs.discard(sub)

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    # ---- the follower ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Poll until cancelled. A failing poll (file replaced, disk error) is logged and retried."""
        failing = False
        while True:
            watched = frozenset(s.readings_site for s in self._subs if s.readings_site)
            try:
                changes = await asyncio.to_thread(self._poll, watched)
                if failing:
                    log.info("following %s again", self.db)
                failing = False
            except sqlite3.Error as exc:
                if not failing:
                    log.warning("cannot follow %s: %s (retrying)", self.db, exc)
                failing = True
                changes = _Changes()
            self._publish(changes)
            self.polls += 1
            await asyncio.sleep(self.interval)

    def close(self) -> None:
        """Called at shutdown, possibly while a poll is still running in its worker thread (a cancelled
        ``to_thread`` does not stop the thread): the lock makes the close wait for it, since closing a SQLite
        connection in use by another thread crashes the interpreter."""
        self.closing = True
        with self._lock:
            self._reset()

    def prime(self) -> None:
        """Load the current alarm rows synchronously (at start, so the first page is not empty)."""
        self._publish(self._poll(frozenset()))

    def _reset(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        self._version = None
        self._alarm_mark = None

    def _poll(self, watched: Collection[str]) -> _Changes:
        """One look at the file (worker thread; only one poll runs at a time, never beside `close`)."""
        with self._lock:
            if self.closing:
                return _Changes()
            try:
                return self._poll_locked(watched)
            except sqlite3.Error:
                self._reset()
                raise

    def _poll_locked(self, watched: Collection[str]) -> _Changes:
        out = _Changes()
        ident = self._identity()
        if self._conn is not None and ident != self._file:  # another file at the path: a fresh record
            self._reset()
            self._journal_seq, self._watched = None, frozenset()
            self._reading_marks.clear()
        if self._conn is None:
            self._conn = connect(self.db)
            if self._conn is None:
                return out
            self._file = ident
        conn = self._conn
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        fresh = version != self._version
        self._version = version
        if fresh or self._alarm_mark is None:
            out.journal = self._journal(conn)
            # seen or a comment: the alarm's row changes, alarm_state does not
            remarked = {str(r.get("alarm", "")) for r in out.journal if is_remark(r)}
            out.rows, out.updated = self._alarm_rows(conn, remarked)
            # not beside an alarm change: that goes out first
            if fresh and out.rows is None and not out.updated and time.monotonic() - self._peaks_at >= PEAK_INTERVAL:
                out.updated = self._peaks(conn)
        if watched or self._watched:
            out.readings = self._readings(conn, watched)
        return out

    def _identity(self) -> tuple[int, int] | None:
        """The (device, inode) of the file at the daemon's path, None if there is none (or a hub database).
        Why: a daemon restarted on a fresh record (the old file moved aside, a new one made at the path)
        leaves the follower's open connection on the old file, whose ``data_version`` never moves again; one
        ``stat`` a poll (~2 µs) tells the follower to open the new one and read its alarms whole."""
        if not isinstance(self.db, Path):
            return None
        try:
            st = os.stat(self.db)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _alarm_rows(self, conn: sqlite3.Connection,
                    remarked: set[str]) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
        """(the whole list, None) or (None, the rows of the alarms changed since the last look)."""
        if not has_table(conn, "alarm_state"):
            if self._alarm_mark == ("absent",):
                return None, []
            self._alarm_mark = ("absent",)
            return alarms(conn, self.config, self._all_sites), []
        top, count = conn.execute("SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM alarm_state").fetchone()
        before, self._alarm_mark = self._alarm_mark, ("seq", top, count)
        if (before is not None and before[0] == "seq" and top >= before[1] and count >= before[2]
                and dialect(conn) == "sqlite"):
            changed = {r[0] for r in conn.execute("SELECT alarm_id FROM alarm_state WHERE seq > ?", (before[1],))}
            ids = changed | remarked
            if not ids:
                return None, []
            if len(ids) <= INCREMENTAL_MAX:
                return None, alarms(conn, self.config, self._all_sites, ids)
        return alarms(conn, self.config, self._all_sites), []

    def _peaks(self, conn: sqlite3.Connection) -> list[dict[str, Any]]:
        """The next `PEAKS_PER_POLL` rows of alarms with an episode under way, rebuilt (their peak may have
        grown)."""
        self._peaks_at = time.monotonic()
        if not self._ongoing:
            self._ongoing.extend(a for a, r in self.rows.items() if r.get("onset") is not None and
                                 r.get("end") is None and r["state"] != "normal")
        ids: set[str] = set()
        while self._ongoing and len(ids) < PEAKS_PER_POLL:
            ids.add(self._ongoing.popleft())
        return alarms(conn, self.config, self._all_sites, ids) if ids else []

    def _journal(self, conn: sqlite3.Connection) -> list[dict[str, Any]]:
        if not has_table(conn, "journal"):
            return []
        if self._journal_seq is None:  # start from now: the page loads older records itself
            self._journal_seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM journal").fetchone()[0])
            return []
        marks = ",".join("?" * len(JOURNAL_KINDS))
        out = []
        for seq, t, kind, text in conn.execute(
                f"SELECT seq, time, kind, payload FROM journal WHERE seq > ? AND kind IN ({marks}) ORDER BY seq",
                (self._journal_seq, *JOURNAL_KINDS)):
            out.append(spoken({**json.loads(text), "seq": seq, "record": kind, "time": t}, self.config))
            self._journal_seq = seq
        return out

    def _readings(self, conn: sqlite3.Connection, watched: Collection[str]) -> dict[tuple[str, str], list[list[Any]]]:
        if not has_table(conn, "channels"):
            return {}
        out: dict[tuple[str, str], list[list[Any]]] = {}
        for cid, site, channel in conn.execute("SELECT id, site, channel FROM channels").fetchall():
            if site not in watched:  # nobody watches: start afresh when someone does
                self._reading_marks.pop(cid, None)
                continue
            mark = self._reading_marks.get(cid)
            if mark is None and site not in self._watched:  # newly watched: from what is there now on
                row = conn.execute("SELECT MAX(time) FROM readings WHERE channel_id = ?", (cid,)).fetchone()
                self._reading_marks[cid] = row[0] if row[0] is not None else float("-inf")
                continue
            mark = float("-inf") if mark is None else mark  # a series that appeared since: all of it
            rows = conn.execute("SELECT time, value, quality, reason FROM readings WHERE channel_id = ? AND "
                                "time > ? ORDER BY time, seq LIMIT ?", (cid, mark, READINGS_PER_POLL)).fetchall()
            if rows:
                self._reading_marks[cid] = rows[-1][0]
                out.setdefault((site, channel), []).extend(
                    [r["time"], r["value"], r["quality"], r["reason"]] for r in map(reading, rows))
        self._watched = frozenset(watched)
        return out

    def _publish(self, changes: _Changes) -> None:
        """Adopt the changes and hand each event to the subscribers allowed to see it (event loop)."""
        events: list[tuple[str, bytes, bool]] = []  # (site, event, is a reading)
        if changes.rows is not None:
            new = {r["alarm"]: r for r in changes.rows}
            for alarm_id, row in new.items():
                if self.rows.get(alarm_id) != row:
                    events.append((row["site"], sse("alarm", row), False))
            for alarm_id in self.rows.keys() - new.keys():
                events.append((self.rows[alarm_id]["site"], sse("alarm-gone", {"alarm": alarm_id}), False))
            self.rows = new
            self._ongoing.clear()
            self._rows_version += 1
        for row in changes.updated:
            if self.rows.get(row["alarm"]) != row:
                events.append((row["site"], sse("alarm", row), False))
                self.rows[row["alarm"]] = row
                self._rows_version += 1
        for rec in changes.journal:
            events.append((str(rec.get("alarm", "")).split("/")[0], sse("journal", rec), False))
        for (site, channel), rows in changes.readings.items():
            events.append((site, sse("readings", {"site": site, "channel": channel, "readings": rows}), True))
        if not events:
            return
        for sub in list(self._subs):
            for site, event, is_reading in events:
                if (sub.readings_site == site) if is_reading else (site in sub.sites):
                    sub.offer(event)
