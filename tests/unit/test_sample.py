"""`Sample`, and `judge_value`: the one place a decoded number becomes a good reading or a bad one with its
reason."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.sample import Quality, Sample, judge_value

ROOT = Path(__file__).resolve().parents[2]

KW = {"time": 1.0, "site": "acme", "channel": "ph", "unit": "pH"}


@pytest.mark.parametrize(("raw", "low", "high"), [(0.0, 0.0, 14.0), (14.0, 0.0, 14.0), (7.0, None, None)])
def test_the_valid_range_is_inclusive_at_both_ends(raw: float, low: float | None, high: float | None) -> None:
    s = judge_value(raw, **KW, valid_min=low, valid_max=high)  # type: ignore[arg-type]
    assert s.quality is Quality.GOOD and s.value == raw


@pytest.mark.parametrize(("raw", "scale", "quality", "words"), [
    (math.nan, 1.0, Quality.BAD_VALUE, "non-finite value nan"),
    (-math.inf, 1.0, Quality.BAD_VALUE, "non-finite value -inf"),
    (14.01, 1.0, Quality.OUT_OF_RANGE, "14.01 pH outside valid range [0.0, 14.0]"),
])
def test_a_number_that_is_no_reading_is_bad_with_its_reason(raw: float, scale: float, quality: Quality,
                                                               words: str) -> None:
    s = judge_value(raw, **KW, scale=scale, valid_min=0.0, valid_max=14.0)  # type: ignore[arg-type]
    assert (s.quality, s.value) == (quality, None) and words in s.reason


def test_a_finite_number_that_overflows_when_scaled_is_bad_even_without_a_valid_range() -> None:
    s = judge_value(1e308, **KW, scale=10.0)  # type: ignore[arg-type]
    assert (s.quality, s.value) == (Quality.BAD_VALUE, None) and "is not finite" in s.reason


def test_a_sample_is_a_value_and_the_type_checker_refuses_to_change_one(tmp_path: Path) -> None:
    """Samples are evidence: equal by value, hashable, changed only by copying. Assignment is refused by mypy
    (run by ``make test``), not at run time: see `monitor.sample.evidence` for why."""
    a = Sample(time=1.0, site="acme", channel="ph", value=7.0, unit="pH")
    b = Sample(time=1.0, site="acme", channel="ph", value=7.0, unit="pH")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert dataclasses.replace(a, value=8.0).value == 8.0 and a.value == 7.0
    assert not hasattr(a, "__dict__")  # slotted: no stray attributes either
    snippet = tmp_path / "mutate.py"
    snippet.write_text("from monitor.sample import Sample\n"
                       "s = Sample(time=1.0, site='a', channel='c', value=1.0, unit='u')\n"
                       "s.value = 2.0\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(snippet)], cwd=ROOT,
                         capture_output=True, text=True)
    refused = 'mutate.py:3: error: Property "value" defined in "Sample" is read-only'
    assert out.returncode == 1 and refused in out.stdout, out.stdout


def test_release_from_gc_untracks_samples_only_and_they_are_still_freed() -> None:
    """The daemon takes every sample it ingests out of the cyclic collector's sight (`release_from_gc`): only
    objects of exactly the `Sample` type, and reference counting still frees them."""
    import gc
    import sys

    from monitor import sample as sample_mod
    from tests.support import IN_CI

    if not sample_mod.NATIVE_UNTRACK:
        assert not IN_CI, "monitor/_untrack.c was not built: see setup.py"
        pytest.skip("monitor._untrack not built")

    @dataclasses.dataclass(slots=True)
    class Other:
        value: object

    batch: list[object] = [Sample(**KW, value=7.0), Sample.bad(**KW, quality=Quality.COMM_FAILURE, reason="x"),
                           Other([]), (1, [])]
    assert all(gc.is_tracked(o) for o in batch)
    assert sample_mod.release_from_gc(batch) == 2  # type: ignore[arg-type]
    assert [gc.is_tracked(o) for o in batch] == [False, False, True, True]
    assert sample_mod.release_from_gc(tuple(batch)) == 0  # type: ignore[arg-type]  # idempotent
    assert batch[0] == Sample(**KW, value=7.0) and hash(batch[0]) == hash(Sample(**KW, value=7.0))

    before = sys.getallocatedblocks()
    for _ in range(5):
        many = [Sample(**KW, value=float(i)) for i in range(20_000)]
        sample_mod.release_from_gc(many)
        del many
    assert sys.getallocatedblocks() - before < 5_000  # freed by reference counting, not left for a collector
    with pytest.raises(TypeError, match="list or a tuple"):
        sample_mod._untrack(iter([]), Sample)  # type: ignore[arg-type]
