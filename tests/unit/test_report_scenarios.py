"""The report tests' scenario (`tests.unit.report_scenarios`) is what its docstring promises."""

from __future__ import annotations

import itertools
from datetime import date

from tests.unit.report_scenarios import scenario


def test_scenario_is_deterministic_and_minute_spaced() -> None:
    a, b = scenario(date(2026, 3, 7), 2), scenario(date(2026, 3, 7), 2)
    assert a == b
    ph = [s.time for s in a if s.channel == "ph"]
    assert all(y - x == 60.0 for x, y in itertools.pairwise(ph))
    assert len(ph) == 24 * 60 + 23 * 60  # 8 March 2026 is 23 hours long in New York
