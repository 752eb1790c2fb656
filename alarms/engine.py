"""The alarm engine: every configured alarm's state, driven by inputs, clock ticks and operator actions.

It wraps the pure state machine (`alarms.machine`) with the two things the machine must not do: keep the
states, and make them durable. Each call journals what happened (the input as an ``episode`` record, each
transition, each operator action or refusal) and upserts the changed alarms' rows in ``alarm_state``, in one
SQLite transaction: the current-state table and the journal can never disagree, even after a crash.

On start the engine restores every alarm from ``alarm_state`` (Kapacitor's flaw, state lost on restart, is the
one to avoid): an alarm already announced is not raised again when its episode is reported again, and an
alarm whose condition ended while the daemon was down clears on the first input saying so. Timers that
fell due during the downtime (delays, shelve expiry, escalation) fire on the first tick, stamped when due.

What the daemon must feed it after a restart: the check engine starts without memory of open episodes, so
for each alarm the engine lists as active (``[s.id for s in states() if s.condition]``) the daemon should
pass the rule's first judgement as an input, "start" or "end", even though no episode edge was seen; a
repeated "start" is harmless. Likewise `held` lists alarms whose deadband needs fresh values to release.

Transitions are returned only after they are committed, carrying their journal ``seq``; the delivery layer
(outbox, notifiers) can therefore never announce something the journal does not hold. A failing write (disk
full) raises `sqlite3.Error` and leaves the in-memory states as they were, consistent with the file.

Not thread-safe: call it from the daemon's event loop only.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from alarms import machine
from alarms.journal import Entry, Journal
from alarms.model import (
    Ack,
    Action,
    AlarmInput,
    AlarmKey,
    AlarmSettings,
    AlarmState,
    InService,
    Kind,
    OutOfService,
    Refusal,
    Reset,
    Shelve,
    State,
    Transition,
    Unshelve,
    action_payload,
)
from alarms.notifiers.base import KIND_WORDS, iso_utc
from monitor.logtext import transition_message

log = logging.getLogger(__name__)
_LOUD = (Kind.RAISE, Kind.REALARM, Kind.ESCALATE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS alarm_state (
    alarm_id TEXT PRIMARY KEY,    -- site/channel/rule
    site TEXT NOT NULL, channel TEXT NOT NULL, rule TEXT NOT NULL,
    state TEXT NOT NULL,          -- display state (alarms.model.State value)
    priority TEXT NOT NULL,
    record TEXT NOT NULL,         -- JSON of AlarmState.to_record()
    seq INTEGER NOT NULL,         -- journal seq of the last record written with this row
    changed REAL                  -- epoch s of the alarm's last transition
);
"""
_UPSERT = """INSERT INTO alarm_state(alarm_id, site, channel, rule, state, priority, record, seq, changed)
VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(alarm_id) DO UPDATE SET state=excluded.state,
priority=excluded.priority, record=excluded.record, seq=excluded.seq, changed=excluded.changed"""

AlarmSpec = tuple[str, str, str, AlarmSettings]


class AlarmEngine:
    """All alarm states of the daemon, persisted in the SQLite file at ``path`` (shared with the journal).

    ``alarms`` lists every configured (site, channel, rule, settings); a duplicate is a configuration error.
    ``now`` is the start time (epoch s), journaled with the start record.
    """

    def __init__(self, *, path: Path, alarms: Iterable[AlarmSpec], now: float,
                 synchronous: Literal["FULL", "NORMAL"] = "FULL") -> None:
        settings: dict[AlarmKey, AlarmSettings] = {}
        for site, channel, rule, s in alarms:
            key = AlarmKey(site, channel, rule)
            if key in settings:
                raise ValueError(f"alarm {key.id} is configured twice")
            settings[key] = s
        self.journal = Journal(path=path, synchronous=synchronous)
        self.counters: Counter[str] = Counter()
        self._warned_unknown: set[AlarmKey] = set()
        self.journal.connection.executescript(_SCHEMA)
        self._states: dict[AlarmKey, AlarmState] = {}
        # the alarms with a timer that can run (`machine.timed`), kept as states change (`_commit`): the clock
        # tick visits these, in the states' order, not every alarm each second (20,000 alarms at 1,000
        # devices were ~5 % of the daemon's CPU there, bench/bench_peers.py)
        self._timed: set[AlarmKey] = set()
        self._keys: dict[str, AlarmKey] = {k.id: k for k in settings}
        self._restore(settings, now)
        # the order the tick fires in: the states' own (every alarm has one from here on, and keeps its place)
        self._order: dict[AlarmKey, int] = {k: n for n, k in enumerate(self._states)}

    def close(self) -> None:
        self.journal.close()

    # ---- queries ---------------------------------------------------------------------------------------

    def state(self, alarm_id: str) -> AlarmState:
        """The current state of one alarm; KeyError if no such alarm is configured."""
        return self._states[AlarmKey.parse(alarm_id)]

    def states(self) -> list[AlarmState]:
        return [self._states[k] for k in sorted(self._states)]

    def conditions_present(self) -> int:
        """How many alarms have their condition present (the health snapshot's count, once a second: without
        `states`' sort of every alarm key)."""
        return sum(1 for st in self._states.values() if st.condition)

    def held(self) -> list[AlarmKey]:
        """Alarms active although their condition has gone: an input with a fresh value can release those
        held by their deadband, so the daemon should keep feeding their channel's readings."""
        return [k for k, st in self._states.items() if st.held]

    # ---- driving the alarms ----------------------------------------------------------------------------

    def apply(self, inp: AlarmInput, now: float) -> list[Transition]:
        """Apply one input (see `apply_many`)."""
        return self.apply_many([inp], now)

    def revise(self, revisions: Sequence[dict[str, Any]], inputs: Sequence[AlarmInput],
               now: float) -> list[Transition]:
        """Journal the check engine's corrections of the episode record (``revision`` records, payloads of
        `monitor.checks.revisions.Revision`) and apply the alarm inputs they call for, in one transaction."""
        notes = [Entry("revision", {**p, "received": now}, now) for p in revisions]
        return self.apply_many(inputs, now, notes=notes)

    def apply_many(self, inputs: Sequence[AlarmInput], now: float, *,
                   notes: Sequence[Entry] = ()) -> list[Transition]:
        """Apply inputs in order, in one transaction; return the committed transitions.

        An input is journaled (kind ``episode``) when it changes its alarm's condition or causes a transition;
        a repeat of the known condition (a value update for an alarm held by its deadband, a "start" seen
        again after a restart) is not. An input for an alarm that is not configured is journaled and counted,
        never dropped silently.
        """
        work: dict[AlarmKey, AlarmState] = {}
        entries: list[Entry | Transition] = list(notes)
        for inp in inputs:
            self.counters["inputs"] += 1
            key = inp.key
            st = work.get(key) or self._states.get(key)
            if st is None:
                self._unknown(inp, entries)
                continue
            st, fired = machine.tick(st, now)
            new, caused = machine.on_input(st, inp, now)
            entries += fired
            if new.condition != st.condition or caused:
                entries.append(Entry("episode", {**inp.to_payload(), "received": now}, inp.time))
            entries += caused
            work[key] = new
        return self._commit(entries, work)

    def tick(self, now: float) -> list[Transition]:
        """Fire every alarm's timers due by ``now`` (delays, shelve expiry, re-alarm, escalation)."""
        work: dict[AlarmKey, AlarmState] = {}
        entries: list[Entry | Transition] = []
        order = self._order
        for key in sorted(self._timed, key=lambda k: order.get(k, len(order))):
            new, fired = machine.tick(self._states[key], now)
            if fired:
                entries += fired
                work[key] = new
        return self._commit(entries, work) if entries else []

    def act(self, alarm_id: str, action: Action, now: float) -> list[Transition] | Refusal:
        """Carry out an operator action on one alarm, or refuse it (the refusal is journaled too)."""
        payload = {"alarm": alarm_id, **action_payload(action)}
        try:
            key = AlarmKey.parse(alarm_id)
        except ValueError:
            key = None
        st = self._states.get(key) if key is not None else None
        if key is None or st is None:
            refusal = Refusal(alarm_id=alarm_id, action=payload["action"], user=action.user,
                              reason="no such alarm")
            return self._refuse(refusal, now)
        # Judge the action on the state as of now (a shelve that has just expired cannot be unshelved). On a
        # refusal those timer transitions are not kept: the next tick makes and returns them.
        st, fired = machine.tick(st, now)
        result = machine.act(st, action, now)
        if isinstance(result, Refusal):
            return self._refuse(result, now)
        new, caused = result
        log.info("alarm %s: %s by %s", alarm_id, payload["action"], action.user)
        entries: list[Entry | Transition] = [*fired, Entry("action", payload, now), *caused]
        return self._commit(entries, {key: new})

    def ack(self, alarm_id: str, *, user: str, note: str = "", now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, Ack(user=user, note=note), now)

    def shelve(self, alarm_id: str, *, user: str, until: float, reason: str,
               now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, Shelve(user=user, until=until, reason=reason), now)

    def unshelve(self, alarm_id: str, *, user: str, note: str = "", now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, Unshelve(user=user, note=note), now)

    def reset(self, alarm_id: str, *, user: str, note: str = "", now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, Reset(user=user, note=note), now)

    def out_of_service(self, alarm_id: str, *, user: str, reason: str,
                       now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, OutOfService(user=user, reason=reason), now)

    def in_service(self, alarm_id: str, *, user: str, note: str = "",
                   now: float) -> list[Transition] | Refusal:
        return self.act(alarm_id, InService(user=user, note=note), now)

    # ---- persistence -----------------------------------------------------------------------------------

    def _commit(self, entries: list[Entry | Transition],
                work: dict[AlarmKey, AlarmState]) -> list[Transition]:
        """Journal ``entries`` and upsert the changed states in one transaction; then adopt the states."""
        changed = {k: st for k, st in work.items() if st != self._states.get(k)}
        if not entries and not changed:
            return []
        records = [e if isinstance(e, Entry) else Entry("transition", e.to_payload(), e.time)
                   for e in entries]
        last_seq: dict[AlarmKey, int] = {}

        def state_rows(seqs: list[int]) -> list[tuple[str, Sequence[Sequence[Any]]]]:
            for seq, rec in zip(seqs, records, strict=True):
                k = self._keys.get(rec.payload.get("alarm"))  # type: ignore[arg-type]
                if k is not None and k in changed:
                    last_seq[k] = seq
            top = seqs[-1] if seqs else self.journal.head()[0]
            return [(_UPSERT, [_row(st, last_seq.get(k, top)) for k, st in changed.items()])]

        seqs = self.journal.append_many(records, also=state_rows)
        self._states.update(changed)
        timed = self._timed
        for k, st in changed.items():
            if machine.timed(st):
                timed.add(k)
            else:
                timed.discard(k)
        out = [replace(e, seq=seq) for e, seq in zip(entries, seqs, strict=True) if isinstance(e, Transition)]
        self.counters["transitions"] += len(out)
        for t in out:  # the one line a transition gets in the daemon's log (raised, re-alarmed, escalated: loud)
            log.log(logging.WARNING if t.kind in _LOUD else logging.INFO, "%s",
                    transition_message(t, KIND_WORDS.get(t.kind, t.kind.value)), extra=_fields(t))
        return out

    def _refuse(self, refusal: Refusal, now: float) -> Refusal:
        self.counters["refusals"] += 1
        log.warning("alarm %s: %s by %s refused: %s", refusal.alarm_id, refusal.action, refusal.user,
                    refusal.reason)
        self.journal.append("refusal", refusal.to_payload(), now)
        return refusal

    def _unknown(self, inp: AlarmInput, entries: list[Entry | Transition]) -> None:
        self.counters["unknown_inputs"] += 1
        if inp.key not in self._warned_unknown:
            self._warned_unknown.add(inp.key)
            log.warning("input for unconfigured alarm %s journaled and ignored", inp.key.id)
        entries.append(Entry("episode", {**inp.to_payload(), "unconfigured": True}, inp.time))

    def _restore(self, settings: dict[AlarmKey, AlarmSettings], now: float) -> None:
        db = self.journal.connection
        rows = {r[0]: r[1] for r in db.execute("SELECT alarm_id, record FROM alarm_state")}
        errors: dict[str, str] = {}
        restored: dict[AlarmKey, AlarmState] = {}
        rewrite: dict[AlarmKey, AlarmState] = {}
        for key, s in settings.items():
            text = rows.pop(key.id, None)
            if text is None:
                self._states[key] = AlarmState(key=key, settings=s)
                continue
            try:
                st = AlarmState.from_record(key, s, json.loads(text))
            except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
                errors[key.id] = f"{type(e).__name__}: {e}"
                log.error("alarm %s: stored state unreadable (%s); starting it at normal", key.id, e)
                rewrite[key] = AlarmState(key=key, settings=s)  # the row then agrees with memory again
                continue
            restored[key] = _fit_settings(st)  # rewritten below: the row then reflects the current settings
        if rows:
            log.warning("stored state of %d alarms no longer configured kept, not loaded: %s", len(rows),
                        ", ".join(sorted(rows)))
        start = {"event": "start", "alarms": len(settings), "restored": len(restored),
                 "active": sorted(k.id for k, st in restored.items() if st.active),
                 "restore_errors": errors, "unconfigured": sorted(rows)}
        self._commit([Entry("engine", start, now)], {**restored, **rewrite})


def _fit_settings(st: AlarmState) -> AlarmState:
    """Adapt a restored state to settings changed since it was stored: a latched state of an alarm no longer
    configured as latched would otherwise wait forever for a reset that is refused."""
    if st.settings.latched or st.phase not in (State.LATCHED_UNACKED, State.LATCHED_ACKED):
        return st
    return replace(st, phase=State.RTN_UNACKED if st.phase is State.LATCHED_UNACKED else State.NORMAL)


def _row(st: AlarmState, seq: int) -> tuple[Any, ...]:
    k = st.key
    return (k.id, k.site, k.channel, k.rule, st.state.value, st.settings.priority.value,
            json.dumps(st.to_record(), separators=(",", ":"), allow_nan=False), seq, st.changed)


def _fields(t: Transition) -> dict[str, Any]:
    """A transition's structured log fields (``--log-format json``), values as measured; ``time`` and
    ``level`` are the log record's own, so the transition's are ``event_time`` and ``escalation_level``."""
    fields = t.to_payload()
    fields["event_time"] = iso_utc(fields.pop("time"))
    fields["escalation_level"] = fields.pop("level")
    fields["seq"] = t.seq
    return fields
