"""The replay: recorded readings (a CSV stream) through a check engine, the episodes out in time order.

`monitor.replay` is the command around it (arguments, files, exit codes); `monitor.checks.replay_csv` reads the
rows and feeds each to its channel's `Processor` (the engine's fast path inlined); `monitor.checks.replay_io`
sorts the events and counts the rejected rows. The engine is the daemon's own, so live and replay agree.
"""

from __future__ import annotations

import sys
from typing import TextIO

from config.rule_catalogue import is_data_quality
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.replay_csv import InputError, read_header, read_rows
from monitor.checks.replay_io import Rejections, SortedEvents


class ReplayStats:
    def __init__(self, *, rows: int, rejected: Rejections, events: SortedEvents, written: int) -> None:
        self.rows = rows
        self.rejected = rejected
        self.starts = events.starts
        self.ends = events.ends
        self.written = written

    def summary(self) -> str:
        lines = [
            f"rows read: {self.rows}",
            f"rows rejected: {self.rejected.total}"
            + "".join(f"; {k} {n}" for k, n in sorted(self.rejected.kinds.items())),
        ]
        for title, quality in (("exceedance episodes", False), ("data-quality episodes", True)):
            rules = sorted(r for r in self.starts if is_data_quality(r) == quality)
            body = ", ".join(f"{r} {self.starts[r]} (open {self.starts[r] - self.ends[r]})" for r in rules)
            lines.append(f"{title}: {body or 'none'}")
        lines.append(f"transitions written: {self.written}")
        return "\n".join(lines)


def replay(
    config: SiteConfig,
    src: TextIO,
    out: TextIO,
    *,
    source: str = "-",
    err: TextIO = sys.stderr,
    report_limit: int = 1000,
    engine: CheckEngine | None = None,
    now: float | None = None,
) -> ReplayStats:
    """Replay one CSV stream through a fresh engine for ``config``; events to ``out``, rejects to ``err``."""
    engine = engine or CheckEngine.for_config(config)
    layout = read_header(src, source)
    if layout.si is None and len(config.sites) != 1:
        raise InputError(f"{source}: no 'site' column, but the site file has {len(config.sites)} sites")
    reject = Rejections(err=err, source=source, limit=report_limit)
    sink = SortedEvents(out)
    by_site = {s.id: engine.inputs(s.id) for s in config.sites}
    chunks = read_rows(src, layout=layout, by_site=by_site, default_site=config.sites[0].id, reject=reject,
                       now=now)
    rows = 0
    for n in chunks:
        rows += n
        if engine.events:
            sink.add(engine.drain())
    written = sink.close()
    return ReplayStats(rows=rows, rejected=reject, events=sink, written=written)
