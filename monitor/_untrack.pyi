"""Types of the C extension built from _untrack.c (see that file and `monitor.sample.release_from_gc`)."""

from collections.abc import Sequence
from typing import Any

def untrack(samples: Sequence[Any], type: type, /) -> int: ...
