"""The corrections of the episode record after late readings, as the history shows them.

The daemon stores each `monitor.checks.revisions.Revision` in ``episode_revisions`` and marks the transitions
it withdrew (``episode_events.withdrawn``, `monitor.stores.episodes`). `withdrawn_ids` lets the pairing leave
those out (a withdrawn start is listed as ``retracted``); `revision_lines` gives each episode shown the
revisions that touched it, oldest first.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from monitor.checks.events import iso_utc, parse_iso
from monitor.checks.revisions import LATE_READING
from monitor.number_text import duration
from monitor.stores.readonly import dialect, has_table, standing

if TYPE_CHECKING:
    from monitor.read.episodes import Episode

_MS = 0.0005 + 1e-6  # s: half the millisecond a revision's stored time is rounded to, and float slack


def withdrawn_ids(conn: sqlite3.Connection) -> set[int]:
    """Ids of transitions a revision withdrew (few; read through the partial index on withdrawn rows). Empty
    for a file recorded before episode schema 3 (read-only, so not migrated). On the hub's database they come
    from the edges' revision events (`monitor.stores.hub_record`), not from a scan of every episode event."""
    if dialect(conn) == "postgresql" and has_table(conn, "episode_withdrawn_ids"):
        return {r[0] for r in conn.execute("SELECT id FROM episode_withdrawn_ids")}
    if not standing(conn):
        return set()
    return {r[0] for r in conn.execute("SELECT id FROM episode_events WHERE withdrawn = 1")}


def revision_lines(conn: sqlite3.Connection, episodes: Sequence[Episode]) -> None:
    """Attach to each episode the revisions that touched it (same rule and channel, a transition moved, found or
    withdrawn within its span): ``"<recorded, UTC>: <change> (<reason> of <time>, <age> old when judged)"``.

    The age says how stale the evidence behind a correction was: a reading taken two hours before it arrived
    can still move or withdraw an episode (readings are honoured however old, so the record equals a replay of
    the stored readings), and an enforcement officer weighing the correction should see that it came late."""
    if not episodes or not has_table(conn, "episode_revisions"):
        return
    keys = {(e.site, e.channel, e.rule) for e in episodes}
    by_key: dict[tuple[str, str, str], list[tuple[float, str, list[str], list[float]]]] = {}
    for rec, s, c, r, why, late, changes, w, a in conn.execute(
            "SELECT recorded, site, channel, rule, reason, late, changes, withdrawn, added FROM episode_revisions "
            "ORDER BY id"):
        if (s, c, r) in keys:
            times = [parse_iso(d["time"]) for d in (*json.loads(w), *json.loads(a))]
            if late is not None and why == LATE_READING:  # (a restoration, `JUDGED_AGAIN`, had no late reading)
                why = f"{why} of {iso_utc(late)}, {duration(max(0.0, rec - late))} old when judged"
            by_key.setdefault((s, c, r), []).append((rec, why, json.loads(changes), times))
    for e in episodes:
        lo = e.start if e.start is not None else e.end
        hi = e.until if e.until is not None else lo
        if lo is None or hi is None:
            continue
        # a revision's times are stored to the millisecond (`iso_utc` rounds), an episode's exactly: a
        # retracted episode (one instant) or a start found at the episode's first reading is matched to the ms
        lo, hi = lo - _MS, hi + _MS
        for rec, why, changes, times in by_key.get((e.site, e.channel, e.rule), []):
            if any(lo <= t <= hi for t in times):
                e.revisions = (e.revisions or []) + [f"{iso_utc(rec)}: {ch} ({why})" for ch in changes]
