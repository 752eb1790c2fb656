"""InfluxDB telemetry sink with durable store-and-forward: no reading lost through outages and restarts.

Data path::

    submit(samples, seq) ─► inbox (memory) ─(writer thread: once the historian committed them; format,
        one transaction per ~2 MiB, with the historian seq they reach)─► Outbox (disk)
    Outbox ─(sender thread: oldest first, ≤ batch_size points per request)─► POST /api/v2/write ─► ack
    start after a crash: historian rows after the Outbox's mark ─► Outbox (before anything new)

- `submit` never blocks the event loop: it appends the sequence to a deque. The writer thread wakes every
  ``flush_interval`` (or as soon as ``batch_size`` points wait), takes the readings the historian has
  committed (never one it has not: the copy holds nothing the record of evidence lacks), formats the
  lines (schema: `monitor.stores.influx_lines`) and appends them to the durable queue as records of
  ``batch_size`` lines
  (the last of a wake-up may be shorter), each a ready-to-send request body (lines joined by newlines,
  UTF-8), committing every ~``APPEND_GROUP_BYTES`` and waking the sender: a burst is made durable and sent
  piece by piece, in bounded memory, instead of being formatted whole first.
- The sender thread takes the oldest records (so the queue drains in time order after an outage), posts
  them in one synchronous request (a single record as is, without a copy) and removes them only after a
  2xx. An outage (connection error, timeout, 429, 5xx), or a 401/403/404 during a run, keeps the queue and
  backs off (capped, jittered exponential); the outage is logged once when it starts and once when it ends,
  and every failed request is counted. A 400/422/413 bisects the batch into lines: the rejected lines are
  quarantined (kept in the queue file, logged, counted) and the rest is written, so one bad point never
  blocks the queue.
- The queue is bounded by ``disk_budget_mb``: past ``alarm_threshold_pct`` the queue alarm is raised
  (logged once, ``on_queue_alarm`` called on the event loop); only when the budget is full are the oldest
  points dropped, counted, and alarmed.
- `close` moves everything submitted into the durable queue and stops; points not yet sent stay queued and
  a restart resumes from them.
- Crashes (SIGKILL, OOM, power cut): each append also records the historian seq its readings reach, and
  `start` re-queues the historian rows past it (`monitor.stores.influx_recovery`) before anything new.

Delivery is at-least-once with idempotent points: a request the server applied but whose answer was lost
is sent again, and a re-queued reading may already have been sent; every copy of a reading is the same
line (measurement, tags, millisecond timestamp ``round(time * 1000)`` of the recorded float, fields), so
InfluxDB overwrites instead of duplicating (VictoriaMetrics keeps such repeats unless deduplicating).
Annotations (episodes, alarm transitions) and health points are not re-queued after a crash: the episode
store and the journal are their record.

Why one module of about 500 lines: the writer and sender threads share the sink's inbox, counters, wake
events and state under one lock; the parts with a concept of their own live apart: the line format
(`monitor.stores.influx_lines`), the crash re-queue (`influx_recovery`), the HTTP write (`influx_writer`), the
durable queue (`outbox`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from config.influx import InfluxSettings, TokenError
from config.schema import SiteConfig
from drivers.backoff import retries
from monitor.logtext import duration
from monitor.sample import Sample
from monitor.stores.influx_lines import EventRecord, SampleFormatter, event_line, health_record
from monitor.stores.influx_recovery import MARK, Recorded, plan, requeue
from monitor.stores.influx_writer import LineWriter, Outcome, WriteResult, deliver
from monitor.stores.outbox import Outbox, OutboxError

log = logging.getLogger(__name__)

HEALTH_COMPONENT = "influx"
_ALARM_HYSTERESIS_PCT = 5.0  # the queue alarm clears this far below the threshold (no flapping)
# Bytes of formatted records per queue transaction. Bounding it keeps the writer's buffers the same few
# MiB, reused, instead of fresh memory for a whole burst (whose page faults cost more CPU than the extra
# commits, ~0.1 ms each), and lets the sender start on a burst while the rest is being formatted.
APPEND_GROUP_BYTES = 2 << 20
CLOSE_DRAIN = 2.0  # s `close` lets the sender deliver the queue while the server is up (systemd waits 30 s)
# An inbox entry: samples (or preformatted lines) and the historian seq the queue reaches once it is appended
_Entry = tuple[Sequence[Sample] | None, list[str] | None, int | None]


class InfluxStartupError(Exception):
    """The sink cannot start: credentials refused, bucket missing, token unreadable, queue unusable."""


@dataclass(slots=True)
class InfluxCounters:
    """The sink's health counters (published with the daemon's other counters and as ``pretreat_health``)."""

    queue_depth: int = 0  # points queued on disk, not yet acknowledged
    queue_bytes: int = 0
    queue_fill_pct: float = 0.0  # of the disk budget
    oldest_unsent_age_s: float = 0.0  # since the oldest queued point was queued
    pending_in_memory: int = 0  # submitted, not yet made durable (~commit_interval + flush_interval worth)
    points_submitted: int = 0  # samples and event records (the sink's own health points not included)
    points_sent: int = 0
    requests: int = 0
    write_errors: int = 0  # failed requests (outage, 5xx, auth, rejected content)
    dropped_over_budget: int = 0  # points dropped oldest-first because the disk budget was full (lifetime)
    quarantined: int = 0  # points the server rejected as malformed (lifetime)
    queue_errors: int = 0  # failed appends to the queue file (disk full, I/O error); retried
    unknown_channels: int = 0  # samples of a channel missing from the instrument map (written as "other")
    requeued_after_crash: int = 0  # historian readings re-queued at start (lost from memory by a crash)
    resumed_at_start: int = 0  # points found queued on disk at start (an outage outlived a stop or a crash)
    server_up: bool = False
    queue_alarm: bool = False


class InfluxSink:
    """See the module docstring. ``instruments`` maps (site, channel) → (instrument id, channel kind)."""

    def __init__(self, *, settings: InfluxSettings, instruments: Mapping[tuple[str, str], tuple[str, str]],
                 on_queue_alarm: Callable[[bool, str], None] | None = None,
                 health_interval: float | None = 10.0, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._formatter = SampleFormatter(instruments=instruments)
        self._on_alarm = on_queue_alarm
        self._health_interval = health_interval
        self._clock = clock
        self._inbox: deque[_Entry] = deque()
        self._c = InfluxCounters()  # fields each written by one thread only (see `counters`)
        self._submitted = 0  # points submitted (event-loop thread)
        self._durable = 0  # points appended to the queue (writer thread)
        # records an append failed on: (records, submitted points among them, mark they reach)
        self._unsaved: tuple[list[tuple[bytes, int]], int, int | None] | None = None
        self._committed: Callable[[], int] | None = None  # the historian's committed seq (see `start`)
        self._marking = False  # write the MARK with appends (with a historian, and unless a re-queue failed)
        self._requeue: tuple[Path, int, int] | None = None  # (historian, first seq, end seq) to re-queue
        self._budget_lock = threading.Lock()
        # held by the sender from an acknowledgement's removal from the queue to its count in `points_sent`:
        # `wait_drained` reads the queue empty only outside it, so what it returns agrees with the counters
        # (the queue read empty a moment before the last batch was counted: 390 of 395 points sent, in CI)
        self._ack_lock = threading.Lock()
        self._progress = asyncio.Event()  # set (via the loop) when a thread made progress a waiter needs
        self._waiters = 0  # coroutines in flush()/wait_drained(): without any, threads do not wake the loop
        self._wake_writer = threading.Event()
        self._wake_sender = threading.Event()
        self._stop_writer = threading.Event()
        self._stop_sender = threading.Event()
        self._threads: list[threading.Thread] = []
        self._outbox: Outbox | None = None
        self._writer: LineWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = "new"
        self._down_since: float | None = None
        self._last_dropped = 0
        self._dropping = False  # inside an episode of oldest-first drops (alarmed once)

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self, historian: Recorded | None = None) -> None:
        """Open the queue, check the server with a real write, start the writer and sender threads.

        With ``historian`` (started, nothing submitted to it yet), samples are queued only once it has
        committed them, each append records the seq reached (`MARK`), and the rows a crash lost from memory
        are re-queued first (see the module docstring).

        Raises `InfluxStartupError` for a token that cannot be read, credentials the server refuses
        (401/403), a missing bucket/org (404), a rejected write, or a queue file in use. An unreachable
        server is not an error: the sink queues, and checks the credentials at first contact.
        """
        if self._state != "new":
            raise RuntimeError("InfluxSink.start() called twice")
        self._loop = asyncio.get_running_loop()
        s = self.settings
        try:
            token = s.read_token()
            self._outbox = await asyncio.to_thread(Outbox, path=s.queue_path, budget_bytes=s.budget_bytes)
        except (TokenError, OutboxError) as exc:
            raise InfluxStartupError(f"influx: {exc}") from None
        self._last_dropped = self._outbox.stats().dropped_items
        if historian is not None:
            await asyncio.to_thread(self._plan_requeue, historian)
        probe = event_line(EventRecord(measurement="pretreat_health", tags={"component": HEALTH_COMPONENT},
                                       fields={"started": 1.0}, time=self._clock()))
        try:
            self._writer = LineWriter(settings=s, token=token)
            result = await asyncio.to_thread(self._writer.write, probe.encode())
        except BaseException:
            await self._abort()
            raise
        finally:
            del token
        if not result.ok and result.outcome is not Outcome.UNAVAILABLE:
            await self._abort()
            raise InfluxStartupError(_startup_message(s, result))
        self._c.server_up = result.ok
        if not result.ok:
            self._down_since = time.monotonic()
            log.warning("influx: %s unreachable at start (%s); queueing in %s until it is back "
                        "(credentials are checked at first contact)", s.url, result.message, s.queue_path)
        depth = self._c.resumed_at_start = self._outbox.depth
        if depth:
            log.info("influx: resuming %d queued points from %s", depth, s.queue_path)
        self._threads = [threading.Thread(target=self._writer_loop, name="influx-writer", daemon=True),
                         threading.Thread(target=self._sender_loop, name="influx-sender", daemon=True)]
        for t in self._threads:
            t.start()
        self._state = "running"

    def _plan_requeue(self, historian: Recorded) -> None:
        assert self._outbox is not None
        self._requeue = plan(self._outbox, historian)
        self._committed = lambda: historian.committed_seq
        self._marking = True

    async def close(self, *, drain: float = CLOSE_DRAIN) -> None:
        """Make everything submitted durable, send what the server takes within ``drain`` seconds (only while
        it is up: an outage never delays a shutdown), stop sending, close the queue. What is left stays in the
        durable queue for the next start. Safe to call twice."""
        if self._state in ("closed", "new"):
            self._state = "closed"
            return
        self._state = "closing"
        self._stop_writer.set()
        self._wake_writer.set()
        await asyncio.to_thread(self._threads[0].join)
        if self._c.server_up and drain > 0:  # the last polls before a SIGTERM reach Grafana now, not next start
            await self.wait_drained(drain)
        self._stop_sender.set()
        self._wake_sender.set()
        await asyncio.to_thread(self._threads[1].join)
        await self._abort()
        self._state = "closed"

    async def _abort(self) -> None:
        if self._writer is not None:
            await asyncio.to_thread(self._writer.close)
        if self._outbox is not None:
            self._outbox.close()

    # -- producers (event loop) ------------------------------------------------------------------------
    def submit(self, samples: Sequence[Sample], seq: int | None = None) -> None:
        """Queue samples for InfluxDB. Never blocks (a copy of the sequence is queued). ``seq``: the
        historian seq of the first (`Historian.submit` returns it); with it, the samples are made durable
        once the historian committed them, within ``flush_interval`` after that."""
        if samples:
            self._put(tuple(samples), None, len(samples), None if seq is None else seq + len(samples))

    def submit_events(self, records: Sequence[EventRecord]) -> None:
        """Queue annotation/health records (episodes, alarm transitions …); see `influx_lines`.

        A record without any writable field is a programming error and raises ValueError here, at the caller.
        """
        if records:
            lines = [event_line(r) for r in records]
            self._put(None, lines, len(lines), None)

    def submit_health(self, component: str, counters: Mapping[str, Any], time: float | None = None) -> None:
        """Queue one ``pretreat_health`` point for a component's numeric counters."""
        rec = health_record(component=component, counters=counters,
                            time=self._clock() if time is None else time)
        if rec.fields:
            self.submit_events([rec])

    def _put(self, samples: Sequence[Sample] | None, lines: list[str] | None, n: int, seq_end: int | None) -> None:
        if self._state in ("closing", "closed"):
            raise RuntimeError("InfluxSink is closed")
        self._inbox.append((samples, lines, seq_end))
        self._submitted += n
        if self._submitted - self._durable >= self.settings.batch_size and not self._wake_writer.is_set():
            self._wake_writer.set()

    async def flush(self) -> None:
        """Return once everything submitted so far (and what a crash left to re-queue) is in the durable
        queue, or the writer has stopped."""
        target = self._submitted
        writer = self._threads[0] if self._threads else None
        await self._wait(lambda: (self._durable >= target and self._requeue is None) or writer is None
                         or not writer.is_alive(),
                         self._wake_writer, math.inf)

    async def wait_drained(self, limit: float) -> bool:
        """Flush, then wait until the server acknowledged everything queued; False after ``limit`` s."""
        deadline = time.monotonic() + limit
        await self.flush()
        outbox = self._outbox
        assert outbox is not None

        def drained() -> bool:
            if not self._ack_lock.acquire(blocking=False):  # an acknowledgement is being counted: not yet
                return False
            try:
                return outbox.depth == 0
            finally:
                self._ack_lock.release()

        await self._wait(drained, self._wake_sender, deadline)
        with self._ack_lock:  # (at most one acknowledgement's wait, on the way out)
            return outbox.depth == 0

    async def _wait(self, done: Callable[[], bool], wake: threading.Event, deadline: float) -> None:
        """Until ``done()`` or the monotonic ``deadline``: nudge the thread, sleep until it reports progress
        (it does so only while someone waits, see ``_waiters``), and re-check at least every 0.5 s."""
        self._waiters += 1
        try:
            while not done() and time.monotonic() < deadline:
                self._progress.clear()
                wake.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._progress.wait(), max(0.0, min(0.5, deadline - time.monotonic())))
        finally:
            self._waiters -= 1

    @property
    def counters(self) -> InfluxCounters:
        """A fresh snapshot (safe from any thread)."""
        c = InfluxCounters(**asdict(self._c))
        c.points_submitted, c.pending_in_memory = self._submitted, self._submitted - self._durable
        if self._outbox is not None:
            st = self._outbox.stats()
            c.queue_depth, c.queue_bytes, c.queue_fill_pct = st.items, st.bytes, round(st.fill_pct, 2)
            c.oldest_unsent_age_s = round(self._outbox.oldest_age(), 3)
            c.dropped_over_budget, c.quarantined = st.dropped_items, st.quarantined_items
        c.unknown_channels = self._formatter.unknown_channels
        c.requests = self._writer.requests if self._writer is not None else 0
        return c

    # -- writer thread: inbox → durable queue ---------------------------------------------------------
    def _writer_loop(self) -> None:
        if self._requeue is not None:
            self._requeue_lost(*self._requeue)
            self._requeue = None
            if self._waiters:
                self._notify_progress()
        next_health = time.monotonic() + (self._health_interval or 0)
        while True:
            self._wake_writer.wait(self.settings.flush_interval)
            self._wake_writer.clear()
            stopping = self._stop_writer.is_set()
            own: list[str] = []
            if self._health_interval and time.monotonic() >= next_health and not stopping:
                next_health = time.monotonic() + self._health_interval
                own.append(event_line(health_record(
                    component=HEALTH_COMPONENT, counters=asdict(self.counters), time=self._clock())))
            self._write_pending(own, gate=not stopping)  # (closing: the historian has closed, all committed)
            if stopping and not self._inbox and self._unsaved is None:
                return

    def _write_pending(self, own: list[str], *, gate: bool) -> None:
        """Format what the inbox holds and append it as records of ``batch_size`` lines, one transaction per
        ~``APPEND_GROUP_BYTES``, each with the historian seq its records reach (`MARK`). ``own`` lines (the
        sink's health points) are not part of the submitted count. With ``gate``, stop at the first samples
        the historian has not committed yet (they wait for the next wake-up).

        After a failed append (disk full, I/O error) the formatted records are kept and retried first at
        the next wake-up, and lines formatted but not yet in a record go back to the front of the inbox:
        order is kept and nothing is formatted twice."""
        if self._unsaved is not None and not self._save(*self._unsaved):
            return
        inbox, size, fmt = self._inbox, self.settings.batch_size, self._formatter.lines
        horizon = self._committed() if gate and self._committed is not None else None
        records: list[tuple[bytes, int]] = []
        chunk: list[str] = []
        bounds: deque[tuple[int, int]] = deque()  # (lines taken when an entry ends, seq it reaches)
        group = taken = recorded = 0  # bytes in records; lines taken from the inbox; of them, in records
        while inbox:
            samples, pre, seq_end = inbox[0]
            if horizon is not None and seq_end is not None and seq_end > horizon:
                break
            inbox.popleft()
            lines = pre if pre is not None else fmt(samples or ())
            chunk.extend(lines)
            taken += len(lines)
            if seq_end is not None:
                bounds.append((taken, seq_end))
            while len(chunk) >= size:
                body = "\n".join(chunk[:size]).encode()
                del chunk[:size]
                records.append((body, size))
                group += len(body)
                recorded += size
                if group >= APPEND_GROUP_BYTES:
                    if not self._save(records, sum(n for _, n in records), _reached(bounds, recorded)):
                        if chunk:
                            inbox.appendleft((None, chunk, bounds[-1][1] if bounds else None))
                        return
                    records, group = [], 0
        submitted = len(chunk) + sum(n for _, n in records)
        chunk.extend(own)
        if chunk:
            records.append(("\n".join(chunk).encode(), len(chunk)))
        if records:
            self._save(records, submitted, bounds[-1][1] if bounds else None)

    def _requeue_lost(self, path: Path, first: int, end: int) -> None:
        """See `influx_recovery.requeue`; if it fails, the mark stays where it was for this whole run, so
        the next start tries again."""
        assert self._outbox is not None
        try:
            self._c.requeued_after_crash = requeue(self._outbox, self._formatter, path, first, end,
                                                   self.settings.batch_size)
        except Exception as exc:  # a thread must not die of it: what is queued stays, the next start retries
            self._marking = False
            self._c.queue_errors += 1
            log.error("influx: re-queuing from %s failed (%s); the next start tries again", path, exc)
            return
        self._check_budget()
        self._wake_sender.set()

    def _save(self, records: list[tuple[bytes, int]], submitted: int, mark: int | None) -> bool:
        """Append ``records`` (``submitted`` of their lines count as submitted points) in one transaction,
        with the historian seq they reach (``mark``, if any); on failure keep them for the next attempt and
        return False."""
        assert self._outbox is not None
        try:
            self._outbox.append_many(records, marks={MARK: mark} if mark is not None and self._marking else None)
        except Exception as exc:  # disk full, I/O error: keep the points in memory and retry next cycle
            self._unsaved = (records, submitted, mark)
            self._c.queue_errors += 1
            if self._c.queue_errors == 1 or self._c.queue_errors % 100 == 0:
                log.error("influx: cannot append to the queue %s (%s); holding %d points in memory",
                          self.settings.queue_path, exc, self._submitted - self._durable)
            return False
        self._unsaved = None
        self._durable += submitted
        if self._waiters:
            self._notify_progress()
        self._check_budget()
        self._wake_sender.set()
        return True

    def _notify_progress(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._progress.set)

    def _check_budget(self) -> None:
        """Raise/clear the queue alarm (called by both threads, hence the lock)."""
        with self._budget_lock:
            self._check_budget_locked()

    def _check_budget_locked(self) -> None:
        assert self._outbox is not None
        st = self._outbox.stats()
        threshold = self.settings.alarm_threshold_pct
        if st.dropped_items > self._last_dropped:
            n = st.dropped_items - self._last_dropped
            self._last_dropped = st.dropped_items
            if not self._dropping:  # once per episode; the counter has the running total
                self._dropping = True
                self._alarm(True, f"influx queue full ({st.bytes} bytes, budget {st.budget_bytes}): dropping "
                                  f"the oldest unsent points ({n} so far, {st.dropped_items} in total)",
                            force=True)
        elif not self._c.queue_alarm and st.fill_pct >= threshold:
            self._alarm(True, f"influx queue at {st.fill_pct:.0f}% of its disk budget "
                              f"({st.items} points unsent for {self._outbox.oldest_age():.0f} s)")
        elif self._c.queue_alarm and st.fill_pct < threshold - _ALARM_HYSTERESIS_PCT:
            self._dropping = False
            self._alarm(False, f"influx queue back to {st.fill_pct:.0f}% of its disk budget")

    def _alarm(self, active: bool, message: str, *, force: bool = False) -> None:
        if self._c.queue_alarm == active and not force:
            return
        self._c.queue_alarm = active
        (log.warning if active else log.info)("%s", message)
        if self._on_alarm is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._on_alarm, active, message)

    # -- sender thread: durable queue → server ---------------------------------------------------------
    def _sender_loop(self) -> None:
        assert self._outbox is not None and self._writer is not None
        outbox, writer = self._outbox, self._writer
        backoff = retries(self.settings.max_backoff)
        while not self._stop_sender.is_set():
            batch = outbox.peek(max_items=self.settings.batch_size)
            if not batch:
                self._wake_sender.wait(self.settings.flush_interval)
                self._wake_sender.clear()
                continue
            result = deliver(writer.write, [r.payload for r in batch], self._quarantine)
            if result.ok:
                with self._ack_lock:
                    self._c.points_sent += outbox.ack(r.id for r in batch)
                if self._waiters and outbox.depth == 0:  # wait_drained() is the only one waiting for acks
                    self._notify_progress()
                backoff.reset()
                self._up()
                self._check_budget()
                continue
            self._c.write_errors += 1
            self._down(result)
            self._stop_sender.wait(backoff.next(result.retry_after))

    def _quarantine(self, line: bytes, result: WriteResult) -> None:
        assert self._outbox is not None
        self._c.write_errors += 1
        reason = f"HTTP {result.status}: {result.message}"
        self._outbox.quarantine(line, reason=reason)
        log.warning("influx: server rejected a point, quarantined in %s (%s): %.200s",
                    self.settings.queue_path, reason, line.decode("utf-8", "replace"))

    def _up(self) -> None:
        if self._down_since is not None:
            depth = self._outbox.depth if self._outbox is not None else 0
            log.info("influx: %s is accepting writes again after %s; %d points still queued",
                     self.settings.url, duration(time.monotonic() - self._down_since), depth)
            self._down_since = None
        self._c.server_up = True

    def _down(self, result: WriteResult) -> None:
        self._c.server_up = False
        if self._down_since is None:
            self._down_since = time.monotonic()
            what = ("refuses our credentials or bucket" if result.outcome in (Outcome.AUTH, Outcome.NOT_FOUND)
                    else "is unavailable")
            log.warning("influx: %s %s (HTTP %s: %s); queueing in %s and retrying", self.settings.url, what,
                        result.status, result.message, self.settings.queue_path)


def _reached(bounds: deque[tuple[int, int]], recorded: int) -> int | None:
    """The historian seq reached once the first ``recorded`` lines are queued: that of the last inbox entry
    wholly among them (its bound and those before it are dropped from ``bounds``); None if none is."""
    seq = None
    while bounds and bounds[0][0] <= recorded:
        seq = bounds.popleft()[1]
    return seq


def _startup_message(s: InfluxSettings, result: WriteResult) -> str:
    if result.outcome is Outcome.AUTH:
        source = (f"token_file {s.token_file}" if s.token_file else
                  f"credential {s.token_credential!r}" if s.token_credential else "no token configured")
        return (f"influx: {s.url} refused the credentials (HTTP {result.status}, auth_scheme "
                f"{s.auth_scheme.value}, {source}): {result.message}")
    if result.outcome is Outcome.NOT_FOUND:
        return (f"influx: {s.url} has no bucket {s.bucket!r} in org {s.org!r} or no /api/v2/write endpoint "
                f"(HTTP 404): {result.message}")
    return f"influx: {s.url} rejected the start-up write (HTTP {result.status}): {result.message}"


def instruments_of(config: SiteConfig) -> dict[tuple[str, str], tuple[str, str]]:
    """The (site, channel) → (instrument, kind) map from a `config.schema.SiteConfig`."""
    return {(c.site, c.id): (c.instrument, c.kind) for c in config.channels}
