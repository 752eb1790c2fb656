"""What the InfluxDB sink re-queues after a crash: the historian readings its memory held when the process died.

The sink's queue (`monitor.stores.outbox`) keeps the ``historian_seq`` mark: every historian reading with a
lower seq is in the queue or was acknowledged by the server. It is written in the same transaction as each
append, and readings enter the queue only once the historian committed them, so the mark never passes the
historian's head. At start:

- mark below the head: the process stopped without closing (SIGKILL, OOM, power cut) while readings were
  between the historian and the queue; `requeue` appends every row with ``mark <= seq < head``;
- no mark (a queue from before marks, or a new one): tracking starts at the head (the past is what
  `pretreat influx backfill` is for);
- mark above the head: the historian file was replaced or restored; tracking restarts at its head.

Why the readings come from the historian and not from a log of their own: the historian is the record of
evidence, committed anyway; a second log of every reading would double the disk writes of the data path.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from monitor.stores.historian_db import HistorianReader
from monitor.stores.influx_lines import SampleFormatter
from monitor.stores.outbox import Outbox

log = logging.getLogger(__name__)

MARK = "historian_seq"  # outbox mark: every historian reading with a lower seq is queued (or was sent)
GROUP_BYTES = 2 << 20  # bytes of records per transaction (as the sink's own appends: bounded memory)


class Recorded(Protocol):
    """What the sink needs of the historian (`monitor.stores.historian.Historian`)."""

    @property
    def path(self) -> Path: ...
    @property
    def committed_seq(self) -> int: ...


def plan(outbox: Outbox, historian: Recorded, *, key: str = MARK, name: str = "influx") -> tuple[Path, int, int] | None:
    """(historian file, first seq, end seq) to re-queue, or None; see the module docstring. Call before
    anything new is submitted to the historian. ``key``/``name``: the mark and the log's name of the copy
    (the InfluxDB sink's by default; the Sparkplug uplink keeps its own, `monitor.uplink.publisher`)."""
    head = historian.committed_seq
    mark = outbox.mark(key)
    if mark is not None and mark < head:
        return historian.path, mark, head
    if mark != head:
        if mark is not None:
            log.warning("%s: the historian %s is behind the queue's mark (seq %d < %d): another or a "
                        "restored file; tracking it from here", name, historian.path, head, mark)
        outbox.set_marks({key: head})
    return None


def requeue(outbox: Outbox, formatter: SampleFormatter, path: Path, first: int, end: int, batch_size: int) -> int:
    """Append the historian's readings with ``first <= seq < end`` as records of ``batch_size`` lines, the
    lines the live path and `pretreat influx backfill` write (so a reading sent before the crash is sent
    again as the same point), streaming, ~``GROUP_BYTES`` per transaction; the last one moves the mark to
    ``end``. Returns how many readings were queued; raises what reading or appending raised (the mark then
    stays: the next start re-queues the range again, which only repeats identical points)."""
    log.warning("influx: re-queuing the readings the historian committed after the last one queued for the "
                "server (seq %d to %d: the daemon stopped without closing, or readings were recorded without "
                "it)", first, end - 1)
    n = group = 0
    records: list[tuple[bytes, int]] = []
    with HistorianReader(path=path) as reader:
        for batch in formatter.batches(reader.by_seq(first=first, end=end), batch_size):
            records.append((b"\n".join(batch), len(batch)))
            group += len(records[-1][0])
            n += len(batch)
            if group >= GROUP_BYTES:
                outbox.append_many(records)
                records, group = [], 0
        outbox.append_many(records, marks={MARK: end})
    log.info("influx: %d readings re-queued", n)
    return n
