"""The daemon's guard over its own record of evidence: the check at start, the sealing passes, the anchors.

At start (in a worker thread, while polling already runs: a damaged record never stops the monitoring) the
whole chain is verified, its end against ``alarm_state`` and the last line of the anchor file, and the last
seals against the stored readings and episodes (`monitor.record_check.startup_check`). A mismatch is:
logged as an error per finding; a ``problem`` in the health snapshot (so `pretreat status` is degraded);
every site's ``record_integrity`` alarm raised to the plant; and, if the chain itself is broken, a
`alarms.journal.BREAK` record appended naming the first bad record, so later verifications report that break
once and check the chain again from the marker on. Findings that are not chain breaks (a deleted episode
row, an edited reading) are journaled as one ``record_check`` record, so the record says when they were seen.

Every `SEAL_INTERVAL` seconds a sealing pass (`monitor.stores.seals.Sealer`) runs in a worker thread (with
`SEAL_WORKERS` above 1 it hands the reading of the rows to that many processes); after
a pass that sealed something the new chain head is appended to the anchor file beside the database and
retained on the MQTT alarm links (``<prefix>/journal/head``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from alarms.journal import BREAK, Journal
from monitor.alarming import Alarming
from monitor.record_check import RecordCheck, startup_check
from monitor.stores.seal_verify import read_anchors
from monitor.stores.seals import SEAL_AFTER, Sealer, anchor_path, append_anchor

log = logging.getLogger(__name__)

SEAL_INTERVAL = 600.0  # s between sealing passes
SEAL_WORKERS = 1  # processes reading the rows of a pass (1: the thread itself; see bench/bench_seals.py)
_MAX_JOURNALED = 50  # findings written into one journal record (the rest: counted)


class RecordGuard:
    """Owned by the daemon's event loop; the file work runs in worker threads."""

    def __init__(self, *, db: Path, alarming: Alarming, clock: Callable[[], float],
                 seal_after: float = SEAL_AFTER) -> None:
        self.db = Path(db)
        self.alarming = alarming
        self.clock = clock
        self.anchor_file = anchor_path(self.db)
        # SEAL_WORKERS > 1: that many processes read the rows of a pass (Sealer._indexes)
        self.sealer = Sealer(path=self.db, seal_after=seal_after, on_sealed=self._sealed,
                             workers=min(SEAL_WORKERS, os.cpu_count() or 1))
        self.state = "checking"  # checking | ok | failing
        self.problems: list[str] = []
        self.notes: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def health(self) -> dict[str, Any]:
        return {"state": self.state, "problems": list(self.problems), "notes": list(self.notes),
                "seals": asdict(self.sealer.stats), "anchor_file": str(self.anchor_file)}

    def fail(self, problem: str) -> None:
        """A problem found while running (the historian file replaced): loud, in health, alarmed."""
        self.state = "failing"
        if problem not in self.problems:
            self.problems.append(problem)
        log.error("record integrity: %s", problem)
        self.alarming.record_integrity(True, problem, self.clock())

    async def check_at_start(self) -> RecordCheck | None:
        self._loop = asyncio.get_running_loop()
        anchors = read_anchors(self.anchor_file) if self.anchor_file.is_file() else []
        try:
            check = await asyncio.to_thread(startup_check, self.db, anchors)
        except (sqlite3.Error, OSError, ValueError, KeyError) as exc:
            self.fail(f"the record cannot be checked: {exc}")
            return None
        for b in check.chain.breaks:
            self.notes.append(f"known chain break: {b}")
        if check.ok or (not check.tail and check.seals.ok and check.chain.breaks
                        and check.chain.detail.endswith("intact after it")):
            if self.state == "checking":
                self.state = "ok"
            log.info("record checked at start: journal %d records, %d seals over %d readings, %d episode "
                     "events: intact%s", check.chain.records, check.seals.seals, check.seals.readings,
                     check.seals.episode_events, f" after {len(check.chain.breaks)} marked break(s)"
                     if check.chain.breaks else "")
            return check
        problems = check.problems()
        await asyncio.to_thread(self._journal_findings, check, problems)
        for p in problems[:_MAX_JOURNALED]:
            log.error("record integrity: %s", p)
        self.state = "failing"
        self.problems += problems[:_MAX_JOURNALED]
        if len(problems) > _MAX_JOURNALED:
            self.problems.append(f"... and {len(problems) - _MAX_JOURNALED} more (pretreat journal verify)")
        self.alarming.record_integrity(True, problems[0], self.clock())
        return check

    def _journal_findings(self, check: RecordCheck, problems: list[str]) -> None:
        journal = Journal(path=self.db)
        try:
            now = self.clock()
            shown = {"findings": problems[:_MAX_JOURNALED], "total": len(problems)}
            chain = check.chain
            if not chain.ok and not chain.detail.endswith("intact after it"):
                journal.append(BREAK, {"first_bad": chain.first_bad, "problem": chain.problem,
                                       "detail": chain.detail, **shown}, now)
            else:
                journal.append("record_check", shown, now)
        finally:
            journal.close()

    async def seal(self) -> int:
        """One sealing pass, in a worker thread (the scheduled job)."""
        self._loop = asyncio.get_running_loop()
        try:
            return await asyncio.to_thread(self.sealer.run_once, self.clock())
        except (sqlite3.Error, OSError) as exc:  # a full or busy disk: the next pass seals what is left
            self.sealer.stats.last_error = str(exc)
            log.error("sealing pass failed (%s); retried at the next pass", exc)
            return 0

    def _sealed(self, head: tuple[int, str]) -> None:
        """In the sealing thread: anchor the new head in the file, then (on the loop) on MQTT."""
        now = self.clock()
        append_anchor(self.anchor_file, head, now)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.alarming.publish_journal_head, head, now)
