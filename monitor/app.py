"""`pretreat run`: the composition root. Wires drivers → samples → historian and checks; no business logic.

Lifecycle (style rule 7): sinks start before sources (historian and episode store, then the check engine,
then drivers and the scheduler) and stop in reverse, so every sample a driver produced is recorded before
the store closes. Each start pushes its stop on one `contextlib.AsyncExitStack`, so a start that raises still
stops what started before it. SIGTERM and SIGINT set one stop event; `Daemon.run` returns after everything is
flushed.

Why one module of about 470 lines: `Daemon` owns the lifetime of every component and the data path between
them (ingest, verdicts, the tick, retention, recorded history), which all touch the same dozen components; what
has a concept of its own lives apart (`monitor.polling`, `monitor.health`, `monitor.alarming`,
`monitor.warmup`, `monitor.integrity`, `monitor.systemd`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from config.loader import load_config_or_report
from config.schema import DriverKind, SiteConfig
from drivers.base import PolledDriver, StreamingDriver
from monitor import clock as clocks
from monitor.alarming import Alarming
from monitor.checks.engine import CheckEngine
from monitor.checks.events import START, EpisodeEvent
from monitor.checks.revisions import Revision
from monitor.clockwatch import ClockWatch
from monitor.health import HealthWriter, counters_of, devices_of, health_path, plain
from monitor.integrity import SEAL_INTERVAL, RecordGuard
from monitor.jobs import JobsInFlight
from monitor.logtext import episode_fields, episode_message, local_time, use_site_config
from monitor.memory import settle_gc
from monitor.polling import Polls, key_of
from monitor.reports.aggregates import DailyAggregator
from monitor.reports.schedule import reports_dir, schedule_reports
from monitor.sample import Sample, release_from_gc
from monitor.slug_history import BaselineSection
from monitor.staleness import LOG_EACH, StalenessTracker
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from monitor.stores.historian_db import recent_samples
from monitor.stores.influx import InfluxSink, InfluxStartupError, instruments_of
from monitor.stores.influx_lines import episode_record
from monitor.stores.retention import HOLD_MARGIN, PurgeResult, purge
from monitor.stores.seals import RETENTION, SEAL_AFTER
from monitor.systemd import Heartbeat, SystemdNotifier, stall_after_for
from monitor.uplink.contract import UplinkStartupError
from monitor.uplink.events import episode_event, revision_events
from monitor.warmup import history_reader, reconcile, warm_up, window_start

if TYPE_CHECKING:
    from monitor.uplink.publisher import UplinkPublisher

log = logging.getLogger(__name__)
STREAM_CLOSE_LIMIT = 10.0  # s a streaming driver gets to acknowledge and disconnect at shutdown

# Episode events (or stale samples of one tick) handled between two yields to the event loop. A start-up of
# 1,000 devices whose first replies come late makes 10,000 channels stale at once: recorded in one piece, the
# 10,000 episodes, alarms and journal records held the loop for seconds (polls late, lag p99 9 s); in chunks
# each piece takes tens of ms and the polls run between them. Each chunk is still one transaction.
VERDICT_CHUNK = 250
SEED_READINGS = 64  # last stored readings a channel, given to the MQTT duplicate filter at start


class HistoryOverlap(Exception):
    """`Daemon.record_history` was asked to record a period the historian already holds readings of."""


@dataclass(frozen=True, slots=True)
class HistoryRecorded:
    samples: int
    episode_events: int


class Daemon:
    """Runs one site file until stopped. ``clock`` is injectable for tests of the tick logic.

    ``tune_gc``: tune the process's garbage collector once started (`monitor.memory.settle_gc`). The
    ``pretreat run`` process does; a test or tool embedding a daemon keeps its own settings."""

    def __init__(self, *, config: SiteConfig, clock: Callable[[], float] | None = None,
                 notifier: SystemdNotifier | None = None, tune_gc: bool = False) -> None:
        from drivers.modbus.driver import build_modbus_drivers

        use_site_config(config)  # the log speaks the sites' time zone and the channels' resolutions
        self.config = config
        self.clock = clocks.wall if clock is None else clock  # (the demonstration clock, if `make demo` set one)
        self.tune_gc = tune_gc
        self.historian = Historian(path=config.daemon.historian, commit_interval=config.daemon.commit_interval,
                                   channels=len(config.channels))
        self.episodes = EpisodeStore(path=config.daemon.historian)
        self.aggregates = DailyAggregator(path=config.daemon.historian, config=config)  # daily report figures
        # InfluxDB is a copy for dashboards, never the only one: the historian stays the record of evidence.
        self.influx = (InfluxSink(settings=config.influx, instruments=instruments_of(config))
                       if config.influx is not None else None)
        # live: late readings are judged at their time, corrections come out as revisions
        self.engine = CheckEngine.for_config(config, live=True, horizon=lambda t: window_start(config, t))
        self.slug_baselines = BaselineSection(self.engine)  # what the console shows of the baselines in force
        self.alarming = Alarming(config=config, now=self.clock(), influx=self.influx)
        # the Sparkplug B uplink to a central broker ([uplink]): a copy for the county's hub, queued on disk
        self.uplink: UplinkPublisher | None = None
        if config.uplink is not None:  # imported here: protobuf costs ~9 MB of RSS a site without one never needs
            from monitor.uplink.publisher import UplinkPublisher
            self.uplink = UplinkPublisher(settings=config.uplink, channels=config.channels)
        self.alarming.uplink = self.uplink
        self.guard = RecordGuard(db=config.daemon.historian, alarming=self.alarming, clock=self.clock,
                                 seal_after=SEAL_AFTER)
        modbus, self.links = build_modbus_drivers(config)  # the daemon owns the links: closed at the stop
        self.polled: list[PolledDriver] = list(modbus)
        self.streaming: list[StreamingDriver] = []
        if any(i.driver is DriverKind.MQTT for s in config.sites for i in s.instruments):
            # paho (~8 MB of the daemon's resident memory) is loaded only for a site with MQTT instruments
            from drivers.mqtt.driver import build_mqtt_drivers
            self.streaming = list(build_mqtt_drivers(config))
        # staleness measures elapsed time: monotonic, so an NTP step of the wall clock cannot fake or hide it
        self.staleness = StalenessTracker(config=config, now=time.monotonic())
        self.episode_events = 0
        # episode events and revisions waiting for their readings to be committed, in the engine's order
        self._verdicts: list[EpisodeEvent | Revision] = []
        self._verdict_wake = asyncio.Event()
        self.scheduler: AsyncIOScheduler | None = None  # while running
        self.clock_watch: ClockWatch | None = None
        self.retention: list[PurgeResult] = []  # purges run since start (only with [daemon] retention_days)
        self.ready = asyncio.Event()
        self.notifier = notifier if notifier is not None else SystemdNotifier(address=None)
        self.heartbeat = Heartbeat(notifier=self.notifier, stall_after=stall_after_for(config))
        self.polls = Polls(drivers=self.polled, ingest=self.ingest, progress=self.heartbeat.progress)
        self.stats = self.polls.stats  # per instrument ("site/instrument"), in the health snapshot

    # -- the data path -------------------------------------------------------------------------------
    def ingest(self, samples: Sequence[Sample]) -> None:
        """Every sample is recorded; good ones also feed staleness; all go through the checks."""
        if not samples:
            return
        if isinstance(samples, list | tuple):  # never part of a cycle: kept out of the collector's passes
            release_from_gc(samples)
        seq = self.historian.submit(samples)
        self.aggregates.observe(samples)
        self.alarming.on_samples(samples)
        if self.influx is not None:
            self.influx.submit(samples, seq)  # queued once the historian committed them (no loss on a kill)
        if self.uplink is not None:
            self.uplink.submit(samples, seq)  # the same hand-off (monitor.uplink.publisher)
        self.staleness.observe(samples, time.monotonic())
        engine = self.engine
        events = engine.process_many(samples)
        if events or engine.revisions or engine.waiting_for_history:
            self._verdicts.extend(events)
            self._verdicts.extend(engine.drain_revisions())
            self._verdict_wake.set()

    async def _deliver_verdicts(self) -> None:
        """Evidence before verdict: the readings behind an episode are committed to the historian before the
        episode and its alarm are recorded and announced, so a crash can never leave an alarm whose readings
        are missing from the record (the cost is one commit, a few ms, per batch of episode events).

        A write that fails (a full disk: ``sqlite3.Error``) puts the events back for the next attempt and
        raises: recording an episode is idempotent and a failed alarm write leaves the alarm states unchanged,
        so a retry announces nothing twice (tests/faults/test_disk_full.py)."""
        if not self._verdicts and not self.engine.waiting_for_history:
            return
        # readings older than the window are judged again from the historian once it has committed them: those
        # ingested before this flush; any ingested while it is awaited wait for the next round (`take_waiting`)
        waiting = self.engine.take_waiting()
        # Only the verdicts whose readings this flush commits: those of readings ingested before it. A poll that
        # returns while the flush (or a chunk below) is awaited adds verdicts behind these; recorded now, a kill
        # right after would leave an episode (and its alarm) whose reading never reached the record, and the
        # restart's reconcile would clear it (tests/faults/test_sigkill.py saw a standing notice cleared so).
        ready = len(self._verdicts)
        try:
            await self.historian.flush()
        except BaseException:
            self.engine.put_back(waiting)
            raise
        arrived = len(self._verdicts) > ready
        if waiting:
            self.engine.rejudge_from_history(history_reader(self.config.daemon.historian), waiting)
            self._verdicts.extend(self.engine.drain_revisions())
        if not arrived:  # (revisions found after later verdicts wait with them: the engine's order is kept)
            ready = len(self._verdicts)
        while ready:
            first = self._verdicts[0]
            kind = type(first)
            n = next((i for i, v in enumerate(self._verdicts[:min(VERDICT_CHUNK, ready)]) if type(v) is not kind),
                     min(VERDICT_CHUNK, ready))
            run = self._verdicts[:n]
            if isinstance(first, Revision):
                self._record_revisions(run)  # type: ignore[arg-type]
            else:
                self._record_events(run)  # type: ignore[arg-type]
            del self._verdicts[:n]  # only once recorded: a failed write keeps them for the retry
            ready -= n
            if ready:
                await asyncio.sleep(0)  # a storm is recorded in chunks: the polls and the tick run between
        if self._verdicts:  # the later ones: once the next flush has committed their readings
            self._verdict_wake.set()

    def _record_events(self, events: list[EpisodeEvent]) -> None:
        recorded = self.episodes.record_events(events, recorded=self.clock())
        row_ids = recorded.ids
        self.alarming.on_episodes(events, self.clock())
        self.episode_events += len(events)
        if self.influx is not None:
            self.influx.submit_events([episode_record(e) for e in events])
        if self.uplink is not None:  # (a repeat of an event already stored has no new id: sent before)
            self.uplink.submit_events(episode_event(e, i) for e, i in zip(events, row_ids, strict=True)
                                      if i is not None)
            if recorded.restored:  # withdrawn rows standing again: the hub's flags follow revisions
                self.uplink.submit_events(revision_events(recorded.restored))
        for e in events[:LOG_EACH]:
            log.log(logging.WARNING if e.event == START else logging.INFO, "%s", episode_message(e),
                    extra=episode_fields(e))
        if len(events) > LOG_EACH:  # a storm: the episode store and the journal have each one
            started = sum(e.event == START for e in events[LOG_EACH:])
            log.warning("%d more episode events (%d started, %d ended): `pretreat exceedances` lists them",
                        len(events) - LOG_EACH, started, len(events) - LOG_EACH - started,
                        extra={"episode_events": len(events)})

    def _record_revisions(self, revisions: list[Revision]) -> None:
        now = self.clock()
        applied = self.episodes.revise(revisions, recorded=now)
        self.alarming.on_revisions(revisions, now)
        # the transitions a correction found go where live ones go: the dashboards' copy and the county's hub;
        # the hub also gets each revision (what it withdrew, the figures it changed) so its copy is corrected too
        added = [a for r in applied for a in r.added]
        if added and self.influx is not None:
            self.influx.submit_events([episode_record(e) for e, _i in added])
        if applied and self.uplink is not None:
            self.uplink.submit_events(revision_events(applied))
        for r in revisions[:LOG_EACH]:
            log.warning("episode revised: %s/%s %s: %s (%s)", r.site, r.channel, r.rule,
                        "; ".join(r.changes()), r.reason)
        if len(revisions) > LOG_EACH:
            log.warning("%d more episodes revised (the episode store records each revision)",
                        len(revisions) - LOG_EACH, extra={"episode_revisions": len(revisions)})

    async def _judge(self, stop: asyncio.Event) -> None:
        retry: float | None = None  # s until the next attempt while episode writes fail
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(retry):
                    await self._verdict_wake.wait()
            self._verdict_wake.clear()
            try:
                await self._deliver_verdicts()
            except sqlite3.Error as exc:
                if retry is None:
                    log.error("cannot record %d episode event(s) (%s); held and retried", len(self._verdicts), exc)
                retry = min(5.0, 2 * (retry or 0.1))
                continue
            if retry is not None:
                log.warning("episode events recorded again")
                retry = None

    async def _tick(self) -> None:
        """On the event loop (an ``async`` job: APScheduler runs plain functions in a thread pool, and the
        alarm engine and stores are owned by the loop)."""
        now = self.clock()
        stale = self.staleness.tick(time.monotonic(), stamp=now)
        for i in range(0, len(stale), VERDICT_CHUNK):  # 10,000 channels going stale at once: in chunks
            if i:
                await asyncio.sleep(0)
            self.ingest(stale[i:i + VERDICT_CHUNK])
        await asyncio.sleep(0)  # staleness and the alarm tick are each several ms at 10,000 channels: apart
        self.alarming.tick(now)

    async def _purge(self) -> None:
        """Retention (``[daemon] retention_days``): delete raw readings past it, keeping every episode's."""
        days = self.config.daemon.retention_days
        assert days is not None
        cutoff = self.clock() - days * 86_400.0

        def run() -> PurgeResult:
            episodes = [(e.site, e.start, e.end) for e in self.episodes.episodes(end=cutoff + HOLD_MARGIN)]
            return purge(self.config.daemon.historian, cutoff=cutoff, episodes=episodes)

        try:
            result = await asyncio.to_thread(run)
        except sqlite3.Error as exc:  # a busy or full file: the next run (6 h) tries again, nothing is lost
            log.error("retention: purge before %s failed (%s); retried at the next run", local_time(cutoff), exc)
            return
        self.retention.append(result)
        if result.deleted:  # seals of days before the cutoff no longer match their readings: say why
            journal = self.alarming.engine.journal
            journal.append(RETENTION, {"cutoff": cutoff, "deleted": result.deleted, "days": days}, self.clock())
        log.info("retention: %d readings older than %s (%d days) deleted; readings within a day of %d "
                 "episode window(s) kept", result.deleted, local_time(cutoff), days, result.holds)

    def _warm_up(self) -> None:
        """Rebuild rule state from the recent record and bring persisted alarms in line with it."""
        now = self.clock()
        events = warm_up(self.engine, self.config, now)
        if events:
            recorded = self.episodes.record_events(events, recorded=now)
            # those not recorded before (the daemon stopped after committing their readings, before recording
            # them: evidence before verdict) go where live ones go, or the dashboards and the hub never see them
            found = [(e, i) for e, i in zip(events, recorded.ids, strict=True) if i is not None]
            if found:
                log.warning("%d episode event(s) found in the recorded readings that were not recorded; recorded "
                            "now", len(found), extra={"episode_events": len(found)})
                if self.influx is not None:
                    self.influx.submit_events([episode_record(e) for e, _i in found])
            if self.uplink is not None:
                self.uplink.submit_events(episode_event(e, i) for e, i in found)
                if recorded.restored:
                    self.uplink.submit_events(revision_events(recorded.restored))
        inputs = reconcile(self.alarming.engine, self.engine, events, now)
        if inputs:
            log.info("reconciling %d alarm(s) with the recorded episodes", len(inputs))
            self.alarming.announce(self.alarming.engine.apply_many(inputs, now))
            # an episode whose alarm the live path never raised (killed in between) never opened its obligations:
            # the open episode (its last start, no end after it) of each alarm raised here
            raised = {(i.site, i.channel, i.rule) for i in inputs if i.active}
            last: dict[tuple[str, str, str], EpisodeEvent] = {}
            for e in events:
                if (key := (e.site, e.channel, e.rule)) in raised:
                    last[key] = e
            self.alarming.obligations.on_episodes([e for e in last.values() if e.event == START], now)

    # -- recorded history ------------------------------------------------------------------------------
    async def record_history(self, batches: Iterable[Sequence[Sample]], *, start: float) -> HistoryRecorded:
        """Record past readings (in time order, none before ``start`` and none already recorded from ``start``
        on) through the live data path: historian, day aggregates, checks and episode store, with no poll.

        `pretreat seed` fills a demonstration's history this way, so the slug baseline and the episodes are the
        ones live operation would have produced. Alarms are not raised here: like any history, the episodes
        it records are reconciled with the alarm states when the daemon starts (`monitor.warmup.reconcile`).
        Raises `HistoryOverlap` if the historian already holds a reading from ``start`` on."""
        if self.config.daemon.historian.exists():
            for c in self.config.channels:
                if next(iter(Historian.read(path=self.config.daemon.historian, site=c.site, channel=c.id,
                                            start=start)), None) is not None:
                    raise HistoryOverlap(f"{self.config.daemon.historian} already holds readings of {c.site}/{c.id} "
                                         "in the period: history is recorded once, never rewritten")
        await self.historian.start()
        samples = flushed = 0
        found: list[EpisodeEvent] = []
        revised: list[Revision] = []  # only if readings of one time came out of channel order
        try:
            for batch in batches:
                self.historian.submit(batch)
                self.aggregates.observe(batch)
                found.extend(self.engine.process_many(batch))
                revised.extend(self.engine.drain_revisions())
                samples += len(batch)
                if samples - flushed >= 200_000:  # bound memory: ~200 bytes a queued sample
                    await self.historian.flush()
                    flushed = samples
            await self.historian.flush()
            self.episodes.record(found)
            self.episodes.revise(revised, recorded=self.clock())
            events = len(found)
        finally:
            await self.historian.close()
            self.aggregates.close()
            self.episodes.close()
            await self.alarming.stop()  # never started: this only releases its files
        return HistoryRecorded(samples=samples, episode_events=events)

    # -- lifecycle -----------------------------------------------------------------------------------
    def _seed_duplicate_filters(self) -> None:
        """Each MQTT instrument's duplicate filter learns its channels' last stored readings, so a message
        committed just before a kill and delivered again now is recognised (`drivers.mqtt.dedupe`)."""
        for d in self.streaming:
            inst = d.instrument
            for ch in self.config.channels:
                if ch.site == inst.site and ch.instrument == inst.id:
                    d.seed_recent(recent_samples(self.config.daemon.historian, site=ch.site, channel=ch.id,
                                        limit=SEED_READINGS)[::-1])

    def _file_lost(self, reason: str) -> None:
        """On the loop, after the historian re-created its file: the other stores reopen it, then the
        guard reports and alarms (`monitor.stores.historian_file`)."""
        self.episodes.reopen()
        self.alarming.engine.journal.reopen()
        self.guard.fail(f"{reason}; re-created from the daemon's own copy")

    def health_counters(self) -> dict[str, Any]:
        """The daemon's part of the health snapshot (`monitor.health.HealthWriter` adds the process's)."""
        h = self.historian.counters
        return {
            "instruments": {k: plain(v) for k, v in self.stats.items()},
            "links": {link.key: {**counters_of(link), "up": link.up} for link in self.links},
            "streaming": {f"{s.instrument.site}/{s.instrument_id}": counters_of(s) for s in self.streaming},
            "historian": {"samples_written": h.samples_written, "batches": h.batches,
                          "write_errors": h.write_errors, "queue_depth": h.queue_depth,
                          "file_losses": h.file_losses, "failing": self.historian.failing},
            "episode_events": self.episode_events,
            "checks": self.engine.counters(),  # late readings re-judged, revisions, retractions, rejected
            "slug_baselines": self.slug_baselines(),  # the baseline each slug rule judges by now, by site/channel
            "record": self.guard.health(),
            "alarms": self.alarming.health(),
            "influx": asdict(self.influx.counters) if self.influx is not None else None,
            "uplink": asdict(self.uplink.counters) if self.uplink is not None else None,
            "stale_channels": ["/".join(k) for k in self.staleness.stale_channels()],
            # what catalogue instruments say about their readings: unit mismatches, fault and service bits
            "devices": devices_of(self.polled),
            "clock_steps": self.clock_watch.steps if self.clock_watch is not None else 0,
            "retention": {"days": self.config.daemon.retention_days, "purges": len(self.retention),
                          "deleted": sum(r.deleted for r in self.retention),
                          "last_cutoff": self.retention[-1].cutoff if self.retention else None},
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Start everything, serve until ``stop`` is set, stop everything.

        Each start pushes its stop on one `contextlib.AsyncExitStack`, so shutdown runs in reverse order of
        start, and a start that raises (the Influx sink refused, warm-up, the alarm gateway's port taken)
        still stops whatever started before it: the historian is always flushed and closed once started."""
        if (demo := clocks.demo()) is not None:
            log.warning("%s", clocks.describe(demo))
        async with contextlib.AsyncExitStack() as stack:
            health = await self._start_stores(stack)
            stack.push_async_callback(self.alarming.stop)  # also releases its files when start never ran
            self._warm_up()
            await self.alarming.start(self.clock)
            stack.push_async_callback(self._stop_sources)
            scheduler = self.scheduler = AsyncIOScheduler()
            self.jobs = JobsInFlight(scheduler)
            stack.push_async_callback(self._stop_scheduler, scheduler)
            self.clock_watch = ClockWatch(scheduler=scheduler, wall=self.clock, monotonic=clocks.monotonic)
            self._schedule(scheduler, health, demo)
            if self.tune_gc:
                settle_gc()
            self.staleness.restart(time.monotonic())
            scheduler.start()
            await self._serve_until(stop, health)

    async def _start_stores(self, stack: contextlib.AsyncExitStack) -> HealthWriter:
        """Historian first (every sink before any source), then the Influx sink that copies from it; the
        stores' stop (pushed once the historian runs) closes them and writes the final health snapshot."""
        loop = asyncio.get_running_loop()

        def file_lost(reason: str) -> None:  # in the historian's writer thread
            loop.call_soon_threadsafe(self._file_lost, reason)

        self.historian.on_file_lost = file_lost
        await self.historian.start()
        health = HealthWriter(path=health_path(self.config.daemon.historian), counters=self.health_counters)
        stack.push_async_callback(self._close_stores, health)
        await asyncio.to_thread(self._seed_duplicate_filters)
        if self.influx is not None:
            await self.influx.start(self.historian)
        if self.uplink is not None:
            await self.uplink.start(self.historian)
        return health

    def _schedule(self, scheduler: AsyncIOScheduler, health: HealthWriter, demo: clocks.DemoClock | None) -> None:
        """The scheduler's jobs: one poll round per distinct interval, the tick, retention, seals, the health
        snapshot, the watchdog and the periodic reports."""
        paced: dict[str, float] = {}  # job id -> interval in (simulated) seconds
        rate = clocks.rate()  # other than 1 only under a demonstration clock (monitor.clock)
        for interval, drivers in self.polls.rounds().items():
            # coalesce folds a backlog into one run; misfire_grace_time=None runs a late round anyway; a round
            # of many instruments yields between chunks (`Polls.round`), so on a loop slowed by start-up's
            # connects it can still be starting polls when the next is due: that one runs too (max_instances=2,
            # an instrument whose poll is in flight is skipped and counted, never polled twice)
            job = scheduler.add_job(self.polls.round, "interval", args=[drivers], seconds=interval / rate,
                                    id=f"poll-every-{interval:g}s", coalesce=True, misfire_grace_time=None,
                                    max_instances=2, next_run_time=_now_dt())
            paced[job.id] = interval
        scheduler.add_job(self._tick, "interval", seconds=self.config.daemon.tick_interval / rate, id="tick",
                          coalesce=True)
        paced["tick"] = self.config.daemon.tick_interval
        if demo is not None:  # re-pace the polls where the simulated clock changes speed
            for at in demo.changes():
                if at > time.time():
                    scheduler.add_job(_pace, "date", args=[scheduler, paced], run_date=_datetime(at))
        if self.config.daemon.retention_days is not None:  # off by default: see monitor.stores.retention
            scheduler.add_job(self._purge, "interval", hours=6, id="retention", coalesce=True,
                              next_run_time=_now_dt() + timedelta(minutes=1))
        # sealing complete channel-days, in a worker thread (monitor.integrity)
        scheduler.add_job(self.guard.seal, "interval", seconds=SEAL_INTERVAL, id="seal", coalesce=True,
                          next_run_time=_now_dt() + timedelta(seconds=30))
        # half an interval after the tick and the rounds' first polls: each costs ~10-20 ms of the loop at 1,000
        # instruments, and back to back they were the longest recurring stall (bench/bench_peers.py)
        every = max(self.config.daemon.tick_interval, 1.0)
        scheduler.add_job(health.write_async, "interval", seconds=every, id="health", coalesce=True,
                          next_run_time=_now_dt() + timedelta(seconds=every * 1.5))
        if self.heartbeat.interval is not None:  # only under systemd with WatchdogSec=
            scheduler.add_job(self.heartbeat.job, "interval", seconds=self.heartbeat.interval,
                              id="watchdog", coalesce=True)
        schedule_reports(scheduler, self.config, reports_dir(self.config), aggregator=self.aggregates,
                         stopping=self.jobs.stopping)

    async def _serve_until(self, stop: asyncio.Event, health: HealthWriter) -> None:
        """The streaming drivers and the daemon's own tasks, until ``stop`` is set."""
        assert self.clock_watch is not None
        async with asyncio.TaskGroup() as tg:
            for sd in self.streaming:
                tg.create_task(self._stream(sd, stop), name=f"stream:{key_of(sd)}")
            tg.create_task(self._judge(stop), name="verdicts")
            tg.create_task(self.guard.check_at_start(), name="record-check")  # polling goes on meanwhile
            tg.create_task(health.lag.run(stop), name="loop-lag")
            tg.create_task(self.clock_watch.run(stop), name="clock-watch")
            log.info("daemon running: %d polled instruments, %d streaming, historian %s",
                     len(self.polled), len(self.streaming), self.config.daemon.historian)
            self.ready.set()
            self.notifier.ready(status=f"polling {len(self.polled)} instruments, "
                                       f"{len(self.streaming)} streaming")
            await stop.wait()
            self.polls.stopping = True  # rounds due from now on start nothing (see Polls.round)
            self._verdict_wake.set()  # let the verdict task see the stop
            log.info("stopping: draining polls and flushing the historian")

    async def _stop_scheduler(self, scheduler: AsyncIOScheduler) -> None:
        """Pause first so no new job starts, let the polls in flight finish and ingest what they read, and the
        other jobs end (APScheduler's shutdown would cancel them: monitor.jobs), then shut the scheduler down."""
        self.notifier.stopping(status="draining polls and flushing the historian")
        self.polls.stopping = True  # (also when leaving on an error)
        self.jobs.stopping.set()
        self.guard.sealer.stopping.set()
        if scheduler.running:
            scheduler.pause()
            await self.polls.drain()
            await self.jobs.idle()
            scheduler.shutdown(wait=False)

    async def _stop_sources(self) -> None:
        """Disconnect the drivers, then record the episode events their last readings made."""
        for sd in self.streaming:
            await sd.close()
        for link in self.links:
            await link.close()
        try:
            for _ in range(100):  # (a round records what its flush committed; the tick may still add a few)
                await self._deliver_verdicts()
                if not self._verdicts and not self.engine.waiting_for_history:
                    break
        except sqlite3.Error as exc:  # the readings are committed: the next start rebuilds these episodes
            log.error("stopping with %d episode event(s) not recorded (%s); the next start rebuilds them "
                      "from the recorded readings", len(self._verdicts), exc)

    async def _close_stores(self, health: HealthWriter) -> None:
        """Last: the historian flushes and closes (the Influx sink after it, so it copies the last commits),
        then the final health snapshot, whose counters match what was recorded."""
        await self.historian.close()
        self.aggregates.close()
        if self.influx is not None:
            await self.influx.close()
        if self.uplink is not None:
            await self.uplink.close()
        self.episodes.close()
        health.state = "stopped"
        health.write()
        log.info("stopped; %d samples recorded", self.historian.counters.samples_written)

    async def _stream(self, driver: StreamingDriver, stop: asyncio.Event) -> None:
        # acknowledged to the broker only once committed: a crash cannot lose a message the broker forgot
        task = asyncio.create_task(driver.run(self.ingest, committed=self.historian.flush),
                                   name=f"mqtt:{key_of(driver)}")
        await stop.wait()
        # `close` acknowledges what was committed and sends DISCONNECT; cancelling is the fallback (bounded)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STREAM_CLOSE_LIMIT):
                await driver.close()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

async def _pace(scheduler: AsyncIOScheduler, paced: dict[str, float]) -> None:
    """The demonstration clock changed speed: poll and tick as often as its simulated seconds pass."""
    rate = clocks.rate()
    for job_id, seconds in paced.items():
        scheduler.reschedule_job(job_id, trigger="interval", seconds=seconds / rate)
    log.info("demonstration clock at %gx: polling every configured interval of simulated time", rate)


def _datetime(t: float) -> datetime:
    return datetime.fromtimestamp(t).astimezone()


def _now_dt() -> datetime:
    """First poll at once: APScheduler's interval trigger would otherwise wait one interval."""
    return datetime.now().astimezone()


# -- CLI -------------------------------------------------------------------------------------------------
def run_command(args: argparse.Namespace) -> int:
    """`pretreat run` (its arguments: monitor.commands.add_run)."""
    config = load_config_or_report(args.config, outcome="nothing started", for_daemon=True)
    if config is None:
        return 2
    return asyncio.run(_serve(config))


async def _serve(config: SiteConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await Daemon(config=config, notifier=SystemdNotifier.from_env(), tune_gc=True).run(stop)
    except InfluxStartupError as exc:
        print(f"pretreat: cannot start the InfluxDB sink: {exc}", file=sys.stderr)
        return 2
    except UplinkStartupError as exc:
        print(f"pretreat: cannot start the uplink: {exc}", file=sys.stderr)
        return 2
    return 0
