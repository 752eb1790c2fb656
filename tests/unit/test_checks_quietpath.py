"""The daemon's engine with and without its C path (`monitor.checks._quietpath`): the same verdicts, revisions,
counters, rule and processor states and reading windows, whatever the arrival order and whatever odd sample it
is given (an integer value or time, a channel not configured, a good sample without a value, NaN, over range).
Where the extension was not built (no C compiler at install) there is nothing to compare; in CI it must be."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from monitor.checks import engine as engine_mod
from monitor.checks.engine import CheckEngine
from monitor.sample import Quality, Sample
from tests.support import IN_CI
from tests.unit.checks_helpers import NAMES, flow_and_count_trace, golden_case, live_arrivals


@pytest.fixture
def native() -> Any:
    if engine_mod._native is None:
        assert not IN_CI, "monitor/checks/_quietpath.c was not built: see setup.py"
        pytest.skip("monitor.checks._quietpath not built")
    return engine_mod._native


def _state(engine: CheckEngine) -> list[object]:
    """Everything a later reading's verdict can depend on."""
    out: list[object] = [engine.counters(), [r.snapshot() for _b, r in engine.rules]]
    for key, p in sorted(engine._live.items()):
        p.sync()
        out.append((key, p.state(), p.glast, p.lo, p.hi, p.until, list(p.wt), [repr(v) for v in p.wv],
                    sorted(p.wq.items()), p.base))
    for g in engine.groups:
        out.append((g.due, g.rank, g.dirty, g.too_old, [c.key for c in g.cks], [c.pos for c in g.cks], g.log))
    return out


def _both(monkeypatch: pytest.MonkeyPatch, run: Any) -> None:
    got = run()
    with monkeypatch.context() as m:
        m.setattr(engine_mod, "_native", None)
        want = run()
    assert got == want


@pytest.mark.parametrize("name", NAMES)
def test_the_c_path_judges_as_the_python_loop_every_golden_case(native: Any, monkeypatch: pytest.MonkeyPatch,
                                                               name: str) -> None:
    """Each golden case (every rule kind) delivered in order, then shuffled within a skew of 5 readings, in
    batches of 1 to 40: events, revisions applied, and the engine's whole state after."""
    config, rows = golden_case(name)
    rnd = random.Random(name)
    shuffled = [r for _, r in sorted(((k + rnd.randint(0, 5), k), r) for k, r in enumerate(rows))]
    for arrivals in (rows, shuffled):
        batches = [rnd.randint(1, 40) for _ in range(5)]

        def run(arrivals: Sequence[Any] = arrivals, batches: list[int] = batches) -> list[object]:
            events, engine = live_arrivals(config, arrivals, batches)
            return [events, _state(engine)]
        _both(monkeypatch, run)


def test_the_c_path_takes_the_quiet_readings_of_a_group_of_several_channels(native: Any,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow meter and the sampler count it paces are one group (the sampling-interval rule reads both): their
    quiet readings move every member's time and the group's rank. The C path takes them as Python's
    `LiveProcessor.good` does (same verdicts and state, in order, at equal times and shuffled), and Python sees
    only the few it must judge (a count that rose, a slug minute's end, a checkpoint, a full ``pend``)."""
    from monitor.checks.engine import LiveProcessor

    config, _rows = golden_case("sampler_pawling_fridge_and_interval")
    rows = flow_and_count_trace()
    rnd = random.Random(11)
    shuffled = [r for _, r in sorted(((k + rnd.randint(0, 4), k), r) for k, r in enumerate(rows))]
    for arrivals in (rows, shuffled):
        def run(arrivals: Sequence[Any] = arrivals) -> list[object]:
            events, engine = live_arrivals(config, arrivals, [1, 25, 250])
            return [events, _state(engine)]
        _both(monkeypatch, run)
    seen: list[str] = []
    good = LiveProcessor.good
    monkeypatch.setattr(LiveProcessor, "good", lambda self, t, v: seen.append(self.channel) or good(self, t, v))
    live_arrivals(config, rows, [250])
    grouped = sum(1 for r in rows if r[1] in ("flow", "sampler_count"))
    assert 0 < seen.count("flow") + seen.count("sampler_count") < grouped / 5


def test_the_c_path_leaves_odd_samples_to_python(native: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples the C path does not take (the Python loop judges them, then the C path goes on): integer values
    and times, an unknown channel, a good sample without a value, NaN and infinite values, over-range and bad
    qualities, a subclass of `Sample`, a channel name that is a str subclass; mixed with quiet readings in one
    batch, in lists, tuples and generators."""
    config, rows = golden_case("ph_bad_samples_inside_excursion")
    site = config.sites[0].id
    ch = rows[0][1]
    t0 = rows[0][0]

    class Tagged(Sample):
        __slots__ = ()

    class Name(str):  # a channel name whose hash and equality would be Python code in the C look-up
        pass

    def odd(i: int, t: float) -> Sample:
        k = i % 12
        if k == 1:
            return Sample(time=t, site=site, channel=ch, value=7, unit="")  # an int value
        if k == 2:
            return Sample(time=int(t) + 1, site=site, channel=ch, value=7.0, unit="")  # an int time
        if k == 3:
            return Sample(time=t, site=site, channel="nowhere", value=7.0, unit="")
        if k == 4:
            return Sample(time=t, site=site, channel=ch, value=None, unit="")
        if k == 5:
            return Sample(time=t, site=site, channel=ch, value=math.nan if i % 24 < 12 else math.inf, unit="")
        if k == 6:
            return Sample(time=t, site=site, channel=ch, value=7.1, unit="", quality=Quality.OVER_RANGE)
        if k == 7:
            return Sample.bad(time=t, site=site, channel=ch, unit="", quality=Quality.COMM_FAILURE, reason="x")
        if k == 8:
            return Tagged(time=t, site=site, channel=ch, value=7.0, unit="")
        if k == 9:
            return Sample(time=t, site=site, channel=ch, value=3.0, unit="")  # off the band
        if k == 10:
            return Sample(time=t, site=site, channel=Name(ch), value=7.0, unit="")
        return Sample(time=t, site=site, channel=ch, value=7.0 + (i % 5) / 10, unit="")

    samples = [odd(i, t0 + 2.0 * i) for i in range(3000)]
    samples[1500:1500] = [odd(0, t0 + 1000.5), odd(1, t0 + 1000.5)]  # late ones

    def run() -> list[object]:
        engine = CheckEngine.for_config(config, live=True)
        events: list[object] = []
        for j, k in enumerate(range(0, len(samples), 37)):
            b = samples[k:k + 37]
            batch: Any = b if j % 3 == 0 else tuple(b) if j % 3 == 1 else iter(b)
            events.append(engine.process_many(batch))
            events.append(engine.drain_revisions())
        return [events, _state(engine)]
    _both(monkeypatch, run)


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_steady_quiet_channel_holds_at_most_pend_max_samples_pending(native: Any, monkeypatch: pytest.MonkeyPatch,
                                                                        path: str) -> None:
    """Quiet in-order readings wait in ``pend`` as `Sample`s (~200 bytes each) until the window needs them; a quiet
    channel would otherwise keep every reading until its next checkpoint (5 minutes of them). Bounded at
    `PEND_MAX`, with every reading still in the window once synced."""
    if path == "python":
        monkeypatch.setattr(engine_mod, "_native", None)
    config, _rows = golden_case(NAMES[0])
    ch = config.channels[0]
    engine = CheckEngine.for_config(config, live=True)
    proc = engine._live[(ch.site, ch.id)]
    value = (max(proc.vmin, 0.0) + min(proc.vmax, 14.0)) / 2  # inside the channel's range; quiet or not, judged
    t0, most = 1_796_000_000.0, 0
    for k in range(0, 1000, 50):  # 1 s apart, batches of 50: 1,000 readings in under 5 minutes of sample time
        engine.process_many([Sample(t0 + k + i, ch.site, ch.id, value, ch.unit) for i in range(50)])
        most = max(most, len(proc.pend))
    assert 0 < most <= engine_mod.PEND_MAX
    proc.sync()
    assert list(proc.wt)[-1000:] == [t0 + k for k in range(1000)]
