"""A small typed reader over parsed TOML that records every mistake instead of stopping at the first."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from config.errors import MISSING, ConfigError

E = TypeVar("E", bound=Enum)


class Reader:
    """Reads values out of TOML tables, collecting `ConfigError`s with their key paths.

    Each getter returns a usable placeholder after recording an error, so validation can continue and the
    user sees every mistake in one run.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[ConfigError] = []

    def error(self, path: str, found: Any, expected: str) -> None:
        self.errors.append(ConfigError(self.file, path, found, expected))

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
                self.error(_join(path, key), table[key], f"one of the known keys {sorted(allowed)}")

    def str(self, t: dict[str, Any], key: str, path: str, *, default: Any = MISSING,
            check: Callable[[str], bool] | None = None, expected: str = "a string") -> str:
        value = t.get(key, default)
        if value is MISSING:
            self.error(_join(path, key), MISSING, expected)
            return ""
        if not isinstance(value, str) or (check is not None and not check(value)):
            self.error(_join(path, key), value, expected)
            return ""
        return value

    def number(self, t: dict[builtins.str, Any], key: builtins.str, path: builtins.str, *, default: Any = MISSING,
               minimum: float | None = None, exclusive_min: bool = False,
               maximum: float | None = None) -> float:
        expected = "a number" + _bounds(minimum, exclusive_min, maximum)
        value = t.get(key, default)
        if value is None and default is None:
            return None  # type: ignore[return-value]  # optional numbers
        if value is MISSING or isinstance(value, bool) or not isinstance(value, int | float):
            self.error(_join(path, key), value, expected)
            return 0.0
        if not math.isfinite(value) or (
            minimum is not None and (value <= minimum if exclusive_min else value < minimum)
        ) or (maximum is not None and value > maximum):
            self.error(_join(path, key), value, expected)
            return float(minimum or 0.0) + (1.0 if exclusive_min else 0.0)
        return float(value)

    def integer(self, t: dict[builtins.str, Any], key: builtins.str, path: builtins.str, *, default: Any = MISSING,
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

    def enum(self, t: dict[builtins.str, Any], key: builtins.str, path: builtins.str, kind: type[E], *,
             default: Any = MISSING) -> E:
        choices = [m.value for m in kind]
        value = t.get(key, default)
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            self.error(_join(path, key), value, f"one of {choices}")
            return next(iter(kind))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _bounds(minimum: float | None, exclusive: bool, maximum: float | None) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if exclusive else '>='} {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return f" {' and '.join(parts)}" if parts else ""
