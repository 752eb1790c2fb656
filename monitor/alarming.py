"""The daemon's alarm side: episodes → alarm engine → delivery, gateway and telemetry. Wiring only.

The check engine's episode events become alarm inputs; the alarm engine (ISA-18.2 state machine, state and
journal in the historian's SQLite file) decides what changes; every committed transition is handed to the
dispatcher (durable outboxes to MQTT, email, webhook), the Modbus gateway and the InfluxDB annotations.
The clock tick drives delays, shelve expiry, re-alarm and escalation, and carries out operator commands
queued by `pretreat alarms …` (and acknowledgements from SCADA over MQTT).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from alarms.commands import CommandQueue, apply_pending
from alarms.dispatcher import Dispatcher
from alarms.engine import AlarmEngine
from alarms.gateway import ModbusGateway
from alarms.model import AlarmInput, AlarmKey, AlarmSettings, Priority, Refusal, Transition
from alarms.notifiers.base import NotifierContext
from config.alarms import RECORD_CHANNEL, RECORD_CITATION, RECORD_INTEGRITY, alarm_settings, alarm_specs
from config.schema import SiteConfig
from monitor.calibration import CALIBRATION_OVERDUE, CalibrationWatch, watched
from monitor.checks.coverage import END_GAP
from monitor.checks.events import END, START, EpisodeEvent, iso_utc
from monitor.checks.revisions import Revision
from monitor.obligation_watch import (
    OBLIGATION_OVERDUE,
    ObligationWatch,
    condition_of,
    obligation_alarm_specs,
    resumed_after_gap,
)
from monitor.sample import Sample
from monitor.stores.influx import InfluxSink
from monitor.stores.influx_lines import alarm_record
from monitor.uplink.events import alarm_event, seal_event

if TYPE_CHECKING:  # the uplink (and protobuf) is imported only where [uplink] is configured (`monitor.app`)
    from monitor.uplink.publisher import UplinkPublisher

log = logging.getLogger(__name__)
_RECORD_CITATION = RECORD_CITATION
_NOT_IN_GATEWAY = (RECORD_INTEGRITY, OBLIGATION_OVERDUE, CALIBRATION_OVERDUE)  # the register map: rule alarms only


def alarm_input(e: EpisodeEvent) -> AlarmInput:
    """The alarm a transition drives. A duration rule's episode starts at its onset but its alarm fires at
    confirmation, when the duration was exceeded (``confirmed``), never back-dated."""
    t = e.confirmed if e.confirmed is not None else e.time
    return AlarmInput(time=t, site=e.site, channel=e.channel, rule=e.rule, active=e.event == "start",
                      value=e.value, limit=e.limit, citation=e.citation)


def alarm_inputs(events: Sequence[EpisodeEvent]) -> list[AlarmInput]:
    """The alarm inputs of a batch of episode events, in order.

    Missing data is no return to normal. When a gap in a channel's readings (`monitor.checks.coverage`) splits
    an episode, the record gets an end at the last reading before the gap (``end_reason = "gap"``) and, if the
    first reading after it still violates, a new start there; both come out of judging that one reading, so
    they are in the same batch. Such a pair is left out here: the alarm stays as it is (active, acknowledged or
    not) instead of clearing and raising again, e.g. after the daemon itself was down longer than max_gap. A
    gap end with no start after it (the channel came back within limits) clears the alarm as any end does."""
    return [alarm_input(e) for e in _followed(events)]


def _followed(events: Sequence[EpisodeEvent]) -> list[EpisodeEvent]:
    """The events an alarm follows: all but a gap-split pair (see `alarm_inputs`)."""
    resumed = resumed_after_gap(events)
    return [e for i, e in enumerate(events) if i not in resumed] if resumed else list(events)


def _input(r: Revision, e: EpisodeEvent | None, active: bool, reason: str, *,
           retracted: bool = False) -> AlarmInput:
    return AlarmInput(time=e.time if e is not None else r.late, site=r.site, channel=r.channel, rule=r.rule,
                      active=active, value=e.value if e is not None else None,
                      limit=e.limit if e is not None else None, citation=e.citation if e is not None else "",
                      reason=reason, retracted=retracted)


class Alarming:
    """Owns the alarm engine, the operator command queue, and (when configured) dispatcher and gateway."""

    def __init__(self, *, config: SiteConfig, now: float, influx: InfluxSink | None) -> None:
        path = config.daemon.historian
        # one record-integrity alarm a site: the record of evidence itself failed a check (monitor.integrity)
        integrity = [(s.id, RECORD_CHANNEL, RECORD_INTEGRITY, AlarmSettings(priority=Priority.HIGH))
                     for s in config.sites]
        # one calibration-overdue alarm a channel with a calibration interval in force (monitor.calibration)
        calibration = [(site, ch, CALIBRATION_OVERDUE, alarm_settings(config.alarms, site, ch, CALIBRATION_OVERDUE))
                       for site, ch in watched(config.sites)]
        self.engine = AlarmEngine(path=path, alarms=[*alarm_specs(config.sites, config.alarms), *integrity,
                                                     *obligation_alarm_specs(config.sites), *calibration], now=now)
        self.obligations = ObligationWatch(sites=config.sites, journal=self.engine.journal)
        self.calibration = CalibrationWatch(
            config, lambda inputs, t: self.announce(self.engine.apply_many(inputs, t)),
            lambda: self.engine.journal.connection)
        self.commands = CommandQueue(path=path)
        self._sites = [s.id for s in config.sites]
        self.influx = influx
        self.uplink: UplinkPublisher | None = None  # the Sparkplug uplink's events topic ([uplink]), set by the daemon
        self.transitions = 0
        self.gateway = (ModbusGateway.from_settings(config, config.gateway)
                        if config.gateway is not None else None)
        self.dispatcher: Dispatcher | None = None
        if config.alarms is not None and config.alarms.notify is not None:
            ctx = NotifierContext(
                on_command=self._on_scada_command,
                known_alarms=frozenset(s.id for s in self.engine.states()),
                alarm_states=self.engine.states,
                units={(s.id, c.id): c.unit for s in config.sites for c in s.channels},
                site_names={s.id: s.name for s in config.sites},
                timezones={s.id: s.timezone for s in config.sites},
            )
            self.dispatcher = Dispatcher(config=config.alarms, context=ctx)
            # Transitions committed just before a crash but never queued for delivery are queued now, before
            # anything else can be announced: the start-up reconcile announces (a clear, say) before `start`,
            # and a submit moves the dispatcher's marks past the lost ones, which catch-up would then skip.
            self.dispatcher.catch_up(self.engine.journal)
        self._clock: Callable[[], float] | None = None
        # Episode ends stamped ahead of the daemon's clock, one an alarm, applied when the clock gets there
        # (`_due`). In memory only: after a restart the warm-up's reconcile follows the record as it stands.
        self._held: dict[AlarmKey, tuple[float, AlarmInput]] = {}
        self._max_gap = {(s.id, c.id): c.max_gap for s in config.sites for c in s.channels}

    async def start(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        if self.gateway is not None:
            await self.gateway.start()
            # (the register map has rule alarms only; record_integrity reaches SCADA over MQTT and the routes)
            self.gateway.update_alarms(s for s in self.engine.states() if s.key.rule not in _NOT_IN_GATEWAY)
        if self.dispatcher is not None:
            await self.dispatcher.start()

    async def stop(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if self.gateway is not None:
            await self.gateway.stop()
        self.engine.close()

    # -- inputs ------------------------------------------------------------------------------------------
    def on_samples(self, samples: Sequence[Sample]) -> None:
        if self.gateway is not None:
            for s in samples:
                self.gateway.update_sample(s)

    def on_episodes(self, events: Sequence[EpisodeEvent], now: float) -> None:
        # obligations first: killed in between, the restart's reconcile raises the missing alarm and opens the
        # obligations with it (`Daemon._warm_up`; opening is idempotent), so neither is ever lost
        self.obligations.on_episodes(events, now)
        kept = _followed(events)
        self.announce(self.engine.apply_many(
            self._due([(alarm_input(e), self._effective(e)) for e in kept], now), now))

    def _effective(self, e: EpisodeEvent) -> float:
        """When an episode's end is known on the daemon's clock: at its reading's time, or for an end at a gap
        (the last reading before it) once ``max_gap`` has passed after that reading with nothing in between."""
        if e.event == END and e.end_reason == END_GAP:
            return e.time + self._max_gap.get((e.site, e.channel), 0.0)
        return e.time

    def _due(self, inputs: Sequence[tuple[AlarmInput, float]], now: float) -> list[AlarmInput]:
        """The inputs to apply at ``now``; an episode's end that is not known yet at ``now`` is held until then.

        A reading is judged at its own time, and a device clock may run ahead of the daemon's (by up to the
        tolerated skew, `drivers.mqtt.payload.MAX_FUTURE_SKEW`). One reading stamped ahead can end an episode at
        a time that has not come yet (a reading back within limits then, or a gap before it), while the
        readings that follow it, stamped right, are still out of limits: the record says the episode lasts
        until then, so the alarm stays active until the daemon's clock gets there instead of clearing at once.
        Starts are never held (an alarm is never delayed), nor withdrawals (an episode that never happened
        holds nothing). Any later input of the same alarm replaces a held end: a start cancels it, an end moved
        by a correction takes its place. In the common case (no clock ahead) nothing is held."""
        out: list[AlarmInput] = []
        for inp, effective in inputs:
            held = self._held.pop(inp.key, None)
            if not inp.active and not inp.retracted and effective > now:
                if held is None:
                    log.info("alarm %s: its episode's end is known only at %s, %.0f s ahead of the daemon's clock "
                             "(a device clock running fast?); it clears then", inp.key.id, iso_utc(effective),
                             effective - now)
                self._held[inp.key] = (effective, inp)
            else:
                out.append(inp)
        return out

    def _release(self, now: float) -> list[AlarmInput]:
        """The held ends whose time has come, in time order."""
        due = sorted((h for h in self._held.values() if h[0] <= now), key=lambda h: h[0])
        for _, inp in due:
            del self._held[inp.key]
        return [inp for _, inp in due]

    def record_integrity(self, active: bool, why: str, now: float) -> None:
        """Raise (or clear) every site's ``record_integrity`` alarm: the record of evidence failed a check
        (altered, missing or added records; the historian file deleted or replaced)."""
        self.announce(self.engine.apply_many(
            [AlarmInput(time=now, site=site, channel=RECORD_CHANNEL, rule=RECORD_INTEGRITY, active=active,
                        value=None, limit=None, citation=f"{_RECORD_CITATION}; {why}"[:500])
             for site in self._sites], now))

    def publish_journal_head(self, head: tuple[int, str], now: float) -> int:
        """Retain the chain head on every MQTT alarm link (``<prefix>/journal/head``); returns how many
        links took it now (the others publish it when they connect). The uplink's events topic gets it too,
        as a ``seal`` event."""
        if self.uplink is not None:
            self.uplink.submit_events([seal_event(head, now, self._sites)])
        if self.dispatcher is None:
            return 0
        body = json.dumps({"seq": head[0], "hash": head[1], "time": now}).encode()
        # (duck-typed: the MQTT notifier, and with it paho, is imported only where a site file asks for it)
        return sum(bool(publish(body)) for n in self.dispatcher.notifiers()
                   if (publish := getattr(n, "publish_journal_head", None)) is not None)

    def on_revisions(self, revisions: Sequence[Revision], now: float) -> None:
        """Corrections of the episode record after late readings: journaled, and the alarms follow them.

        An alarm follows the corrected record: an announced episode that never happened returns its alarm to
        normal, saying so, a latched one included (`alarms.machine._retract`: there was no condition to hold);
        an episode found open raises it; an episode found wholly in the past (started and ended before the late
        readings arrived) raises it and clears it, so it is announced and acknowledged like any other (cleared
        when the daemon's clock reaches its end, if a fast device clock stamped that end ahead: `_due`). A moved
        start or end of an episode the alarm already follows changes nothing.

        Obligations first, as in `on_episodes`: a late-found episode opens its obligations, a retracted one's
        are closed as withdrawn, a moved start's go to the corrected episode (`ObligationWatch.on_revisions`);
        the overdue alarm follows at the next tick."""
        self.obligations.on_revisions(revisions, now)
        inputs: list[tuple[AlarmInput, float]] = []
        cond = {s.key.id: s.condition for s in self.engine.states()}
        for r in revisions:
            key = f"{r.site}/{r.channel}/{r.rule}"
            if key not in cond:
                continue
            starts = [e for e in r.added if e.event == START]
            ends = [e for e in r.added if e.event == END]
            gone = [e for e in r.withdrawn if e.event == START]
            gone_at = {e.time for e in gone}
            ended = (f"late reading: episode from {iso_utc(gone[0].time)} retracted, it never happened"
                     if r.retraction and gone else "late reading: episode ended")
            held = AlarmKey(r.site, r.channel, r.rule) in self._held
            if held:  # the record's episode has ended, the alarm waits for the end's time (`_due`)
                if r.active:  # open again: the held end is no longer the record's
                    del self._held[AlarmKey(r.site, r.channel, r.rule)]
                elif r.retraction or ends:  # withdrawn now, or an end moved: it replaces the held one
                    inputs.append(self._end(r, ends[-1] if ends else None, ended))
            elif not cond[key] and not r.active and (fresh := [s for s in starts if s.time not in gone_at]):
                s = fresh[0]  # (a start at a withdrawn one's time is that episode revised: announced already)
                e = next((x for x in ends if x.time >= s.time), None)
                end_t = e.time if e is not None else s.time
                why = f"late reading: episode {iso_utc(s.time)} to {iso_utc(end_t)} found"
                inputs.append((_input(r, s, True, why), s.time))
                inputs.append(self._end(r, e, why) if e is not None else (_input(r, s, False, why), s.time))
            elif cond[key] != r.active or (r.retraction and not r.active):
                if r.active:
                    start = starts[-1] if starts else None
                    inputs.append((_input(r, start, True, "late reading: episode found open"), r.late))
                else:  # ended, or withdrawn: a latched alarm raised for a withdrawn episode is released too
                    inputs.append(self._end(r, ends[-1] if ends else None, ended))
                cond[key] = r.active
        self.announce(self.engine.revise([r.to_payload() for r in revisions], self._due(inputs, now), now))

    def _end(self, r: Revision, e: EpisodeEvent | None, why: str) -> tuple[AlarmInput, float]:
        """A revision's alarm input for an end (or a withdrawal), with when it is known (`_effective`)."""
        inp = _input(r, e, False, why, retracted=r.retraction)
        return inp, (self._effective(e) if e is not None else inp.time)

    def tick(self, now: float) -> None:
        if self._held and (due := self._release(now)):
            self.announce(self.engine.apply_many(due, now))
        self.announce(self.engine.tick(now) + apply_pending(self.commands, self.engine, now))
        try:
            overdue = self.obligations.inputs(now, condition_of(self.engine))
            if overdue:
                self.announce(self.engine.apply_many(overdue, now))
        except sqlite3.Error as exc:  # the disk is full, say: the watch looks again and raises it then
            log.error("cannot raise or clear the overdue-obligation alarm (%s); tried again shortly", exc)
        self.calibration.tick(now)

    def _on_scada_command(self, alarm_id: str, action: str, user: str,
                          note: str) -> list[Transition] | Refusal | Awaitable[Any]:
        """An acknowledgement published by the plant's SCADA on the MQTT command topic."""
        now = self._clock() if self._clock is not None else 0.0
        result = self.engine.ack(alarm_id, user=user, note=note, now=now)
        if not isinstance(result, Refusal):
            self.announce(result)
        return result

    # -- outputs -----------------------------------------------------------------------------------------
    def announce(self, transitions: Sequence[Transition]) -> None:
        if not transitions:
            return
        self.transitions += len(transitions)  # (each is logged once, by the engine that journaled it)
        if self.dispatcher is not None:
            self.dispatcher.submit(transitions)
        if self.gateway is not None:
            for t in transitions:
                if t.alarm_id.rsplit("/", 1)[-1] not in _NOT_IN_GATEWAY:
                    self.gateway.update_alarm(t)
        if self.influx is not None:
            records = []
            for t in transitions:
                site, channel, rule = t.alarm_id.split("/")
                records.append(alarm_record(time=t.time, site=site, channel=channel, rule=rule,
                                            priority=t.priority.value, from_state=t.from_state.value,
                                            to_state=t.to_state.value, user=t.who, note=t.why, value=t.value,
                                            limit=t.limit))
            self.influx.submit_events(records)
        if self.uplink is not None:
            self.uplink.submit_events(alarm_event(t) for t in transitions)

    def health(self) -> dict[str, Any]:
        return {
            "transitions": self.transitions,
            "active": self.engine.conditions_present(),
            "delivery": self.dispatcher.health() if self.dispatcher is not None else None,
        }
