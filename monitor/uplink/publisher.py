"""The Sparkplug B uplink: every recorded reading, episode event, alarm transition and seal to a central broker,
with store and forward through outages and crashes (README "Uplink"; topics and payloads in
`monitor.uplink.contract` and `monitor.uplink.payloads`).

Data path (one thread, ``uplink``, besides paho's network thread)::

    submit(samples, seq) ─► inbox ─(once the historian committed them)─► Outbox (disk) ─► DDATA ─► PUBACK ─► ack
    submit_events(objects) ─► inbox ─► Outbox ─► events topic (JSON) ─► PUBACK ─► ack
    start after a crash: historian rows from the Outbox's mark on ─► Outbox (before anything new)

- The hand-off is the InfluxDB sink's (`monitor.stores.influx`): a reading enters the durable queue only
  once the historian committed it, and each append records, in the same transaction, the historian seq up to
  which readings are queued (`MARK`). Every reading below the mark is in the queue or was PUBACKed by the
  broker; a record leaves the queue only after the broker acknowledged every message made of it.
- Live before backlog: at each (re)connect the queue's newest id is the boundary. Records after it are live
  and published as they come; records up to it are the backlog of the outage (or of messages in flight when
  the link dropped), published oldest first, every metric ``is_historical``, at most ``backlog_rate``
  readings a second and at most `BACKLOG_INFLIGHT` records on the wire, so a live reading never waits behind
  more than a few backlog messages.
- A daemon killed (SIGKILL, OOM, power cut) re-queues at its next start every historian reading from the mark
  on (`requeue`), in seq order, before anything new; they go out as backlog (historical). So a reading may
  reach the broker twice (published before the kill, PUBACK lost with the process), always as the same
  metric: same site, channel, millisecond and ``rseq``, the hub's idempotence key.
- Events (episodes, revisions of episodes, alarm transitions, seals) travel the same queue; after a kill the
  episode store and the journal are their record, as for the InfluxDB copy (not re-queued).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.schema import Channel
from config.uplink import UplinkSettings
from drivers.backoff import retries
from monitor.sample import QUALITY_BY_CODE, Sample
from monitor.stores.historian_db import open_for_reading
from monitor.stores.influx_recovery import Recorded, plan
from monitor.stores.outbox import Outbox, OutboxError, Record
from monitor.uplink import contract as c
from monitor.uplink import payloads
from monitor.uplink.contract import UplinkStartupError
from monitor.uplink.session import Session, SessionError

log = logging.getLogger(__name__)

MARK = "uplink_historian_seq"  # every historian reading with a lower seq is queued or was PUBACKed
BDSEQ_MARK = "uplink_bdseq"  # the last session's bdSeq (the next session takes the next one)
BACKLOG_INFLIGHT = 4  # backlog records published and not yet acknowledged, at most
SPOOL_BURST = 4  # batches waiting in memory that make the thread queue them before flush_interval is up
CLOSE_DRAIN = 2.0  # s `close` lets the live queue drain while the broker is up
_READINGS, _EVENT = b"R", b"E"


@dataclass(slots=True)
class UplinkCounters:
    """Health counters (the daemon's snapshot, ``uplink``)."""

    connected: bool = False
    bdseq: int | None = None
    sessions: int = 0
    rebirths: int = 0
    queue_depth: int = 0  # readings and events queued on disk, not yet PUBACKed
    draining_backlog: bool = False  # the session is still sending what was queued before it began
    oldest_unsent_age_s: float = 0.0
    pending_in_memory: int = 0  # submitted, waiting for the historian's commit
    readings_sent: int = 0  # PUBACKed (live and historical)
    historical_sent: int = 0
    events_sent: int = 0
    dropped_over_budget: int = 0
    requeued_after_crash: int = 0
    queue_errors: int = 0


class UplinkPublisher:
    """See the module docstring. ``channels``: every channel of the site file (the DBIRTHs)."""

    def __init__(self, *, settings: UplinkSettings, channels: Sequence[Channel],
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._sites: dict[str, list[Channel]] = defaultdict(list)
        for ch in channels:
            self._sites[ch.site].append(ch)
        self._types = {(ch.site, ch.id): payloads.datatype(ch.unit) for ch in channels}
        self._inbox: deque[tuple[tuple[Sample, ...] | None, int | None, bytes | None]] = deque()
        self._pending = 0
        self._c = UplinkCounters()
        self._committed: Callable[[], int] | None = None  # the historian's committed seq (with a historian)
        self._marking = False  # write the MARK with appends (with a historian, unless an append failed)
        self._requeue: tuple[Path, int, int] | None = None
        self._outbox: Outbox | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._password: str | None = None
        self._state = "new"

    # -- lifecycle (event loop) ------------------------------------------------------------------------------
    async def start(self, historian: Recorded | None = None) -> None:
        """Open the queue (re-queue after a crash, with ``historian``: started, nothing submitted yet) and
        start the thread. An unreachable broker is not an error: the uplink queues until it is back."""
        if self._state != "new":
            raise RuntimeError("UplinkPublisher.start() called twice")
        s = self.settings
        try:
            self._password = s.read_password()
            self._outbox = await asyncio.to_thread(Outbox, path=s.queue_path, budget_bytes=s.budget_bytes)
        except OSError as exc:
            raise UplinkStartupError(f"uplink: password_file {s.password_file}: {exc.strerror}") from None
        except OutboxError as exc:
            raise UplinkStartupError(f"uplink: {exc}") from None
        self._c.dropped_over_budget = self._outbox.stats().dropped_items
        if historian is not None:
            self._requeue = await asyncio.to_thread(plan, self._outbox, historian, key=MARK, name="uplink")
            self._committed = lambda: historian.committed_seq
            self._marking = True
        self._thread = threading.Thread(target=self._run, name="uplink", daemon=True)
        self._thread.start()
        self._state = "running"

    async def close(self) -> None:
        """Queue everything submitted (the historian has closed: all of it is committed), let the live queue
        drain for up to `CLOSE_DRAIN` s while the broker is up, publish NDEATH and disconnect. What is left
        stays queued for the next start."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closing"
        self._stop.set()
        self._wake.set()
        assert self._thread is not None
        await asyncio.to_thread(self._thread.join)
        if self._outbox is not None:
            self._outbox.close()
        self._state = "closed"

    # -- producers (event loop) --------------------------------------------------------------------------
    def submit(self, samples: Sequence[Sample], seq: int | None = None) -> None:
        """Readings as the historian got them (``seq``: `Historian.submit`'s return, the first one's)."""
        if samples and self._state == "running":
            self._inbox.append((tuple(samples), seq, None))
            self._pending += len(samples)

    def submit_events(self, events: Iterable[Mapping[str, Any] | None]) -> None:
        """JSON events (`monitor.uplink.events`); None entries are skipped."""
        if self._state != "running":
            return
        for e in events:
            if e is not None:
                self._inbox.append((None, None, json.dumps(e, separators=(",", ":")).encode()))

    @property
    def counters(self) -> UplinkCounters:
        c_ = self._c
        c_.pending_in_memory = self._pending
        if self._outbox is not None:
            c_.queue_depth = self._outbox.depth
            c_.oldest_unsent_age_s = round(self._outbox.oldest_age(), 3)
        return c_

    # -- the uplink thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        assert self._outbox is not None
        if self._requeue is not None:
            self._requeue_lost(*self._requeue)
        backoff = retries(self.settings.max_backoff)
        session: _Lanes | None = None
        retry_at = 0.0
        down_since: float | None = None
        spooled = 0.0
        while True:
            stopping = self._stop.is_set()
            now = time.monotonic()
            # committed readings go to disk every flush_interval (or sooner for a burst): one transaction each
            if stopping or now - spooled >= self.settings.flush_interval or \
                    self._pending >= SPOOL_BURST * self.settings.batch_size:
                self._spool(gate=not stopping)
                spooled = now
            if session is not None and not session.s.connected:
                log.warning("uplink: lost the broker %s:%d; queueing on disk", self.settings.host,
                            self.settings.port)
                session.s.close()
                session, down_since = None, time.monotonic()
                self._c.connected = False
            if session is None and not stopping and time.monotonic() >= retry_at:
                session = self._connect(down_since is None)
                if session is None:
                    retry_at = time.monotonic() + backoff.next()
                    down_since = down_since or time.monotonic()
                else:
                    backoff.reset()
                    down_since = None
            if session is not None:
                session.pump(self)
            if stopping:
                self._finish(session)
                return
            # woken by a submit burst, a PUBACK, a command or the stop; 20 ms while there is work (the rate)
            self._wake.wait(self.settings.flush_interval if session is None or session.idle else 0.02)
            self._wake.clear()

    def _connect(self, first: bool) -> _Lanes | None:
        assert self._outbox is not None
        last = self._outbox.mark(BDSEQ_MARK)
        bdseq = 0 if last is None else (last + 1) % 256  # (a failed attempt births nothing: its number is reused)
        s = Session(settings=self.settings, bdseq=bdseq, sites=self._sites, now=self._clock(),
                    password=self._password, wake=self._wake)
        try:
            s.open(self._clock(), self._stop)
        except SessionError as exc:
            if first:  # once per outage (the counters and the health snapshot say the rest)
                log.warning("uplink: %s; queueing in %s and retrying", exc, self.settings.queue_path)
            return None
        self._outbox.set_marks({BDSEQ_MARK: bdseq})  # this bdSeq has an NBIRTH: the next session takes the next
        self._c.sessions += 1
        self._c.bdseq = bdseq
        self._c.connected = True
        lanes = _Lanes(s, boundary=self._outbox.last_id(), settings=self.settings, now=time.monotonic())
        log.info("uplink: connected to %s:%d as Sparkplug node %s/%s (bdSeq %d); %d queued items to send as "
                 "history", self.settings.host, self.settings.port, self.settings.group, self.settings.node,
                 bdseq, self._outbox.depth)
        return lanes

    def _finish(self, session: _Lanes | None) -> None:
        if session is None:
            return
        deadline = time.monotonic() + CLOSE_DRAIN
        while session.s.connected and time.monotonic() < deadline and not session.drained(self):
            session.pump(self)
            session.s.published.wait(0.05)
            session.s.published.clear()
        session.s.goodbye(self._clock())
        self._c.connected = False

    def _spool(self, *, gate: bool) -> None:
        """Move what the historian has committed from the inbox into the durable queue, with the mark."""
        assert self._outbox is not None
        inbox, size = self._inbox, self.settings.batch_size
        horizon = self._committed() if gate and self._committed is not None else None
        records: list[tuple[bytes, int]] = []
        rows: list[list[Any]] = []
        mark: int | None = None
        taken = 0
        while inbox:
            samples, seq, event = inbox[0]
            if samples is not None and horizon is not None and seq is not None and seq + len(samples) > horizon:
                break
            inbox.popleft()
            if event is not None:
                records.append((_EVENT + event, 1))
                continue
            assert samples is not None
            taken += len(samples)
            base = seq if seq is not None else -1
            for i, sm in enumerate(samples):
                rows.append([base + i if seq is not None else -1, sm.site, sm.channel, sm.time, sm.value,
                             str(sm.quality), sm.reason])
                if len(rows) >= size:
                    records.append(_readings_record(rows))
                    rows = []
            if seq is not None:
                mark = seq + len(samples)
        if rows:
            records.append(_readings_record(rows))
        if not records and mark is None:
            return
        try:
            self._outbox.append_many(records, marks={MARK: mark} if mark is not None and self._marking else None)
        except Exception as exc:  # disk full, I/O error: the readings are in the historian; re-queued at start
            self._c.queue_errors += 1
            self._marking = False  # the mark stays before them for the rest of this run
            log.error("uplink: cannot append to the queue %s (%s); %d readings will be re-queued from the "
                      "historian at the next start", self.settings.queue_path, exc, taken)
        self._pending -= taken
        self._c.dropped_over_budget = self._outbox.stats().dropped_items

    def _requeue_lost(self, path: Path, first: int, end: int) -> None:
        """Historian readings ``first <= seq < end`` (lost from memory by a crash) into the queue, in seq
        order, the mark moved to ``end`` with the last append. A failure leaves the mark: the next start
        tries again."""
        assert self._outbox is not None
        log.warning("uplink: re-queuing the readings the historian committed after the last one queued for the "
                    "broker (seq %d to %d: the daemon stopped without closing)", first, end - 1)
        size, n = self.settings.batch_size, 0
        try:
            conn = open_for_reading(path)
            try:
                cur = conn.execute("SELECT r.seq, c.site, c.channel, r.time, r.value, r.quality, r.reason "
                                   "FROM readings r JOIN channels c ON c.id = r.channel_id "
                                   "WHERE r.seq >= ? AND r.seq < ? ORDER BY r.seq", (first, end))
                records: list[tuple[bytes, int]] = []
                while batch := cur.fetchmany(size):
                    rows = [[q, site, ch, t, v, str(QUALITY_BY_CODE[code]), reason or ""]
                            for q, site, ch, t, v, code, reason in batch]
                    records.append(_readings_record(rows))
                    n += len(rows)
                    if len(records) >= 64:
                        self._outbox.append_many(records)
                        records = []
                self._outbox.append_many(records, marks={MARK: end})
            finally:
                conn.close()
        except Exception as exc:  # a thread must not die of it: the mark stays, the next start tries again
            self._c.queue_errors += 1
            self._marking = False  # no mark written this run: the next start re-queues from the old one
            log.error("uplink: re-queuing from %s failed (%s); the next start tries again", path, exc)
            return
        self._c.requeued_after_crash = n
        log.info("uplink: %d readings re-queued", n)


class _Lanes:
    """The live and backlog lanes of one session over the durable queue (see the module docstring)."""

    def __init__(self, s: Session, *, boundary: int, settings: UplinkSettings, now: float) -> None:
        self.s = s
        self.boundary = boundary
        self.live_after = boundary
        self.back_after = 0
        self.settings = settings
        self.tokens = float(settings.batch_size)
        self.refilled = now
        self.inflight: deque[tuple[Record, list[Any], bool]] = deque()  # record, message infos, historical
        self.idle = True

    def drained(self, up: UplinkPublisher) -> bool:
        assert up._outbox is not None
        return not self.inflight and up._outbox.depth == 0

    def pump(self, up: UplinkPublisher) -> None:
        """Acknowledge what the broker PUBACKed, answer a rebirth, publish live records, then backlog ones
        within the rate."""
        outbox = up._outbox
        assert outbox is not None
        self._acks(up)
        if self.s.rebirth_wanted.is_set():
            self.s.rebirth_wanted.clear()
            self.s.birth(up._clock())
            up._c.rebirths += 1
            log.info("uplink: rebirth requested (NCMD): NBIRTH and every DBIRTH published again")
        sent = 0
        for rec in outbox.peek(max_items=self.settings.batch_size * 8, after_id=self.live_after):
            self._publish(up, rec, historical=False)
            self.live_after = rec.id
            sent += 1
        backlog_busy = False
        if self.back_after < self.boundary:
            now = time.monotonic()
            rate = self.settings.backlog_rate
            self.tokens = min(max(rate, self.settings.batch_size), self.tokens + rate * (now - self.refilled))
            self.refilled = now
            while self.tokens > 0 and sum(h for _, _, h in self.inflight) < BACKLOG_INFLIGHT:
                batch = [r for r in outbox.peek(max_items=1, after_id=self.back_after) if r.id <= self.boundary]
                if not batch:
                    self.back_after = self.boundary
                    break
                rec = batch[0]
                self._publish(up, rec, historical=True)
                self.back_after = rec.id
                self.tokens -= rec.count
                sent += 1
            backlog_busy = self.back_after < self.boundary
        up._c.draining_backlog = backlog_busy
        self.idle = not sent and not self.inflight and not backlog_busy

    def _publish(self, up: UplinkPublisher, rec: Record, *, historical: bool) -> None:
        st = self.settings
        data = rec.payload
        infos = []
        if data[:1] == _EVENT:
            infos.append(self.s.publish(c.events_topic(st.group, st.node), data[1:]))
        else:
            by_site: dict[str, list[payloads.Reading]] = defaultdict(list)
            for r in json.loads(data[1:]):
                by_site[r[1]].append(tuple(r))
            now = up._clock()
            for site, readings in by_site.items():
                body = payloads.ddata(readings, seq=self.s.next_seq(), now=now, historical=historical,
                                      types=up._types)
                infos.append(self.s.publish(c.device_topic(st.group, "DDATA", st.node, site), body))
        self.inflight.append((rec, infos, historical))

    def _acks(self, up: UplinkPublisher) -> None:
        assert up._outbox is not None
        done: list[Record] = []
        keep: deque[tuple[Record, list[Any], bool]] = deque()
        for rec, infos, historical in self.inflight:
            try:
                ok = all(i.is_published() for i in infos)
            except (RuntimeError, ValueError):  # not queued: the session is going; re-sent next session
                ok = False
            if ok:
                done.append(rec)
                if rec.payload[:1] == _EVENT:
                    up._c.events_sent += 1
                else:
                    up._c.readings_sent += rec.count
                    if historical:
                        up._c.historical_sent += rec.count
            else:
                keep.append((rec, infos, historical))
        self.inflight = keep
        if done:
            up._outbox.ack(r.id for r in done)


def _readings_record(rows: list[list[Any]]) -> tuple[bytes, int]:
    return _READINGS + json.dumps(rows, separators=(",", ":")).encode(), len(rows)


def channels_of(config: Any) -> list[Channel]:
    """Every channel of a `config.schema.SiteConfig`, in file order (the DBIRTHs' metrics)."""
    return list(config.channels)

