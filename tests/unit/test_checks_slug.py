"""The slug rule: a baseline of whole local days of normal operation, 5 × threshold, longer than 15 minutes,
onset and confirmation, bounded state."""

from __future__ import annotations

import math
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from config.rule_model import SlugParams
from config.rules import RuleBinding
from config.schema import SiteConfig
from monitor.checks.events import EpisodeEvent
from monitor.checks.slug import SlugDetector
from tests.unit.checks_helpers import brief, channel, live, load, site_toml

DAY = 86400.0
D0 = datetime(2025, 3, 3, tzinfo=ZoneInfo("UTC")).timestamp()  # a UTC midnight


def detector(
    *,
    duration: float = 900.0,
    duration_operator: str = ">",
    baseline: float | None = None,
    days: int = 7,
    timezone: str = "UTC",
) -> tuple[SlugDetector, list[EpisodeEvent]]:
    params = SlugParams(multiplier=5.0, operator=">", duration=duration, duration_operator=duration_operator,
                        baseline_days=days, timezone=timezone, baseline=baseline)
    out: list[EpisodeEvent] = []
    b = RuleBinding(rule="slug", site="s", channel="flow", citation="c", inputs=("flow",), params=params)
    return SlugDetector(binding=b, out=out), out


def slugs(events: list[EpisodeEvent]) -> list[EpisodeEvent]:
    """The slug episodes alone (the detector also raises ``slug_no_baseline`` while it has no baseline)."""
    return [e for e in events if e.rule == "slug"]


MAX_GAP = 900.0  # the channel's max_gap the engine would judge these rows by (3 x a 5-minute poll)


def feed(det: SlugDetector, rows: list[tuple[float, float]], *, max_gap: float = MAX_GAP) -> None:
    """The rows as the engine hands them over: an interval longer than ``max_gap`` is told as a gap first."""
    for t, v in rows:
        if det.minute is not None and t - det.last_t > max_gap:
            det.gap(det.last_t, det.last_v, t, 0)
        det.feed(t, v)


def day(start: float, value: float, *, step: float = 60.0, minutes: int = 1440) -> list[tuple[float, float]]:
    return [(start + step * i, value) for i in range(int(minutes * 60 / step))]


def test_no_baseline_and_no_slug_before_a_day_of_normal_operation() -> None:
    det, out = detector()
    feed(det, day(D0 + 12 * 3600, 10.0, minutes=720))  # half a day: < 90 % covered
    feed(det, [(D0 + DAY + 60 * i, 1000.0) for i in range(30)])  # 30 minutes at 100 x: judged against nothing
    assert det.baseline is None and slugs(out) == [] and det.state == 0
    # ... and says why, from the first reading, as a data-quality episode
    assert [(e.rule, e.event, e.time, e.value) for e in out] == [("slug_no_baseline", "start", D0 + 12 * 3600, None)]
    # in plain words: what a day of normal operation is, and that none is in the look-back
    assert out[0].citation == ("c: no baseline, so no slug is judged: no day of normal operation yet in the last 60 "
                               "days (a local day counts when readings cover at least 90 % of it, no slug episode "
                               "is in it and the readings were above zero for at least an hour)")
    feed(det, day(D0 + DAY + 1800, 10.0, minutes=1410))  # the rest of the day: covered, normal
    feed(det, [(D0 + 2 * DAY, 10.0)])  # local midnight: the baseline is fixed for the new day
    assert det.baseline == (30 * 1000.0 + 1410 * 10.0) / 1440  # every minute of the day weighs the same
    # the notice ends at the first reading of the first day with a baseline, all of it measured
    assert [(e.rule, e.event, e.time, e.measured, e.unmeasured) for e in out[1:]] == [
        ("slug_no_baseline", "end", D0 + 2 * DAY, 1.5 * DAY, 0.0)]


def test_exactly_five_times_complies_and_just_above_opens_a_candidate() -> None:
    det, _ = detector()
    feed(det, day(D0, 10.0))
    feed(det, [(D0 + DAY, 50.0)])
    assert det.baseline == 10.0 and det.state == 0  # "more than five times": 50.0 complies
    feed(det, [(D0 + DAY + 30, 50.000001)])
    assert det.state == 1 and det.frozen == 50.0


def test_a_slug_starts_at_its_onset_and_is_confirmed_past_fifteen_minutes() -> None:
    det, out = detector()
    feed(det, day(D0, 10.0))
    start = D0 + DAY + 8 * 3600
    feed(det, [(start + 60 * i, 60.0) for i in range(16)])  # exactly 15 minutes above: not longer
    assert slugs(out) == []
    feed(det, [(start + 15 * 60 + 1, 70.0)])
    assert [(e.event, e.time, e.value, e.limit, e.confirmed) for e in slugs(out)] == [
        ("start", start, 60.0, 50.0, start + 901)  # the onset reading; confirmed when the alarm fires
    ]
    feed(det, [(start + 20 * 60, 50.0)])  # at or below the frozen threshold ends it
    assert [(e.event, e.value, e.peak) for e in slugs(out)][1] == ("end", 50.0, 70.0)


def test_for_a_duration_of_fifteen_minutes_includes_exactly_fifteen() -> None:
    det, out = detector(duration_operator=">=", baseline=400.0)  # a fixed normal-sewage strength
    feed(det, [(D0 + 60 * i, 2001.0) for i in range(16)])
    assert [(e.event, e.time - D0, e.confirmed) for e in slugs(out)] == [("start", 0.0, D0 + 900.0)]


def test_the_literal_reading_confirms_at_the_onset_reading() -> None:
    det, out = detector(duration=0.0, duration_operator=">=")  # [site.permit.slug] reading = "multiple_alone"
    feed(det, day(D0, 10.0))
    feed(det, [(D0 + DAY + 60, 51.0)])
    assert [(e.event, e.time, e.confirmed) for e in slugs(out)] == [("start", D0 + DAY + 60, D0 + DAY + 60)]


def test_a_day_with_a_slug_is_no_day_of_normal_operation() -> None:
    det, _ = detector()
    feed(det, day(D0, 10.0))
    rows = day(D0 + DAY, 20.0)
    rows[600:630] = [(t, 80.0) for t, _ in rows[600:630]]  # 30 minutes at 80 > 50: a slug on day 2
    feed(det, rows)
    feed(det, [(D0 + 2 * DAY, 10.0)])
    assert det.baseline == 10.0  # day 2 left out whole: its slug never inflates the baseline


def test_days_without_an_hour_of_operation_or_with_gaps_are_left_out() -> None:
    det, _ = detector()
    feed(det, day(D0, 25.0))  # a working day
    feed(det, day(D0 + DAY, 0.0))  # shut down: recorded, but not an hour above zero
    feed(det, day(D0 + 2 * DAY, 5.0, minutes=59) + day(D0 + 2 * DAY + 59 * 60, 0.0, minutes=1381))  # 59 min
    feed(det, day(D0 + 3 * DAY, 100.0, minutes=1200))  # 83 % covered: not a day of normal operation
    feed(det, [(D0 + 4 * DAY, 25.0)])
    assert det.baseline == 25.0 and det.normal_days == 1


def test_an_hour_above_zero_makes_a_day_of_operation_and_zero_hours_count_in_its_average() -> None:
    det, _ = detector()
    feed(det, day(D0, 60.0, minutes=60) + day(D0 + 3600, 0.0, minutes=1380))
    feed(det, [(D0 + DAY, 0.0)])
    assert det.baseline == 60.0 * 60 / 1440  # 2.5: the whole day, zero-flow hours included


def test_the_day_average_is_time_weighted_whatever_the_sample_rate() -> None:
    det, _ = detector()
    feed(det, day(D0, 10.0, step=1.0, minutes=720))  # 12 h at 1 s: 43,200 readings of 10
    feed(det, day(D0 + DAY / 2, 0.0, step=60.0, minutes=720))  # 12 h at 1 min: 720 readings of 0
    feed(det, [(D0 + DAY, 0.0)])
    assert det.baseline == 5.0  # not the mean of the readings (9.8)


@pytest.mark.parametrize("poll", [60.0, 90.0, 120.0, 300.0])
def test_a_meter_publishing_every_few_minutes_forms_a_baseline_and_its_tank_dump_is_found(poll: float) -> None:
    """A day of normal operation is >= 90 % measured time (intervals within the channel's max_gap, 3 x the poll):
    a reading every 90 s, 2 min or 5 min leaves most minutes empty but measures the whole day."""
    det, out = detector()
    feed(det, day(D0, 10.0, step=poll), max_gap=3 * poll)
    onset = D0 + DAY + 7 * 3600.0  # the dump: 30 minutes at 120 (limit 5 x 10 = 50)
    rows = day(D0 + DAY, 10.0, step=poll, minutes=600)
    feed(det, [(t, 120.0 if onset <= t < onset + 1800.0 else v) for t, v in rows], max_gap=3 * poll)
    assert det.baseline == 10.0 and det.normal_days == 1
    got = [(e.event, e.time, e.limit) for e in slugs(out)]
    assert got == [("start", onset, 50.0), ("end", onset + 1800.0, 50.0)]
    assert out[-2].confirmed == onset + (math.floor(900.0 / poll) + 1) * poll  # first reading > 15 min in


def test_the_day_average_holds_each_value_until_the_next_reading_and_weighs_gaps_nothing() -> None:
    """Unequal intervals weigh by their length; an interval longer than max_gap is unmeasured."""
    det, _ = detector()
    rows = [(D0 + 300.0 * i, 30.0 if i % 3 == 0 else 0.0) for i in range(288)]  # 30 held 5 min in every 15
    del rows[10:16]  # 35 minutes without a reading (> 15 min max_gap): a gap, 2100 s unmeasured
    feed(det, rows)
    feed(det, [(D0 + DAY, 0.0)])
    assert det.normal_days == 1 and det.baseline is not None
    # measured: 86400 - 2100 s; 30 held 300 s by 93 of the 96 readings of 30: two were removed, and the one at
    # 00:45 is the last before the gap, so its value holds for no time
    assert math.isclose(det.baseline, 30.0 * 300.0 * 93 / (DAY - 2100.0), rel_tol=1e-12)


def test_a_day_of_three_quarters_measured_time_is_left_out_at_any_poll() -> None:
    det, _ = detector()
    feed(det, day(D0, 10.0, step=120.0, minutes=1080), max_gap=360.0)  # 18 h measured, then silence
    feed(det, [(D0 + DAY, 10.0)], max_gap=360.0)
    assert det.baseline is None


def test_the_baseline_is_the_mean_of_the_most_recent_n_days() -> None:
    det, _ = detector(days=2)
    for i, v in enumerate([10.0, 20.0, 30.0]):
        feed(det, day(D0 + i * DAY, v))
    feed(det, [(D0 + 3 * DAY, 1.0)])
    assert det.baseline == 25.0


def test_days_are_looked_back_at_most_sixty_days() -> None:
    det, _ = detector()
    feed(det, day(D0, 10.0))
    feed(det, [(D0 + 60 * DAY, 10.0)])  # the day 60 days later: the normal day is still within reach
    assert det.baseline == 10.0
    det2, _ = detector()
    feed(det2, day(D0, 10.0))
    feed(det2, [(D0 + 62 * DAY, 10.0)])
    assert det2.baseline is None


def test_days_are_local_calendar_days_of_23_hours_across_dst() -> None:
    ny = ZoneInfo("America/New_York")
    start = datetime(2025, 3, 9, tzinfo=ny).timestamp()  # a 23-hour day (spring forward)
    end = datetime(2025, 3, 10, tzinfo=ny).timestamp()
    det, _ = detector(timezone="America/New_York")
    feed(det, [(t, 10.0) for t in range(int(start), int(end), 60)])
    feed(det, [(end, 10.0)])
    assert (end - start) / 60 == 1380 and det.baseline == 10.0


def test_state_is_bounded_whatever_the_sample_rate() -> None:
    det, _ = detector()
    before = det.memory_bytes()
    feed(det, [(D0 + 0.1 * i, 10.0) for i in range(20000)])  # 10 Hz
    assert det.memory_bytes() == before <= 1024


def reference(rows: list[tuple[float, float]], *, duration: float, days: int) -> list[tuple[float, str, float]]:
    """The rule as the issue words it, by brute force over the whole record (UTC days)."""
    out: list[tuple[float, str, float]] = []
    state, cand, frozen = 0, 0.0, 0.0
    slug_days: set[int] = set()
    normal: dict[int, float] = {}

    def day_avg(d: int) -> float | None:
        """Each value held until the next reading within MAX_GAP; the day's measured part of that."""
        measured = integral = operating = 0.0
        for (t0, v0), (t1, _) in pairwise(rows):
            a, b = max(t0, d * DAY), min(t1, (d + 1) * DAY)
            if t1 - t0 <= MAX_GAP and b > a:
                measured += b - a
                integral += v0 * (b - a)
                operating += (b - a) * (v0 > 0)
        if measured < 0.9 * DAY or operating < 3600 or d in slug_days:
            return None
        return integral / measured

    current = None
    base: float | None = None
    prev = -math.inf
    for t, v in rows:
        if t - prev > MAX_GAP and state:  # a gap ends a candidate or an episode at the reading before it
            if state == 2:
                out.append((prev, "end", frozen))
            state = 0
        prev = t
        d = math.floor(t / DAY)
        if d != current:
            if current is not None and (avg := day_avg(current)) is not None:
                normal[current] = avg
            recent = [normal[k] for k in sorted(normal) if d - 60 <= k < d][-days:]
            base = sum(recent) / len(recent) if recent else None
            current = d
            if state == 2:
                slug_days.add(d)
        thr = math.inf if base is None else 5 * base
        if state == 0:
            if not v > thr:
                continue
            state, cand, frozen = 1, t, thr
        elif not v > frozen:
            if state == 2:
                out.append((t, "end", frozen))
            state = 0
            continue
        if state == 1 and t - cand > duration:
            state = 2
            slug_days.add(d)
            out.append((cand, "start", frozen))
    return out


SEEN: list[bool] = []


# derandomized: the examples (and so whether some hold slugs, which the test below checks) are the same on every
# machine and every run; the explicit example is two days at 10 then 40 minutes at 60 (> 5 x 10 for > 10 min)
@settings(max_examples=40, deadline=None, derandomize=True)
@example([(60, 10.0, 1440), (60, 10.0, 1440), (60, 60.0, 40)])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([60, 60, 60, 300, 3600, 6 * 3600]),
            st.sampled_from([0.0, 1.0, 10.0, 10.0, 60.0]),
            st.one_of(st.integers(1, 40), st.sampled_from([1440, 1500, 2000])),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_the_detector_matches_the_brute_force_definition(segments: list[tuple[int, float, int]]) -> None:
    """Runs of one value at one step (whole days and partial ones, gaps, slugs): the incremental detector
    against the definition computed over the whole record."""
    t, rows = D0, []
    for step, v, n in segments:
        for _ in range(n if step == 60 else min(n, 30)):
            t += step
            rows.append((t, v))
    det, out = detector(duration=600.0, days=2)
    feed(det, rows)
    want = reference(rows, duration=600.0, days=2)
    got = [(e.time, e.event, e.limit) for e in slugs(out)]
    assert len(got) == len(want)
    SEEN.append(bool(want))
    for (ta, ea, la), (tb, eb, lb) in zip(got, want, strict=True):
        assert (ta, ea) == (tb, eb) and la is not None and math.isclose(la, lb, rel_tol=1e-9)


def test_the_brute_force_comparison_reaches_slugs() -> None:
    """Guards the property above against vacuity: some generated records do hold slugs."""
    SEEN.clear()
    test_the_detector_matches_the_brute_force_definition()
    assert any(SEEN)


def _permit_slug(minutes: float) -> str:
    return (f'[site.permit]\nid = "P"\n[site.permit.limits.slug]\nmultiplier = 5.0\nminutes = {minutes}\n'
            '[site.rules.slug]\nbaseline_days = 1\n')


def test_sub_minute_candidate_is_seen_by_the_fast_path(tmp_path: Path) -> None:
    """A slug that starts mid-minute (the fast path adds in-minute readings to the day) still opens a
    candidate, and the fast path agrees with the slow one."""
    config = load(tmp_path, site_toml(channel("flow"), extra=_permit_slug(3.0) + "loading = false\n"))
    rows = [(D0 + 30 * i, "flow", 10.0, "good") for i in range(2 * 2880 + 21)]
    t = D0 + 30 * (2 * 2880 + 21)
    rows += [(t + 30 * i, "flow", 50.5, "good") for i in range(10)]
    events = live(config, rows)
    assert brief(slugs(events)) == [(t - D0, "flow", "slug", "start", 50.5)]
    assert slugs(events)[0].confirmed == t + 210.0
    assert live(config, rows, fast=False) == events


def test_mass_loading_is_flow_times_concentration_and_never_uses_a_stale_partner(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("flow"), channel("cod"), extra=_permit_slug(2.0)))
    rows = []
    for i in range(1440):  # a day of loading 10 × 2 = 20: the baseline of the next
        rows += [(D0 + 60 * i, "flow", 10.0, "good"), (D0 + 60 * i + 1, "cod", 2.0, "good")]
    t = D0 + DAY + 600
    rows += [(t - 600, "flow", 10.0, "good"), (t - 599, "cod", 2.0, "good")]
    rows += [(t, "cod", None, "comm_failure")]  # concentration lost: no product from flow alone
    rows += [(t + 60 * i, "flow", 100.0, "good") for i in range(1, 5)]
    rows += [(t + 270, "cod", 2.0, "good")]  # back: 100 × 2 = 200 > 5 × 20, but a candidate only now
    rows += [(t + 270 + 60 * i, "flow", 100.0, "good") for i in range(1, 4)]
    events = [(e.time - t, e.event, e.value, e.limit, e.confirmed) for e in slugs(live(config, rows))
              if e.channel == "flow*cod"]
    assert events == [(270.0, "start", 200.0, 100.0, t + 450.0)]  # onset +270, longer than 2 minutes at +450


def test_a_gap_ends_a_candidate_and_an_episode_so_a_slug_is_measured_time(tmp_path: Path) -> None:
    """max_gap 180 s (a reading every 30 s here, the instrument's interval a minute). 50.5 (> 5 × 10) at +0 to +60 s,
    then nothing until +600 s: the candidate ends at the gap (it would otherwise be confirmed at +600 across ten
    unmeasured minutes); 50.5 again from +600 s is a new candidate, confirmed past 3 minutes at +810 s; the
    readings stop after +870 s and the next, at +1200 s, is after a gap: the episode ends at +870 s (``gap``)."""
    config = load(tmp_path, site_toml(channel("flow"), extra=_permit_slug(3.0) + "loading = false\n"))
    rows = [(D0 + 30 * i, "flow", 10.0, "good") for i in range(2 * 2880 + 21)]
    t = D0 + 30 * (2 * 2880 + 21)
    rows += [(t + 30 * i, "flow", 50.5, "good") for i in range(3)]
    rows += [(t + 600 + 30 * i, "flow", 50.5, "good") for i in range(10)]
    rows += [(t + 1200, "flow", 10.0, "good")]
    events = live(config, rows)
    got = [(e.time - t, e.event, e.confirmed and e.confirmed - t, e.end_reason, e.measured, e.unmeasured)
           for e in events if e.rule == "slug"]
    assert got == [(600.0, "start", 810.0, None, None, None), (870.0, "end", None, "gap", 270.0, 0.0)]
    assert live(config, rows, fast=False) == events


def _flow_site(folder: Path) -> SiteConfig:
    folder.mkdir()
    return load(folder, site_toml(channel("flow")))


async def _recorded_days(tmp_path: Path, first: float, now: float) -> SiteConfig:
    from monitor.sample import Sample
    from monitor.stores.historian import Historian

    config = _flow_site(tmp_path)
    h = Historian(path=config.daemon.historian, commit_interval=0.05)
    await h.start()
    n = int((now - first) // 60)
    for i in range(0, n, 20_000):  # a reading a minute: every day is a day of normal operation
        h.submit([Sample(time=first + 60.0 * j, site="acme", channel="flow", value=10.0, unit="gpm")
                  for j in range(i, min(n, i + 20_000))])
    await h.close()
    return config


async def test_the_no_baseline_notice_is_raised_where_the_record_begins_not_where_a_restart_window_does(
        tmp_path: Path) -> None:
    """The daemon's warm-up replays the last 62 days of a slug channel: where the record began earlier, the fresh
    engine's missing baseline at the window's start is an artefact of the window (the daemon that judged those
    days live had one), so no notice is recorded for it; where the record begins inside the window, the notice
    is the record's own and is kept. Its alarm is configured with the slug's."""
    from config.alarms import alarm_specs
    from monitor.checks.engine import CheckEngine
    from monitor.warmup import warm_up

    now = D0 + 70 * DAY + 600
    config = await _recorded_days(tmp_path / "long", D0, now)
    assert ("acme", "flow", "slug_no_baseline") in {(s, c, r) for s, c, r, _ in alarm_specs(config.sites, None)}
    engine = CheckEngine.for_config(config, live=True)
    events = warm_up(engine, config, now)
    assert [e for e in events if e.rule.startswith("slug")] == []
    (slug,) = [r for b, r in engine.rules if b.rule == "slug"]
    assert isinstance(slug, SlugDetector) and slug.baseline == 10.0 and slug.nb_start is None

    config = await _recorded_days(tmp_path / "short", D0 + 67 * DAY, now)
    events = warm_up(CheckEngine.for_config(config, live=True), config, now)
    assert [(e.rule, e.event, e.time) for e in events if e.rule.startswith("slug")] == [
        ("slug_no_baseline", "start", D0 + 67 * DAY), ("slug_no_baseline", "end", D0 + 68 * DAY)]  # day 67 whole


async def test_the_report_shows_the_slug_baseline_in_force_each_day_with_its_unit_and_days(tmp_path: Path) -> None:
    """The report states, per slug rule and day of the period, the baseline in force, its threshold and unit,
    and the days of normal operation it rests on (here a meter publishing every 2 minutes)."""
    from datetime import date

    from monitor.reports.compliance import build_report
    from monitor.reports.periods import FEDERAL_CITATION, Period
    from monitor.reports.sections import build_sections
    from monitor.sample import Sample
    from monitor.stores.historian import Historian

    config = load(tmp_path, site_toml(channel("flow"), extra="[site.rules.slug]\nloading = false\n",
                                      poll_interval=120.0))
    h = Historian(path=config.daemon.historian, commit_interval=0.05)
    await h.start()
    h.submit([Sample(time=D0 + 120.0 * i, site="acme", channel="flow", value=(10.0, 20.0, 12.0)[i // 720],
                     unit="gpm") for i in range(3 * 720)])
    await h.close()
    period = Period(date(2025, 3, 3), date(2025, 3, 5), date(2025, 4, 1), FEDERAL_CITATION)
    sections = {s.key: s for s in build_sections(build_report(config, "acme", period, now=D0 + 3 * DAY))}
    assert sections["slug_baselines"].text[-1].startswith(  # what it means for a batch discharger, and no way out here
        "Batch operation: a batch discharger is measured against its own 24-hour average, zero-flow hours included")
    assert "at this site the permit cannot replace the ordinance's average with fixed values" in \
        sections["slug_baselines"].text[-1]
    assert sections["slug_baselines"].rows == (
        ("flow", "2025-03-03", "none", "none: no slug judged", "gpm", "—"),
        ("flow", "2025-03-04", "10", "50", "gpm", "2025-03-03"),
        ("flow", "2025-03-05", "15", "75", "gpm", "2025-03-03, 2025-03-04"),
    )


async def test_the_no_baseline_alarm_stays_active_across_a_restart_while_the_notice_is_open(tmp_path: Path) -> None:
    """A restart rebuilds the rule state and reconciles the persisted alarms with it (`monitor.warmup`): the
    ``slug_no_baseline`` notice still open in the rebuilt state keeps its alarm active, as any open episode does;
    once the record shows a day with a baseline, the next restart clears it at the notice's end."""
    from alarms.engine import AlarmEngine
    from alarms.model import AlarmInput
    from config.alarms import alarm_specs
    from monitor.checks.engine import CheckEngine
    from monitor.warmup import reconcile, warm_up

    now = D0 + 12 * 3600
    config = await _recorded_days(tmp_path / "site", D0 + 3600, now)  # 11 hours of the first day: no baseline
    alarms = AlarmEngine(path=tmp_path / "alarms.sqlite", alarms=alarm_specs(config.sites, None), now=D0)
    key = "acme/flow/slug_no_baseline"
    try:
        alarms.apply(AlarmInput(time=D0 + 3600, site="acme", channel="flow", rule="slug_no_baseline", active=True,
                                value=None, limit=None, citation="c"), D0 + 3600)  # as the live path raised it
        assert alarms.state(key).condition
        engine = CheckEngine.for_config(config, live=True)
        events = warm_up(engine, config, now)
        assert [(e.rule, e.event) for e in events] == [("slug_no_baseline", "start")]
        assert ("acme", "flow", "slug_no_baseline") in engine.open_episodes()
        assert reconcile(alarms, engine, events, now) == []  # nothing clears it: the notice is still open
        alarms.apply_many(reconcile(alarms, engine, events, now), now)
        assert alarms.state(key).condition

        later = D0 + DAY + 7200  # the record now holds the first whole day: a baseline since midnight
        config = await _recorded_days(tmp_path / "later", D0 + 3600, later)
        engine = CheckEngine.for_config(config, live=True)
        events = warm_up(engine, config, later)
        assert ("acme", "flow", "slug_no_baseline") not in engine.open_episodes()
        [clear] = reconcile(alarms, engine, events, later)
        assert (clear.rule, clear.active, clear.time) == ("slug_no_baseline", False, D0 + DAY)
    finally:
        alarms.close()
