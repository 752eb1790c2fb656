"""The seal's minute index is a stored format: seals written by earlier versions must still verify, so the bytes
`minute_index` produces for given readings may never change. These digests were computed by the first version
of the format (issue 15); a faster implementation has to reproduce them exactly."""

from __future__ import annotations

import hashlib

from monitor.stores.seals import MINUTE, digest_of, minute_index, parse_index
from tests.seal_support import DAY0, pinned_rows


def test_the_minute_index_of_known_readings_has_not_changed() -> None:
    index = minute_index(pinned_rows(), DAY0)
    assert [(m, c) for m, (c, _) in sorted(parse_index(index).items())] == [(0, 4), (1, 1), (3, 2)]
    assert hashlib.sha256(index).hexdigest() == digest_of(index)
    assert digest_of(index) == "4a2b443c3a7e106cad6985de2a8f5ae35375ab75b5ab47f79ce5fee99f6c51e8"


def test_a_day_without_null_values_takes_the_same_format() -> None:
    rows = [(DAY0 + i * MINUTE / 4, 100 + i, 7.0 + i / 100, 0, "") for i in range(10)]
    assert digest_of(minute_index(rows, DAY0)) == "61cb2d1a0dbf3d148a1d6f18bcd90787b1bed76594901766b5fa3f768508a016"


def test_no_readings_is_an_empty_index() -> None:
    assert minute_index([], DAY0) == b""
