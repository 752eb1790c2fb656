"""The historian: the record of evidence. Every `Sample`, good and bad, with its quality and reason.

Why a thread: SQLite calls block. The writer runs in one dedicated thread that owns its connection and is fed
by an in-memory queue, so a slow or stalled disk never blocks the event loop that polls the instruments.
`submit` only appends to the queue; the writer commits every ``commit_interval`` seconds, or at once when
``_EARLY_COMMIT`` samples are waiting, in batches (one transaction per batch is what makes 50,000+
samples/s possible; one transaction per sample would manage a few hundred).

Nothing is dropped:
- A failed write (disk full, file locked by another program, read-only file system) is logged once per
  outage, counted in ``write_errors``, and the whole batch goes back to the head of the queue and is retried
  with a capped back-off. When writes succeed again, that is logged once too.
- A sample that can never be a row (NaN timestamp, a value of the wrong type, a good sample without a value)
  is kept as text in the ``rejected_samples`` table with the error, counted and logged, so one bad sample
  cannot block the queue behind it.
- The queue is not capped by dropping: above ``max_queue`` samples `submit` still accepts (it must never
  block the event loop, and losing a sample is a defect), but logs a warning once per episode and counts it
  in ``queue_overflows``. Backpressure is applied in `flush`, which returns only once everything submitted
  before it is committed: a producer that can wait (a bulk import, the scheduler's tick when `backlogged`)
  awaits it, which bounds memory to what is produced meanwhile. A queued sample costs ~200 bytes.
- The only way to lose samples is `close` with ``give_up_after`` while the file cannot be written; the number
  lost is then logged as an error.
- The file deleted or replaced under the writer is seen at the next commit, which then does not count: see
  `historian_file` (re-created from the writer's own copy; ``file_losses``, ``failing``).

Durability: see `historian_db.open_for_writing` (WAL, ``synchronous=NORMAL``).

Why one module of about 420 lines: the API the daemon calls and the writer thread share the queue, the
waiters and the counters; the parts with a concept of their own live apart: the rows of a batch
(`historian_rows`, the hot path), the file's schema and reads (`historian_db`), file loss (`historian_file`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from pathlib import Path

from monitor.number_text import duration
from monitor.sample import Sample
from monitor.stores.historian_db import (
    ARRIVALS_SQL,
    HistorianError,
    HistorianReader,
    arrivals_row,
    open_for_writing,
    read_channels,
    read_readings,
    writer_cache_kib,
)
from monitor.stores.historian_file import FileLost, FileWatch, recreate
from monitor.stores.historian_rows import DATA_ERRORS, insert_batch, insert_one_by_one

__all__ = ["Historian", "HistorianCounters", "HistorianError", "HistorianReader", "read_channels",
           "read_readings"]

log = logging.getLogger(__name__)

_EARLY_COMMIT = 100_000  # samples waiting: commit now instead of at the next commit_interval
# (bigger transactions write each hot B-tree page once for more rows: 3.1 µs of writer CPU a row at 50,000,
# 4.1 µs at 20,000, with 1,000 channels interleaved, then 1.8 µs at 50,000, 1.6 at 67,000 and 1.45 at 100,000
# once the rows went in from C. Above what flat-out polling queues in one commit_interval (~80,000 at the
# benchmark's ~16,000 polls of ten readings a second), so the interval, the window a kill can lose, decides the
# commits, not this cap; ~20 MB of queued samples at most before a commit)
_MAX_BACKOFF = 5.0  # s between retries of a failing write


class HistorianCounters:
    """Live counters, published as the daemon's health telemetry. Each field has one writing thread."""

    __slots__ = ("batches", "file_losses", "queue_overflows", "samples_rejected", "samples_written",
                 "submitted", "write_errors")

    def __init__(self) -> None:
        self.submitted = 0  # samples accepted by submit() (event-loop thread)
        self.samples_written = 0  # committed to `readings` (writer thread, as are the next three)
        self.samples_rejected = 0  # kept in `rejected_samples` instead: malformed, see module doc
        self.batches = 0  # transactions committed
        self.write_errors = 0  # failed write attempts (each batch retried, nothing dropped)
        self.queue_overflows = 0  # times the queue grew past max_queue
        self.file_losses = 0  # times the file was deleted or replaced under the writer (historian_file)

    @property
    def queue_depth(self) -> int:
        """Samples submitted and not yet committed."""
        return self.submitted - self.samples_written - self.samples_rejected

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in (*self.__slots__, "queue_depth")}


class Historian:
    """Records samples in a SQLite file. Start before the drivers, close after them (close flushes)."""

    def __init__(self, *, path: Path, commit_interval: float = 0.5, max_queue: int = 1_000_000,
                 busy_timeout: float = 5.0, channels: int = 0) -> None:
        """``busy_timeout`` (s): how long one write waits for another connection's lock (the episode store
        shares the file) before the attempt counts as failed and is retried later. ``channels``: how many
        series the daemon records, which sizes the writer's page cache (`historian_db.writer_cache_kib`)."""
        self.path = Path(path)
        self.cache_kib = writer_cache_kib(channels)
        self.commit_interval = commit_interval
        self.max_queue = max_queue
        self.busy_timeout = busy_timeout
        self.counters = HistorianCounters()
        self._pending: deque[tuple[Sample, ...]] = deque()
        self._taken = 0  # samples the writer has taken off the queue (writer thread; read by submit)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._closed = False
        self._stopping = False  # writer: exit once the queue is empty
        self._abandon = False  # writer: exit now (close timed out)
        self._fatal: BaseException | None = None
        self._overflowing = False
        self._ids: dict[tuple[str, str, str], int] = {}
        self._next_seq = 1  # the seq the next committed sample gets (writer thread)
        self._base_seq = 1  # the seq of the first sample submitted since start
        self._watch: FileWatch | None = None
        self.failing = ""  # why writes fail right now ("" while they succeed); writer thread
        self.on_file_lost: Callable[[str], None] | None = None  # called in the writer thread, after re-creating

    # -- the API the daemon calls -----------------------------------------------------------------------
    async def start(self) -> None:
        """Open or create the file (raises `HistorianError` or `sqlite3.Error` if it cannot) and start
        the writer thread."""
        if self._thread is not None or self._closed:
            raise HistorianError(f"historian {self.path} already started or closed")
        self._loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(target=self._run, args=(opened,), name="historian-writer",
                                        daemon=True)
        self._thread.start()
        try:
            await opened
        except BaseException:
            await asyncio.to_thread(self._thread.join)
            self._thread = None
            raise

    def submit(self, samples: Sequence[Sample]) -> int:
        """Queue samples for recording. Never blocks, never drops (see the module doc for overflow).

        Returns the ``seq`` the first of them gets in ``readings`` (the others follow one by one: seq
        numbers are given in submission order), so a copy elsewhere (the InfluxDB sink) can tell which
        recorded rows it holds."""
        if self._closed:
            raise HistorianError(f"historian {self.path} is closed; {len(samples)} samples not recorded")
        c = self.counters
        first = self._base_seq + c.submitted
        if not samples:
            return first
        self._pending.append(tuple(samples))  # a copy: the caller may reuse its list
        c.submitted += len(samples)
        depth = c.queue_depth
        # a full batch waiting (not counting what the writer is committing now): commit it without waiting for
        # the interval. (Event.set takes a lock the writer contends, hence the is_set check first.)
        if c.submitted - self._taken >= _EARLY_COMMIT and not self._wake.is_set():
            self._wake.set()
        if depth > self.max_queue and not self._overflowing:
            self._overflowing = True
            c.queue_overflows += 1
            log.warning("historian queue holds %d samples (max_queue %d): the disk is not keeping up; "
                        "accepting and holding them in memory", depth, self.max_queue)
        return first

    @property
    def committed_seq(self) -> int:
        """Every sample submitted with a seq below this is committed (or kept in ``rejected_samples``).
        Right after `start` it is the seq the first submitted sample will get."""
        return self._next_seq

    @property
    def backlogged(self) -> bool:
        """True while more than ``max_queue`` samples wait: producers that can wait should `flush`."""
        return self.counters.queue_depth > self.max_queue

    async def flush(self) -> None:
        """Return once everything submitted before this call is committed (or rejected, see module doc).

        Waits as long as the file cannot be written: that is the backpressure. Raises `HistorianError` if
        the writer stopped for good.
        """
        target = self.counters.submitted
        if self._done() >= target:
            return
        if self._thread is None or self._loop is None:
            raise HistorianError("historian not started: nothing can be flushed")
        self._check_fatal()
        fut: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((target, fut))
        self._wake.set()
        await fut

    async def close(self, *, give_up_after: float | None = None) -> None:
        """Flush, then stop the writer and close the file. Safe to call twice.

        With ``give_up_after`` (s), give up flushing after that long: what is still queued is then lost, and
        logged as an error with its count. Without it, wait as long as the file cannot be written.
        """
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            if self.counters.queue_depth:
                log.error("historian closed before start: %d samples not recorded", self.counters.queue_depth)
            return
        try:
            await asyncio.wait_for(self.flush(), give_up_after)
        except TimeoutError:
            log.error("historian: gave up flushing after %s; %d samples NOT recorded",
                      duration(give_up_after or 0.0), self.counters.queue_depth)  # (a number: it timed out)
            self._abandon = True
        except HistorianError:
            pass  # the writer already stopped for good and said why
        self._stopping = True
        self._wake.set()
        await asyncio.to_thread(thread.join)
        self._thread = None

    def query(self, *, site: str, channel: str, start: float | None = None,
              end: float | None = None) -> Iterator[Sample]:
        """One channel's committed samples, time order, ``start`` inclusive, ``end`` exclusive. Opens its
        own read-only connection (WAL readers do not block the writer)."""
        return read_readings(self.path, site=site, channel=channel, start=start, end=end)

    def channels(self) -> list[tuple[str, str, str]]:
        """(site, channel, unit) of every series recorded so far."""
        return read_channels(self.path)

    @staticmethod
    def read(*, path: Path, site: str, channel: str, start: float | None = None,
             end: float | None = None) -> Iterator[Sample]:
        """Read a historian file without a running `Historian` (tools, other processes)."""
        return read_readings(Path(path), site=site, channel=channel, start=start, end=end)

    @staticmethod
    def open_readonly(path: Path) -> HistorianReader:
        return HistorianReader(path=Path(path))

    # -- event-loop side helpers -----------------------------------------------------------------------
    def _done(self) -> int:
        return self.counters.samples_written + self.counters.samples_rejected

    def _check_fatal(self) -> None:
        if self._fatal is not None:
            raise HistorianError(f"historian writer stopped: {self._fatal!r}") from self._fatal

    def _release_waiters(self) -> None:
        done = self._done()
        keep = []
        for target, fut in self._waiters:
            if fut.done():
                continue
            if self._fatal is not None:
                fut.set_exception(HistorianError(f"historian writer stopped: {self._fatal!r}"))
            elif done >= target:
                fut.set_result(None)
            else:
                keep.append((target, fut))
        self._waiters = keep

    def _notify(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody is waiting
                self._loop.call_soon_threadsafe(self._release_waiters)

    # -- the writer thread -----------------------------------------------------------------------------
    def _run(self, opened: asyncio.Future[None]) -> None:
        assert self._loop is not None
        try:
            conn = self._open()
            self._next_seq = self._base_seq = int(conn.execute(
                "SELECT value FROM historian_meta WHERE key = 'next_seq'").fetchone()[0])
            rows = conn.execute("SELECT id, site, channel, unit FROM channels")
            self._ids = {(s, c, u): i for i, s, c, u in rows}
        except BaseException as exc:
            self._loop.call_soon_threadsafe(_settle, opened, exc)
            return
        self._loop.call_soon_threadsafe(_settle, opened, None)
        self._conn = conn
        try:
            self._loop_forever()
        except BaseException as exc:  # a defect: make it loud and unblock every flush()
            log.critical("historian writer stopped: %r; %d samples not recorded", exc,
                         self.counters.queue_depth, exc_info=True)
            self._fatal = exc
        finally:
            self._conn.close()
            if self._watch is not None:
                self._watch.close()
            self._notify()

    def _open(self) -> sqlite3.Connection:
        conn = open_for_writing(self.path, busy_timeout=self.busy_timeout, cache_kib=self.cache_kib)
        try:
            self._watch = FileWatch.open(self.path)
        except BaseException:
            conn.close()
            raise
        return conn

    def _recover(self, reason: str) -> None:
        """The file was deleted or replaced (`historian_file`): re-create it from our own view, reopen, and
        let the daemon know. The batch that was not counted is still queued and goes to the new file."""
        self.counters.file_losses += 1
        self.failing = reason
        log.error("%s: its last commit does not count; %d samples held in memory", reason,
                  self.counters.queue_depth)
        recreate(self._conn, self.path, reason, next_seq=self._next_seq)
        old, watch = self._conn, self._watch
        self._conn = self._open()
        old.close()
        if watch is not None:
            watch.close()
        if self.on_file_lost is not None:
            self.on_file_lost(reason)

    def _loop_forever(self) -> None:
        """Commit what is queued, then wait until ``commit_interval`` after that round began (or until woken by
        a flush, a full batch or close), so that samples arriving steadily make one transaction per interval.

        Why not commit again at once whenever something is queued: under a steady load something always is,
        and the writer would commit back to back in small transactions (~4,000 samples every 80 ms flat out,
        bench/bench_polling.py), rewriting every channel's newest leaf page for a handful of rows each time:
        several times the writer's CPU and disk writes of one transaction per interval, taken from the cores
        the event loop and the instruments need."""
        retry_at = 0.0
        failures = 0
        while not self._abandon and not (self._stopping and not self._pending):
            now = time.monotonic()
            if now < retry_at:
                self._wake.wait(retry_at - now)
                self._wake.clear()
                continue
            round_start = now
            if self._pending:
                try:
                    try:
                        self._write_pending(self._conn)
                    except FileLost as lost:
                        self._recover(str(lost))
                        continue
                except (sqlite3.Error, OSError) as exc:
                    failures += 1
                    self.counters.write_errors += 1
                    self.failing = self.failing or f"cannot write {self.path}: {exc}"
                    if failures == 1:
                        log.error("historian: cannot write %s (%s); %d samples held in memory and retried",
                                  self.path, exc, self.counters.queue_depth)
                    backoff = max(0.05, self.commit_interval) * 2 ** failures
                    retry_at = time.monotonic() + min(_MAX_BACKOFF, backoff)
                    continue
                if failures:
                    log.warning("historian: writing %s again after %d failed attempts; nothing lost",
                                self.path, failures)
                    failures = 0
                self.failing = ""
                self._notify()
                if self._overflowing and self.counters.queue_depth <= self.max_queue // 2:
                    self._overflowing = False
                    log.info("historian queue back to %d samples", self.counters.queue_depth)
            if not self._stopping:
                self._wake.wait(max(0.0, round_start + self.commit_interval - time.monotonic()))
                self._wake.clear()

    def _write_pending(self, conn: sqlite3.Connection) -> None:
        """Commit the chunks queued when called, one transaction per ~_EARLY_COMMIT samples (what arrives
        meanwhile waits for the next round, see `_loop_forever`). On a file error the transaction's chunks go
        back to the head of the queue, in order, and the error propagates."""
        left = len(self._pending)
        while left:
            chunks: list[tuple[Sample, ...]] = []
            n = 0
            while left and n < _EARLY_COMMIT:
                chunks.append(self._pending.popleft())
                n += len(chunks[-1])
                left -= 1
            self._taken += n
            try:
                self._commit(conn, list(chain.from_iterable(chunks)))
            except BaseException:
                self._pending.extendleft(reversed(chunks))
                self._taken -= n
                raise

    def _commit(self, conn: sqlite3.Connection, batch: list[Sample]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            ids = self._ids
            earliest: float | None = None
            try:
                ids, earliest = insert_batch(conn, ids, batch, self._next_seq)
                written, rejected = len(batch), 0
            except DATA_ERRORS:
                conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                ids, written, rejected = insert_one_by_one(conn, self._ids, batch, self._next_seq)
            conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'",
                         (self._next_seq + len(batch),))
            conn.execute(ARRIVALS_SQL, arrivals_row(self.counters.batches, self._next_seq, batch, earliest))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if self._watch is not None and (lost := self._watch.problem()):
            raise FileLost(lost)  # committed into a file that is no longer the historian: not durable
        self._ids = ids  # channel ids created in a rolled-back transaction must not be remembered
        self._next_seq += len(batch)
        c = self.counters
        c.samples_written += written
        c.samples_rejected += rejected
        c.batches += 1

def _settle(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)
