"""`judge_value`: the one place a decoded number becomes a good reading or a bad one with its reason."""

from __future__ import annotations

import math

import pytest

from monitor.sample import Quality, judge_value

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
