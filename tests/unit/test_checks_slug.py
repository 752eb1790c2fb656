"""The slug rule: trailing baseline of normal operation, 5 × threshold, longer than 15 minutes, bounded
state."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from config.rules import RuleBinding
from monitor.checks.events import EpisodeEvent
from monitor.checks.slug import SlugDetector
from tests.unit.test_checks_helpers import T0, brief, channel, live, load, site_toml

DAY = 86400.0


def detector(
    *,
    window: float = DAY,
    duration: float = 900.0,
    duration_operator: str = ">",
    baseline: float | None = None,
) -> tuple[SlugDetector, list[EpisodeEvent]]:
    params: dict[str, float | str] = {
        "multiplier": 5.0,
        "operator": ">",
        "duration": duration,
        "duration_operator": duration_operator,
        "window": window,
    }
    if baseline is not None:
        params["baseline"] = baseline
    out: list[EpisodeEvent] = []
    b = RuleBinding(rule="slug", site="s", channel="flow", citation="c", inputs=("flow",), params=params)
    return SlugDetector(binding=b, out=out), out


def feed(det: SlugDetector, rows: list[tuple[float, float]]) -> None:
    for t, v in rows:
        det.feed(t, v)


def test_no_baseline_until_a_full_day_of_history() -> None:
    det, _ = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1440)])  # minutes 0..1439: not yet a full window behind
    det.feed(T0 + 1439 * 60 + 30, 1000.0)
    assert det.baseline is None and det.state == 0  # no baseline, so no slug: the reading is normal operation
    det.feed(T0 + 1440 * 60, 10.0)  # minute 1440: the window 0..1439 is complete
    assert det.baseline == (1440 * 10.0 + 1000.0) / 1441


def test_exactly_five_times_baseline_is_not_a_slug_and_just_above_is_a_candidate() -> None:
    det, _ = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1441)])
    det.feed(T0 + 1441 * 60, 50.0)
    assert det.state == 0  # "more than five times": 50.0 complies
    det.feed(T0 + 1441 * 60 + 30, 50.000001)  # same minute, same baseline
    assert det.state == 1 and det.frozen == 50.0


def test_exactly_fifteen_minutes_is_not_longer_than_fifteen() -> None:
    det, out = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1441)])
    start = T0 + 1441 * 60
    feed(det, [(start + 60 * i, 60.0) for i in range(16)])  # candidate from start to start + 15 min exactly
    assert out == []
    det.feed(start + 15 * 60 + 1, 60.0)
    assert [(e.event, e.time - start, e.limit) for e in out] == [("start", 901.0, 50.0)]
    det.feed(start + 20 * 60, 50.0)  # at or below the frozen threshold ends it
    assert [(e.event, e.value, e.peak) for e in out][1] == ("end", 50.0, 60.0)


def test_for_a_duration_of_fifteen_minutes_includes_exactly_fifteen() -> None:
    det, out = detector(duration_operator=">=", baseline=400.0)  # Vestal-Endicott: fixed normal sewage
    feed(det, [(T0 + 60 * i, 2001.0) for i in range(16)])
    assert [(e.event, e.time - T0, e.limit) for e in out] == [("start", 900.0, 2000.0)]


def test_a_slug_never_inflates_its_own_baseline() -> None:
    det, _ = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1441)])
    t = T0 + 1441 * 60
    feed(det, [(t + 30 * i, 500.0) for i in range(120)])  # an hour of slug
    assert det.frozen == 50.0 and det.state == 2
    det.feed(t + 3600, 10.0)  # ends; the hour of 500 never entered the baseline
    det.feed(t + 3660, 10.0)
    assert det.baseline == 10.0


def test_candidate_shorter_than_the_duration_leaves_no_episode_and_no_baseline_trace() -> None:
    det, out = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1441)])
    t = T0 + 1441 * 60
    feed(det, [(t, 80.0), (t + 30, 80.0), (t + 60, 9.0), (t + 120, 10.0)])
    assert out == [] and det.state == 0
    assert det.baseline is not None and det.baseline < 10.0  # 9.0 counted as normal; the 80s did not


def test_state_is_bounded_whatever_the_sample_rate() -> None:
    det, _ = detector()
    assert det.memory_bytes() == 3 * 8 * 1440 <= 64 * 1024
    feed(det, [(T0 + 0.1 * i, 10.0) for i in range(20000)])  # 10 Hz
    assert det.memory_bytes() == 3 * 8 * 1440


def test_gap_longer_than_the_window_empties_the_baseline() -> None:
    det, _ = detector()
    feed(det, [(T0 + 60 * i, 10.0) for i in range(1500)])
    assert det.baseline == 10.0
    det.feed(T0 + 3 * DAY, 10.0)  # two days of silence: nothing in the trailing window
    assert det.baseline is None


def reference(rows: list[tuple[float, float]], *, width: int, duration: float) -> list[tuple[float, str]]:
    """The rule as the issue words it, by brute force over all earlier normal readings."""
    normal: list[tuple[int, float]] = []  # (minute, value) of readings taken in normal operation
    first_min = math.floor(rows[0][0] / 60) if rows else 0
    state, cand, frozen, out = 0, 0.0, 0.0, []
    for t, v in rows:
        m = math.floor(t / 60)
        window = [x for mm, x in normal if m - width <= mm <= m - 1]
        base = sum(window) / len(window) if window and first_min <= m - width else None
        if state == 0:
            if base is not None and v > 5 * base:
                state, cand, frozen = 1, t, 5 * base
            else:
                normal.append((m, v))
        elif v > frozen:
            pass
        else:
            if state == 2:
                out.append((t, "end"))
            state = 0
            normal.append((m, v))
            continue
        if state == 1 and t - cand > duration:
            state = 2
            out.append((t, "start"))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, 1, 20, 30, 60, 61, 300, 900]),
            st.sampled_from([1.0, 2.0, 4.0, 10.0, 20.0, 50.0]),
        ),
        max_size=200,
    )
)
def test_ring_baseline_matches_brute_force(steps: list[tuple[int, float]]) -> None:
    """A 10-minute window and a 3-minute duration: the ring, its eviction and rollovers against the
    definition."""
    t, rows = T0, []
    for dt, v in steps:
        t += dt
        rows.append((t, v))
    det, out = detector(window=600.0, duration=180.0)
    feed(det, rows)
    want = reference(rows, width=10, duration=180.0)
    got = [(e.time, e.event) for e in out]
    if got != want:  # sums in a different order can differ in the last bit; only then allow a tolerance
        assert all(abs(a[0] - b[0]) < 1e-6 for a, b in zip(got, want, strict=True))
    assert len(got) == len(want)


def test_sub_minute_candidate_is_seen_by_the_fast_path(tmp_path: Path) -> None:
    """A slug that starts mid-minute (the fast path accumulates in-minute readings) still opens a
    candidate."""
    site = site_toml(
        channel("flow"),
        extra=(
            '[site.permit]\nid = "P"\n[site.permit.limits.slug]\nmultiplier = 5.0\n'
            "minutes = 3.0\nbaseline_hours = 0.1\n"
        ),
    )
    config = load(tmp_path, site)
    rows = [(T0 + 30 * i, "flow", 10.0, "good") for i in range(21)]
    rows += [(T0 + 30 * (21 + i), "flow", 50.5, "good") for i in range(10)]
    assert brief(live(config, rows)) == [(30 * 28.0, "flow", "slug", "start", 50.5)]


def test_mass_loading_is_flow_times_concentration_and_never_uses_a_stale_partner(tmp_path: Path) -> None:
    site = site_toml(
        channel("flow"),
        channel("cod"),
        extra=(
            '[site.permit]\nid = "P"\n[site.permit.limits.slug]\nmultiplier = 5.0\nminutes = 2.0\n'
            "baseline_hours = 0.1\n"
        ),
    )
    config = load(tmp_path, site)
    rows = []
    for i in range(
        10
    ):  # loading 10 × 2 = 20 for 10 minutes, then cod is lost for 5 (inside the 6-minute window)
        rows += [(T0 + 60 * i, "flow", 10.0, "good"), (T0 + 60 * i + 1, "cod", 2.0, "good")]
    t = T0 + 600
    rows += [(t, "cod", None, "comm_failure")]  # concentration lost: no product from flow alone
    rows += [(t + 60 * i, "flow", 100.0, "good") for i in range(1, 5)]
    rows += [(t + 270, "cod", 2.0, "good")]  # back: 100 × 2 = 200 > 5 × 20, but a candidate only now
    rows += [(t + 270 + 60 * i, "flow", 100.0, "good") for i in range(1, 4)]
    events = [(e.time - t, e.event, e.value, e.limit) for e in live(config, rows) if e.channel == "flow*cod"]
    assert events == [(450.0, "start", 200.0, 100.0)]  # candidate at +270, longer than 2 minutes at +450
