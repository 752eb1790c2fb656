"""The dispatcher: routes committed alarm transitions to channels through one durable outbox per channel.

Data path::

    AlarmEngine ─(committed transitions, with journal seq)─► Dispatcher.submit ─► Router (alarms.routing)
        ─► one Notice per channel × recipient ─► that channel's Outbox (SQLite, one file per channel)
    one asyncio task per channel: Outbox head ─► FloodGrouper (alarms.flood) ─► Notifier.deliver ─► ack

Guarantees.
- `submit` is synchronous and cheap (one SQLite transaction per channel, no network): evaluation never waits
  for a channel. A channel's task is the only thing that waits for it, so a slow or dead channel delays only
  its own queue; its queue is bounded by ``queue_budget_mb`` (past it the oldest notices are dropped and
  counted, `monitor.stores.outbox`).
- A notice leaves its outbox only after the channel confirmed it (MQTT PUBACK, SMTP 250, HTTP 2xx), and is
  delivered in queue order: a failure stops the channel's queue and retries it with capped, jittered
  backoff (`drivers.backoff.Backoff`), at once when the notifier reports its link back (``ready``).
  A message refused for good (HTTP 4xx other than 408/429, SMTP 5xx) is quarantined with the reason (kept
  in the outbox file, logged, counted) and the queue moves on.
- Restarts: undelivered notices are in the outbox files and are delivered by the next run. Delivery is
  at-least-once: a notice whose confirmation was lost (the link dropped after the receiver took it) is sent
  again; receivers can de-duplicate on the notice ``seq`` (MQTT, webhook ``Idempotency-Key``, e-mail
  ``Message-ID``). After a clean delivery nothing is announced twice.
- Nothing accepted is lost between the engine and the outbox: each channel's highest queued journal seq is
  kept in ``dispatch.sqlite``; `catch_up` re-reads transitions the journal holds beyond it (the daemon died
  between the engine's commit and `submit`), and `submit` ignores what a channel already queued, so feeding
  the same transitions twice is harmless.

Not thread-safe: use it from the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from alarms.flood import FloodGrouper, Pending, Planned
from alarms.journal import Journal
from alarms.model import Kind, Priority, State, Transition
from alarms.notifiers.base import Delivery, Notice, Notifier, NotifierContext
from alarms.routing import Router
from config.alarms import AlarmConfig
from config.notify import FloodSettings
from drivers.backoff import Backoff
from monitor.logtext import duration
from monitor.stores.outbox import Outbox, OutboxError

log = logging.getLogger(__name__)

PEEK_ITEMS = 2000  # notices looked at per planning round (held flood groups stay in the queue meanwhile)
DELIVER_TIMEOUT = 120.0  # s: a notifier stuck beyond its own timeouts is abandoned for this attempt
# asyncio.timeout, never asyncio.wait_for, around awaits here: Python 3.11's wait_for returns the inner
# result when a cancellation arrives just as the inner finishes, swallowing the cancel (CPython gh-86296), and
# `stop` then waits forever for a task that carried on.
_ENDED = (State.NORMAL, State.SHELVED, State.OUT_OF_SERVICE)


class _Lane:
    """One channel: its notifier, outbox, flood grouper, task and counters."""

    def __init__(self, notifier: Notifier, outbox: Outbox, grouper: FloodGrouper, mark: int) -> None:
        self.notifier, self.outbox, self.grouper, self.mark = notifier, outbox, grouper, mark
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.unsaved: list[Notice] = []  # accepted but not yet in the outbox (the queue file failed)
        self.c: dict[str, Any] = {"queued": 0, "delivered": 0, "messages": 0, "summaries": 0, "failures": 0,
                                  "quarantined": 0, "queue_errors": 0, "skipped_duplicates": 0}
        self.down_since: float | None = None
        self.last_error = ""


class Dispatcher:
    """See the module docstring.

    ``config``: the alarm configuration (routes, channels, flood settings). ``state_dir``: where the outbox
    files live (default ``config.notify.state_dir``). ``notifiers``: channel id → notifier; built from
    ``config`` with `alarms.notifiers.build_notifiers` when not given. ``context`` describes alarms for the
    messages and carries the operator-command callback (`NotifierContext`).
    """

    def __init__(self, *, config: AlarmConfig, state_dir: Path | None = None,
                 notifiers: Mapping[str, Notifier] | None = None, context: NotifierContext | None = None,
                 clock: Callable[[], float] = time.time, backoff: Backoff | None = None) -> None:
        notify = config.notify
        if state_dir is None:
            if notify is None:
                raise ValueError("no state_dir and no [notify] table to take it from")
            state_dir = notify.state_dir
        self._dir = Path(state_dir)
        self._ctx = context or NotifierContext()
        self._clock = clock
        max_backoff = notify.max_backoff if notify is not None else 60.0
        self._backoff = backoff or Backoff(initial=0.5, maximum=max_backoff)
        if notifiers is None:
            from alarms.notifiers import build_notifiers
            notifiers = build_notifiers(config, self._ctx)
        self._router = Router(config=config, notifiers=notifiers)
        flood = notify.flood if notify is not None else FloodSettings()
        budget = notify.budget_bytes if notify is not None else 64 << 20
        self._dir.mkdir(parents=True, exist_ok=True)
        self._marks = sqlite3.connect(str(self._dir / "dispatch.sqlite"), isolation_level=None)
        self._marks.execute("PRAGMA journal_mode=WAL")
        self._marks.execute("PRAGMA synchronous=NORMAL")  # as the outboxes: a mark lost to a power cut only
        # means a notice queued twice by catch_up (at-least-once), never one lost
        self._marks.execute("CREATE TABLE IF NOT EXISTS marks (notifier TEXT PRIMARY KEY, seq INTEGER NOT NULL)")
        marks = dict(self._marks.execute("SELECT notifier, seq FROM marks").fetchall())
        self._lanes: dict[str, _Lane] = {}
        try:
            for nid, n in notifiers.items():
                outbox = Outbox(path=self._dir / f"{nid}.outbox.sqlite", budget_bytes=budget, clock=clock)
                self._lanes[nid] = _Lane(n, outbox, FloodGrouper(settings=flood, enabled=n.group_floods),
                                         int(marks.get(nid, -1)))
        except BaseException:
            self._close_files()
            raise
        self._since: dict[str, float] = {}
        if self._ctx.alarm_states is not None:
            for st in self._ctx.alarm_states():  # alarms raised before this start: best known raise time
                since = st.unacked_since if st.unacked_since is not None else st.changed
                if st.phase is not State.NORMAL and since is not None:
                    self._since[st.id] = since
        self._started = False

    def notifiers(self) -> list[Any]:
        """The notifiers, in configuration order (the daemon publishes the journal head on the MQTT ones)."""
        return [lane.notifier for lane in self._lanes.values()]

    def outbox(self, nid: str) -> Outbox:
        """Channel ``nid``'s durable queue: what it holds, and what it quarantined (notices the channel refused
        for good, kept for an operator to read)."""
        return self._lanes[nid].outbox

    def marks(self) -> dict[str, int]:
        """Per channel, the journal record up to which its notices are queued (-1: none yet); persisted, so a
        restart catches up from there."""
        return {nid: lane.mark for nid, lane in self._lanes.items()}

    # ---- producer side (the engine's caller) -------------------------------------------------------------

    def submit(self, transitions: Iterable[Transition]) -> int:
        """Queue every routed notice of these committed transitions, durably; returns how many were queued.
        Never raises for a queue-file failure: the notices are kept in memory, retried, and counted."""
        batches: dict[str, list[Notice]] = {}
        top = -1
        for t in transitions:
            if t.seq is None:
                raise ValueError(f"transition of {t.alarm_id} has no journal seq: submit committed ones")
            top = max(top, t.seq)
            since = self._track_since(t)
            site = t.key.site
            for a in self._router.targets(t):
                lane = self._lanes[a.notifier]
                if t.seq <= lane.mark:
                    lane.c["skipped_duplicates"] += 1
                    continue
                batches.setdefault(a.notifier, []).append(Notice.of(
                    t, target=a.target, routes=a.routes, since=since,
                    unit=self._ctx.units.get((site, t.key.channel), ""),
                    site_name=self._ctx.site_names.get(site, ""), timezone=self._ctx.timezones.get(site, "UTC")))
        queued = 0
        for nid, lane in self._lanes.items():
            lane.unsaved.extend(batches.get(nid, ()))
            if lane.unsaved:
                queued += self._save(nid, lane)
            if not lane.unsaved:  # every transition up to `top` is handled for this channel, routed or not
                lane.mark = max(lane.mark, top)
        self._store_marks()
        return queued

    def catch_up(self, journal: Journal) -> int:
        """Queue transitions the journal committed but no channel queued (a crash between the engine's
        commit and `submit`). A channel seen for the first time starts at the journal's head: history is
        not replayed to it. Call once at start, before the first `submit`."""
        head = journal.head()[0]
        for lane in self._lanes.values():
            if lane.mark < 0:
                lane.mark = head
        self._store_marks()
        low = min((lane.mark for lane in self._lanes.values()), default=head)
        replay = [transition_of(r.seq, r.payload) for r in journal.records(after=low, kinds=["transition"])]
        if replay:
            log.warning("re-queuing %d alarm transitions committed after the last notification was queued "
                        "(the daemon stopped in between)", len(replay))
        return self.submit(replay)

    def _track_since(self, t: Transition) -> float | None:
        """When the alarm's current activation was raised, as this dispatcher saw it."""
        if t.kind is Kind.RAISE:
            self._since[t.alarm_id] = t.time
        since = self._since.get(t.alarm_id)
        if t.to_state in _ENDED:
            self._since.pop(t.alarm_id, None)
        return since

    def _store_marks(self) -> None:
        """Each channel's highest handled journal seq, for `catch_up` after a restart."""
        rows = [(nid, lane.mark) for nid, lane in self._lanes.items() if lane.mark >= 0]
        db = self._marks
        try:
            db.execute("BEGIN")
            db.executemany("INSERT OR REPLACE INTO marks VALUES (?, ?)", rows)
            db.execute("COMMIT")
        except sqlite3.Error as exc:  # a stale mark only makes catch_up re-read more of the journal
            if db.in_transaction:
                db.execute("ROLLBACK")
            log.warning("cannot store notification marks (%s)", exc)

    def _save(self, nid: str, lane: _Lane) -> int:
        notices = lane.unsaved
        try:
            lane.outbox.append_many([(n.to_json(), 1) for n in notices])
        except (OutboxError, sqlite3.Error, OSError) as exc:
            lane.c["queue_errors"] += 1
            log.error("notification queue of channel %s failed (%s): %d notices kept in memory and retried",
                      nid, exc, len(notices))
            return 0
        lane.unsaved = []
        lane.mark = max(lane.mark, max(n.seq for n in notices))
        lane.c["queued"] += len(notices)
        lane.wake.set()
        return len(notices)

    # ---- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every notifier, then one named delivery task per channel."""
        if self._started:
            raise RuntimeError("dispatcher already started")
        self._started = True
        for nid, lane in self._lanes.items():
            await lane.notifier.start()
            lane.task = asyncio.create_task(self._run(nid, lane), name=f"notify:{nid}")

    async def stop(self, *, drain_timeout: float = 2.0) -> None:
        """Give queued notices up to ``drain_timeout`` s to go out, then stop the tasks and notifiers and
        close the files. What is still queued is delivered by the next run. Idempotent."""
        if self._lanes and drain_timeout > 0 and self._started:
            await self.wait_idle(drain_timeout)
        for lane in self._lanes.values():
            if lane.task is not None:
                lane.task.cancel()
        for lane in self._lanes.values():
            if lane.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await lane.task
                lane.task = None
            await lane.notifier.close()
        self._close_files()

    def _close_files(self) -> None:
        for lane in self._lanes.values():
            lane.outbox.close()
        self._marks.close()

    async def wait_idle(self, limit: float) -> bool:
        """Wait until every channel's queue is empty; False if ``limit`` s passed first."""
        deadline = time.monotonic() + limit
        while any(lane.outbox.depth or lane.unsaved for lane in self._lanes.values()):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def health(self) -> dict[str, Any]:
        """Per channel: queue depth and age, counters, link state, the notifier's own counters."""
        now = self._clock()
        out: dict[str, Any] = {}
        for nid, lane in self._lanes.items():
            stats = lane.outbox.stats()
            out[nid] = {**lane.c, "depth": stats.items, "oldest_age_s": lane.outbox.oldest_age(now),
                        "dropped": stats.dropped_items, "up": lane.down_since is None,
                        "last_error": lane.last_error, "notifier": lane.notifier.health()}
        return out

    # ---- one channel's delivery task -----------------------------------------------------------------------

    async def _run(self, nid: str, lane: _Lane) -> None:
        failures = 0
        while True:
            lane.wake.clear()
            if lane.unsaved and self._save(nid, lane):
                self._store_marks()
            pending = self._pending(nid, lane)
            now = self._clock()
            ready, due = lane.grouper.plan(pending, now)
            if not ready:
                timeout = None if due is None else max(0.0, due - now)
                if lane.unsaved:
                    timeout = min(timeout or 1.0, 1.0)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await lane.wake.wait()
                continue
            if await self._send(nid, lane, ready):
                failures = 0
                continue
            await self._pause(lane, failures)
            failures += 1

    def _pending(self, nid: str, lane: _Lane) -> list[Pending]:
        out: list[Pending] = []
        for r in lane.outbox.peek(max_items=PEEK_ITEMS):
            try:
                out.append(Pending(r.id, r.created, Notice.from_json(r.payload)))
            except (ValueError, KeyError, TypeError) as exc:  # a newer format or a damaged record
                lane.outbox.quarantine(r.payload, reason=f"unreadable notice: {exc}", count=r.count)
                lane.outbox.ack([r.id])
                lane.c["quarantined"] += r.count
                log.error("channel %s: unreadable notice %d quarantined (%s)", nid, r.id, exc)
        return out

    async def _send(self, nid: str, lane: _Lane, ready: Sequence[Planned]) -> bool:
        """Deliver planned messages in order; True if the queue made progress without a channel failure."""
        n = lane.notifier
        for start in range(0, len(ready), max(1, n.max_batch)):
            chunk = ready[start:start + max(1, n.max_batch)]
            try:
                async with asyncio.timeout(DELIVER_TIMEOUT):
                    d = await n.deliver([p.message for p in chunk])
            except TimeoutError:
                d = Delivery(0, f"no answer within {DELIVER_TIMEOUT:g} s")
            except Exception as exc:  # a notifier bug must not end the channel's task
                log.exception("channel %s: notifier failed", nid)
                d = Delivery(0, f"notifier error: {exc!r}")
            done = chunk[:max(0, min(d.delivered, len(chunk)))]
            self._confirmed(lane, done)
            if len(done) == len(chunk):
                continue
            bad = chunk[len(done)]
            if d.permanent:
                self._quarantine(nid, lane, bad, d.error)
                return True  # plan again: the rest of the chunk follows in order
            self._failed(nid, lane, d.error)
            return False
        self._restored(nid, lane)
        return True

    def _confirmed(self, lane: _Lane, done: Sequence[Planned]) -> None:
        if not done:
            return
        lane.outbox.ack([i for p in done for i in p.ids])
        for p in done:
            lane.grouper.commit(p)
            lane.c["delivered"] += len(p.members)
            lane.c["messages"] += 1
            lane.c["summaries"] += p.message.grouped

    def _quarantine(self, nid: str, lane: _Lane, bad: Planned, reason: str) -> None:
        for m in bad.members:
            lane.outbox.quarantine(m.notice.to_json(), reason=reason)
        lane.outbox.ack(bad.ids)
        lane.grouper.commit(bad)
        lane.c["quarantined"] += len(bad.members)
        log.error("channel %s refused notification %s for %s for good (%s): quarantined", nid,
                  bad.message.key, bad.message.target, reason)

    def _failed(self, nid: str, lane: _Lane, error: str) -> None:
        lane.c["failures"] += 1
        lane.last_error = error
        if lane.down_since is None:
            lane.down_since = self._clock()
            log.warning("channel %s unavailable (%s): %d notifications queued, retrying with backoff", nid,
                        error, lane.outbox.depth)
        else:
            log.debug("channel %s still unavailable: %s", nid, error)

    def _restored(self, nid: str, lane: _Lane) -> None:
        if lane.down_since is not None:
            outage = self._clock() - lane.down_since
            log.info("channel %s delivering again after %s", nid, duration(outage),
                     extra={"notify_channel": nid, "outage_s": outage})
            lane.down_since = None
            lane.last_error = ""

    async def _pause(self, lane: _Lane, failures: int) -> None:
        """Back off; wake early when the notifier reports its link back up."""
        delay = self._backoff.delay(failures)
        ready = lane.notifier.ready
        if ready is None or ready.is_set():
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await ready.wait()


def transition_of(seq: int, payload: Mapping[str, Any]) -> Transition:
    """Rebuild a committed transition from its journal record (``Transition.to_payload`` plus its seq)."""
    return Transition(time=float(payload["time"]), alarm_id=str(payload["alarm"]), kind=Kind(payload["kind"]),
                      from_state=State(payload["from"]), to_state=State(payload["to"]),
                      priority=Priority(payload["priority"]), who=str(payload["who"]), why=str(payload["why"]),
                      value=payload["value"], limit=payload["limit"], citation=str(payload["citation"]),
                      level=int(payload["level"]), seq=seq)
