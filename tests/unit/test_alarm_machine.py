"""The pure alarm state machine, driven with an injected clock: every transition, delay, deadband, latch,
shelve expiry, re-alarm, escalation and refusal.

Why one module of a little over 400 lines: some thirty short tests of one pure state machine, built by the same
few helpers; split by topic, each part would repeat them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from alarms.machine import act, on_input, step, tick
from alarms.model import (
    SYSTEM,
    Ack,
    Action,
    AlarmInput,
    AlarmKey,
    AlarmSettings,
    AlarmState,
    InService,
    Kind,
    Mode,
    OutOfService,
    Priority,
    Refusal,
    Reset,
    Shelve,
    State,
    Transition,
    Unshelve,
)

KEY = AlarmKey("acme-plating", "ph", "ph_high")
CITE = "Southeast § 112-5A(1)(c)"
T0 = 1_700_000_000.0


def alarm(**settings: Any) -> AlarmState:
    return AlarmState(key=KEY, settings=AlarmSettings(**settings))


def inp(t: float, active: bool, value: float | None = 9.5, limit: float | None = 9.0) -> AlarmInput:
    return AlarmInput(time=t, site=KEY.site, channel=KEY.channel, rule=KEY.rule, active=active, value=value,
                      limit=limit, citation=CITE)


def feed(st: AlarmState, t: float, active: bool, **kw: Any) -> tuple[AlarmState, list[Transition]]:
    return step(st, inp(t, active, **kw), t)


def do(st: AlarmState, action: Action, now: float) -> tuple[AlarmState, list[Transition]]:
    """An accepted action (the test fails if it is refused)."""
    st, fired = tick(st, now)
    result = act(st, action, now)
    assert not isinstance(result, Refusal), result
    return result[0], fired + result[1]


def refused(st: AlarmState, action: Action, now: float) -> str:
    result = act(st, action, now)
    assert isinstance(result, Refusal), result
    return result.reason


def kinds(trs: list[Transition]) -> list[tuple[Kind, State, State]]:
    return [(t.kind, t.from_state, t.to_state) for t in trs]


# ---- the four ISA-18.2 states -----------------------------------------------------------------------------

def test_raise_ack_clear_carries_who_why_and_condition_data() -> None:
    st, trs = feed(alarm(priority=Priority.CRITICAL), T0, True)
    assert kinds(trs) == [(Kind.RAISE, State.NORMAL, State.ACTIVE_UNACKED)]
    r = trs[0]
    assert (r.time, r.who, r.priority, r.value, r.limit, r.citation, r.level) == (
        T0, SYSTEM, Priority.CRITICAL, 9.5, 9.0, CITE, 1)
    assert r.alarm_id == "acme-plating/ph/ph_high" and r.why
    st, trs = do(st, Ack(user="jdoe", note="called the industry"), T0 + 30)
    assert kinds(trs) == [(Kind.ACK, State.ACTIVE_UNACKED, State.ACTIVE_ACKED)]
    assert (trs[0].who, trs[0].why, trs[0].time) == ("jdoe", "called the industry", T0 + 30)
    st, trs = feed(st, T0 + 60, False, value=8.1)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_ACKED, State.NORMAL)]
    assert trs[0].value == 8.1 and trs[0].who == SYSTEM
    assert st.state is State.NORMAL and st.unacked_since is None


def test_return_to_normal_unacknowledged_then_ack() -> None:
    st, _ = feed(alarm(), T0, True)
    st, trs = feed(st, T0 + 5, False)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_UNACKED, State.RTN_UNACKED)]
    st, trs = do(st, Ack(user="op"), T0 + 9)
    assert kinds(trs) == [(Kind.ACK, State.RTN_UNACKED, State.NORMAL)]


def test_condition_returning_before_ack_raises_again_in_the_same_unacknowledged_stretch() -> None:
    st, _ = feed(alarm(), T0, True)
    st, _ = feed(st, T0 + 5, False)
    st, trs = feed(st, T0 + 8, True)
    assert kinds(trs) == [(Kind.RAISE, State.RTN_UNACKED, State.ACTIVE_UNACKED)]
    assert st.unacked_since == T0  # escalation still measured from the first raise


def test_repeated_inputs_change_nothing() -> None:
    st, _ = feed(alarm(), T0, True)
    st2, trs = feed(st, T0 + 1, True, value=9.7)
    assert trs == [] and st2.phase is State.ACTIVE_UNACKED and st2.value == 9.7
    st3, trs = feed(alarm(), T0, False)
    assert trs == [] and st3.phase is State.NORMAL


def test_input_for_another_alarm_is_a_programming_error() -> None:
    other = AlarmInput(time=T0, site="acme-plating", channel="ph", rule="ph_low", active=True)
    with pytest.raises(ValueError, match="ph_low"):
        on_input(alarm(), other, T0)


# ---- latched alarms ---------------------------------------------------------------------------------------

def test_latched_alarm_holds_until_reset_after_condition_clears() -> None:
    st, _ = feed(alarm(latched=True), T0, True)
    assert "still active" in refused(st, Reset(user="op"), T0 + 1)
    st, trs = feed(st, T0 + 10, False, value=3.0)
    assert kinds(trs) == [(Kind.LATCH, State.ACTIVE_UNACKED, State.LATCHED_UNACKED)]
    st, trs = do(st, Ack(user="op"), T0 + 20)
    assert kinds(trs) == [(Kind.ACK, State.LATCHED_UNACKED, State.LATCHED_ACKED)]
    st, trs = do(st, Reset(user="op", note="vented, LEL 0 %"), T0 + 30)
    assert kinds(trs) == [(Kind.RESET, State.LATCHED_ACKED, State.NORMAL)]
    assert (trs[0].who, trs[0].why) == ("op", "vented, LEL 0 %")
    assert "nothing to reset" in refused(st, Reset(user="op"), T0 + 31)


def test_acknowledged_latched_alarm_latches_and_reset_of_unacked_latch_acknowledges() -> None:
    st, _ = feed(alarm(latched=True), T0, True)
    st, _ = do(st, Ack(user="op"), T0 + 1)
    st, trs = feed(st, T0 + 2, False)
    assert kinds(trs) == [(Kind.LATCH, State.ACTIVE_ACKED, State.LATCHED_ACKED)]
    st, _ = feed(alarm(latched=True), T0, True)
    st, _ = feed(st, T0 + 2, False)
    st, trs = do(st, Reset(user="op"), T0 + 3)
    assert kinds(trs) == [(Kind.RESET, State.LATCHED_UNACKED, State.NORMAL)] and "acknowledges" in trs[0].why


def test_condition_returning_on_a_latched_alarm_raises_a_new_occurrence() -> None:
    st, _ = feed(alarm(latched=True), T0, True)
    st, _ = do(st, Ack(user="op"), T0 + 1)
    st, _ = feed(st, T0 + 2, False)
    st, trs = feed(st, T0 + 3, True)
    assert kinds(trs) == [(Kind.RAISE, State.LATCHED_ACKED, State.ACTIVE_UNACKED)]
    assert st.unacked_since == T0 + 3


def withdrawn(t: float) -> AlarmInput:
    """The "end" a correction sends when the episode the alarm was raised for never happened."""
    return replace(inp(t, False), reason="late reading: episode retracted", retracted=True)


def test_a_withdrawn_episode_does_not_hold_a_latched_alarm() -> None:
    """Latching holds an alarm until an operator confirms the hazard gone; an episode a late reading withdrew
    was no hazard. The alarm clears as an unlatched one would, still asking for the acknowledgement of its
    raise when that is missing."""
    latched = alarm(latched=True)
    st, _ = feed(latched, T0, True)  # active, unacknowledged
    st, trs = step(st, withdrawn(T0 + 5), T0 + 5)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_UNACKED, State.RTN_UNACKED)]
    assert "withdrawn" in trs[0].why and "retracted" in trs[0].why and not st.active
    st, trs = do(st, Ack(user="op"), T0 + 6)
    assert kinds(trs) == [(Kind.ACK, State.RTN_UNACKED, State.NORMAL)]

    st, _ = feed(latched, T0, True)
    st, _ = feed(st, T0 + 2, False)  # latched, unacknowledged: its condition was already gone
    st, trs = step(st, withdrawn(T0 + 5), T0 + 5)
    assert kinds(trs) == [(Kind.CLEAR, State.LATCHED_UNACKED, State.RTN_UNACKED)]
    st, _ = do(st, Ack(user="op"), T0 + 6)
    assert st.state is State.NORMAL

    st, _ = feed(latched, T0, True)
    st, _ = do(st, Ack(user="op"), T0 + 1)
    st, _ = feed(st, T0 + 2, False)  # latched and acknowledged: nothing is left to do
    st, trs = step(st, withdrawn(T0 + 5), T0 + 5)
    assert kinds(trs) == [(Kind.CLEAR, State.LATCHED_ACKED, State.NORMAL)]
    assert "nothing to reset" in refused(st, Reset(user="op"), T0 + 6)


def test_a_withdrawal_changes_nothing_an_ordinary_end_would_not_where_no_latch_is_held() -> None:
    st, _ = feed(alarm(), T0, True)  # not latched: the usual clear
    st, trs = step(st, withdrawn(T0 + 5), T0 + 5)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_UNACKED, State.RTN_UNACKED)]
    st, trs = step(st, withdrawn(T0 + 6), T0 + 6)  # again: nothing
    assert trs == []
    st, trs = step(alarm(latched=True), withdrawn(T0), T0)  # a normal latched alarm: nothing
    assert trs == [] and st.state is State.NORMAL
    st, _ = feed(alarm(latched=True), T0, True)
    st, _ = feed(st, T0 + 2, False)
    st, _ = do(st, Shelve(user="op", until=T0 + 600, reason="probe swap"), T0 + 3)
    st, trs = step(st, withdrawn(T0 + 5), T0 + 5)  # shelved: followed silently
    assert trs == [] and st.mode is Mode.SHELVED and not st.active


def test_reset_of_a_non_latched_alarm_is_refused() -> None:
    st, _ = feed(alarm(), T0, True)
    st, _ = feed(st, T0 + 1, False)
    assert "not a latched alarm" in refused(st, Reset(user="op"), T0 + 2)


# ---- on-delay, off-delay, deadband ------------------------------------------------------------------------

def test_on_delay_raises_when_the_delay_elapses_stamped_at_that_moment() -> None:
    st, trs = feed(alarm(on_delay=30), T0, True)
    assert trs == [] and st.pending_since == T0 and not st.active
    st, trs = tick(st, T0 + 29.9)
    assert trs == []
    st, trs = tick(st, T0 + 45)  # a late tick: the raise is still stamped T0 + 30
    assert kinds(trs) == [(Kind.RAISE, State.NORMAL, State.ACTIVE_UNACKED)] and trs[0].time == T0 + 30
    assert "on-delay" in trs[0].why


def test_episode_shorter_than_the_on_delay_never_alarms() -> None:
    st, _ = feed(alarm(on_delay=30), T0, True)
    st, trs = feed(st, T0 + 29, False)
    assert trs == [] and st.pending_since is None
    st, trs = tick(st, T0 + 1000)
    assert trs == [] and st.phase is State.NORMAL


def test_input_after_an_elapsed_on_delay_raises_first_then_clears() -> None:
    st, _ = feed(alarm(on_delay=10), T0, True)
    st, trs = feed(st, T0 + 15, False)  # no tick in between: step fires the due delay first
    assert [(t.kind, t.time) for t in trs] == [(Kind.RAISE, T0 + 10), (Kind.CLEAR, T0 + 15)]


def test_repeated_inputs_do_not_restart_a_running_delay() -> None:
    st, _ = feed(alarm(on_delay=30), T0, True)
    st, trs = feed(st, T0 + 20, True, value=9.8)  # the same episode reported again (e.g. after a restart)
    assert trs == []
    st, trs = tick(st, T0 + 30)
    assert [(t.kind, t.time) for t in trs] == [(Kind.RAISE, T0 + 30)]
    st = replace(st, settings=AlarmSettings(off_delay=30))
    st, _ = feed(st, T0 + 40, False)
    st, _ = feed(st, T0 + 60, False, value=8.0)
    st, trs = tick(st, T0 + 70)
    assert [(t.kind, t.time) for t in trs] == [(Kind.CLEAR, T0 + 70)]


def test_off_delay_clears_only_after_the_condition_stays_away() -> None:
    st, _ = feed(alarm(off_delay=60), T0, True)
    st, trs = feed(st, T0 + 100, False)
    assert trs == [] and st.active and st.held
    st, trs = feed(st, T0 + 130, True)  # back within the off-delay: no clear, no second raise
    assert trs == [] and st.pending_since is None
    st, trs = feed(st, T0 + 200, False)
    st, trs = tick(st, T0 + 259)
    assert trs == []
    st, trs = tick(st, T0 + 300)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_UNACKED, State.RTN_UNACKED)] and trs[0].time == T0 + 260


def test_deadband_holds_the_clear_until_the_value_is_far_enough_from_the_limit() -> None:
    st, _ = feed(alarm(deadband=0.5), T0, True, value=9.6)
    st, trs = feed(st, T0 + 1, False, value=8.75)  # 0.25 below the 9.0 limit: inside the band
    assert trs == [] and st.held
    st, trs = feed(st, T0 + 2, False, value=8.6)
    assert trs == [] and st.active
    st, trs = feed(st, T0 + 3, False, value=8.5)  # exactly the deadband away: clears (inclusive)
    assert kinds(trs) == [(Kind.CLEAR, State.ACTIVE_UNACKED, State.RTN_UNACKED)] and trs[0].value == 8.5


def test_deadband_works_for_a_low_limit_and_is_ignored_without_a_value() -> None:
    st, _ = feed(alarm(deadband=0.5), T0, True, value=4.8, limit=5.0)
    st, trs = feed(st, T0 + 1, False, value=5.25, limit=5.0)
    assert trs == []
    st, trs = feed(st, T0 + 2, False, value=5.5, limit=5.0)
    assert [t.kind for t in trs] == [Kind.CLEAR]
    st, _ = feed(alarm(deadband=0.5), T0, True, value=None, limit=None)  # e.g. a stale-data alarm
    st, trs = feed(st, T0 + 1, False, value=None, limit=None)
    assert [t.kind for t in trs] == [Kind.CLEAR]


def test_deadband_then_off_delay() -> None:
    st, _ = feed(alarm(deadband=0.5, off_delay=10), T0, True)
    st, _ = feed(st, T0 + 1, False, value=8.9)  # held by the band: no off-delay yet
    assert st.pending_since is None
    st, _ = feed(st, T0 + 5, False, value=8.0)  # off-delay starts now
    st, trs = tick(st, T0 + 15)
    assert [(t.kind, t.time) for t in trs] == [(Kind.CLEAR, T0 + 15)]


# ---- shelving and out of service --------------------------------------------------------------------------

def test_shelve_hides_the_alarm_and_expiry_raises_it_again_if_still_active() -> None:
    st, _ = feed(alarm(), T0, True)
    st, trs = do(st, Shelve(user="op", until=T0 + 3600, reason="probe being cleaned"), T0 + 10)
    assert kinds(trs) == [(Kind.SHELVE, State.ACTIVE_UNACKED, State.SHELVED)]
    assert (trs[0].who, trs[0].why) == ("op", "probe being cleaned")
    assert "shelved" in refused(st, Ack(user="op"), T0 + 11)
    st, trs = feed(st, T0 + 20, False)
    st, trs2 = feed(st, T0 + 30, True)
    assert trs == trs2 == []  # followed silently while shelved
    st, trs = tick(st, T0 + 3599)
    assert trs == []
    st, trs = tick(st, T0 + 7200)  # stamped at the expiry, not at the late tick
    assert kinds(trs) == [(Kind.SHELVE_EXPIRED, State.SHELVED, State.NORMAL),
                          (Kind.RAISE, State.NORMAL, State.ACTIVE_UNACKED)]
    assert [t.time for t in trs] == [T0 + 3600, T0 + 3600] and trs[0].who == SYSTEM
    assert "probe being cleaned" in trs[0].why


def test_shelve_expiry_of_a_cleared_alarm_returns_to_normal_quietly() -> None:
    st, _ = feed(alarm(), T0, True)
    st, _ = do(st, Shelve(user="op", until=T0 + 60, reason="nuisance"), T0 + 1)
    st, _ = feed(st, T0 + 2, False)
    st, trs = tick(st, T0 + 61)
    assert kinds(trs) == [(Kind.SHELVE_EXPIRED, State.SHELVED, State.NORMAL)]


def test_unshelve_raises_at_once_if_active() -> None:
    st, _ = do(alarm(), Shelve(user="op", until=T0 + 60, reason="r"), T0)
    st, _ = feed(st, T0 + 1, True)
    st, trs = do(st, Unshelve(user="op", note="done"), T0 + 2)
    assert kinds(trs) == [(Kind.UNSHELVE, State.SHELVED, State.NORMAL),
                          (Kind.RAISE, State.NORMAL, State.ACTIVE_UNACKED)]
    assert trs[0].who == "op" and trs[1].who == SYSTEM
    assert "not shelved" in refused(st, Unshelve(user="op"), T0 + 3)


def test_shelve_refusals() -> None:
    st = alarm()
    assert "reason" in refused(st, Shelve(user="op", until=T0 + 60, reason="  "), T0)
    assert "not in the future" in refused(st, Shelve(user="op", until=T0, reason="r"), T0)
    assert "not in the future" in refused(st, Shelve(user="op", until=float("nan"), reason="r"), T0)
    st, _ = do(st, OutOfService(user="tech", reason="meter replaced"), T0)
    assert "out of service" in refused(st, Shelve(user="op", until=T0 + 60, reason="r"), T0)


def test_reshelving_moves_the_expiry() -> None:
    st, _ = do(alarm(), Shelve(user="op", until=T0 + 60, reason="a"), T0)
    st, trs = do(st, Shelve(user="op2", until=T0 + 600, reason="b"), T0 + 30)
    assert kinds(trs) == [(Kind.SHELVE, State.SHELVED, State.SHELVED)]
    st, trs = tick(st, T0 + 100)
    assert trs == [] and st.mode_until == T0 + 600 and st.mode_by == "op2"


def test_out_of_service_and_back() -> None:
    st, _ = feed(alarm(), T0, True)
    st, trs = do(st, OutOfService(user="tech", reason="pH probe replaced"), T0 + 5)
    assert kinds(trs) == [(Kind.OUT_OF_SERVICE, State.ACTIVE_UNACKED, State.OUT_OF_SERVICE)]
    st, trs = tick(st, T0 + 10**6)
    assert trs == [] and st.mode is Mode.OUT_OF_SERVICE  # no expiry
    assert "already out of service" in refused(st, OutOfService(user="tech", reason="x"), T0 + 6)
    st, trs = do(st, InService(user="tech", note="calibrated"), T0 + 7)
    assert kinds(trs) == [(Kind.IN_SERVICE, State.OUT_OF_SERVICE, State.NORMAL),
                          (Kind.RAISE, State.NORMAL, State.ACTIVE_UNACKED)]
    assert "not out of service" in refused(st, InService(user="tech"), T0 + 8)
    assert "reason" in refused(alarm(), OutOfService(user="tech", reason=""), T0)


def test_out_of_service_replaces_a_shelve() -> None:
    st, _ = do(alarm(), Shelve(user="op", until=T0 + 60, reason="r"), T0)
    st, _ = do(st, OutOfService(user="tech", reason="maintenance"), T0 + 1)
    st, trs = tick(st, T0 + 120)
    assert trs == [] and st.state is State.OUT_OF_SERVICE and st.mode_until is None


# ---- re-alarm and escalation ------------------------------------------------------------------------------

def test_realarm_reminds_while_unacknowledged_one_reminder_per_tick_at_most() -> None:
    st, _ = feed(alarm(realarm_interval=60), T0, True)
    st, trs = tick(st, T0 + 59)
    assert trs == []
    st, trs = tick(st, T0 + 60)
    assert kinds(trs) == [(Kind.REALARM, State.ACTIVE_UNACKED, State.ACTIVE_UNACKED)]
    assert trs[0].time == T0 + 60
    st, trs = tick(st, T0 + 250)  # three periods missed: one reminder, at the latest boundary
    assert [(t.kind, t.time) for t in trs] == [(Kind.REALARM, T0 + 240)]
    st, _ = do(st, Ack(user="op"), T0 + 251)
    st, trs = tick(st, T0 + 1000)
    assert trs == []


def test_no_reminder_for_a_condition_that_has_gone() -> None:
    st, _ = feed(alarm(realarm_interval=60), T0, True)
    st, _ = feed(st, T0 + 10, False)
    st, trs = tick(st, T0 + 600)
    assert trs == [] and st.phase is State.RTN_UNACKED


def test_escalation_levels_after_time_unacknowledged() -> None:
    st, _ = feed(alarm(escalate_after=(300.0, 900.0)), T0, True)
    st, trs = tick(st, T0 + 299)
    assert trs == []
    st, trs = tick(st, T0 + 300)
    assert [(t.kind, t.level, t.time) for t in trs] == [(Kind.ESCALATE, 2, T0 + 300)]
    assert "level 2" in trs[0].why
    st, trs = tick(st, T0 + 5000)
    assert [(t.kind, t.level, t.time) for t in trs] == [(Kind.ESCALATE, 3, T0 + 900)]
    st, trs = tick(st, T0 + 9000)
    assert trs == []  # no level beyond the configured ones
    st, trs = do(st, Ack(user="op"), T0 + 9001)
    assert trs[0].level == 3 and st.level == 1  # the ack says at which level it was answered


def test_escalation_continues_after_return_to_normal_unacknowledged() -> None:
    st, _ = feed(alarm(escalate_after=(300.0,)), T0, True)
    st, _ = feed(st, T0 + 10, False)
    st, trs = tick(st, T0 + 301)
    assert [(t.kind, t.to_state) for t in trs] == [(Kind.ESCALATE, State.RTN_UNACKED)]


def test_ack_before_escalation_stops_it() -> None:
    st, _ = feed(alarm(escalate_after=(300.0,)), T0, True)
    st, _ = do(st, Ack(user="op"), T0 + 100)
    st, trs = tick(st, T0 + 1000)
    assert trs == []


# ---- refusals ---------------------------------------------------------------------------------------------

def test_refusals_name_the_alarm_action_user_and_reason() -> None:
    r = act(alarm(), Ack(user="op", note="x"), T0)
    assert r == Refusal(alarm_id=KEY.id, action="ack", user="op",
                        reason="alarm is normal: nothing to acknowledge")
    st, _ = feed(alarm(), T0, True)
    st, _ = do(st, Ack(user="op"), T0 + 1)
    assert "nothing to acknowledge" in refused(st, Ack(user="op"), T0 + 2)
    assert "user name" in refused(st, Ack(user=""), T0 + 2)
    assert "user name" in refused(st, Ack(user=SYSTEM), T0 + 2)


# ---- values the configuration and the adapter must not get wrong ------------------------------------------

@pytest.mark.parametrize("settings", [
    {"on_delay": -1.0}, {"off_delay": float("inf")}, {"deadband": float("nan")}, {"realarm_interval": -5.0},
    {"escalate_after": (600.0, 300.0)}, {"escalate_after": (0.0,)},
])
def test_bad_settings_fail_loudly(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AlarmSettings(**settings)


def test_bad_keys_and_inputs_fail_loudly() -> None:
    with pytest.raises(ValueError):
        AlarmKey("a/b", "ph", "r")
    with pytest.raises(ValueError):
        AlarmKey.parse("a/b")
    with pytest.raises(ValueError):
        inp(T0, True, value=float("nan"))
    assert AlarmKey.parse("acme-plating/ph/ph_high") == KEY


def test_state_record_round_trip_and_rejection() -> None:
    st, _ = feed(alarm(on_delay=5), T0, True)
    st, _ = tick(st, T0 + 6)
    st, _ = do(st, Shelve(user="op", until=T0 + 99, reason="r"), T0 + 7)
    rec = st.to_record()
    assert AlarmState.from_record(KEY, st.settings, rec) == st
    with pytest.raises(ValueError):
        AlarmState.from_record(KEY, st.settings, {**rec, "phase": "shelved"})
    with pytest.raises(TypeError):
        AlarmState.from_record(KEY, st.settings, {**rec, "notified": "yesterday"})
    with pytest.raises(KeyError):
        AlarmState.from_record(KEY, st.settings, {k: v for k, v in rec.items() if k != "active"})
