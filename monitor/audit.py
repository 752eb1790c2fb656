"""`pretreat audit`: check the recorded episodes against a replay of the stored readings.

    pretreat audit --config FILE [--database postgresql://…] [--from T] [--to T]

The invariant the daemon keeps (README, "Rules"): the episodes recorded live, after the corrections late
readings caused, are exactly the episodes a replay of the stored readings sorted by time finds. This is how an
enforcement officer checks the record before relying on it. The command reads the historian directly (no CSV
in between), judges every configured channel's readings with the replay engine (`monitor.checks.engine`, the
daemon's own rules), and compares its episodes with the episode store's (withdrawn transitions left out).

Period: episodes that *start* in [from, to) are compared (default: everything recorded). The replay starts
earlier, where rule memory begins (the earlier of 25 hours before ``--from`` and the start of its month in
each site's time zone, as a restart's warm-up does), and goes on past ``--to`` to the end of the record: some
rules start an episode at its onset only once it is confirmed later (401.17's 60 minutes of excursion, a slug's
15 minutes, a tamper pattern's run), so a replay stopped at ``--to`` would miss an episode the record rightly
has starting in the period, and could not say where one ends. A period far back in a long record therefore
replays everything after it too (the readings count says so).

Output: one line per mismatch: ``missing`` (the replay finds it, the record lacks it), ``extra`` (recorded,
the replay does not find it), ``different start`` / ``different end`` / ``different start and end`` (the same
episode, its edges elsewhere); ``different values`` (the same episode, but its start value, end value or peak
differ: those come from the readings, so a figure altered in the record, or a reading, shows here); then a
summary with the readings replayed and the rate. Exit 0 when the record
matches, 1 on any mismatch or an unreadable file, 2 for an invalid site file or bad usage.

Speed: channels that no rule reads together with another are replayed one after the other over the clustered
(channel, time) key. On an SQLite file, where the C scanner is built (`monitor.audit_scan`), the quiet readings
(the engine's quiet-band test, `Processor`) are stepped over in C and only the others reach Python; otherwise
a cursor feeds every reading to the same test inlined in Python (`pretreat replay`'s fast path). Channels
joined by a rule (mass-loading slug, sampler pacing) are merged in (time, channel order) first, as the daemon
judges them, and go through Python.

``--database`` audits the county hub's copy of the site file's sites instead (`monitor.stores.hub_record`): the
same replay over the readings the edges sent. The hub keeps reading times in milliseconds, so the recorded
episode times are compared rounded to the millisecond there, as the readings that started and ended them are.
"""

from __future__ import annotations

import argparse
import heapq
import math
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from config.loader import load_config_or_report
from config.schema import SiteConfig
from monitor import audit_scan
from monitor.checks.engine import CheckEngine, Processor
from monitor.checks.events import EpisodeEvent, iso_utc
from monitor.progress import Progress
from monitor.read.times import UsageError, parse_time
from monitor.stores.episodes import pair_transitions
from monitor.stores.historian_db import QUALITY_BY_CODE, HistorianError, open_for_reading
from monitor.stores.hub_record import is_database_url
from monitor.stores.readonly import connect_record, dialect, has_column, has_table, record_errors, standing
from monitor.warmup import window_start

_EXIT_MISMATCH, _EXIT_USAGE = 1, 2
_OVER_RANGE = audit_scan.OVER_RANGE
Key = tuple[str, str, str]




def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    config = load_config_or_report(args.config, outcome="nothing audited")
    if config is None:
        return _EXIT_USAGE
    try:
        start = parse_time(args.start) if args.start else None
        end = parse_time(args.end) if args.end else None
        if start is not None and end is not None and start >= end:
            raise UsageError("--from must be before --to")
        database = getattr(args, "database", None)
        if database is not None and not is_database_url(database):
            raise UsageError(f"--database {database!r}: expected a postgresql:// URL (the hub's database)")
    except UsageError as exc:
        print(f"pretreat audit: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    try:
        result = audit(config, start=start, end=end, database=database)
    except Exception as exc:  # the record unreadable: either kind (psycopg's errors are known once it is imported)
        if not isinstance(exc, (*record_errors(), HistorianError, OSError)):
            raise
        where = "the hub's database" if database else config.daemon.historian
        print(f"pretreat audit: cannot read {where}: {exc}", file=sys.stderr)
        return _EXIT_MISMATCH
    for line in (*result.mismatches, *result.notes):
        out.write(line + "\n")
    out.write(result.summary() + "\n")
    return _EXIT_MISMATCH if result.mismatches else 0


@dataclass(frozen=True, slots=True)
class Episode:
    key: Key
    start: float
    end: float | None
    # what the readings say of it: the value at its start, at its end and its peak (None where the transition or
    # the figure is absent). Compared too: they come from the readings, so an altered figure is a mismatch.
    values: tuple[float | None, float | None, float | None] = (None, None, None)
    # the law it was judged under: the start's limit and citation. Not a mismatch when it differs (see `compare`)
    law: tuple[float | None, str] = (None, "")


@dataclass(slots=True)
class AuditResult:
    readings: int
    seconds: float
    recorded: int
    replayed: int
    mismatches: list[str]
    notes: list[str] = field(default_factory=list)  # same episode, a different limit or citation (`compare`)

    def summary(self) -> str:
        rate = self.readings / self.seconds if self.seconds > 0 else 0.0
        verdict = "the record matches the replay" if not self.mismatches else \
            f"{len(self.mismatches)} mismatch(es)"
        law = (f"; {len(self.notes)} episode(s) recorded under another limit or citation than the site file "
               "states now") if self.notes else ""
        return (f"audit: {self.readings} readings replayed in {self.seconds:.2f} s ({rate / 1e6:.2f} M/s); "
                f"{self.recorded} episodes recorded, {self.replayed} found by the replay; {verdict}{law}")


def audit(config: SiteConfig, *, start: float | None = None, end: float | None = None,
          database: str | None = None) -> AuditResult:
    """Replay the stored readings of the period and compare the episodes (see the module doc); ``database``:
    the hub's PostgreSQL URL instead of the site file's historian."""
    db: Path | str = database if database is not None else Path(config.daemon.historian)
    began = time.perf_counter()
    engine = CheckEngine.for_config(config)
    events: list[EpisodeEvent] = []
    frm = window_start(config, start) if start is not None else None
    conn = open_for_reading(db)
    try:
        _refuse_impossible_times(conn)
        with Progress("audit", unit="channel group") as bar:  # on a terminal only (monitor.progress)
            n = replay_historian(conn, config, engine, events, start=frm, end=None, bar=bar)
    finally:
        conn.close()
    seconds = time.perf_counter() - began
    replayed = episodes(events)
    recorded = episodes(recorded_events(db))
    notes: list[str] = []
    return AuditResult(n, seconds, *_counts(recorded, replayed, start, end),
                       compare(recorded, replayed, start=start, end=end, notes=notes), notes)


# Reading times the engine's calendar arithmetic can hold: years 1 to 9999 (Python's datetime), epoch seconds.
_FIRST_TIME, _END_TIME = -62_135_596_800.0, 253_402_300_800.0


def _refuse_impossible_times(conn: sqlite3.Connection) -> None:
    """A reading stored outside years 1-9999 (epoch milliseconds stored as seconds, say: a damaged or
    hand-imported file; the daemon refuses device times more than 5 minutes ahead) cannot be judged: a rule's
    month or day arithmetic would fail on it, and one at ±inf would lie outside every period replayed. Each
    channel's first and last time (two index lookups on the (channel_id, time) key) tell, before any replay."""
    for cid, site, channel in conn.execute("SELECT id, site, channel FROM channels ORDER BY id").fetchall():
        for order in ("", " DESC"):
            row = conn.execute(f"SELECT time FROM readings WHERE channel_id = ? ORDER BY time{order} LIMIT 1",
                               (cid,)).fetchone()
            if row is not None and not _FIRST_TIME <= row[0] < _END_TIME:
                raise HistorianError(f"a reading of {site}/{channel} is stored at {row[0]!r} s since 1970, outside "
                                     "years 1-9999: the file is damaged or was imported with the wrong time unit")


def _counts(recorded: list[Episode], replayed: list[Episode], start: float | None,
            end: float | None) -> tuple[int, int]:
    return (sum(_in(e, start, end) for e in recorded), sum(_in(e, start, end) for e in replayed))


def _in(e: Episode, start: float | None, end: float | None) -> bool:
    return (start is None or e.start >= start) and (end is None or e.start < end)


def replay_historian(conn: sqlite3.Connection, config: SiteConfig, engine: CheckEngine,
                     events: list[EpisodeEvent], *, start: float | None, end: float | None,
                     bar: Progress | None = None, native: bool = True) -> int:
    """Feed every configured channel's stored readings of [start, end) through ``engine``; returns how many.
    ``bar`` advances once a group of channels judged together (a rule reading several of them) is done.
    ``native=False``: Python only, even where the C scanner could run (the tests compare the two)."""
    series: dict[tuple[str, str], list[int]] = {}
    for cid, site, ch in conn.execute("SELECT id, site, channel FROM channels ORDER BY id"):
        series.setdefault((site, ch), []).append(cid)
    procs = {(s.id, ch): p for s in config.sites for ch, p in engine.inputs(s.id).items()}
    names = _QualityNames({code: q.value for code, q in QUALITY_BY_CODE.items()})
    order = {(c.site, c.id): i for i, c in enumerate(config.channels)}
    n = 0
    uri = audit_scan.uri_of(conn) if native else None
    lo_t = start if start is not None else -math.inf
    hi_t = end if end is not None else math.inf
    groups = _groups(procs)
    if bar is not None:
        bar.total(len(groups))
    for group in groups:
        if bar is not None:
            bar.advance()
        keys = sorted((k for k in group if k in series), key=order.__getitem__)
        if bar is not None and keys:
            bar.note("/".join(keys[0]))
        if not keys:
            continue
        if len(keys) == 1:
            p, ids = procs[keys[0]], series[keys[0]]
            if uri is not None:
                n += audit_scan.feed_channel(uri, p, ids, lo_t, hi_t, names)
            elif len(ids) == 1 and p.gap == math.inf:
                n += _skip_scan(conn, p, ids[0], start, end, names)
            else:
                n += audit_scan.feed_rows(p, conn.execute(audit_scan.rows_sql(len(ids)), (*ids, lo_t, hi_t)),
                                          names)
        else:
            streams = [_rows(conn, series[k], start, end, i) for i, k in enumerate(keys)]
            rows = heapq.merge(*streams, key=lambda r: (r[0], r[3]))
            n += _feed_many([procs[k] for k in keys], rows, names)
        if engine.events:
            events += engine.drain()
    return n


def _groups(procs: dict[tuple[str, str], Processor]) -> list[set[tuple[str, str]]]:
    """Channels a rule reads together (the replay must merge them by time)."""
    key_of = {id(p): k for k, p in procs.items()}
    seen: set[tuple[str, str]] = set()
    out: list[set[tuple[str, str]]] = []
    for k, p in procs.items():
        if k in seen:
            continue
        group, todo = set(), [p]
        while todo:
            q = todo.pop()
            kq = key_of[id(q)]
            if kq in group:
                continue
            group.add(kq)
            todo += q.linked
        seen |= group
        out.append(group)
    return out


def _rows(conn: sqlite3.Connection, ids: list[int], start: float | None, end: float | None,
          tag: int) -> Iterator[tuple[float, float | None, int, int]]:
    cur = conn.execute(
        f"SELECT time, value, quality, {tag} FROM readings WHERE channel_id IN ({','.join('?' * len(ids))}) "
        "AND time >= ? AND time < ? ORDER BY time, seq",
        [*ids, start if start is not None else float("-inf"), end if end is not None else float("inf")])
    cur.arraysize = 4096
    return iter(cur)


_NEXT = ("SELECT time, seq, value, quality FROM readings WHERE channel_id = ? AND (time, seq) > (?, ?) "
         "AND time < ? AND (quality != 0 OR value < ? OR value > ? OR time >= ?) ORDER BY time, seq LIMIT 1")
_QUIET = ("SELECT total(value), count(*) FROM readings WHERE channel_id = ? AND (time, seq) > (?, ?) "
          "AND (time, seq) < (?, ?)")
_QUIET_PG = _QUIET.replace("total(value)", "coalesce(sum(value), 0.0)")  # PostgreSQL has no total()
_ROWS = ("SELECT time, seq, value, quality FROM readings WHERE channel_id = ? AND (time, seq) > (?, ?) "
         "AND time < ? ORDER BY time, seq LIMIT 256")


def _skip_scan(conn: sqlite3.Connection, p: Processor, cid: int, start: float | None, end: float | None,
               names: dict[int, str]) -> int:
    """One channel's readings, letting SQLite skip the quiet ones.

    Most readings change no rule state: good, inside the channel's quiet band, before its deadline (see
    `monitor.checks.base`). Instead of handing each to Python, ask SQLite for the next reading that is *not*
    quiet (bad, outside [lo, hi], at or after the deadline), judge that one, and repeat with the new band;
    the quiet readings skipped only add to a slug baseline's minute when one is accumulating, which one
    aggregate query gives (SQLite adds them, so that sum can differ from the daemon's in its last bit: the
    audit compares episode starts and ends, not baselines). While the band is empty (every reading matters:
    a flatline rule counting, an episode about to end), rows are read in blocks instead."""
    lo_t = start if start is not None else -math.inf
    hi_t = end if end is not None else math.inf
    pos = (lo_t, -1) if start is None else (math.nextafter(lo_t, -math.inf), 2**62)
    n = conn.execute("SELECT count(*) FROM readings WHERE channel_id = ? AND time >= ? AND time < ?",
                     (cid, lo_t, hi_t)).fetchone()[0]
    while True:
        if p.lo > p.hi:  # no reading is quiet: judge them one by one until one could be
            rows = conn.execute(_ROWS, (cid, *pos, hi_t)).fetchall()
            if not rows:
                return n
            for t, seq, v, q in rows:
                audit_scan.judge(p, t, v, q, names)
                pos = (t, seq)
                if p.lo <= p.hi:
                    break
            continue
        row = conn.execute(_NEXT, (cid, *pos, hi_t, p.lo, p.hi, p.until)).fetchone()
        acc = p.acc
        if acc is not None:
            upto = (row[0], row[1]) if row is not None else (hi_t, 2**62)
            quiet = _QUIET if dialect(conn) == "sqlite" else _QUIET_PG
            total, count = conn.execute(quiet, (cid, *pos, *upto)).fetchone()
            acc.add_quiet_sum(total, count)
        if row is None:
            return n
        t, seq, v, q = row
        audit_scan.judge(p, t, v, q, names)
        pos = (t, seq)


class _QualityNames(dict[int, str]):
    """Quality code -> name. A code this version does not know (written into the file by another program: the
    daemon writes none) reads as ``unknown-<code>``, as `pretreat readings` exports it, and is judged as the bad
    reading it is, instead of stopping the audit."""

    def __missing__(self, code: int) -> str:
        return f"unknown-{code}"


def _feed_many(procs: list[Processor], rows: Iterable[tuple[float, float | None, int, int]],
               names: dict[int, str]) -> int:
    n = 0
    for t, v, q, i in rows:
        n += 1
        p = procs[i]
        if (q == 0 or q == _OVER_RANGE) and v is not None:
            p.good(t, v)
        else:
            p.bad(t, names[q])
    return n


def recorded_events(db: Path | str) -> list[EpisodeEvent]:
    """The episode store's transitions, withdrawn ones left out, in time order (on the hub's database, at the
    millisecond its readings are kept to)."""
    conn = connect_record(db)
    try:
        if not has_table(conn, "episode_events"):
            return []
        # the end reason orders two ends at one instant (`episodes`); a file from before it was kept has none
        reason = "end_reason" if has_column(conn, "episode_events", "end_reason") else "NULL"
        rows = conn.execute("SELECT time, site, channel, rule, event, value, limit_value, citation, peak, "
                            f"{reason} FROM episode_events WHERE 1 = 1{standing(conn)} ORDER BY time, id").fetchall()
        if dialect(conn) == "postgresql":
            rows = [(round(r[0] * 1000) / 1000, *r[1:]) for r in rows]
    finally:
        conn.close()
    return [EpisodeEvent(*r) for r in rows]


def episodes(events: Iterable[EpisodeEvent]) -> list[Episode]:
    """Pair each rule's transitions in time order into episodes, as the episode store pairs them
    (`pair_transitions`: ends at one instant by `end_order`, whatever order they were recorded in); a start
    followed by another before any end is an episode without an end here, so a missing end is a mismatch."""
    ordered = sorted(events, key=lambda e: (e.site, e.channel, e.rule, e.time))
    out = [_episode((s.site, s.channel, s.rule), s, e) for s, e in pair_transitions(ordered, unended=True)]
    return sorted(out, key=lambda e: (e.start, e.key))


def _episode(k: Key, start: EpisodeEvent, end: EpisodeEvent | None) -> Episode:
    return Episode(k, start.time, end.time if end is not None else None,
                   (start.value, end.value if end is not None else None, end.peak if end is not None else None),
                   (start.limit, start.citation))


def compare(recorded: list[Episode], replayed: list[Episode], *, start: float | None,
            end: float | None, notes: list[str] | None = None) -> list[str]:
    """Every difference between the two lists of episodes starting in [start, end), as lines of text.

    The limit and citation an episode was recorded under are compared too, but a difference goes to ``notes``
    (``law differs``), not to the mismatches: the replay judges under the site file as it stands, and a permit
    renewed or a limit corrected since then rightly changes them for older episodes, which were judged under
    the law in force at the time. The note lets the officer see it; `pretreat journal verify` tells a record
    altered since it was sealed from a site file changed since."""
    rec = [e for e in recorded if _in(e, start, end)]
    rep = [e for e in replayed if _in(e, start, end)]
    out: list[str] = []
    left = list(rep)
    for r in rec:
        same = next((p for p in left if p.key == r.key and p.start == r.start and p.end == r.end), None)
        if same is not None:
            left.remove(same)
            if not _same_values(same.values, r.values):
                out.append(f"different values  {_show(r)} recorded {_values(r)}; the replay finds {_values(same)}")
            if notes is not None and not _same_law(same.law, r.law):
                notes.append(f"law differs  {_show(r)} recorded under {_law(r)}; the site file now gives "
                             f"{_law(same)} (changed since, or the record altered: `pretreat journal verify`)")
            continue
        near = next((p for p in left if p.key == r.key and _overlap(r, p)), None)
        if near is None:
            out.append(f"extra     {_show(r)} (recorded; the replay does not find it)")
            continue
        left.remove(near)
        what = "different start and end" if near.start != r.start and near.end != r.end else \
            "different start" if near.start != r.start else "different end"
        out.append(f"{what}  {_show(r)} recorded; the replay finds {_span(near)}")
    out += [f"missing   {_show(p)} (the replay finds it; not in the record)" for p in left]
    return out


def _same_values(a: tuple[float | None, ...], b: tuple[float | None, ...]) -> bool:
    """Equal figures (both absent counts as equal; NaN equals NaN: a figure the rule did not compute)."""
    return all(x == y or (x is None and y is None) or (x is not None and y is not None and x != x and y != y)
               for x, y in zip(a, b, strict=True))


def _same_law(a: tuple[float | None, str], b: tuple[float | None, str]) -> bool:
    return a[1] == b[1] and _same_values(a[:1], b[:1])


def _law(e: Episode) -> str:
    limit, citation = e.law
    return f"limit {limit:g} ({citation or 'no citation'})" if limit is not None else (citation or "no citation")


def _values(e: Episode) -> str:
    names = ("start value", "end value", "peak")
    return ", ".join(f"{n} {v:g}" for n, v in zip(names, e.values, strict=True) if v is not None) or "no figures"


def _overlap(a: Episode, b: Episode) -> bool:
    inf = float("inf")
    return a.start <= (b.end if b.end is not None else inf) and b.start <= (a.end if a.end is not None else inf)


def _span(e: Episode) -> str:
    return f"{iso_utc(e.start)} to {iso_utc(e.end) if e.end is not None else '(open)'}"


def _show(e: Episode) -> str:
    return f"{'/'.join(e.key[:2])} {e.key[2]} {_span(e)}"
