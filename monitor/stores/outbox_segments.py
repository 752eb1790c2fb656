"""Append-only segment files holding the outbox's large payloads (the SQLite index points into them).

Why not keep every payload in SQLite: a payload in SQLite is written twice (WAL, then the checkpoint into
the database) and read back page by page, and deleting it walks its overflow-page chain. Measured here with
500 KB records, that was 0.2–0.5 µs of CPU per 100-byte line, more than the whole HTTP write of that line
costs; a plain file append plus ``pread`` costs about a tenth of it, and writes flash storage once.

Layout: ``<queue file>.segments/<number>.seg``, numbered from 1. Payloads are appended to the newest
segment until it reaches ``max_size``, then a new one starts. A segment is deleted once no index row points
into it (the caller keeps the reference counts). Bytes written before the index row is committed are
harmless after a crash (nothing points at them); a crash between commit and unlink leaves an orphan segment
that `SegmentStore.collect` removes at the next start.

Durability matches the index (WAL, ``synchronous=NORMAL``): no fsync per append. A process crash or SIGKILL
loses nothing the kernel accepted; a power loss can truncate the newest segment, which `read` reports as a
short read (the outbox then counts those records as lost instead of sending garbage).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

_SUFFIX = ".seg"


class SegmentStore:
    """Append/read/delete payload bytes in numbered files. Not thread-safe: the Outbox holds its lock."""

    def __init__(self, *, directory: Path, max_size: int) -> None:
        self.directory = directory
        self.max_size = max_size
        directory.mkdir(parents=True, exist_ok=True)
        numbers = self.existing()
        self.current = max(numbers, default=0) or 1
        self._fd = self._open_append(self.current)
        self._size = os.lseek(self._fd, 0, os.SEEK_END)
        self._readers: dict[int, int] = {}

    def existing(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit())

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:010d}{_SUFFIX}"

    def _open_append(self, number: int) -> int:
        return os.open(self._path(number), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    def append(self, payloads: Sequence[bytes]) -> list[tuple[int, int]]:
        """Write payloads; returns (segment, offset) of each. On an I/O error the file is re-measured so
        later offsets stay right (the partial bytes are dead space) and the error propagates."""
        out: list[tuple[int, int]] = []
        try:
            for data in payloads:
                if self._size >= self.max_size:
                    self._rotate()
                out.append((self.current, self._size))
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                    self._size += written
        except OSError:
            self._size = os.lseek(self._fd, 0, os.SEEK_END)
            raise
        return out

    def _rotate(self) -> None:
        os.close(self._fd)
        self.current += 1
        self._fd = self._open_append(self.current)
        self._size = os.lseek(self._fd, 0, os.SEEK_END)

    def read(self, segment: int, offset: int, size: int) -> bytes | None:
        """The payload, or None if the file is gone or shorter than the index says (lost in a power cut)."""
        fd = self._fd if segment == self.current else self._readers.get(segment)
        if fd is None:
            try:
                fd = os.open(self._path(segment), os.O_RDONLY)
            except FileNotFoundError:
                return None
            self._readers[segment] = fd
        data = os.pread(fd, size, offset)
        return data if len(data) == size else None

    def delete(self, segments: Iterable[int]) -> None:
        """Remove segments nothing points into any more (never the one being appended to)."""
        for number in segments:
            if number == self.current:
                continue
            fd = self._readers.pop(number, None)
            if fd is not None:
                os.close(fd)
            self._path(number).unlink(missing_ok=True)

    def collect(self, live: set[int]) -> None:
        """At start: delete every segment but the live ones and the current one (orphans of a crash)."""
        self.delete(n for n in self.existing() if n not in live)

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.glob(f"*{_SUFFIX}"))

    def close(self) -> None:
        for fd in (self._fd, *self._readers.values()):
            os.close(fd)
        self._readers.clear()
