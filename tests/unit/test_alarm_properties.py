"""Invariants of the alarm state machine over random histories of inputs, ticks and operator actions."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from alarms.machine import act, on_input, tick
from alarms.model import (
    PHASES,
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
    Refusal,
    Reset,
    Shelve,
    State,
    Transition,
    Unshelve,
)

KEY = AlarmKey("s", "ph", "ph_high")
_ACTIVE = (State.ACTIVE_UNACKED, State.ACTIVE_ACKED)


@dataclass(frozen=True)
class Op:
    dt: float  # seconds after the previous operation
    what: str  # "start", "end", "tick" or an action name
    value: float = 9.5


ops = st.builds(
    Op,
    dt=st.sampled_from([0.0, 1.0, 4.0, 10.0, 30.0, 61.0, 200.0]),
    what=st.sampled_from(["start", "end", "end", "tick", "ack", "shelve", "unshelve", "reset", "oos", "ins"]),
    value=st.sampled_from([8.0, 8.8, 9.0, 9.5, 10.0]),
)
alarm_settings = st.builds(
    AlarmSettings,
    latched=st.booleans(),
    on_delay=st.sampled_from([0.0, 5.0, 30.0]),
    off_delay=st.sampled_from([0.0, 5.0, 30.0]),
    deadband=st.sampled_from([0.0, 0.5]),
    realarm_interval=st.sampled_from([0.0, 60.0]),
    escalate_after=st.sampled_from([(), (100.0,), (50.0, 300.0)]),
)


def _action(what: str, now: float) -> Action:
    actions: dict[str, Action] = {
        "ack": Ack(user="op"), "shelve": Shelve(user="op", until=now + 120, reason="r"),
        "unshelve": Unshelve(user="op"), "reset": Reset(user="op"),
        "oos": OutOfService(user="op", reason="r"), "ins": InService(user="op")}
    return actions[what]


def run(s: AlarmSettings, history: list[Op], extra_ticks: bool) -> list[tuple[AlarmState, list[Transition]]]:
    """Play a history the way the engine does (timers first, then the input or action).

    With ``extra_ticks``, a tick is inserted halfway through every gap: a finer clock must not change what
    happens.
    """
    state = AlarmState(key=KEY, settings=s)
    now = 1_000_000.0
    out: list[tuple[AlarmState, list[Transition]]] = []
    for op in history:
        if extra_ticks and op.dt > 0:
            state, trs = tick(state, now + op.dt / 2)
            out.append((state, trs))
        now += op.dt
        state, trs = tick(state, now)
        if op.what in ("start", "end"):
            i = AlarmInput(time=now, site="s", channel="ph", rule="ph_high", active=op.what == "start",
                           value=op.value, limit=9.0)
            state, more = on_input(state, i, now)
            trs = trs + more
        elif op.what != "tick":
            result = act(state, _action(op.what, now), now)
            if not isinstance(result, Refusal):
                state, more = result
                trs = trs + more
        out.append((state, trs))
    return out


def _check_state(s: AlarmState) -> None:
    assert s.phase in PHASES
    if s.mode is not Mode.IN_SERVICE:
        assert s.phase is State.NORMAL
    else:
        assert (s.phase in _ACTIVE) == s.active  # the alarm shows active exactly when it is
    if s.phase in (State.LATCHED_UNACKED, State.LATCHED_ACKED):
        assert s.settings.latched
    assert (s.unacked_since is not None) == s.phase.unacknowledged
    if s.pending_since is not None:
        assert s.active != s.condition  # a delay runs only while the alarm lags its condition
    assert 1 <= s.level <= len(s.settings.escalate_after) + 1


@settings(max_examples=300, deadline=None, derandomize=True)
@given(s=alarm_settings, history=st.lists(ops, max_size=40))
def test_invariants_hold_over_any_history(s: AlarmSettings, history: list[Op]) -> None:
    previous = AlarmState(key=KEY, settings=s)
    last_time = float("-inf")
    for state, trs in run(s, history, extra_ticks=False):
        _check_state(state)
        shown = previous.state
        for t in trs:
            assert t.from_state is shown  # transitions chain without gaps
            shown = t.to_state
            assert t.time >= last_time  # and never go back in time
            last_time = t.time
            assert t.who and t.priority is s.priority
            if t.kind is Kind.RAISE:
                assert t.from_state not in _ACTIVE  # never a second raise of an alarm already raised
            if t.who == SYSTEM:
                assert t.kind not in (Kind.ACK, Kind.RESET, Kind.SHELVE, Kind.UNSHELVE)
        assert shown is state.state
        previous = state


@settings(max_examples=200, deadline=None, derandomize=True)
@given(s=alarm_settings, history=st.lists(ops, max_size=30))
def test_a_finer_clock_changes_nothing(s: AlarmSettings, history: list[Op]) -> None:
    # Reminders are the one thing tick granularity may change (missed periods collapse into one); all else,
    # delays, expiries and escalations, is stamped at its due time and must be identical.
    s = replace(s, realarm_interval=0.0)
    coarse = [t for _, trs in run(s, history, extra_ticks=False) for t in trs]
    fine = [t for _, trs in run(s, history, extra_ticks=True) for t in trs]
    assert fine == coarse


engine_ops = st.tuples(st.integers(min_value=0, max_value=3), ops)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(specs=st.lists(alarm_settings, min_size=4, max_size=4), history=st.lists(engine_ops, max_size=40))
def test_the_engine_tick_fires_what_a_tick_of_every_alarm_fires(specs: list[AlarmSettings],
                                                                 history: list[tuple[int, Op]]) -> None:
    """The engine's tick visits only the alarms with a timer that can run (`AlarmEngine._timed`): over any
    history of inputs, actions and ticks on four alarms, it fires the transitions, in the order, that
    `machine.tick` over every alarm in the engine's order fires, and the set it keeps is exactly the alarms
    for which `machine.timed` holds."""
    import tempfile
    from pathlib import Path

    from alarms.engine import AlarmEngine
    from alarms.machine import timed

    keys = [AlarmKey("s", f"c{n}", "r") for n in range(4)]
    now = 1_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        engine = AlarmEngine(path=Path(tmp) / "a.sqlite", alarms=[("s", k.channel, "r", s) for k, s in
                                                                  zip(keys, specs, strict=True)], now=now)
        try:
            for n, op in history:
                now += op.dt
                every = [(st_, tick(st_, now)[1]) for st_ in engine.states()]  # states() sorts by key
                expected = [(t.alarm_id, t.kind, t.time) for _st, trs in every for t in trs]
                got = [(t.alarm_id, t.kind, t.time) for t in engine.tick(now)]
                assert got == expected
                if op.what in ("start", "end"):
                    engine.apply(AlarmInput(time=now, site="s", channel=f"c{n}", rule="r",
                                            active=op.what == "start", value=op.value, limit=9.0), now)
                elif op.what != "tick":
                    engine.act(keys[n].id, _action(op.what, now), now)
                assert engine._timed == {s.key for s in engine.states() if timed(s)}
        finally:
            engine.close()
