"""Types of the C extension built from _rowflat.c (see that file and monitor/stores/historian_rows.py)."""

from collections.abc import Sequence
from typing import Any

def bind(sample: type, /) -> None: ...
def flatten(ids: dict[tuple[str, str, str], int], batch: Sequence[Any], seq: int, good: object,
            codes: dict[Any, int], /) -> tuple[list[Any], list[Any]] | None: ...
