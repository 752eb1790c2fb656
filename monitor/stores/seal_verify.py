"""Verify the seals (`monitor.stores.seals`) against the stored readings and episode events, and the chain's
end against ``alarm_state`` and an anchor file.

Each problem is a `Finding` naming the record: what (reading, episode event, seal, journal), how (altered,
missing, added, late), the series (site/channel), the UTC day and the time (for readings, the minute the
sealed minute index places it in: a seal keeps one digest a minute, not a copy of every reading).
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alarms.journal import canonical, head_of
from monitor.stores.readonly import connect_readonly
from monitor.stores.seal_scan import (
    DAY,
    MINUTE,
    DayReader,
    digest_of,
    file_uri,
    native_available,
    parse_index,
    scan_engine,
)
from monitor.stores.seals import (
    EPISODE_EVENT,
    EPISODE_WITHDRAWN,
    RETENTION,
    SEAL,
    SEALING_STARTED,
    episode_columns,
    episode_payload,
    legacy_episode_digest,
)

_MAX_LATE_LISTED = 20
_PARALLEL_FROM = 1_000_000  # sealed readings from which worker processes pay for their start-up
_THREADS_FROM = 100_000  # the same for threads (the C scanner releases the GIL): they cost next to nothing


@dataclass(frozen=True, slots=True)
class Finding:
    what: str  # reading | episode event | seal | journal
    how: str  # altered | missing | added | late
    where: str  # site/channel (or the journal)
    day: str  # YYYY-MM-DD (UTC), or ""
    time: str  # ISO 8601 UTC (a minute for readings), or ""
    detail: str

    def line(self) -> str:
        at = " ".join(x for x in (self.day, self.time) if x)
        return f"{self.what} {self.how}: {self.where}{' ' + at if at else ''}: {self.detail}"

    @property
    def problem(self) -> bool:
        """Late readings (recorded after their day was sealed) are reported, not failures."""
        return self.how != "late"


@dataclass(slots=True)
class SealReport:
    findings: list[Finding]
    seals: int = 0
    readings: int = 0
    episode_events: int = 0
    seconds: float = 0.0
    purged: int = 0  # seals of days purged by retention, not recomputed
    engine: str = ""  # the path that recomputed the minute indexes (`monitor.stores.seals.scan_engine`)

    @property
    def ok(self) -> bool:
        return not any(f.problem for f in self.findings)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def verify_seals(conn: sqlite3.Connection, *, last: int | None = None, path: Path | None = None,
                 jobs: int = 1) -> SealReport:
    """Recompute every seal (or only the ``last`` N) and compare the episode events with their records.

    With ``jobs`` > 1 and the file's ``path``, the day seals are recomputed by that many threads (the C
    scanner, which releases the GIL) or, on the Python path, worker processes (each its own read-only
    connection): reading rows into Python is the cost there, one core's worth at a time."""
    started = time.perf_counter()
    report = SealReport(findings=[], engine=scan_engine())
    if not _has(conn, "journal"):
        return report
    seals = list(_seal_records(conn, last))
    cutoff = conn.execute("SELECT max(json_extract(payload, '$.cutoff')) FROM journal WHERE kind = ?",
                          (RETENTION,)).fetchone()[0]
    if cutoff is not None:  # days purged by retention: their readings are gone by design, not recomputed
        kept = [(seq, p) for seq, p in seals if float(p["start"]) >= float(cutoff)]
        report.purged = len(seals) - len(kept)
        seals = kept
    native = native_available()
    if jobs > 1 and path is not None and \
            sum(int(p["count"]) for _, p in seals) >= (_THREADS_FROM if native else _PARALLEL_FROM):
        parts = [seals[i::jobs] for i in range(jobs)]
        pool: Executor
        if native:
            pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="seal-verify")
        else:  # spawn: safe whatever threads the caller runs
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
        with pool:
            for findings, n_seals, n_readings in pool.map(_check_part, [path] * jobs, parts):
                report.findings += findings
                report.seals += n_seals
                report.readings += n_readings
        report.findings.sort(key=lambda f: (f.where, f.day, f.time))
    else:
        report.findings, report.seals, report.readings = _check_seals(conn, seals)
    if _has(conn, "episode_events"):
        _check_episodes(conn, report)
    report.seconds = time.perf_counter() - started
    return report


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _seal_records(conn: sqlite3.Connection, last: int | None) -> list[tuple[int, dict[str, Any]]]:
    rows = conn.execute("SELECT seq, payload FROM journal WHERE kind = ? ORDER BY seq", (SEAL,)).fetchall()
    return [(int(seq), json.loads(text)) for seq, text in (rows[-last:] if last else rows)]


def _check_part(path: Path, seals: list[tuple[int, dict[str, Any]]]) -> tuple[list[Finding], int, int]:
    conn = connect_readonly(path)
    try:
        return _check_seals(conn, seals)
    finally:
        conn.close()


def _check_seals(conn: sqlite3.Connection, seals: list[tuple[int, dict[str, Any]]]
                 ) -> tuple[list[Finding], int, int]:
    """(findings, seals checked, readings read) for ``seals`` (journal seq, payload)."""
    findings: list[Finding] = []
    readings = 0
    ids = {(s, c, u): i for i, s, c, u in conn.execute("SELECT id, site, channel, unit FROM channels")} \
        if _has(conn, "channels") else {}
    wanted = [seq for seq, _ in seals]
    stored: dict[int, bytes] = {}
    if _has(conn, "seal_minutes"):
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            stored.update(conn.execute(f"SELECT journal_seq, minutes FROM seal_minutes WHERE journal_seq IN "
                                       f"({','.join('?' * len(chunk))})", chunk).fetchall())
    with DayReader(file_uri(conn), conn) as reader:  # one scanner for all the days (see `DayReader`)
        for seq, p in seals:
            where = f"{p['site']}/{p['channel']}"
            cid = ids.get((p["site"], p["channel"], p["unit"]))
            if cid is None:
                findings.append(Finding("reading", "missing", where, p["day"], "",
                                        f"all {p['count']} sealed readings: the series is gone"))
                continue
            day = float(p["start"])
            count, index = reader.index(cid, day, int(p["seq_max"]))
            readings += count
            if count != p["count"] or digest_of(index) != p["digest"]:
                findings += _locate(where, p, index, stored.get(seq), count)
            late = conn.execute("SELECT time FROM readings WHERE channel_id = ? AND time >= ? AND time < ? "
                                "AND seq > ? ORDER BY time LIMIT ?",
                                (cid, day, day + DAY, p["seq_max"], _MAX_LATE_LISTED)).fetchall()
            for (t,) in late:
                findings.append(Finding("reading", "late", where, p["day"], _iso(t),
                                        "recorded after its day was sealed (not covered by the seal)"))
    return findings, len(seals), readings


def _locate(where: str, p: dict[str, Any], index: bytes, kept: bytes | None, count: int) -> list[Finding]:
    """Name the minutes that changed, using the sealed minute index if it is authentic."""
    if kept is None or digest_of(kept) != p["digest"]:
        return [Finding("reading", "altered", where, p["day"], "",
                        f"{count} readings now, {p['count']} sealed; the day's minute index is "
                        f"{'missing' if kept is None else 'altered too'}, so the minute cannot be named")]
    now, then = parse_index(index), parse_index(kept)
    out = []
    for m in sorted(set(now) | set(then)):
        a, b = now.get(m, (0, b"")), then.get(m, (0, b""))
        if a == b:
            continue
        at = _iso(float(p["start"]) + m * MINUTE)
        if a[0] < b[0]:
            how, detail = "missing", f"{b[0] - a[0]} of the {b[0]} readings sealed in this minute"
        elif a[0] > b[0]:
            how, detail = "added", f"{a[0] - b[0]} reading(s) more than the {b[0]} sealed in this minute"
        else:
            how, detail = "altered", f"{a[0]} readings in this minute, content changed"
        out.append(Finding("reading", how, where, p["day"], at, detail))
    return out


def _check_episodes(conn: sqlite3.Connection, report: SealReport) -> None:
    rows = {r[0]: r for r in conn.execute(f"SELECT {episode_columns(conn)} FROM episode_events")}
    start = conn.execute("SELECT payload FROM journal WHERE kind = ? ORDER BY seq LIMIT 1",
                         (SEALING_STARTED,)).fetchone()
    legacy_max = 0
    legacy_withdrawn: set[int] | None = None
    if start is not None:
        legacy = json.loads(start[0])
        legacy_max = int(legacy["max_id"])
        if "withdrawn" in legacy:  # recorded since the list was kept
            legacy_withdrawn = {int(i) for i in legacy["withdrawn"]}
        n, digest = legacy_episode_digest(conn, legacy_max)
        if (n, digest) != (legacy["episode_events"], legacy["digest"]):
            report.findings.append(Finding("episode event", "altered", "episode_events", "", "",
                                           f"the {legacy['episode_events']} events recorded before sealing "
                                           f"began no longer match their digest ({n} now)"))
    latest: dict[int, dict[str, Any]] = {}  # a revision journals a changed row again: the newest record counts
    gone: list[dict[str, Any]] = []  # events whose id a later record gives to another event
    for (text,) in conn.execute("SELECT payload FROM journal WHERE kind = ? ORDER BY seq", (EPISODE_EVENT,)):
        p = json.loads(text)
        before = latest.get(p["id"])
        if before is not None and _identity(before) != _identity(p):
            gone.append(before)
        latest[p["id"]] = p
    seen = set(latest)
    report.episode_events += len(gone)
    for p in gone:
        # A revision changes a row's values, never which event it is: a new event journaled under an old id means
        # the old row was deleted and its id given again (the store never does that; a hand-made insert does)
        newer = latest[p["id"]]
        report.findings.append(Finding("episode event", "missing", f"{p['site']}/{p['channel']}",
                                       _iso(p["time"])[:10], _iso(p["time"]),
                                       f"{p['rule']} {p['event']} (id {p['id']}; the id now holds "
                                       f"{newer['site']}/{newer['channel']} {newer['rule']} {newer['event']} "
                                       f"at {_iso(newer['time'])})"))
    for p in latest.values():
        report.episode_events += 1
        row = rows.get(p["id"])
        what = f"{p['site']}/{p['channel']}"
        label = f"{p['rule']} {p['event']}"
        day, at = _iso(p["time"])[:10], _iso(p["time"])
        if row is None:
            report.findings.append(Finding("episode event", "missing", what, day, at, f"{label} (id {p['id']})"))
        elif canonical(episode_payload(row)) != canonical(p):
            report.findings.append(Finding("episode event", "altered", what, day, at,
                                           f"{label} (id {p['id']}) differs from its journal record"))
    _check_withdrawn(conn, latest, legacy_max, legacy_withdrawn, report)
    _check_last_id(conn, max((legacy_max, *latest, *rows)), report)
    if start is None:
        return
    for i, row in rows.items():
        if i > legacy_max and i not in seen:
            p = episode_payload(row)
            report.findings.append(Finding("episode event", "added", f"{p['site']}/{p['channel']}",
                                           _iso(p["time"])[:10], _iso(p["time"]),
                                           f"{p['rule']} {p['event']} (id {i}) has no journal record"))


def _identity(p: dict[str, Any]) -> tuple[Any, ...]:
    """Which event an episode record is of: (site, channel, rule, event, time). The store's key also has the end
    reason since schema 6, but before it a revision could change an end's reason in place (a cleared end at
    one time found to be a gap end), so a file's older records may differ in it under one id."""
    return p["site"], p["channel"], p["rule"], p["event"], p["time"]


def _check_last_id(conn: sqlite3.Connection, given: int, report: SealReport) -> None:
    """``episode_meta.last_id`` (the highest episode id given: the store gives the next one past it) against the
    highest id the journal, the pre-sealing record and the table know. Above them it was raised by hand: past
    SQLite's largest integer the store can give no id and records no event until it opens again (it then sets
    the value from the journal). Below is not named: an older version records without keeping it, and a row
    deleted so that its id could be given again is named by its id's journal records."""
    if not _has(conn, "episode_meta"):
        return
    row = conn.execute("SELECT value FROM episode_meta WHERE key = 'last_id'").fetchone()
    if row is not None and int(row[0]) > given:
        report.findings.append(Finding("episode event", "altered", "episode_meta", "", "",
                                       f"last_id is {row[0]}, past the highest id given ({given})"))


def _check_withdrawn(conn: sqlite3.Connection, latest: dict[int, dict[str, Any]], legacy_max: int,
                     legacy_withdrawn: set[int] | None, report: SealReport) -> None:
    """Each episode row's ``withdrawn`` flag against the newest ``episode_withdrawn`` record of its id; without
    one, 0, or for a row recorded before sealing began, what the ``sealing_started`` record lists
    (``legacy_withdrawn``). A ``sealing_started`` record written before it kept that list leaves such rows held
    to a record only once they have one: a version before seals could withdraw rows, and nothing says which."""
    if "withdrawn" not in {r[1] for r in conn.execute("PRAGMA table_info(episode_events)")}:
        return
    flags: dict[int, int] = {}
    for (text,) in conn.execute("SELECT payload FROM journal WHERE kind = ? ORDER BY seq", (EPISODE_WITHDRAWN,)):
        p = json.loads(text)
        flags[p["id"]] = int(p["withdrawn"])
    for i, w, site, channel, rule, event, t in conn.execute(
            "SELECT id, withdrawn, site, channel, rule, event, time FROM episode_events"):
        if i in flags:
            want = flags[i]
        elif i > legacy_max:
            want = 0
        elif legacy_withdrawn is not None:
            want = int(i in legacy_withdrawn)
        else:
            continue
        if w != want:  # named as the journal has the event (a row recorded before sealing: as the row has it)
            p = latest.get(i, {"site": site, "channel": channel, "rule": rule, "event": event, "time": t})
            report.findings.append(Finding("episode event", "altered", f"{p['site']}/{p['channel']}",
                                           _iso(p["time"])[:10], _iso(p["time"]),
                                           f"{p['rule']} {p['event']} (id {i}): withdrawn = {w}, its journal "
                                           f"records say {want}"))


def check_tail(conn: sqlite3.Connection, anchors: Sequence[tuple[int, str]] = ()) -> list[Finding]:
    """The chain's end: every ``alarm_state`` row names a journal record that exists (so deleting the last
    records is seen), and every anchor (seq, hash) is in the journal with that hash."""
    out = []
    # alarm_state first, the journal's head after it: each SELECT is its own read transaction, and the daemon
    # commits a transition's journal record and its alarm_state row together, so a commit between the two reads
    # only moves the head on. Read the other way round, a transition committed in between showed as records "cut
    # off the end" (seen once, in tests/faults/test_disk_full.py, while alarms were raised beside the check).
    top = conn.execute("SELECT max(seq) FROM alarm_state").fetchone()[0] if _has(conn, "alarm_state") else None
    head = head_of(conn)[0] if _has(conn, "journal") else 0
    if top is not None and int(top) > head:
        out.append(Finding("journal", "missing", "journal", "", "",
                           f"alarm_state names record {top} but the journal ends at {head}: "
                           f"records {head + 1}..{top} were cut off the end"))
    for seq, digest in anchors:
        row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone() if head else None
        if row is None:
            out.append(Finding("journal", "missing", "journal", "", "",
                               f"record {seq} named by the anchor is missing (journal ends at {head})"))
        elif row[0] != digest:
            out.append(Finding("journal", "altered", "journal", "", "",
                               f"record {seq} does not carry the anchor's hash"))
    return out


def read_anchors(path: Path) -> list[tuple[int, str]]:
    """(seq, hash) of every line of an anchor file (``<seq> <hash> <time>``)."""
    out = []
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and len(parts[1]) == 64:
            out.append((int(parts[0]), parts[1]))
    return out
