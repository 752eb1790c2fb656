"""The replay's input and output plumbing: fast ISO 8601 times, row rejection reports, time-sorted JSON Lines.

Kept apart from `monitor.checks.replay_run` (the replay), `monitor.checks.replay_csv` (the reading loop) so that
each stays short and readable.
"""

from __future__ import annotations

import heapq
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TextIO

from monitor.checks.events import START, EpisodeEvent, parse_iso

_SECONDS = {f"{i:02d}": float(i) for i in range(60)}


def time_parser() -> Callable[[str], float]:
    """ISO 8601 with offset or 'Z' → epoch seconds, caching everything but the seconds digits.

    A month of 1-second data repeats each ``YYYY-MM-DDTHH:MM:…offset`` prefix 60 times per channel, so a
    whole- second time costs a slice, two dict lookups and an addition; anything else (fractions, odd forms)
    takes the full `datetime.fromisoformat` parse. Both give the same float for the same instant (whole
    seconds are exact). Naive times are refused. The cache is bounded, whatever the file.
    """
    cache: dict[str, float] = {}
    cached = cache.get
    seconds = _SECONDS.get

    def parse(ts: str) -> float:
        base = cached(ts[:17] + ts[19:])  # only whole-second forms are ever stored (see below)
        if base is not None:
            sec = seconds(ts[17:19])
            if sec is not None:
                return base + sec
        if len(ts) >= 20 and ts[16] == ":" and ts[19] not in ".," and ts[17:19] in _SECONDS:
            base = parse_iso(f"{ts[:17]}00{ts[19:]}")
            if len(cache) >= 4096:
                cache.clear()
            cache[ts[:17] + ts[19:]] = base
            return base + _SECONDS[ts[17:19]]
        return parse_iso(ts)

    return parse


class Rejections:
    """Counts rejected rows by kind and reports the first ``limit`` on ``err`` with their line numbers."""

    def __init__(self, *, err: TextIO, source: str, limit: int) -> None:
        self.err = err
        self.source = source
        self.limit = limit
        self.kinds: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def __call__(self, line: int, kind: str, detail: str) -> None:
        """Count one rejected row; ``detail`` quotes the offending text already cut short (`excerpt`)."""
        self.kinds[kind] += 1
        n = self.total
        if self.limit <= 0 or n <= self.limit:
            print(f"{self.source}:{line}: skipped ({kind}): {detail}", file=self.err)
        elif n == self.limit + 1:
            print(
                f"{self.source}: further skipped rows are counted, not listed (--report-limit)", file=self.err
            )


class SortedEvents:
    """Writes events as JSON Lines sorted by time (ties in emission order), in bounded memory.

    Events arrive in emission order, which is time order per channel but not across channels when the CSV
    holds one channel after another. Up to ``spill_at`` are kept in memory; beyond that sorted runs go to
    temporary files that are merged at the end, so memory stays flat however many episodes a file holds.
    """

    def __init__(self, out: TextIO, *, spill_at: int = 100_000) -> None:
        self.out = out
        self.spill_at = spill_at
        self.buffer: list[tuple[float, int, str]] = []
        self.runs: list[str] = []
        self.seq = 0
        self.starts: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()

    def add(self, events: list[EpisodeEvent]) -> None:
        for e in events:
            (self.starts if e.event == START else self.ends)[e.rule] += 1
            self.buffer.append((e.time, self.seq, e.to_json()))
            self.seq += 1
        if len(self.buffer) >= self.spill_at:
            self._spill()

    def _spill(self) -> None:
        self.buffer.sort()
        fd, path = tempfile.mkstemp(prefix="pretreat-replay-", suffix=".run")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(f"{t!r}\t{s}\t{line}\n" for t, s, line in self.buffer)
        self.runs.append(path)
        self.buffer = []

    def close(self) -> int:
        """Write everything out; returns the number of events written."""
        self.buffer.sort()
        try:
            if not self.runs:
                self.out.writelines(f"{line}\n" for _, _, line in self.buffer)
            else:
                merged = heapq.merge(iter(self.buffer), *(_read_run(p) for p in self.runs))
                self.out.writelines(f"{line}\n" for _, _, line in merged)
        finally:
            for p in self.runs:
                os.unlink(p)
            self.runs = []
        return self.seq


def _read_run(path: str) -> Iterator[tuple[float, int, str]]:
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            t, s, line = raw.rstrip("\n").split("\t", 2)
            yield float(t), int(s), line
