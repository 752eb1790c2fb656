"""What people have said about each alarm: the industry's acknowledgements (``seen``) and comments, as the
alarm engine journaled them (`alarms.model.Seen`, `alarms.model.Comment`).

An industry user's "acknowledge" never acknowledges the plant's alarm: it is journaled as ``seen`` and the
operator's table shows it beside the plant's own acknowledgement state. A ``seen`` counts for the current
occurrence only, the one that began with the alarm's latest ``raise``: after a new raise the industry has not
seen it yet. Comments are kept for every occurrence (newest shown, all counted; the journal lists them all).

The console rebuilds its alarm list on every alarm change, so the journal is read incrementally: each file's
records after the last one read (the journal's ``seq`` is its primary key, so that range read is cheap),
remembered per database file. The journal is append-only (triggers refuse updates and deletes), so nothing
read can change later.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from monitor.stores.readonly import dialect, has_table

COMMENTS_KEPT = 20  # per alarm, newest: the row shows the newest, the journal panel all of them


@dataclass(slots=True)
class _Digest:
    seq: int = 0
    raised: dict[str, float] = field(default_factory=dict)  # alarm -> time of its latest raise
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # alarm -> seen records (any time)
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # alarm -> comments ever


_DIGESTS: dict[str, _Digest] = {}
_LOCK = threading.Lock()


def _file(conn: sqlite3.Connection) -> str:
    """Which record the digest is of: the SQLite file's path; the hub's database (it has no journal view, so its
    digest stays empty) is keyed by its dialect."""
    if dialect(conn) != "sqlite":
        return dialect(conn)
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row is not None else ""


def digest(conn: sqlite3.Connection) -> _Digest:
    """The remarks of every alarm in ``conn``'s file, brought up to its newest journal record."""
    with _LOCK:
        d = _DIGESTS.setdefault(_file(conn), _Digest())
        if not has_table(conn, "journal"):
            return d
        rows = conn.execute("SELECT seq, time, kind, payload FROM journal WHERE seq > ? AND kind IN "
                            "('transition', 'action') ORDER BY seq", (d.seq,)).fetchall()
        for seq, t, kind, text in rows:
            d.seq = seq
            p = json.loads(text)
            alarm = str(p.get("alarm", ""))
            if kind == "transition":
                if p.get("kind") == "raise":
                    d.raised[alarm] = float(p.get("time", t))
                continue
            action = p.get("action")
            if action not in ("seen", "comment"):
                continue
            rec = {"user": p.get("user", ""), "note": p.get("note", ""), "time": float(t), "seq": seq}
            if action == "seen":
                d.seen.setdefault(alarm, []).append(rec)
                del d.seen[alarm][:-COMMENTS_KEPT]
            else:
                d.comments.setdefault(alarm, []).append(rec)
                del d.comments[alarm][:-COMMENTS_KEPT]
                d.counts[alarm] = d.counts.get(alarm, 0) + 1
        return d


def annotate(conn: sqlite3.Connection, rows: list[dict[str, Any]], when: Callable[[str, float], str]) -> None:
    """Add to each alarm row ``seen`` (the industry's acknowledgements of the current occurrence, oldest
    first), ``comments`` (how many) and ``last_comment`` (the newest, or None); ``when(site, t)`` writes a
    time in the site's zone."""
    d = digest(conn)
    for row in rows:
        alarm, site = row["alarm"], row["site"]
        since = d.raised.get(alarm, float("-inf"))
        seen = [r for r in d.seen.get(alarm, []) if r["time"] >= since] if row["state"] != "normal" else []
        row["seen"] = [{**r, "time_text": when(site, r["time"])} for r in seen]
        last = d.comments.get(alarm)
        row["comments"] = d.counts.get(alarm, 0)
        row["last_comment"] = {**last[-1], "time_text": when(site, last[-1]["time"])} if last else None


def is_remark(record: dict[str, Any]) -> bool:
    """A journal record that changes what `annotate` adds (the live follower then rebuilds the rows)."""
    return record.get("record") == "action" and record.get("action") in ("seen", "comment")
