"""The day aggregates with and without their C path (`monitor.reports._dayaccrue`): the same days, excursions and
channel states, bit for bit, whatever the stream holds (bad and maintenance readings, gaps, late readings, day
boundaries and the DST change, integer values and times, channels not configured, batches of any size). Where the
extension was not built (no C compiler at install) there is nothing to compare; in CI it must be."""

from __future__ import annotations

import random
from dataclasses import astuple
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from monitor.reports import aggregates as agg_mod
from monitor.reports.aggregates import DailyAggregator
from monitor.reports.aggregates_db import connect, read_days
from monitor.reports.days import day_bounds
from monitor.sample import Quality, Sample
from tests.support import IN_CI
from tests.unit.report_scenarios import SITE, TZ, scenario, site_config

UNITS = {"flow": "gpm", "flow_total": "gal", "ph": "pH", "temperature": "degC", "lel": "%LEL", "fridge": "degC",
         "samples": "count"}


@pytest.fixture
def native() -> Any:
    if agg_mod._native is None:
        assert not IN_CI, "monitor/reports/_dayaccrue.c was not built: see setup.py"
        pytest.skip("monitor.reports._dayaccrue not built")
    return agg_mod._native


def _exact(x: object) -> object:
    return repr(x) if isinstance(x, float) else x  # -0.0 against 0.0, and NaN, told apart


def _state(agg: DailyAggregator) -> list[object]:
    """Every field of every channel's state and of every day not flushed yet."""
    out: list[object] = [agg.unknown]
    for key, c in sorted(agg._chans.items()):
        out.append((key, [_exact(x) for x in c.state_row()], _exact(c.run_integral), c.excursions,
                    c.cursor.day, _exact(c.cursor.start), list(c.window.first()) if c.window.size else None))
        out.extend((key, d, [_exact(x) for x in acc.row(*key, d)]) for d, acc in sorted(c.days.items()))
    return out


def _noisy(rnd: random.Random, samples: list[Sample]) -> list[Sample]:
    """The golden days with what real instruments add: bad and maintenance readings, late ones, gaps, integer
    values and times, readings of a channel not in the site file."""
    out: list[Sample] = []
    for s in samples:
        r = rnd.random()
        if r < 0.02:
            continue  # a gap: the next reading comes two minutes on
        if r < 0.04:
            out.append(Sample.bad(time=s.time, site=s.site, channel=s.channel, unit=s.unit,
                                  quality=Quality.COMM_FAILURE, reason="no reply"))
            continue
        if r < 0.05:
            out.append(Sample.bad(time=s.time, site=s.site, channel=s.channel, unit=s.unit,
                                  quality=Quality.MAINTENANCE, reason="calibrating"))
            continue
        if r < 0.06 and out:
            late = out[rnd.randrange(max(0, len(out) - 40), len(out))]
            out.append(Sample(late.time - 1.5, late.site, late.channel, late.value, late.unit, late.quality))
        if r < 0.065:
            out.append(Sample(s.time, s.site, "not-configured", 1.0, "m"))
        if r < 0.07 and s.value is not None:
            out.append(Sample(int(s.time), s.site, s.channel, int(s.value), s.unit))  # type: ignore[arg-type]
            continue
        if r < 0.08 and s.value is not None:
            out.append(Sample(s.time + 0.25, s.site, s.channel, s.value + rnd.uniform(-3, 3), s.unit))
            continue
        out.append(s)
    return out


def _rows(path: Path, first: date, last: date) -> list[object]:
    conn = connect(path)
    try:
        return [tuple(_exact(x) for x in astuple(row)) for row in read_days(conn, site=SITE, first=first.isoformat(),
                                                                   last=last.isoformat())]
    finally:
        conn.close()


def _feed(path: Path, config: Any, samples: list[Sample], batches: list[int], flush_every: int) -> list[object]:
    agg = DailyAggregator(path=path, config=config)
    states: list[object] = []
    i = k = 0
    while i < len(samples):
        n = batches[k % len(batches)]
        chunk = samples[i:i + n]
        agg.observe(chunk if k % 3 else tuple(chunk))
        i, k = i + n, k + 1
        if k % 50 == 0:
            states.append(_state(agg))
        if k % flush_every == 0:
            agg.flush()
    states.append(_state(agg))
    agg.close()
    return states


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_c_path_accrues_as_the_python_loop(native: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               seed: int) -> None:
    """Three days over the autumn DST change, with noise, in batches of 1 to 300, flushed now and then: the
    states along the way and the rows written are identical with and without the C path."""
    rnd = random.Random(seed)
    samples = _noisy(rnd, scenario(date(2026, 10, 31), 3))
    batches = [rnd.randint(1, 300) for _ in range(40)]
    first, last = date(2026, 10, 31), date(2026, 11, 2)

    config = site_config(tmp_path / "c")
    got = _feed(config.daemon.historian, config, samples, batches, flush_every=7)
    got_rows = _rows(config.daemon.historian, first, last)
    with monkeypatch.context() as m:
        m.setattr(agg_mod, "_native", None)
        config_py = site_config(tmp_path / "py")
        want = _feed(config_py.daemon.historian, config_py, samples, batches, flush_every=7)
        want_rows = _rows(config_py.daemon.historian, first, last)
    assert len(got) == len(want)
    for n, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"state {n} differs"
    assert got_rows == want_rows
    assert got_rows, "nothing was written: the comparison proved nothing"


def test_the_c_path_takes_the_ordinary_readings_and_leaves_the_rest(native: Any, tmp_path: Path) -> None:
    """What `run` accrues itself and where it stops: so the comparison above exercises both sides."""
    config = site_config(tmp_path)
    agg = DailyAggregator(path=config.daemon.historian, config=config)
    lo, _hi = day_bounds(date(2026, 11, 3), TZ)
    chans = agg._chans
    good, maint = Quality.GOOD, Quality.MAINTENANCE

    def s(t: float, ch: str = "temperature", v: float | None = 20.0, q: Quality = good) -> Sample:
        return Sample(lo + t, SITE, ch, v, UNITS.get(ch, "m"), q, "" if q is good else "x")

    first = [s(60, ch, 7.0 if ch == "ph" else 4.0) for ch in UNITS]  # pH and the fridge inside their ranges
    assert native.run(first, 0, chans, good, maint) == 0  # a channel's first reading: Python
    agg.observe(first)
    # then the day's next readings, good and bad, are the C path's own; the day's count moves
    run = [s(120), s(180, v=21.5), s(240, v=None, q=Quality.COMM_FAILURE), s(300)]
    assert native.run(run, 0, chans, good, maint) == len(run)
    day = chans[(SITE, "temperature")].days[date(2026, 11, 3)]
    assert (day.count, day.good, day.vmax, day.covered) == (5, 4, 21.5, 240.0)
    # a pH reading and the fridge's inside their ranges with no excursion open: nothing for `_Chan.excursion`,
    # whose call is skipped; one outside: called. A flow rate's rolling peak is the C path's own.
    called: list[str] = []
    excursion = agg_mod._Chan.excursion
    with pytest.MonkeyPatch.context() as m:
        m.setattr(agg_mod._Chan, "excursion", lambda c, t, v: called.append(c.plan.channel) or excursion(c, t, v))
        m.setattr(agg_mod._Chan, "rolling", lambda *a: called.append("rolling"))
        assert native.run([s(90, "ph", 7.2), s(90, "fridge", 5.9)], 0, chans, good, maint) == 2
        assert called == []
        # a flow rate (its rolling peak) and a pH reading outside the range (an excursion starts) too
        assert native.run([s(120, "flow", 150.0), s(120, "ph", 9.6)], 0, chans, good, maint) == 2
        assert called == ["ph"]
    assert chans[(SITE, "ph")].exc_start == lo + 120 and chans[(SITE, "ph")].outside
    assert chans[(SITE, "flow")].window.size == 2
    # a counter (a flow total; a sampler's count alike): its increase is the day's volume, a decrease a reset
    assert native.run([s(120, "flow_total", 6.5), s(180, "flow_total", 6.0)], 0, chans, good, maint) == 2
    total = chans[(SITE, "flow_total")].days[date(2026, 11, 3)]
    assert (total.volume, total.resets, total.count, total.covered) == (2.5, 1, 3, 120.0)
    for odd in (s(3600 * 5), s(360, q=maint), s(360, ch="ph"),
                s(360, ch="nowhere"), s(200), Sample(int(lo) + 400, SITE, "temperature", 20.0, "degC")):
        before = _state(agg)
        assert native.run([odd], 0, chans, good, maint) == 0, odd  # left to Python (pH: an excursion in progress)
        assert _state(agg) == before


def test_python_run_from_the_c_path_may_change_the_batch(native: Any, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """`_Chan.excursion` (Python, called from C for a pH reading outside its range) empties the batch being
    accrued: the C path stops where the Python loop stops, with the same state, and reads nothing freed (a crash,
    before, when the flow rate's `_Chan.rolling` was called from C and did this)."""
    lo, _hi = day_bounds(date(2026, 11, 3), TZ)

    def batch() -> list[Sample]:
        return [Sample(lo + 60 * k, SITE, ch, (7.0 if k == 1 else 9.6) if ch == "ph" else 4.0, unit)
                for k in range(1, 4) for ch, unit in UNITS.items()]

    def run(sub: str) -> list[object]:
        config = site_config(tmp_path / sub)
        agg = DailyAggregator(path=config.daemon.historian, config=config)
        agg.observe(batch()[:len(UNITS)])
        samples = batch()[len(UNITS):]
        excursion = agg_mod._Chan.excursion

        def clearing(self: Any, t: float, v: float) -> None:
            excursion(self, t, v)
            samples.clear()  # the batch's list, emptied while the C path walks it

        with monkeypatch.context() as m:
            m.setattr(agg_mod._Chan, "excursion", clearing)
            agg.observe(samples)
        return _state(agg)

    got = run("c")
    with monkeypatch.context() as m:
        m.setattr(agg_mod, "_native", None)
        want = run("py")
    assert got == want
