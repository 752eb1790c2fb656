"""Live updates for the browser: one follower of the daemon's file, fanned out as server-sent events.

The console never talks to the daemon; it follows what the daemon commits. One task polls the file every
``interval`` (0.1 s) through a read-only connection; ``PRAGMA data_version`` tells it cheaply whether any
other connection committed since the last look, so an idle system costs one pragma per poll. When something
changed it reads:

* ``alarm_state`` (the engine's current states): when its highest ``seq`` or row count moved, the whole
  alarm list is rebuilt with `monitor.console.queries.alarms` (the rows the API and `pretreat alarms list`
  give) and compared with the previous one; each changed row is an ``alarm`` event;
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
import contextlib
import json
import logging
import sqlite3
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.schema import SiteConfig
from monitor.console.queries import alarm_sort_key, alarms, connect, spoken
from monitor.console.remarks import is_remark
from monitor.read.alarms import JOURNAL_KINDS
from monitor.read.readings import reading
from monitor.stores.readonly import has_table

log = logging.getLogger(__name__)

QUEUE_LIMIT = 2000
READINGS_PER_POLL = 500  # per channel and poll: beyond that the page reloads its trend instead


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
    rows: list[dict[str, Any]] | None = None  # the full alarm list, when alarm_state moved
    journal: list[dict[str, Any]] = field(default_factory=list)
    readings: dict[tuple[str, str], list[list[Any]]] = field(default_factory=dict)


class Hub:
    """The follower and its subscribers. Start `run` as a task; set `closing` to end every stream."""

    def __init__(self, *, db: Path | str, config: SiteConfig, interval: float = 0.1) -> None:
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
        self._alarm_mark: tuple[Any, ...] | None = None
        self._journal_seq: int | None = None
        self._reading_marks: dict[int, float] = {}  # series id -> time of the last reading sent
        self._watched: frozenset[str] = frozenset()  # sites watched at the previous poll
        self._all_sites = frozenset(s.id for s in config.sites)

    # ---- subscribers (event loop) ------------------------------------------------------------------------

    def subscribe(self, *, sites: frozenset[str], readings_site: str | None = None) -> tuple[Subscriber, bytes]:
        """A new subscriber and its opening ``snapshot`` event (its alarm rows, display order)."""
        sub = Subscriber(sites=sites, readings_site=readings_site)
        self._subs.add(sub)
        rows = sorted((r for r in self.rows.values() if r["site"] in sites), key=alarm_sort_key)
        return sub, sse("snapshot", {"alarms": rows})

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
        if self._conn is None:
            self._conn = connect(self.db)
            if self._conn is None:
                return out
        conn = self._conn
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        fresh = version != self._version
        self._version = version
        if fresh or self._alarm_mark is None:
            out.journal = self._journal(conn)
            if any(map(is_remark, out.journal)):  # seen or a comment: the rows change, alarm_state does not
                self._alarm_mark = None
            out.rows = self._alarm_rows(conn)
        if watched or self._watched:
            out.readings = self._readings(conn, watched)
        return out

    def _alarm_rows(self, conn: sqlite3.Connection) -> list[dict[str, Any]] | None:
        mark: tuple[Any, ...] = ("absent",)
        if has_table(conn, "alarm_state"):
            mark = tuple(conn.execute("SELECT MAX(seq), COUNT(*) FROM alarm_state").fetchone())
        if mark == self._alarm_mark:
            return None
        self._alarm_mark = mark
        return alarms(conn, self.config, self._all_sites)

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
