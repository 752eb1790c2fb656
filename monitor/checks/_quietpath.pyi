"""Types of the C extension built from _quietpath.c (see that file and monitor/checks/engine.py)."""

from collections.abc import Sequence
from typing import Any

def bind(sample: type, processor: type, group: type, pend_max: int, /) -> None: ...
def run(samples: Sequence[Any], start: int, procs: dict[tuple[str, str], Any], good: object, over_range: object,
        /) -> int: ...
