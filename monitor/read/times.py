"""The one parser of the times a user types (command options, console query strings and forms).

Absolute times are ISO 8601 with ``Z`` or an offset, or a date alone (midnight UTC); a time without an offset
is refused rather than guessed, because a site's record spans time zones and daylight-saving changes. An
expiry may also be a duration from now (``30m``, ``2h``, ``1h30m``). Results are epoch seconds UTC.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, date, datetime, tzinfo

TIME_HELP = "ISO 8601 with Z or an offset, e.g. 2026-01-31T05:00:00Z; a date alone is midnight UTC"

_DURATION = re.compile(r"^\+?((?:\d+(?:\.\d+)?[smhd])+)$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class UsageError(Exception):
    """A mistake in the request (a command exits 2, the console answers 400); the message says what was
    expected."""


def parse_time(text: str, zone: tzinfo | None = None) -> float:
    """Epoch seconds of an ISO 8601 time with offset or ``Z``, or of a date's midnight in ``zone`` (UTC unless
    the caller knows the site's zone: a technician's "2026-03-02" is that day at the site)."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        d = date.fromisoformat(text)
        return datetime(d.year, d.month, d.day, tzinfo=zone or UTC).timestamp()
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        expected = TIME_HELP if zone is None else TIME_HELP.replace("midnight UTC", f"midnight at the site ({zone})")
        raise UsageError(f"{text!r} is not a time: expected {expected}") from None
    if dt.tzinfo is None:
        raise UsageError(f"{text!r} has no UTC offset: add Z (UTC) or the offset, e.g. {text}-05:00")
    return dt.timestamp()


def parse_until(text: str, now: float) -> float:
    """An ISO 8601 time with offset (or a date, midnight UTC), or a duration from ``now``: 30m, 2h, 1h30m."""
    m = _DURATION.match(text.strip())
    if m:
        return now + sum(float(n) * _UNIT[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smhd])", m.group(1)))
    return parse_time(text)


def time_range(start: str | None, end: str | None, *, names: tuple[str, str] = ("--from", "--to")
               ) -> tuple[float | None, float | None]:
    """[start, end) of a query from the texts given (either may be absent); refuses an empty range, naming
    the two options as the caller calls them."""
    t0 = parse_time(start) if start else None
    t1 = parse_time(end) if end else None
    if t0 is not None and t1 is not None and t0 >= t1:
        raise UsageError(f"{names[0]} must be before {names[1]}")
    return t0, t1
