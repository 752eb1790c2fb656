"""Progress of the long commands (replay, report rebuild, influx backfill, reports) on a terminal.

On a TTY standard error shows a tqdm bar: percent, rate and time left. Anywhere else (a pipe, a log, cron,
systemd) it shows nothing, so scripts and logs get only the commands' own results. The bar is written to
standard error, never to standard output, which carries the results.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import IO, Any


class Progress:
    """A bar of ``total`` ``unit`` (None: count without percent), shown only on a terminal."""

    def __init__(self, desc: str, *, unit: str, total: float | None = None, stream: IO[str] | None = None,
                 unit_scale: bool = False) -> None:
        out = stream or sys.stderr
        self._bar = _bar(out, desc=desc, unit=unit, total=total, unit_scale=unit_scale) if _is_tty(out) else None

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def total(self, n: float) -> None:
        if self._bar is not None:
            self._bar.total = n
            self._bar.refresh()

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def note(self, text: str) -> None:
        """What is being worked on (a channel, a step), beside the bar."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        self.close()


def _bar(out: IO[str], *, desc: str, unit: str, total: float | None, unit_scale: bool) -> Any:
    """A tqdm bar, imported only here: off a terminal tqdm is never needed (~40 ms of a command's start)."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no tqdm monitor thread (it only tunes refresh rates)
    cols, rows = _size(out)
    return tqdm(total=total, desc=desc, unit=unit, file=out, leave=False, ncols=cols, nrows=rows,
                unit_scale=unit_scale)


def _size(stream: IO[str]) -> tuple[int, int]:
    """The terminal's columns and lines; 80 × 24 where it reports none (a terminal whose size was never set
    reports 0 × 0, on which tqdm would draw an empty bar)."""
    try:
        size = os.get_terminal_size(stream.fileno())
        return size.columns or 80, size.lines or 24
    except (OSError, ValueError, AttributeError):
        return 80, 24


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class CountingReader:
    """A text stream that advances ``bar`` by the characters read through it (for a file's percent, the
    characters of an ASCII CSV are its bytes)."""

    def __init__(self, src: IO[str], bar: Progress) -> None:
        self._src, self._bar = src, bar

    def __iter__(self) -> CountingReader:
        return self

    def __next__(self) -> str:
        line = next(self._src)
        self._bar.advance(len(line))
        return line

    def readline(self, size: int = -1) -> str:
        line = self._src.readline(size)
        self._bar.advance(len(line))
        return line

    def read(self, size: int = -1) -> str:
        text = self._src.read(size)
        self._bar.advance(len(text))
        return text

    def __getattr__(self, name: str) -> object:
        return getattr(self._src, name)
