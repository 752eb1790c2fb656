"""The historian's row parameters with and without their C path (`monitor.stores._rowflat`): the same two lists,
element for element, for any batch (good and bad samples, reasons, channels interleaved, seq numbers of any size),
the same KeyError for a channel not registered yet, and Python's own result for what the C path leaves to it.
Where the extension was not built (no C compiler at install) there is nothing to compare; in CI it must be."""

from __future__ import annotations

import random
from typing import Any

import pytest

from monitor.sample import GOOD, QUALITY_CODES, Quality, Sample
from monitor.stores import historian_rows
from monitor.stores.historian_rows import flatten, flatten_py
from tests.support import IN_CI

KEYS = [("s", f"c{n}", "u") for n in range(12)]


@pytest.fixture
def native() -> Any:
    if historian_rows._native is None:
        assert not IN_CI, "monitor/stores/_rowflat.c was not built: see setup.py"
        pytest.skip("monitor.stores._rowflat not built")
    return historian_rows._native


def _batch(rnd: random.Random, n: int) -> list[Sample]:
    out = []
    for i in range(n):
        site, channel, unit = rnd.choice(KEYS)
        r = rnd.random()
        if r < 0.7:
            out.append(Sample(1e9 + i * 0.5, site, channel, rnd.uniform(-5, 5), unit))
        elif r < 0.8:
            out.append(Sample(1e9 + i, site, channel, rnd.randint(0, 9), unit, GOOD, "estimated"))
        else:
            q = rnd.choice([q for q in Quality if q is not GOOD])
            out.append(Sample(1e9 + i, site, channel, None, unit, q, f"why {i}"))
    return out


def _same(a: tuple[list[Any], list[Any]], b: tuple[list[Any], list[Any]]) -> None:
    assert [type(x) for x in a[0]] == [type(x) for x in b[0]] and [type(x) for x in a[1]] == [type(x) for x in b[1]]
    assert a == b


@pytest.mark.parametrize("seed", range(6))
def test_the_c_path_builds_the_rows_python_builds(native: Any, seed: int) -> None:
    rnd = random.Random(seed)
    ids = {k: rnd.randint(1, 40) for k in KEYS}  # ids out of the keys' order: the sort is on the id
    for n in (0, 1, 2, 7, 100, 1000):
        batch = _batch(rnd, n)
        for seq in (1, 12_345, 2**62):
            for form in (batch, tuple(batch)):
                got = native.flatten(ids, form, seq, GOOD, QUALITY_CODES)
                assert got is not None
                _same(got, flatten_py(ids, batch, seq))
                _same(flatten(ids, form, seq), flatten_py(ids, batch, seq))


def test_an_unregistered_channel_is_a_key_error_as_in_python(native: Any) -> None:
    ids = {KEYS[0]: 1}
    batch = [Sample(1.0, *KEYS[0][:2], 1.0, "u"), Sample(2.0, "s", "new", 1.0, "u")]
    with pytest.raises(KeyError) as c_err:
        native.flatten(ids, batch, 1, GOOD, QUALITY_CODES)
    with pytest.raises(KeyError) as py_err:
        flatten_py(ids, batch, 1)
    assert c_err.value.args == py_err.value.args == (("s", "new", "u"),)


def test_what_the_c_path_leaves_to_python(native: Any) -> None:
    """Not a `Sample`, a reason that is not a str, seq numbers past 2**63: None, and `flatten` gives Python's."""
    ids = {k: n for n, k in enumerate(KEYS)}
    good = Sample(1.0, "s", "c1", 2.0, "u")

    class Odd:  # something a plugin might submit: has the fields, is not a Sample
        time, site, channel, value, unit, quality, reason = 1.0, "s", "c2", 3.0, "u", GOOD, ""

    odd_reason = Sample(1.0, "s", "c3", 2.0, "u", GOOD, "")
    object.__setattr__(odd_reason, "reason", 0)  # falsy, not a str: Python's `not s.reason` decides

    class Site(str):  # its hash and equality would be Python code, run in the middle of the C walk
        pass

    odd_site = Sample(1.0, Site("s"), "c4", 2.0, "u")
    for batch, seq in (([good, Odd()], 1), ([good, odd_reason], 1), ([good], 2**63 - 1), ([good, odd_site], 1)):
        assert native.flatten(ids, batch, seq, GOOD, QUALITY_CODES) is None
        _same(flatten(ids, batch, seq), flatten_py(ids, batch, seq))  # type: ignore[arg-type]


def test_a_quality_whose_hash_runs_python_is_looked_up_once(native: Any) -> None:
    """A quality given as a str subclass (its ``__hash__`` is Python, and here fails when asked twice): the C path
    looks its code up once, as Python does, and builds the same rows (it crashed on a second look-up, before)."""

    class Once(str):
        asked = 0

        def __hash__(self) -> int:
            Once.asked += 1
            if Once.asked > 1:
                raise RuntimeError("hashed twice")
            return str.__hash__(self)

    ids = {k: n for n, k in enumerate(KEYS)}
    stale = Sample(1.0, "s", "c1", None, "u", Quality.STALE, "silent")
    object.__setattr__(stale, "quality", Once(Quality.STALE.value))
    got = native.flatten(ids, [stale], 1, GOOD, QUALITY_CODES)
    Once.asked = 0
    assert got == flatten_py(ids, [stale], 1) == ([], [1, 1.0, 1, None, QUALITY_CODES[Quality.STALE], "silent"])
