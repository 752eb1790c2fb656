"""A small typed reader over parsed TOML that records every mistake instead of stopping at the first."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable
from datetime import date
from enum import Enum
from typing import Any, TypeVar

from config.errors import MISSING, ConfigError

E = TypeVar("E", bound=Enum)

ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""An id in a site file or register map (site, instrument, channel, point)."""
ID_EXPECTED = "an id of letters, digits, '_', '-' or '.' (at most 64 characters)"


class Reader:
    """Reads values out of TOML tables, collecting `ConfigError`s with their key paths.

    Each getter returns a usable placeholder after recording an error, so validation can continue and the
    user sees every mistake in one run.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[ConfigError] = []
        self._ids: dict[str, str] = {}  # "site[0].instrument[1]" -> "ph-meter"
        self._index: dict[tuple[str, str, str], int] = {}  # ("site[0]", "instrument", "ph-meter") -> 1

    def name(self, path: str, raw: dict[str, Any], *, key: str = "id") -> None:
        """Remember the id (or the ``key`` naming it, e.g. a route's ``name``) of the array item at ``path``
        (``site[0].instrument[1]``) so that errors inside it name it (`labelled`). Called before the item
        is validated: an id is worth showing even when something else in the item is wrong."""
        item = raw.get(key)
        m = _LAST_ITEM.fullmatch(path)
        if not isinstance(item, str) or not item or m is None:
            return
        self._ids[path] = item
        self._index.setdefault((m["parent"] or "", m["key"], item), int(m["index"]))

    def labelled(self) -> list[ConfigError]:
        """The errors, each with its key path told by the ids of the items on it."""
        return [e if e.file != self.file else _with_label(e, self._label(e.path)) for e in self.errors]

    def _label(self, path: str) -> str:
        """``site[0].instrument[1].qos`` → ``site 's1' instrument 'lel' qos (site[0].instrument[1].qos)``; an
        item given by id (``channel[id=lel]``) is shown with its index too. "" when no item has an id."""
        indexed, words, tail, named = "", [], [], False
        for key, sel in _TOKEN.findall(path):
            if sel is None or sel == "":
                tail.append(key)
                continue
            parent = ".".join(filter(None, [indexed, *tail]))
            if sel.startswith("id="):
                item = sel[3:]
                where = self._index.get((parent, key, item))
                indexed = f"{parent}.{key}[{where if where is not None else sel}]".lstrip(".")
            else:
                indexed = f"{parent}.{key}[{sel}]".lstrip(".")
                item = self._ids.get(indexed, "")
            kind = " ".join([*tail, key])
            words.append(f"{kind} {item!r}" if item else f"{kind}[{sel}]")
            named = named or bool(item)
            tail = []
        if not named:
            return ""
        return " ".join([*words, ".".join(tail)]).rstrip() + f" ({'.'.join([indexed, *tail])})"

    def error(self, path: str, found: Any, expected: str) -> None:
        e = ConfigError(self.file, path, found, expected)
        if e not in self.errors:  # one setting read for several rules or channels is named once
            self.errors.append(e)

    def table(self, parent: dict[str, Any], key: str, path: str, *, required: bool = False) -> dict[str, Any]:
        value = parent.get(key, MISSING)
        if value is MISSING:
            if required:
                self.error(_join(path, key), MISSING, "a table")
            return {}
        if not isinstance(value, dict):
            self.error(_join(path, key), value, "a table")
            return {}
        return value

    def tables(self, parent: dict[str, Any], key: str, path: str) -> list[dict[str, Any]]:
        value = parent.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.error(_join(path, key), value, f"an array of tables ([[{key}]])")
            return []
        return value

    def unknown_keys(self, table: dict[str, Any], path: str, allowed: set[str]) -> None:
        """A misspelt key is an error, not a silently ignored option."""
        for key in table:
            if key not in allowed:
                self.error(_join(path, key), table[key], f"one of the known keys {sorted(allowed)}"
                           + did_you_mean(key, allowed))

    def text(self, t: dict[str, Any], key: str, path: str, *, default: Any = MISSING,
            check: Callable[[str], bool] | None = None, expected: str = "a string") -> str:
        """A string (``check``: which strings are allowed); ``""`` after recording the mistake."""
        value = t.get(key, default)
        if value is MISSING:
            self.error(_join(path, key), MISSING, expected)
            return ""
        if not isinstance(value, str) or (check is not None and not check(value)):
            self.error(_join(path, key), value, expected)
            return ""
        return value

    def number(self, t: dict[str, Any], key: str, path: str, *, default: Any = MISSING,
               minimum: float | None = None, exclusive_min: bool = False,
               maximum: float | None = None) -> float:
        expected = "a number" + _bounds(minimum, exclusive_min, maximum)
        value = t.get(key, default)
        if value is None and default is None:
            return None  # type: ignore[return-value]  # optional numbers
        # An optional number that is wrong reads as absent (None), so that no check built on it reports a
        # second, bogus error (valid_max = nan is one mistake, not also "valid_max not above valid_min").
        if value is MISSING or isinstance(value, bool) or not isinstance(value, int | float):
            self.error(_join(path, key), value, expected)
            return None if default is None else 0.0  # type: ignore[return-value]
        if not math.isfinite(value) or (
            minimum is not None and (value <= minimum if exclusive_min else value < minimum)
        ) or (maximum is not None and value > maximum):
            self.error(_join(path, key), value, expected)
            if default is None:
                return None  # type: ignore[return-value]
            return float(minimum or 0.0) + (1.0 if exclusive_min else 0.0)
        return float(value)

    def day(self, t: dict[str, Any], key: str, path: str) -> str:
        """An optional calendar day (a TOML date, ``2025-04-01``, or the same as text) as ISO text; "" if absent."""
        value = t.get(key)
        if value is None:
            return ""
        try:
            return date.fromisoformat(str(value)).isoformat()
        except ValueError:
            self.error(_join(path, key), value, "a date, e.g. 2025-04-01")
            return ""

    def integer(self, t: dict[str, Any], key: str, path: str, *, default: Any = MISSING,
                minimum: int | None = None, maximum: int | None = None) -> int:
        expected = "an integer" + _bounds(minimum, False, maximum)
        value = t.get(key, default)
        if value is MISSING or isinstance(value, bool) or not isinstance(value, int):
            self.error(_join(path, key), value, expected)
            return minimum or 0
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self.error(_join(path, key), value, expected)
            return minimum or 0
        return value

    def enum(self, t: dict[str, Any], key: str, path: str, kind: type[E], *,
             default: Any = MISSING) -> E:
        value = t.get(key, default)
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            choices = [m.value for m in kind]  # (only here: a site file's thousands of channels each ask twice)
            self.error(_join(path, key), value, f"one of {choices}"
                       + (did_you_mean(value, choices) if isinstance(value, str) else ""))
            return next(iter(kind))


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'poll_interval'?)`` for the nearest known word to a typo, or "" when none is near."""
    close = difflib.get_close_matches(word, [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# One key of a path: ``key`` or ``key[index]`` / ``key[id=value]`` (an id may hold dots; a key may not).
_TOKEN = re.compile(r"([^.\[\]]+)(?:\[([^\]]*)\])?")
_LAST_ITEM = re.compile(r"(?:(?P<parent>.*)\.)?(?P<key>[^.\[\]]+)\[(?P<index>\d+)\]")


def _with_label(e: ConfigError, label: str) -> ConfigError:
    return ConfigError(e.file, e.path, e.found, e.expected, label) if label else e


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _bounds(minimum: float | None, exclusive: bool, maximum: float | None) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if exclusive else '>='} {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return f" {' and '.join(parts)}" if parts else ""
