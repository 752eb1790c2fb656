"""The pure ISA-18.2 alarm state machine: ``step(state, input, now)``, ``tick(state, now)`` and
``act(state, action, now)``, each returning the new state and the transitions it made.

No I/O and no clock of its own (style rule 8): the caller passes ``now`` (epoch s UTC, the daemon's clock), so
the same inputs at the same times give the same transitions, live or replayed.

How time is stamped. A transition caused by an input or an operator action carries ``now``. A transition
caused by a timer carries the moment the timer fell due, not the moment a tick noticed it: an on-delay that
started at t and lasts d raises at t + d even if the next tick or input comes later. That keeps transitions
independent of tick granularity and of a daemon's downtime (a shelve that expired while the daemon was down
is stamped with its expiry). Re-alarm is the exception in one respect: several reminder periods missed at
once give one reminder, stamped at the latest period boundary, not a burst.

Timers (all evaluated by `tick`, and by `step` before it applies its input):
* on-delay / off-delay: the alarm follows the condition only once it has persisted that long;
* shelve expiry; re-alarm while active-or-latched and unacknowledged (a reminder of a condition that has
  gone is noise); escalation while in any unacknowledged phase, measured from ``unacked_since`` (an alarm
  nobody saw is worth escalating even if its condition has gone).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from alarms.model import (
    ACTION_NAMES,
    SYSTEM,
    Ack,
    Action,
    AlarmInput,
    AlarmState,
    Comment,
    InService,
    Kind,
    Mode,
    OutOfService,
    Refusal,
    Reset,
    Seen,
    Shelve,
    State,
    Transition,
    Unshelve,
)

Result = tuple[AlarmState, list[Transition]]
_MAX_TIMERS = 64  # timers fired per tick; each firing advances state, so this only guards against a bug

_UNACK_TO_ACK = {State.ACTIVE_UNACKED: State.ACTIVE_ACKED, State.RTN_UNACKED: State.NORMAL,
                 State.LATCHED_UNACKED: State.LATCHED_ACKED}
_REMINDED = (State.ACTIVE_UNACKED, State.LATCHED_UNACKED)
_LATCHED = (State.LATCHED_UNACKED, State.LATCHED_ACKED)


def step(state: AlarmState, inp: AlarmInput, now: float) -> Result:
    """Fire the timers due by ``now``, then apply one input. See `on_input` for the input's effect."""
    state, fired = tick(state, now)
    state, caused = on_input(state, inp, now)
    return state, fired + caused


def timed(state: AlarmState) -> bool:
    """Whether any timer of ``state`` can run: a delay pending, something to remind of or escalate, a shelve
    to expire. False is the common case (the engine's tick visits only the alarms for which it is True)."""
    return not (state.pending_since is None and state.phase is State.NORMAL and state.mode is not Mode.SHELVED)


def tick(state: AlarmState, now: float) -> Result:
    """Fire every timer due at or before ``now``, earliest first."""
    if not timed(state):  # without building `_next_due`'s candidates
        return state, []
    out: list[Transition] = []
    for _ in range(_MAX_TIMERS):
        due = _next_due(state, now)
        if due is None:
            break
        at, fire = due
        state, trs = fire(state, at)
        out.extend(trs)
    return state, out


def on_input(state: AlarmState, inp: AlarmInput, now: float) -> Result:
    """Apply the condition reported by ``inp`` at ``now`` (timers are not fired here: see `step`).

    Repeating the current condition changes nothing but the latest value/limit (and, for an active alarm
    held by its deadband, can release it). An input may be the first one ever seen for an alarm restored
    from storage: an "end" for an alarm that is active clears it, a "start" for one already active is not
    raised again.
    """
    if inp.key != state.key:
        raise ValueError(f"input for {inp.key.id} applied to alarm {state.id}")
    # one replace per input (this is the hot path): the condition data travel with whatever else changes
    seen: dict[str, Any] = {"condition": inp.active, "value": inp.value, "limit": inp.limit,
                            "citation": inp.citation or state.citation}
    s = state.settings
    if inp.retracted and not inp.active and s.latched:
        return _retract(state, inp, now, seen)
    if not state.active:
        if not inp.active:
            return replace(state, pending_since=None, **seen), []  # an on-delay not yet elapsed is cancelled
        if s.on_delay <= 0:
            return _set_active(state, True, now, _why("started", inp), **seen)
        return replace(state, pending_since=_started(state.pending_since, now), **seen), []
    if inp.active:
        return replace(state, pending_since=None, **seen), []  # an off-delay in progress is cancelled
    if not _beyond_deadband(s.deadband, inp.value, inp.limit):
        return replace(state, pending_since=None, **seen), []  # held by the deadband until the value moves on
    if s.off_delay <= 0 or inp.reason:  # a correction is not a flicker: no off-delay
        return _set_active(state, False, now, _why("ended", inp), **seen)
    return replace(state, pending_since=_started(state.pending_since, now), **seen), []


def _why(edge: str, inp: AlarmInput) -> str:
    why = f"condition {edge} at {inp.time:.3f}"
    return f"{why} ({inp.reason})" if inp.reason else why


def _started(pending_since: float | None, now: float) -> float:
    """A delay runs from the first input that started it: repeating the input does not restart it."""
    return now if pending_since is None else pending_since


def act(state: AlarmState, action: Action, now: float) -> Result | Refusal:
    """Apply an operator action, or refuse it with a reason (an invalid action is not an error)."""
    name = ACTION_NAMES[type(action)]

    def refuse(reason: str) -> Refusal:
        return Refusal(alarm_id=state.id, action=name, user=action.user, reason=reason)

    if not action.user.strip() or action.user == SYSTEM:
        return refuse("an operator user name is required")
    handler = _ACTIONS[type(action)]
    return handler(state, action, now, refuse)


# ---- condition following ---------------------------------------------------------------------------------

def _beyond_deadband(deadband: float, value: float | None, limit: float | None) -> bool:
    if deadband <= 0 or value is None or limit is None:
        return True
    return abs(value - limit) >= deadband


def _set_active(st: AlarmState, active: bool, at: float, why: str, **seen: Any) -> Result:
    """The alarm's filtered view of the condition changes; annunciate it if the alarm is in service.
    ``seen`` are other fields to update with it (the input's condition data)."""
    changes: dict[str, Any] = {"active": active, "pending_since": None, **seen}
    if st.mode is not Mode.IN_SERVICE:
        return replace(st, **changes), []  # followed silently; back in service, it is raised if still active
    if active:
        return _raise(st, at, why, **changes)
    latched = st.settings.latched
    if st.phase is State.ACTIVE_UNACKED:
        target = State.LATCHED_UNACKED if latched else State.RTN_UNACKED
    elif st.phase is State.ACTIVE_ACKED:
        target = State.LATCHED_ACKED if latched else State.NORMAL
        if target is State.NORMAL:
            changes["notified"] = None
    else:
        return replace(st, **changes), []
    return _go(st, Kind.LATCH if latched else Kind.CLEAR, at, SYSTEM, why, phase=target, **changes)


def _retract(st: AlarmState, inp: AlarmInput, now: float, seen: dict[str, Any]) -> Result:
    """A correction withdrew the episode a latched alarm was raised for: it never happened, so nothing is left
    for an operator to confirm gone before a reset. The alarm clears as an unlatched one would (active or
    latched → returned-to-normal-unacknowledged, or normal if acknowledged), with the retraction as its why;
    an unacknowledged alarm still waits for its acknowledgement, so the raise is not silently taken back.
    No off-delay or deadband holds it: a withdrawal is not a flicker. Out of service or shelved, the alarm
    follows silently as `_set_active` does (the latch, if any, stays for the operator)."""
    changes: dict[str, Any] = {"active": False, "pending_since": None, **seen}
    held = (State.ACTIVE_UNACKED, State.ACTIVE_ACKED, *_LATCHED)
    if st.mode is not Mode.IN_SERVICE or st.phase not in held:
        return replace(st, **changes), []
    if st.phase.unacknowledged:
        target = State.RTN_UNACKED
    else:
        target = State.NORMAL
        changes["notified"] = None
    return _go(st, Kind.CLEAR, now, SYSTEM, _why("withdrawn", inp), phase=target, **changes)


def _raise(st: AlarmState, at: float, why: str, **changes: Any) -> Result:
    if st.phase in (State.ACTIVE_UNACKED, State.ACTIVE_ACKED):  # cannot happen unless a stored row is bad
        return (replace(st, **changes) if changes else st), []
    if not st.phase.unacknowledged:  # a new unacknowledged stretch (else: the same one, same level)
        changes.update(unacked_since=at, level=1)
    return _go(st, Kind.RAISE, at, SYSTEM, why, phase=State.ACTIVE_UNACKED, notified=at, **changes)


def _go(st: AlarmState, kind: Kind, at: float, who: str, why: str, *, report_level: int | None = None,
        **changes: Any) -> Result:
    """Make a transition: apply ``changes`` and describe it. The transition reports the new escalation level
    unless ``report_level`` says otherwise (an acknowledgement reports the level it was acknowledged at)."""
    new = replace(st, changed=at, **changes)
    tr = Transition(time=at, alarm_id=st.id, kind=kind, from_state=st.state, to_state=new.state,
                    priority=st.settings.priority, who=who, why=why, value=new.value, limit=new.limit,
                    citation=new.citation, level=new.level if report_level is None else report_level)
    return new, [tr]


# ---- timers ----------------------------------------------------------------------------------------------

Fire = Callable[[AlarmState, float], Result]


def _next_due(st: AlarmState, now: float) -> tuple[float, Fire] | None:
    """The earliest timer due at or before ``now`` (ties: delays first, they change what the others see)."""
    candidates: list[tuple[float, int, Fire]] = []
    s = st.settings
    if st.pending_since is not None:
        delay = s.off_delay if st.active else s.on_delay
        which = "off" if st.active else "on"
        candidates.append((st.pending_since + delay, 0, lambda x, at: _set_active(
            x, not x.active, at, f"{which}-delay of {delay:g} s elapsed")))
    if st.mode is Mode.SHELVED and st.mode_until is not None:
        candidates.append((st.mode_until, 1, _expire_shelve))
    if st.mode is Mode.IN_SERVICE:
        if st.phase in _REMINDED and s.realarm_interval > 0 and st.notified is not None:
            first = st.notified + s.realarm_interval
            if first <= now:
                periods = max(1, math.floor((now - st.notified) / s.realarm_interval))
                candidates.append((st.notified + periods * s.realarm_interval, 2, _realarm))
        if st.phase.unacknowledged and st.unacked_since is not None and st.level <= len(s.escalate_after):
            candidates.append((st.unacked_since + s.escalate_after[st.level - 1], 3, _escalate))
    due = [c for c in candidates if c[0] <= now]
    if not due:
        return None
    at, _, fire = min(due, key=lambda c: (c[0], c[1]))
    return at, fire


def _expire_shelve(st: AlarmState, at: float) -> Result:
    why = f"shelve by {st.mode_by} expired ({st.mode_reason})"
    return _back_in_service(st, at, Kind.SHELVE_EXPIRED, SYSTEM, why)


def _realarm(st: AlarmState, at: float) -> Result:
    since = st.unacked_since if st.unacked_since is not None else at
    return _go(st, Kind.REALARM, at, SYSTEM, f"still unacknowledged after {at - since:g} s", notified=at)


def _escalate(st: AlarmState, at: float) -> Result:
    since = st.unacked_since if st.unacked_since is not None else at
    return _go(st, Kind.ESCALATE, at, SYSTEM, f"unacknowledged for {at - since:g} s: escalated to level "
               f"{st.level + 1}", level=st.level + 1)


def _back_in_service(st: AlarmState, at: float, kind: Kind, who: str, why: str) -> Result:
    """Leave shelved/out of service at normal, then raise at once if the condition is (still) active."""
    st, out = _go(st, kind, at, who, why, mode=Mode.IN_SERVICE, phase=State.NORMAL, mode_until=None,
                  mode_by="", mode_reason="", unacked_since=None, notified=None, level=1)
    if st.active:
        st, more = _raise(st, at, f"condition still active on return to service ({kind.value})")
        out += more
    return st, out


# ---- operator actions ------------------------------------------------------------------------------------

Refuse = Callable[[str], Refusal]


def _ack(st: AlarmState, a: Ack, now: float, refuse: Refuse) -> Result | Refusal:
    if st.mode is not Mode.IN_SERVICE:
        return refuse(f"alarm is {st.state.value}: nothing to acknowledge")
    target = _UNACK_TO_ACK.get(st.phase)
    if target is None:
        return refuse(f"alarm is {st.phase.value}: nothing to acknowledge")
    notified = None if target is State.NORMAL else st.notified
    return _go(st, Kind.ACK, now, a.user, a.note, report_level=st.level, phase=target, unacked_since=None,
               notified=notified, level=1)


def _reset(st: AlarmState, a: Reset, now: float, refuse: Refuse) -> Result | Refusal:
    if not st.settings.latched:
        return refuse("not a latched alarm: reset applies only to latched alarms")
    if st.mode is not Mode.IN_SERVICE:
        return refuse(f"alarm is {st.state.value}: nothing to reset")
    if st.phase not in _LATCHED:
        if st.active:
            return refuse("condition still active: a latched alarm is reset after it returns to normal")
        return refuse(f"alarm is {st.phase.value}: nothing to reset")
    why = a.note
    if st.phase is State.LATCHED_UNACKED:
        why = f"{a.note} (reset also acknowledges)".strip()
    return _go(st, Kind.RESET, now, a.user, why, report_level=st.level, phase=State.NORMAL,
               unacked_since=None, notified=None, level=1)


def _shelve(st: AlarmState, a: Shelve, now: float, refuse: Refuse) -> Result | Refusal:
    if st.mode is Mode.OUT_OF_SERVICE:
        return refuse("alarm is out of service: put it in service before shelving")
    if not a.reason.strip():
        return refuse("a reason is required to shelve an alarm")
    if not math.isfinite(a.until) or a.until <= now:
        return refuse(f"shelve expiry {a.until!r} is not in the future (now {now:.3f})")
    return _go(st, Kind.SHELVE, now, a.user, a.reason, mode=Mode.SHELVED, phase=State.NORMAL,
               mode_until=a.until, mode_by=a.user, mode_reason=a.reason, unacked_since=None, notified=None,
               level=1)


def _unshelve(st: AlarmState, a: Unshelve, now: float, refuse: Refuse) -> Result | Refusal:
    if st.mode is not Mode.SHELVED:
        return refuse(f"alarm is {st.state.value}, not shelved")
    return _back_in_service(st, now, Kind.UNSHELVE, a.user, a.note)


def _out_of_service(st: AlarmState, a: OutOfService, now: float, refuse: Refuse) -> Result | Refusal:
    if st.mode is Mode.OUT_OF_SERVICE:
        return refuse("alarm is already out of service")
    if not a.reason.strip():
        return refuse("a reason is required to take an alarm out of service")
    return _go(st, Kind.OUT_OF_SERVICE, now, a.user, a.reason, mode=Mode.OUT_OF_SERVICE, phase=State.NORMAL,
               mode_until=None, mode_by=a.user, mode_reason=a.reason, unacked_since=None, notified=None,
               level=1)


def _in_service(st: AlarmState, a: InService, now: float, refuse: Refuse) -> Result | Refusal:
    if st.mode is not Mode.OUT_OF_SERVICE:
        return refuse(f"alarm is {st.state.value}, not out of service")
    return _back_in_service(st, now, Kind.IN_SERVICE, a.user, a.note)


def _seen(st: AlarmState, a: Seen, now: float, refuse: Refuse) -> Result | Refusal:
    """The industry has seen the alarm: journaled by the engine, the state unchanged (`alarms.model.Seen`)."""
    if st.state is State.NORMAL:
        return refuse("alarm is normal: there is nothing to acknowledge")
    if len(a.note) > MAX_TEXT:
        return refuse(f"notes are limited to {MAX_TEXT} characters")
    return st, []


def _comment(st: AlarmState, a: Comment, now: float, refuse: Refuse) -> Result | Refusal:
    if not a.note.strip():
        return refuse("a comment needs its text")
    if len(a.note) > MAX_TEXT:
        return refuse(f"comments are limited to {MAX_TEXT} characters")
    return st, []


MAX_TEXT = 2000  # characters of a note or comment (the console refuses longer ones before queueing)

_ACTIONS: dict[type, Callable[[AlarmState, Any, float, Refuse], Result | Refusal]] = {
    Ack: _ack, Reset: _reset, Shelve: _shelve, Unshelve: _unshelve, OutOfService: _out_of_service,
    InService: _in_service, Seen: _seen, Comment: _comment,
}
