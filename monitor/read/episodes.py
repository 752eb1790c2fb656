"""The exceedance history enforcement staff pull, one row per episode: what `pretreat exceedances` writes
and the console's history and episode pages show (`history`).

Episodes come from the episode store (``episode_events`` in the daemon's SQLite file): per (site, channel,
rule), in time then recording order, each ``start`` is paired with the ``end`` that follows it. Nothing is
dropped: a start still open is ``ongoing`` (end and duration measured to now); a start followed by another
start is ``end not recorded``; an end without a start before it is ``start not recorded``.

Columns: start and end (ISO 8601 UTC, ``Z``), duration, peak, limit, unit, rule, citation, and data
completeness. **Peak** is the value the end event carries; when it carries none (an ongoing episode, an older
record) it is computed from the historian's good readings over the episode: the maximum for a high limit
(operator ``>``/``>=``), the minimum for a low one, the reading furthest from the set point for the sampler's
fridge; duration rules (401.17 excursions, sampler pacing) and data-quality rules have no reading peak while
open. **Completeness** is the share of expected readings received with good quality over [start, end]:
expected = ⌊duration / poll interval⌋ + 1 (the instrument's ``poll_interval`` from the site file), received
= good readings in that closed interval, over every series of the channel; a derived channel (flow×
concentration) takes the least complete of its inputs. It is capped at 100 %; csv/json also give the two
counts, so nothing is hidden. Without ``--config`` (``--db`` only) completeness is left empty.
**Measured / unmeasured** (`monitor.checks.coverage`): seconds of the episode covered by readings no further
apart than the channel's ``max_gap``, and the rest (the proven figure and what the worst case adds to it; for
``ph_monthly_excursion`` the month's measured excursion time and the month's unmeasured time). **End reason**:
``cleared``, ``gap`` (the episode ended at the last reading before a gap in the data) or ``month_end``.
**Censored**: caused by an over-range reading judged as the instrument's span top (the true value was higher).
Episodes recorded before these were kept show them empty.

Corrections: a reading that arrived late can make the daemon revise the record (`monitor.checks.revisions`):
an episode found in the past, a start or end moved, an announced episode that never happened. The history shows
the record as corrected; each episode a revision touched lists its revision history (when, what changed, why:
``late reading``; `monitor.read.revisions`), and a withdrawn episode is listed with status ``retracted`` so
what was announced stays visible.

Selection: ``--from``/``--to`` (ISO 8601 with ``Z`` or an offset; a date alone is midnight UTC) keep the
episodes that *overlap* [from, to): one that began before the month and lasted into it is part of the month's
record. Data-quality episodes (stale, sensor_fault, flatline) are not discharge exceedances and are left out
unless ``--data-quality`` is given or ``--rule`` names one.

Cost: pairing reads only the episode store's unique index on (site, channel, rule, event, time, end reason), which
covers it (no table rows; only transitions at one instant are put in id order): 100,000 episodes are found in
about 0.2 s (bench/bench_exceedances.py). Values,
citations, completeness and computed peaks are read only for the rows output; completeness is one range count
per episode over the clustered (channel_id, time) key of ``readings``, so it costs in proportion to the
readings inside those episodes. The table therefore shows the latest ``--limit`` episodes (default 500, and
says how many it left out); csv and json write every episode unless ``--limit`` is given.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from config.rule_catalogue import DATA_QUALITY_RULES, NO_READING_PEAK
from config.schema import SiteConfig
from monitor.checks.coverage import end_order
from monitor.checks.events import iso_utc
from monitor.permitted_excursions import ALLOWANCE_VIOLATIONS, Span, beyond_allowance
from monitor.read.revisions import revision_lines, withdrawn_ids
from monitor.stores.casefile import episode_key as casefile_id
from monitor.stores.casefile import invalid_episodes
from monitor.stores.historian_db import QUALITY_BY_CODE, opening_reason
from monitor.stores.readonly import dialect, has_table

EVIDENCE_MARGIN = 3600.0  # s of readings shown before and after an episode with --evidence


@dataclass(slots=True)
class Episode:
    """One row of the report. ``start``/``end`` epoch s UTC (None when not recorded); ``until`` is where
    measurements stop: the end, or now for an ongoing episode."""

    site: str
    channel: str
    rule: str
    status: str  # closed | ongoing | end not recorded | start not recorded
    start: float | None
    end: float | None
    until: float | None
    start_value: float | None
    end_value: float | None
    limit: float | None
    peak: float | None
    citation: str
    unit: str = ""
    good: int | None = None
    expected: int | None = None
    evidence: list[tuple[str, float, float | None, str, str]] | None = None
    end_reason: str | None = None  # cleared | gap | month_end (None: open, or recorded before schema 2)
    measured: float | None = None  # s of the episode covered by readings (monitor.checks.coverage)
    unmeasured: float | None = None  # s not covered: measured + unmeasured is the worst case
    maintenance: float | None = None  # s the instrument was in service/calibration: neither of the two
    censored: bool = False  # caused by an over-range reading judged as the instrument's span top
    invalid: str = ""  # enforcement marked it invalid (`monitor.stores.casefile`): who, when (UTC), why; no violation
    invalid_at: float | None = None  # when it was marked invalid (epoch s), for tables in the site's time
    invalid_by: str = ""  # who marked it invalid
    invalid_reason: str = ""  # and why
    revisions: list[str] | None = None  # "<when recorded>: <change> (<reason>)", oldest first
    calibration: str = ""  # the instrument's calibration status during the episode (monitor.calibration), UTC
    calibration_local: str = ""  # the same with the site's local times, for the table
    confirmed: float | None = None  # duration rules: when the duration was exceeded (start is the onset)
    permitted: str = ""  # a pH excursion 40 CFR 401.17 permits where the permit adopts it: not a violation
    fault: str = ""  # sensor_fault: the reason of the reading that opened it (the vendor's fault text, quoted)

    @property
    def at(self) -> float:
        return self.start if self.start is not None else self.end or 0.0

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.until is None else self.until - self.start

    @property
    def completeness(self) -> float | None:
        if self.good is None or not self.expected:
            return None
        return min(100.0, 100.0 * self.good / self.expected)


# ---- finding episodes ------------------------------------------------------------------------------------

# (at, site, channel, rule, status, start id, end id, start time, end time, until): an episode before its
# details are read; plain tuples, because a report may pair hundreds of thousands and show only a few.
Found = tuple[float, str, str, str, str, int | None, int | None, float | None, float | None, float]


def find_episodes(conn: sqlite3.Connection, *, now: float, site: str | None = None, rule: str | None = None,
                  channel: str | None = None, start: float | None = None, end: float | None = None,
                  data_quality: bool = False) -> list[Found]:
    """Pair the stored transitions into episodes overlapping [start, end), oldest first (see the module doc).

    Reads only the episode store's unique index (site, channel, rule, event, time, end reason, rowid): per
    (site, channel, rule) the ends and the starts come out in time order from a covering index scan, with no
    table row read (SQLite sorts only the ends at one instant, by id); they are merged here. Details (values,
    citation) are read for the rows shown only
    (`details`).
    """
    if not has_table(conn, "episode_events"):
        return []
    withdrawn = withdrawn_ids(conn)
    where, args = ["1 = 1"], []
    for column, value in (("site", site), ("rule", rule), ("channel", channel)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    keys = conn.execute(f"SELECT DISTINCT site, channel, rule FROM episode_events WHERE {' AND '.join(where)}",
                        args).fetchall()
    out: list[Found] = []
    for k in keys:
        if rule is None and not data_quality and k[2] in DATA_QUALITY_RULES:
            continue
        rows = conn.execute("SELECT event = 'end', time, id FROM episode_events "
                            "WHERE site = ? AND channel = ? AND rule = ? ORDER BY event, time, id", k).fetchall()
        ends = _in_end_order(conn, [(t, i, True) for is_end, t, i in rows if is_end and i not in withdrawn])
        starts = [(t, i, False) for is_end, t, i in rows if not is_end and i not in withdrawn]
        out += _pair(k, heapq.merge(ends, starts), now)
        if withdrawn:  # an announced start a revision withdrew with none at its time now: retracted
            kept = {t for t, _i, _e in starts}
            out += [(t, *k, "retracted", i, None, t, None, t) for is_end, t, i in rows
                    if not is_end and i in withdrawn and t not in kept]
    keep = [f for f in out if (start is None or f[9] >= start) and (end is None or f[0] < end)]
    keep.sort()
    return keep


def _in_end_order(conn: sqlite3.Connection, ends: list[tuple[float, int, bool]]) -> list[tuple[float, int, bool]]:
    """``ends`` (in time, then id order) with those at one instant in `end_order` of their reasons: a correction
    after late readings can store an instant's second end first. Rare, so their reasons are read by id then, and
    the covering scan stays the rule."""
    tied = {i for k, (t, i, _e) in enumerate(ends)
            if (k and ends[k - 1][0] == t) or (k + 1 < len(ends) and ends[k + 1][0] == t)}
    if not tied:
        return ends
    marks = ", ".join("?" * len(tied))
    reasons = dict(conn.execute(f"SELECT id, end_reason FROM episode_events WHERE id IN ({marks})", sorted(tied)))
    return sorted(ends, key=lambda e: (e[0], end_order(reasons.get(e[1])), e[1]))


def _pair(key: tuple[str, str, str], events: Iterable[tuple[float, int, bool]], now: float) -> list[Found]:
    """Walk one rule's transitions in time order: each start takes the end that follows it.

    Transitions at one time are taken in the order that pairs them, not in row order: an end first while an
    episode is open (it closes it: a month's end and the next month's start at one reading), a start first
    while none is (an episode of one reading, [t, t], whose end a correction after late readings may have
    stored before its start)."""
    s, c, r = key
    out: list[Found] = []
    opened: tuple[float, int] | None = None
    for t, group in groupby(events, key=lambda e: e[0]):
        same = list(group)
        while same:
            pick = next((e for e in same if e[2] == (opened is not None)), same[0])
            same.remove(pick)
            _t, i, is_end = pick
            if not is_end:
                if opened is not None:
                    out.append((opened[0], s, c, r, "end not recorded", opened[1], None, opened[0], None,
                                opened[0]))
                opened = (t, i)
            elif opened is not None:
                out.append((opened[0], s, c, r, "closed", opened[1], i, opened[0], t, t))
                opened = None
            else:
                out.append((t, s, c, r, "start not recorded", None, i, None, t, t))
    if opened is not None:
        out.append((opened[0], s, c, r, "ongoing", opened[1], None, opened[0], None, max(now, opened[0])))
    return out


def details(conn: sqlite3.Connection, found: list[Found]) -> list[Episode]:
    """The report rows for ``found``: values, limit, peak and citation read by id (rowid look-ups).

    Rows are keyed by (site, id): on the hub's database an id is the edge's episode store row id, unique per
    edge node only, and a site's events all come from its edge."""
    if not found:
        return []
    ids = [i for f in found for i in (f[5], f[6]) if i is not None]
    columns = "e.site, e.id, e.value, e.limit_value, e.peak, e.citation, " + _coverage_columns(conn)
    stored = conn.execute("SELECT MAX(id) FROM episode_events").fetchone()[0] or 0
    if dialect(conn) == "postgresql":  # no temporary tables in a read-only transaction: an array instead
        sites = sorted({f[1] for f in found})
        rows = {(r[0], r[1]): r[1:] for r in conn.execute(
            f"SELECT {columns} FROM episode_events e WHERE e.id = ANY(?) AND e.site = ANY(?)", (ids, sites))}
    elif len(ids) * 4 >= stored:  # a large share: one sequential scan beats a look-up per row
        rows = {(r[0], r[1]): r[1:] for r in conn.execute(f"SELECT {columns} FROM episode_events e")}
    else:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS exceedance_ids (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM temp.exceedance_ids")
        conn.executemany("INSERT OR IGNORE INTO temp.exceedance_ids VALUES (?)", ((i,) for i in ids))
        rows = {(r[0], r[1]): r[1:] for r in conn.execute(
            f"SELECT {columns} FROM temp.exceedance_ids x JOIN episode_events e ON e.id = x.id")}
    out = []
    for _at, site, channel, rule, status, sid, eid, st, et, until in found:
        s = rows.get((site, sid)) if sid is not None else None
        e = rows.get((site, eid)) if eid is not None else None
        limit = s[2] if s is not None and s[2] is not None else (e[2] if e is not None else None)
        ep = Episode(site, channel, rule, status, st, et, until, s[1] if s else None, e[1] if e else None,
                     limit, e[3] if e else None, (s or e or (0, 0, 0, 0, ""))[4])
        if e is not None:
            ep.end_reason, ep.measured, ep.unmeasured, ep.maintenance = e[5], e[6], e[7], e[10]
        ep.censored = bool((s is not None and s[8]) or (e is not None and e[8]))
        ep.confirmed = s[9] if s is not None else None
        out.append(ep)
    return out


def _coverage_columns(conn: sqlite3.Connection) -> str:
    """end_reason, measured, unmeasured, censored, confirmed, maintenance: NULLs for a file recorded before
    episode schema 2 (4 for confirmed, 5 for maintenance), read with --db, read-only, so not migrated."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(episode_events)")}
    confirmed = "e.confirmed" if "confirmed" in have else "NULL"
    maintenance = "e.maintenance" if "maintenance" in have else "NULL"
    if "measured" in have:
        return f"e.end_reason, e.measured, e.unmeasured, e.censored, {confirmed}, {maintenance}"
    return f"NULL, NULL, NULL, 0, {confirmed}, {maintenance}"


# ---- completeness, peaks, evidence -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Channel:
    inputs: tuple[tuple[str, float | None], ...]  # (channel id, poll interval s) read by the rule
    unit: str
    peak: str  # "max" | "min" | "far" | "" (none from readings)
    mid: float = 0.0  # set point, for "far"


def annotate(conn: sqlite3.Connection, episodes: list[Episode], config: SiteConfig | None, *,
             evidence: bool = False) -> None:
    """Fill unit, completeness counts, missing peaks (and evidence) for ``episodes``, in place.

    One SQL statement for all of them: a temporary table of (episode, input, series id, interval) joined
    to ``readings`` by correlated range counts on its clustered key; min/max are only read where a peak is
    missing (SQLite evaluates a CASE branch only when taken).
    """
    if not episodes:
        return
    series = _series(conn)
    plans = {key: _plan(key, config) for key in {(e.site, e.channel, e.rule) for e in episodes}}
    permitted = {(s.id, b.channel, b.rule): str(b.params["permitted"]) for s in (config.sites if config else ())
                 for b in s.checks if b.params.get("permitted")}
    todo: list[tuple[int, int, int, float, float, int]] = []
    invalid = invalid_episodes(conn)
    spans: dict[tuple[str, str], list[Span]] = {}
    for n, e in enumerate(episodes):
        plan = plans[(e.site, e.channel, e.rule)]
        inv = invalid.get(casefile_id(e.site, e.channel, e.rule, e.start)) if e.start is not None else None
        if inv is not None:
            e.invalid = f"marked invalid by {inv.user} at {iso_utc(inv.time)}: {inv.reason}"
            e.invalid_at, e.invalid_by, e.invalid_reason = inv.time, inv.user, inv.reason
        if (e.site, e.channel, e.rule) in permitted:  # the permit adopts 40 CFR 401.17: within it, no violation
            _permit(conn, e, permitted[(e.site, e.channel, e.rule)], spans)
        e.unit = "s" if e.rule in NO_READING_PEAK and e.rule not in DATA_QUALITY_RULES else plan.unit
        if e.start is None or e.until is None:
            continue
        want_peak = int(e.peak is None and bool(plan.peak) and len(plan.inputs) == 1)
        for part, (ch, interval) in enumerate(plan.inputs):
            if interval or want_peak:  # without an interval (no site file) a count says nothing
                todo += [(n, part, cid, e.start, e.until, want_peak) for cid in series.get((e.site, ch), [])]
    counts = _range_counts(conn, todo)
    _calibration(conn, episodes, config)
    for e in episodes:
        if e.rule == FAULT_RULE and e.start is not None:
            e.fault = opening_reason(conn, e.site, e.channel, e.start)
    for n, e in enumerate(episodes):
        plan = plans[(e.site, e.channel, e.rule)]
        _complete(e, plan, counts, n)
        if evidence:
            e.evidence = list(_evidence(conn, e, plan, series))


FAULT_RULE = "sensor_fault"


def _permit(conn: sqlite3.Connection, e: Episode, basis: str, spans: dict[tuple[str, str], list[Span]]) -> None:
    """Mark ``e`` permitted under ``basis`` (40 CFR 401.17) when it is within the allowances; when it is part of
    a single-duration or monthly-total violation it stays a violation and its citation says why."""
    key = (e.site, e.channel)
    if key not in spans:
        spans[key] = [Span(f[2], f[3], f[7], f[8]) for rule in ALLOWANCE_VIOLATIONS
                      for f in find_episodes(conn, now=time.time(), site=e.site, channel=e.channel, rule=rule)
                      if f[7] is not None and f[4] != "retracted"]
    why = beyond_allowance(e.channel, e.rule, e.start, e.end, spans[key]) if e.start is not None else ""
    if why:
        e.citation += f" [{why}]"
        return
    e.permitted = basis
    e.citation += f" [permitted excursion under {basis}, adopted by the permit: not a violation]"


def _calibration(conn: sqlite3.Connection, episodes: list[Episode], config: SiteConfig | None) -> None:
    """The calibration status of each episode's instrument over its span: the first thing asked of a reading
    used as evidence (needs the site file for the intervals in force)."""
    from monitor.calibration import episode_calibration
    from monitor.stores.calibration import entries

    if config is None:
        return
    found: dict[tuple[str, str], list[Any]] = {}
    for c in entries(conn):
        found.setdefault((c.site, c.channel), []).append(c)
    sites = {s.id: s for s in config.sites}
    now = time.time()  # an open episode is judged up to now, never into the future
    for e in episodes:
        if e.start is not None:
            site = sites.get(e.site)
            e.calibration = episode_calibration(site, found, e.channel, e.start, e.end, now=now)
            e.calibration_local = episode_calibration(site, found, e.channel, e.start, e.end, now=now, local=True)


def _complete(e: Episode, plan: _Channel, counts: dict[tuple[int, int], tuple[int, Any, Any]], n: int) -> None:
    if e.start is None or e.until is None or not plan.inputs:
        return
    ratios: list[tuple[float, int, int]] = []
    for part, (_ch, interval) in enumerate(plan.inputs):
        good, lo, hi = counts.get((n, part), (0, None, None))
        if part == 0 and e.peak is None and plan.peak and len(plan.inputs) == 1:
            e.peak = _peak(plan, lo, hi)
        if interval:
            expected = math.floor((e.until - e.start) / interval + 1e-9) + 1
            ratios.append((good / expected, good, expected))
    if ratios:
        _, e.good, e.expected = min(ratios)


def _peak(plan: _Channel, lo: float | None, hi: float | None) -> float | None:
    if plan.peak == "max":
        return hi
    if plan.peak == "min":
        return lo
    if lo is None or hi is None:
        return None
    return lo if abs(lo - plan.mid) > abs(hi - plan.mid) else hi


def _range_counts(conn: sqlite3.Connection, todo: list[tuple[int, int, int, float, float, int]]
                  ) -> dict[tuple[int, int], tuple[int, Any, Any]]:
    if not todo or not has_table(conn, "readings"):
        return {}
    sub = "FROM readings r WHERE r.channel_id = e.cid AND r.time >= e.lo AND r.time <= e.hi"
    counts = (f"SELECT n, part, SUM((SELECT COUNT(r.value) {sub})), "
              f"MIN(CASE WHEN want_peak = 1 THEN (SELECT MIN(r.value) {sub}) END), "
              f"MAX(CASE WHEN want_peak = 1 THEN (SELECT MAX(r.value) {sub}) END) ")
    if dialect(conn) == "postgresql":
        # the hub keeps reading times in ms (the Sparkplug timestamp, rounded as the edge rounds it): the
        # bounds are rounded the same way, so the reading that opened an episode is inside it here too; and
        # the ranges go as arrays, since a read-only transaction makes no temporary table
        cols = list(zip(*todo, strict=True))
        lo, hi = ([round(t * 1000) / 1000 for t in ts] for ts in (cols[3], cols[4]))
        rows = conn.execute(
            "WITH e (n, part, cid, lo, hi, want_peak) AS (SELECT * FROM unnest(?::int[], ?::int[], ?::bigint[], "
            f"?::float8[], ?::float8[], ?::int[])) {counts} FROM e GROUP BY n, part",
            (list(cols[0]), list(cols[1]), list(cols[2]), lo, hi, list(cols[5]))).fetchall()
    else:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS exceedance_ranges "
                     "(n INTEGER, part INTEGER, cid INTEGER, lo REAL, hi REAL, want_peak INTEGER)")
        conn.execute("DELETE FROM temp.exceedance_ranges")
        conn.executemany("INSERT INTO temp.exceedance_ranges VALUES (?,?,?,?,?,?)", todo)
        rows = conn.execute(f"{counts} FROM temp.exceedance_ranges e GROUP BY n, part").fetchall()
    return {(n, part): (int(good or 0), lo, hi) for n, part, good, lo, hi in rows}


def _series(conn: sqlite3.Connection) -> dict[tuple[str, str], list[int]]:
    """(site, channel) -> ids of its historian series (one per unit it was recorded in)."""
    if not has_table(conn, "channels"):
        return {}
    out: dict[tuple[str, str], list[int]] = {}
    for cid, s, c in conn.execute("SELECT id, site, channel FROM channels ORDER BY id"):
        out.setdefault((s, c), []).append(int(cid))
    return out


def _plan(key: tuple[str, str, str], config: SiteConfig | None) -> _Channel:
    """What a rule on a channel reads, how often, in what unit, and which way its peak goes."""
    site_id, channel, rule = key
    site = next((s for s in config.sites if s.id == site_id), None) if config else None
    if site is None or config is None:
        return _Channel(inputs=((channel, None),), unit="", peak="")
    binding = next((b for b in site.checks if b.rule == rule and b.channel == channel), None)
    inputs = binding.inputs if binding is not None else (channel,)
    chans = {c.id: c for c in site.channels}
    pairs = []
    for ch in inputs:
        c = chans.get(ch)
        inst = config.instruments_by_id.get((site_id, c.instrument)) if c is not None else None
        pairs.append((ch, inst.poll_interval if inst is not None else None))
    unit = chans[channel].unit if channel in chans else ""
    params = binding.params if binding is not None else {}
    op = str(params.get("operator", ""))
    if rule in NO_READING_PEAK:
        return _Channel(inputs=tuple(pairs), unit=unit, peak="")
    if "low" in params and "high" in params:
        mid = (float(params["low"]) + float(params["high"])) / 2
        return _Channel(inputs=tuple(pairs), unit=unit, peak="far", mid=mid)
    peak = "max" if op in (">", ">=") else "min" if op in ("<", "<=") else ""
    return _Channel(inputs=tuple(pairs), unit=unit, peak=peak)


def _evidence(conn: sqlite3.Connection, e: Episode, plan: _Channel, series: dict[tuple[str, str], list[int]]
              ) -> Iterator[tuple[str, float, float | None, str, str]]:
    """Every reading of the episode's input channels from an hour before to an hour after, time order."""
    first = e.at - EVIDENCE_MARGIN
    last = (e.until if e.until is not None else e.at) + EVIDENCE_MARGIN
    rows: list[tuple[float, int, str, float | None, str, str]] = []
    for ch, _interval in plan.inputs:
        for cid in series.get((e.site, ch), []):
            for t, seq, value, code, reason in conn.execute(
                    "SELECT time, seq, value, quality, reason FROM readings WHERE channel_id = ? "
                    "AND time >= ? AND time <= ? ORDER BY time, seq", (cid, first, last)):
                q = QUALITY_BY_CODE.get(code)
                rows.append((t, seq, ch, value, q.value if q else f"code {code}", reason))
    rows.sort(key=lambda r: (r[0], r[1]))
    for t, _seq, ch, value, quality, reason in rows:
        yield ch, t, value, quality, reason


def episode_key(conn: sqlite3.Connection, record_id: int) -> tuple[str, str, str] | None:
    """(site, channel, rule) of the episode whose start or end record is ``record_id``; None if none is."""
    if not has_table(conn, "episode_events"):
        return None
    row = conn.execute("SELECT site, channel, rule FROM episode_events WHERE id = ?", (record_id,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), str(row[2]))


def episode_start(conn: sqlite3.Connection, record_id: int, *, now: float) -> tuple[str, str, str, float] | None:
    """(site, channel, rule, start) of the episode whose start or end record is ``record_id``, paired as the history
    pairs them (an end that shares its instant with the next episode's start closes the one before, and two ends
    at one instant go by `end_order`); an end whose start is not recorded gives its own time. None if none is."""
    key = episode_key(conn, record_id)
    if key is None:
        return None
    site, channel, rule = key
    for f in find_episodes(conn, now=now, site=site, channel=channel, rule=rule, data_quality=True):
        if record_id in (f[5], f[6]):
            start = f[7] if f[7] is not None else f[8]
            return None if start is None else (site, channel, rule, start)
    return None  # a withdrawn transition: no episode stands on it


def episode_by_record(conn: sqlite3.Connection, record_id: int, *, config: SiteConfig | None, now: float
                      ) -> Episode | None:
    """The episode (data-quality ones included) whose start or end record is ``record_id``, annotated."""
    key = episode_key(conn, record_id)
    if key is None:
        return None
    site, channel, rule = key
    found = [f for f in find_episodes(conn, now=now, site=site, channel=channel, rule=rule, data_quality=True)
             if record_id in (f[5], f[6])]
    shown = details(conn, found)
    annotate(conn, shown, config)
    revision_lines(conn, shown)  # the episode's corrections after late readings, if any
    return shown[0] if shown else None


# ---- the history, as the command and the console ask for it ----------------------------------------------

@dataclass(frozen=True, slots=True)
class History:
    """The episodes shown of those that matched: ``total`` matched, ``shown`` are the latest of them (the
    ``limit``), numbered from ``first`` (1-based, the oldest shown) in the order they were found."""

    total: int
    first: int
    found: list[Found]
    shown: list[Episode]

    def numbered(self) -> list[tuple[int, Episode]]:
        return list(enumerate(self.shown, start=self.first))

    def record_ids(self) -> list[int]:
        """Each shown episode's name in the store: the id of its start record, else of its end record."""
        return [f[5] if f[5] is not None else f[6] for f in self.found]  # type: ignore[misc]


def history(conn: sqlite3.Connection, *, config: SiteConfig | None, now: float,
            sites: Iterable[str | None] = (None,), rule: str | None = None, channel: str | None = None,
            start: float | None = None, end: float | None = None, data_quality: bool = False,
            evidence: bool = False, limit: int = 0) -> History:
    """Find the episodes of ``sites`` (None: every site) overlapping [start, end), keep the latest ``limit``
    (0: all), read their details and annotate them (completeness, peaks, evidence)."""
    found = sorted(f for site in sites for f in find_episodes(
        conn, now=now, site=site, rule=rule, channel=channel, start=start, end=end, data_quality=data_quality))
    first = max(0, len(found) - limit) if limit > 0 else 0
    shown = details(conn, found[first:])
    annotate(conn, shown, config, evidence=evidence)
    revision_lines(conn, shown)
    return History(total=len(found), first=first + 1, found=found[first:], shown=shown)
