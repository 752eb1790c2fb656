"""Types of the C extension built from _dayaccrue.c (see that file and monitor/reports/aggregates.py)."""

from collections.abc import Sequence
from typing import Any

def bind(sample: type, chan: type, cursor: type, day: type, window: type, peak_window: float, /) -> None: ...
def run(samples: Sequence[Any], start: int, chans: dict[tuple[str, str], Any], good: object, maintenance: object,
        /) -> int: ...
