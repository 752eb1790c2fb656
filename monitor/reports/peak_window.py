"""The rolling 30-minute window behind a flow channel's highest 30-minute average rate
(`monitor.reports.aggregates`)."""

from __future__ import annotations

from array import array


class PeakWindow:
    """The last 30 minutes of one flow channel's good readings, for its rolling peak: (time, running integral,
    value held) per reading, kept as three doubles in one array.

    Why not a deque of tuples: a 1-second channel keeps 1,800 readings, ~130 bytes each as a tuple of floats
    and 24 bytes here, and the window fills for its first 30 minutes of running: as tuples, 40 flow channels
    grew the daemon by ~9 MiB over that half hour (bench/soak.py), which looked like a leak and hid real ones.
    Readings leave from the front by moving ``head``; the array is compacted once the dead front is at least
    half of it, so each reading is copied a bounded number of times."""

    __slots__ = ("buf", "head")

    def __init__(self) -> None:
        self.buf = array("d")
        self.head = 0  # index in ``buf`` of the first live triple

    @property
    def size(self) -> int:
        return (len(self.buf) - self.head) // 3

    def append(self, t: float, integral: float, v: float) -> None:
        self.buf.extend((t, integral, v))

    def first(self) -> tuple[float, float, float]:
        b, h = self.buf, self.head
        return b[h], b[h + 1], b[h + 2]

    def second_time(self) -> float:
        return self.buf[self.head + 3]

    def last(self) -> tuple[float, float, float]:
        b = self.buf
        return b[-3], b[-2], b[-1]

    def popleft(self) -> None:
        self.head += 3
        if self.head >= 3 * 256 and 2 * self.head >= len(self.buf):
            del self.buf[:self.head]
            self.head = 0

    def clear(self) -> None:
        del self.buf[:]
        self.head = 0
