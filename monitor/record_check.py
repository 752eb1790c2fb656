"""The whole check of the record of evidence: the journal's chain, its end (``alarm_state``, anchors), and the
seals over readings and episode events. `pretreat journal verify` runs it over everything; the daemon runs it
at start over the chain and the last seals (`startup_check`), in a worker thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from alarms.journal import VerifyResult, verify_connection
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_verify import Finding, SealReport, check_tail, verify_seals

STARTUP_SEALS = 200  # seals re-checked at start (the last ones: the days most recently sealed)


@dataclass(slots=True)
class RecordCheck:
    chain: VerifyResult
    seals: SealReport
    tail: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.chain.ok and self.seals.ok and not self.tail

    def problems(self) -> list[str]:
        """One line per problem, for logs, the health snapshot and the journal's break record."""
        out = []
        if not self.chain.ok:
            out.append(f"journal record {self.chain.first_bad} {self.chain.problem}: {self.chain.detail}")
        out += [f.line() for f in self.tail]
        out += [f.line() for f in self.seals.findings if f.problem]
        return out


def check_record(conn: sqlite3.Connection, *, anchors: Sequence[tuple[int, str]] = (),
                 last_seals: int | None = None, path: Path | None = None, jobs: int = 1) -> RecordCheck:
    """``path`` and ``jobs`` > 1: recompute the day seals in that many worker processes.

    Every read is made in one read transaction, so that the check sees the file at one moment: the daemon goes
    on recording while its start-up check runs (and while an officer runs `pretreat journal verify`), and an
    episode event committed between two statements was otherwise found in the journal but not yet in its
    table ("missing"), or the reverse. The day seals' scanners read sealed days, which no writer changes."""
    owned = not conn.in_transaction
    if owned:
        conn.execute("BEGIN")
    try:
        chain = verify_connection(conn)
        return RecordCheck(chain=chain, seals=verify_seals(conn, last=last_seals, path=path, jobs=jobs),
                           tail=check_tail(conn, anchors))
    finally:
        if owned:
            conn.rollback()


def startup_check(db: Path, anchors: Sequence[tuple[int, str]]) -> RecordCheck:
    """The daemon's check at start: the whole chain, its end against ``alarm_state`` and the anchor file,
    and the last `STARTUP_SEALS` seals."""
    conn = connect_readonly(db)
    try:
        return check_record(conn, anchors=anchors[-1:], last_seals=STARTUP_SEALS)
    finally:
        conn.close()


def render(check: RecordCheck) -> str:
    """The report: problems first, then one summary line ending with the chain head (the anchor to keep)."""
    chain, s = check.chain, check.seals
    seq, digest = chain.head
    bad = [f for f in s.findings if f.problem]
    lines = [f"chain break (marked by the daemon): {b}" for b in chain.breaks]
    if not chain.ok and not chain.detail.endswith("intact after it"):
        lines.append(f"journal NOT intact: record {chain.first_bad} {chain.problem}: {chain.detail}")
    lines += [f"NOT intact: {f.line()}" for f in (*check.tail, *bad)]
    lines += [f"note: {f.line()}" for f in s.findings if not f.problem]
    rate = f", {s.readings / s.seconds:,.0f} readings/s" if s.seconds > 0 and s.readings else ""
    seals = (f"seals {'intact' if not bad else 'NOT intact'}: {s.seals} day seals over {s.readings} readings, "
             f"{s.episode_events} episode events{rate}" + (f", minute indexes by {s.engine}" if s.readings else "")
             + (f", {s.purged} seals of days purged by retention not recomputed" if s.purged else ""))
    if chain.ok:
        summary = f"journal intact: {chain.records} records; {seals}; head {seq}:{digest}"
    elif chain.breaks and chain.detail.endswith("intact after it"):
        summary = (f"journal NOT intact: {len(chain.breaks)} marked break(s), intact after the last; "
                   f"{chain.records} records; {seals}; head {seq}:{digest}")
    else:
        summary = f"journal NOT intact; {seals}; last good record: {seq}:{digest}"
    if check.ok:
        return summary + "\n"
    return "\n".join([*lines, summary]) + "\n"
