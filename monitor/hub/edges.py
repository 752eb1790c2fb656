"""Every edge's health as the hub's database sees it: births, deaths, silence and holes in the Sparkplug seq.

With a shared subscription each hub sees only its share of an edge's messages, so the tracking lives in
PostgreSQL, not in one hub's memory: each message's (node, seq) is stored in ``edge_messages`` in the same
transaction as its content, and any hub (or `pretreat hub status`) evaluates them.

* ``edge_offline``: the edge's NDEATH (its last will, same bdSeq as its current birth) arrived, or nothing at
  all came from it for more than ``edge_silence`` seconds. Cleared by its next birth or message.
* ``edge_gap``: a Sparkplug seq (0..255, wrapping, one per message after NBIRTH) is missing among the messages
  the edge sent since its birth. Messages are put in the edge's own order by their payload timestamps (the
  edge's clock, never compared with the hub's), so two hubs committing out of order raise nothing; only what
  the edge sent more than ``gap_grace`` seconds before its latest stored message is judged (another hub may
  still be committing the rest). Cleared when the hole fills (a hub restarted and committed its backlog) or
  the edge is born again. The window checked is the last ``GAP_WINDOW`` seconds; older message rows are
  pruned.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg

GAP_WINDOW = 600.0
"""s of message rows examined for holes (and kept): a hole older than this was already alarmed."""


@dataclass(frozen=True)
class EdgeState:
    node: str
    sites: list[str]
    bdseq: int | None
    born_at: dt.datetime | None
    died_at: dt.datetime | None
    last_seen: dt.datetime | None
    missing: int
    """Sparkplug seqs missing since the edge's birth (within `GAP_WINDOW`)."""


def missing_positions(seqs: list[int]) -> int:
    """How many messages are missing from seqs (0..255 wrapping) in the order the edge sent them.

    Each seq is unwrapped against the one before by the signed difference (-128..127), so messages sent in the
    same millisecond, listed in any order, are not mistaken for a wrap; the positions must then be contiguous."""
    if not seqs:
        return 0
    pos, prev = 0, seqs[0]
    seen = {0}
    for s in seqs[1:]:
        pos += (s - prev + 128) % 256 - 128
        prev = s
        seen.add(pos)
    return (max(seen) - min(seen) + 1) - len(seen)


def edge_states(conn: psycopg.Connection[Any], gap_grace: float) -> list[EdgeState]:
    rows = conn.execute("SELECT node, sites, bdseq, birth_ms, born_at, died_at, last_seen FROM edges "
                        "ORDER BY node").fetchall()
    out = []
    for node, sites, bdseq, birth_ms, born_at, died_at, last_seen in rows:
        sent = conn.execute(
            "SELECT seq, sent_ms FROM edge_messages WHERE node = %s AND sent_ms >= %s "
            "AND received_at >= now() - make_interval(secs => %s) ORDER BY sent_ms",
            (node, birth_ms or 0, GAP_WINDOW)).fetchall()
        settled = (sent[-1][1] - gap_grace * 1000) if sent else 0
        seqs = [seq for seq, sent_ms in sent if sent_ms <= settled]
        out.append(EdgeState(node, list(sites), bdseq, born_at, died_at, last_seen, missing_positions(seqs)))
    return out


def evaluate(conn: psycopg.Connection[Any], *, edge_silence: float, gap_grace: float) -> list[EdgeState]:
    """Raise and clear the hub's alarms from the edges' states, in one transaction; returns the states."""
    with conn.transaction():
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        states = edge_states(conn, gap_grace)
        for e in states:
            offline = _offline_reason(e, now, edge_silence)
            _set_alarm(conn, "edge_offline", e, offline)
            _set_alarm(conn, "edge_gap", e, f"{e.missing} Sparkplug message(s) missing since the edge's birth"
                       if e.missing else None)
        conn.execute("DELETE FROM edge_messages WHERE received_at < now() - make_interval(secs => %s)",
                     (GAP_WINDOW,))
    return states


def _offline_reason(e: EdgeState, now: dt.datetime, silence: float) -> str | None:
    if e.died_at is not None:
        return f"NDEATH (bdSeq {e.bdseq}) at {e.died_at.isoformat(timespec='seconds')}"
    if e.last_seen is not None and (now - e.last_seen).total_seconds() > silence:
        return f"silent since {e.last_seen.isoformat(timespec='seconds')} (more than {silence:g} s)"
    return None


def _set_alarm(conn: psycopg.Connection[Any], kind: str, e: EdgeState, detail: str | None) -> None:
    if detail is None:
        conn.execute("UPDATE hub_alarms SET cleared_at = now() WHERE kind = %s AND node = %s AND cleared_at IS NULL",
                     (kind, e.node))
    else:
        conn.execute("INSERT INTO hub_alarms (kind, node, sites, detail) VALUES (%s, %s, %s, %s) "
                     "ON CONFLICT (kind, node) WHERE cleared_at IS NULL DO NOTHING", (kind, e.node, e.sites, detail))


def open_alarms(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT kind, node, sites, detail, raised_at FROM hub_alarms WHERE cleared_at IS NULL "
                        "ORDER BY raised_at, id").fetchall()
    return [{"kind": k, "node": n, "sites": list(s), "detail": d, "raised_at": r.isoformat()}
            for k, n, s, d, r in rows]
