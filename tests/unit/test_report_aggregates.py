"""The pre-aggregates' own structures (the figures themselves are tested in test_report_daily.py)."""

from __future__ import annotations

from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from monitor.reports.peak_window import PeakWindow


@given(st.lists(st.one_of(st.just("pop"), st.just("clear"), st.floats(-1e6, 1e6)), max_size=3000))
def test_peak_window_keeps_what_a_deque_of_triples_keeps(ops: list[str | float]) -> None:
    """The compact array window (compacted as its dead front grows) against the obvious model."""
    w, model = PeakWindow(), deque[tuple[float, float, float]]()
    for i, op in enumerate(ops):
        if op == "pop":
            if model:
                model.popleft()
                w.popleft()
        elif op == "clear":
            model.clear()
            w.clear()
        else:
            assert isinstance(op, float)
            model.append((float(i), op, -op))
            w.append(float(i), op, -op)
        assert w.size == len(model)
        if model:
            assert (w.first(), w.last()) == (model[0], model[-1])
        if len(model) > 1:
            assert w.second_time() == model[1][0]
