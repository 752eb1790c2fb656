"""How an alarm follows the corrections late readings make (`monitor.alarming.Alarming.on_revisions`).

A device clock running ahead of the daemon's (within the tolerated skew): one reading stamped in the future
must not clear an alarm whose episode the record says is still going on (`Alarming._due`). An episode already
announced and revised (its figures changed, its start where it was) is not announced again.

Driven the daemon's way: the live check engine judges each arrival, its episode events and corrections go to
`Alarming`, the clock tick releases what is due. The episodes themselves are the record a replay finds (the
late-reading tests hold that); here only the alarm's timing is at stake."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.model import Kind, State
from config.loader import load_config
from monitor.alarming import Alarming
from monitor.checks.engine import CheckEngine
from monitor.sample import Sample
from tests.unit.checks_helpers import CASES

T0 = 1_764_590_400.0  # 2025-12-01T12:00:00Z
ALARM = "acme/ph/ph_low"


class Site:
    """The Wilson pH case with a meter publishing every second (max_gap 5 s), live engine and alarms."""

    def __init__(self, tmp_path: Path) -> None:
        case = CASES / "ph_wilson_5_5_and_9_5"
        shutil.copy(case / "site.toml", tmp_path / "site.toml")
        text = (tmp_path / "site.toml").read_text()
        assert "poll_interval = 60" in text
        (tmp_path / "site.toml").write_text(text.replace("poll_interval = 60", "poll_interval = 1"))
        self.config = load_config(tmp_path / "site.toml")
        self.engine = CheckEngine.for_config(self.config, live=True)
        self.alarming = Alarming(config=self.config, now=T0 - 10, influx=None)

    def arrive(self, t: float, value: float, now: float) -> None:
        """One reading stamped ``t`` arrives at ``now`` (the daemon's clock), then the clock ticks."""
        events = self.engine.process_many([Sample(time=t, site="acme", channel="ph", value=value, unit="pH")])
        self.alarming.on_episodes(events, now)
        if revisions := self.engine.drain_revisions():
            self.alarming.on_revisions(revisions, now)
        self.alarming.tick(now)

    @property
    def state(self) -> State:
        return self.alarming.engine.state(ALARM).state

    def transitions(self) -> list[tuple[Kind, float]]:
        return [(Kind(r.payload["kind"]), r.time) for r in self.alarming.engine.journal.records()
                if r.kind == "transition" and r.payload["alarm"] == ALARM]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    s = Site(tmp_path)
    yield s
    s.alarming.engine.close()


def test_one_reading_stamped_four_minutes_ahead_does_not_clear_the_alarm_of_the_readings_after_it(
        site: Site) -> None:
    """The issue's reproduction: pH 7 stamped now + 240 s, then real readings at pH 3.0. The record has the
    excursion from the first of them to the last reading before the gap that the future reading leaves; the
    alarm is raised at the first and stays active while they keep coming, instead of being raised and
    cleared at once, and clears only once max_gap has passed after the last one with nothing in between."""
    for k in range(3):
        site.arrive(T0 - 2 + k, 7.0, now=T0 - 2 + k)
    site.arrive(T0 + 240, 7.0, now=T0 + 0.5)  # the device's clock jumped 4 minutes ahead for one reading
    for k in range(1, 6):
        site.arrive(T0 + k, 3.0, now=T0 + k + 0.2)
        assert site.state is State.ACTIVE_UNACKED, (k, site.transitions())
    assert [k for k, _ in site.transitions()] == [Kind.RAISE]
    site.alarming.tick(T0 + 9.9)  # the last pH 3.0 at T0 + 5, max_gap 5 s: the gap is not known yet
    assert site.state is State.ACTIVE_UNACKED
    site.alarming.tick(T0 + 10.0)
    assert site.state is State.RTN_UNACKED
    assert [k for k, _ in site.transitions()] == [Kind.RAISE, Kind.CLEAR]


def test_a_reading_back_within_limits_stamped_ahead_clears_the_alarm_at_its_time_not_on_arrival(
        site: Site) -> None:
    """pH 3.0 in progress; a reading of 7.0 stamped 3 s ahead ends the episode at its time; the real readings of
    3.0 between now and then arrive after it. The alarm stays active until the daemon's clock reaches the end."""
    for k in range(3):
        site.arrive(T0 - 2 + k, 3.0, now=T0 - 2 + k + 0.1)
    assert site.state is State.ACTIVE_UNACKED
    site.arrive(T0 + 3, 7.0, now=T0 + 0.5)
    assert site.state is State.ACTIVE_UNACKED  # not cleared on arrival: its time has not come
    site.arrive(T0 + 1, 3.0, now=T0 + 1.1)
    site.arrive(T0 + 2, 3.0, now=T0 + 2.1)
    site.alarming.tick(T0 + 2.9)
    assert site.state is State.ACTIVE_UNACKED
    site.alarming.tick(T0 + 3.0)
    assert site.state is State.RTN_UNACKED
    assert [(k, t) for k, t in site.transitions()] == [(Kind.RAISE, T0 - 2 + 0.1), (Kind.CLEAR, T0 + 3.0)]


def test_with_the_clocks_agreeing_nothing_is_held(site: Site) -> None:
    """The common case: an end is applied on arrival, as before."""
    site.arrive(T0, 3.0, now=T0 + 0.1)
    site.arrive(T0 + 1, 7.0, now=T0 + 1.1)
    assert site.state is State.RTN_UNACKED
    assert [(k, t) for k, t in site.transitions()] == [(Kind.RAISE, T0 + 0.1), (Kind.CLEAR, T0 + 1.1)]


def test_an_announced_episode_revised_in_place_is_not_announced_again(site: Site) -> None:
    """A correction that re-adds an ended episode's start with other figures (same time) is that episode, which
    the alarm already raised and cleared: no second raise."""
    from dataclasses import replace

    from monitor.checks.events import EpisodeEvent
    from monitor.checks.revisions import Revision

    site.arrive(T0, 3.0, now=T0 + 0.1)
    site.arrive(T0 + 1, 7.0, now=T0 + 1.1)
    before = site.transitions()
    assert [k for k, _ in before] == [Kind.RAISE, Kind.CLEAR]
    start = EpisodeEvent(T0, "acme", "ph", "ph_low", "start", 3.0, 5.5, "Wilson § 105-5C")
    site.alarming.on_revisions([Revision("acme", "ph", "ph_low", withdrawn=(start,),
                                         added=(replace(start, value=2.9),), late=T0 + 0.5, active=False)],
                               T0 + 2)
    assert site.transitions() == before
    found = replace(start, time=T0 + 0.5)  # a start at another time is another episode: announced
    site.alarming.on_revisions([Revision("acme", "ph", "ph_low", withdrawn=(), added=(found,), late=T0 + 0.5,
                                         active=False)], T0 + 3)
    assert [k for k, _ in site.transitions()] == [Kind.RAISE, Kind.CLEAR, Kind.RAISE, Kind.CLEAR]
