"""Configuration errors: every mistake in a file is collected and reported at once, each with its key path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ConfigError:
    """One mistake: where (file and key path), what was found, and what was expected."""

    file: str
    path: str
    found: Any
    expected: str

    def __str__(self) -> str:
        found = "(missing)" if self.found is _MISSING else repr(self.found)
        return f"{self.file}: {self.path}: got {found}, expected {self.expected}"


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING: Any = _Missing()
MISSING: Any = _MISSING


class ConfigErrors(Exception):
    """Raised by the loader when a file has one or more mistakes; nothing is started."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))
