"""The readings whose seal digests tests/unit/test_seal_format.py pins, shared with the C scanner's tests
(tests/unit/test_seal_native.py): one set of rows, so both paths are held to the same pinned bytes."""

from __future__ import annotations

DAY0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z


def pinned_rows() -> list[tuple[float, int, float | None, int, str]]:
    """(time, seq, value, quality, reason) in (time, seq) order: three minutes with readings (one empty minute
    between), a NULL value, a negative and a tiny value, two readings at the same time, a non-ASCII reason."""
    return [
        (DAY0 + 0.25, 10, 7.1, 0, ""),
        (DAY0 + 1.0, 11, None, 1, "COMM_FAILURE: no reply within 0.5 s"),
        (DAY0 + 1.0, 12, -0.000123, 0, ""),
        (DAY0 + 59.999, 13, 1e300, 8, "over range"),
        (DAY0 + 60.0, 14, 6.02e-23, 0, ""),
        (DAY0 + 180.5, 15, 14.0, 2, "Temperatur außerhalb ±5 °C"),
        (DAY0 + 180.5, 16, 0.0, 0, ""),
    ]
