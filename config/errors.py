"""Configuration errors: every mistake in a file is collected and reported at once, each with its key path.

An error names the item it is in by id as well as by index (``site 'acme-plating' instrument 'ph-meter'
poll_interval (site[0].instrument[1].poll_interval)``): an operator finds an instrument by its id, a tool
or a test by the key path, which `ConfigError.path` keeps as the loader wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ConfigError:
    """One mistake: where (file and key path), what was found, and what was expected.

    ``label``: the key path told by the ids of the items on it (`config.reader.Reader.labelled`); empty
    when no item on the path has an id, and the path is printed instead."""

    file: str
    path: str
    found: Any
    expected: str
    label: str = ""

    def __str__(self) -> str:
        found = "(missing)" if self.found is _MISSING else repr(self.found)
        return f"{self.file}: {self.label or self.path}: got {found}, expected {self.expected}"


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
