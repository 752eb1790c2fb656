"""Types of the C extension built from _blockdecode.c (see that file and drivers/modbus/driver.py)."""

from collections.abc import Sequence
from typing import Any

def bind(target: type, sample: type, good: object, decoders: tuple[Any, ...], /) -> None: ...
def run(values: Sequence[Any], targets: tuple[Any, ...], start: int, out: list[Any], now: float, /) -> int: ...
