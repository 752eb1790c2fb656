"""What a number written as text may look like, wherever readings or results arrive as text.

Python's `float` accepts far more than a number as an instrument, a lab or a spreadsheet writes one:
``1_000`` (a thousands separator in a Python literal), ``4_0``, ``infinity``, ``nan``, `` 5 `` (surrounding
white space) and digits of other scripts (``٣``). Taken as readings, each is a guess at what was meant. So a
MQTT payload, a replayed CSV and a lab import accept only a **plain decimal number**: an optional sign, ASCII
digits with at most one decimal point, and an optional exponent (``7``, ``-0.5``, ``.25``, ``6.``,
``1e-05``, ``2.5E+3`` — what `repr` of a float writes, so an export reads back as itself).

`PLAIN_NUMBER` is the rule; `plain_float` applies it. Hot loops that convert millions of values use
`float` first and then `is_plain`: for text `float` has accepted, consisting only of `PLAIN_CHARS` is the
same test as `PLAIN_NUMBER` (float's grammar restricted to those characters is exactly the pattern), and a
`str.strip` of those characters costs a fraction of a regular expression match.
"""

from __future__ import annotations

import re

PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""The whole text must match (``fullmatch``). ASCII digits only (``\\d`` would admit other scripts)."""

PLAIN_CHARS = "0123456789.+-eE"
"""The characters of a plain number: text `float` accepts and that holds no other character is plain."""

EXCERPT = 200
"""Characters of an offending text quoted in an error message: enough to recognise it, never a flood."""


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``repr`` of ``text``, cut to ``limit`` characters with the full length said when longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


def is_plain(text: str) -> bool:
    """True when ``text``, already accepted by `float`, is a plain decimal number (see the module doc)."""
    return not text.strip(PLAIN_CHARS)


def plain_float(text: str, what: str = "value") -> float:
    """``text`` as a float if it is a plain decimal number; `ValueError` naming ``what`` otherwise."""
    if PLAIN_NUMBER.fullmatch(text):
        return float(text)
    if not text:
        raise ValueError(f"{what} is empty, expected a number")
    raise ValueError(f"{what} {excerpt(text)} is not a plain decimal number")
