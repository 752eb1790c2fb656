"""The demonstration clock (`monitor.clock`): simulated time that starts in the past, runs at the wall's pace while
the demo's processes start, faster until it meets the present, then with the wall, never ahead of it."""

from __future__ import annotations

import itertools
import time

import pytest

from monitor import clock
from monitor.clock import DemoClock


def demo() -> DemoClock:
    # wall anchor 1000, simulated 900 at the anchor: 100 s behind, closing 19 s per wall second
    return DemoClock(wall_anchor=1000.0, sim_anchor=900.0, speed=20.0)


def test_runs_at_the_wall_pace_before_the_anchor_then_faster_until_it_meets_the_present() -> None:
    d = demo()
    assert d.at(990.0) == 890.0 and d.rate(990.0) == 1.0  # settling: the wall's pace, 110 s behind
    assert d.at(1000.0) == 900.0
    assert d.at(1002.0) == 940.0 and d.rate(1002.0) == 20.0
    assert d.catch_up == pytest.approx(1000.0 + 100.0 / 19.0)
    assert d.at(d.catch_up) == pytest.approx(d.catch_up)
    assert d.at(2000.0) == 2000.0 and d.rate(2000.0) == 1.0  # then the present, never ahead of it
    assert d.changes() == (1000.0, d.catch_up)


def test_is_monotonic_and_never_ahead_of_the_wall() -> None:
    d = demo()
    walls = [990.0 + 0.01 * i for i in range(2_000)]
    sims = [d.at(w) for w in walls]
    assert all(b >= a for a, b in itertools.pairwise(sims))
    assert all(s <= w for s, w in zip(sims, walls, strict=True))


@pytest.mark.parametrize("text", ["1,2", "a,b,c", "1000,900,1", "1000,1100,20", ""])
def test_a_malformed_setting_is_refused_with_its_variable_named(text: str) -> None:
    if not text:
        assert clock.install_from_env({}) is None  # unset: the real clocks
        return
    with pytest.raises(ValueError, match="PRETREAT_DEMO_CLOCK"):
        DemoClock.parse(text)


def test_installing_replaces_wall_and_monotonic_and_uninstalling_restores_them() -> None:
    now = time.time()
    installed = clock.install_from_env({clock.ENV: f"{now + 10},{now - 3600},20"})
    try:
        assert installed is not None and clock.demo() is installed
        assert clock.wall() == pytest.approx(now - 3610, abs=1.0)  # before the anchor: the wall's pace
        assert clock.rate() == 1.0
    finally:
        clock.install(None)
    assert clock.wall is time.time and clock.monotonic is time.monotonic and clock.demo() is None
