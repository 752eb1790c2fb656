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

The other way, `number` and `duration` write a number and a span of seconds as an operator reads them in a
log line (``4.82``, ``2 min 5 s``; `monitor.logtext` has the rest of a log line's vocabulary). They live
here, with no import of the project, because the drivers use them too.
"""

from __future__ import annotations

import math
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


NO_READING = "no reading"
_SIGNIFICANT = 4  # digits shown of a reading whose resolution is unknown (a float register, an MQTT value)
_MAX_DECIMALS = 6


def number(value: float | None, decimals: int | None = None) -> str:
    """``value`` with ``decimals`` places, or (None) to four significant digits without an exponent."""
    if value is None:
        return NO_READING
    if not math.isfinite(value):
        return "not a number" if math.isnan(value) else ("-" if value < 0 else "") + "infinity"
    if decimals is None:
        magnitude = math.floor(math.log10(abs(value))) if value else 0
        places = min(_MAX_DECIMALS, max(0, _SIGNIFICANT - 1 - magnitude))
        text = f"{value:.{places}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    text = f"{value:.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and not text.strip("-0.") else text  # no "-0.00"


def duration(seconds: float) -> str:
    """``0.4 s``, ``10 s``, ``2 min 5 s``, ``3 h 12 min``, ``2 d 4 h``: the two largest units, rounded."""
    if not math.isfinite(seconds):
        return "forever" if seconds > 0 else "-"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 1:
        return f"{sign}{number(round(s, 2))} s" if s >= 0.005 else f"{sign}0 s"
    whole = round(s)
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)):
        if whole >= size or (unit == "s" and not parts):
            parts.append(f"{whole // size} {unit}")
            whole %= size
        elif parts:
            parts.append("")  # a zero unit between two shown ones still counts as one of the two
        if len(parts) == 2:
            break
    return sign + " ".join(p for p in parts if p)
