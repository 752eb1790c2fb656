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
import time
from dataclasses import dataclass
from typing import Any

import psycopg

EVALUATE_LOCK = 0x7072_6574_6875_62  # the advisory lock key of `evaluate` ("prethub")
GAP_WINDOW = 600.0
"""s of message rows examined for holes (and kept): a hole older than this was already alarmed."""
GAP_SHARE = 0.1
"""The share of wall time the hole count may keep PostgreSQL busy: after a count that took d s the next waits
at least d / GAP_SHARE s (a 500-edge county keeps ~300,000 message rows in the window; counting them every
2 s kept the database busy most of the time, beside the hub's own COPY: bench/bench_hub_fleet.py, py-spy)."""


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


GAPS = """
WITH sent AS (
    SELECT m.node, m.sent_ms, m.seq - lag(m.seq) OVER w AS step
    FROM edge_messages m JOIN edges e ON e.node = m.node
    WHERE m.sent_ms >= coalesce(e.birth_ms, 0) AND m.received_at >= now() - make_interval(secs => %(window)s)
    WINDOW w AS (PARTITION BY m.node ORDER BY m.sent_ms, m.seq)),
positioned AS (
    SELECT node, sent_ms, max(sent_ms) OVER (PARTITION BY node) AS latest,
           coalesce(sum(((step + 128) %% 256 + 256) %% 256 - 128)
                    OVER (PARTITION BY node ORDER BY sent_ms, step ROWS UNBOUNDED PRECEDING), 0) AS pos
    FROM sent)
SELECT node, max(pos) - min(pos) + 1 - count(DISTINCT pos) FROM positioned
WHERE sent_ms <= latest - %(grace_ms)s GROUP BY node"""
"""`missing_positions` for every edge in one statement: each message's position is the running sum of the
signed seq steps (-128..127) in the edge's order (its payload timestamps); only messages sent more than
``gap_grace`` before the edge's latest stored one are judged. Done by PostgreSQL: a county of 500 edges keeps
about 300,000 message rows in the window, which fetched into the hub every few seconds stalled its ingest."""


class GapCounter:
    """The holes of every edge (`GAPS`), counted anew at most as often as `GAP_SHARE` allows; in between the
    last count stands (the offline checks, which cost nothing, still run every time)."""

    def __init__(self) -> None:
        self.gaps: dict[str, int] = {}
        self.next_at = 0.0
        self.last_seconds = 0.0

    def count(self, conn: psycopg.Connection[Any], gap_grace: float) -> dict[str, int]:
        now = time.monotonic()
        if now >= self.next_at:
            rows = conn.execute(GAPS, {"window": GAP_WINDOW, "grace_ms": gap_grace * 1000}).fetchall()
            self.gaps = {node: int(n or 0) for node, n in rows}
            self.last_seconds = time.monotonic() - now
            self.next_at = now + self.last_seconds / GAP_SHARE
        return self.gaps


def edge_states(conn: psycopg.Connection[Any], gap_grace: float, counter: GapCounter | None = None
                ) -> list[EdgeState]:
    rows = conn.execute("SELECT node, sites, bdseq, born_at, died_at, last_seen FROM edges ORDER BY node").fetchall()
    gaps = (counter or GapCounter()).count(conn, gap_grace)
    return [EdgeState(node, list(sites), bdseq, born_at, died_at, last_seen, int(gaps.get(node) or 0))
            for node, sites, bdseq, born_at, died_at, last_seen in rows]


def evaluate(conn: psycopg.Connection[Any], *, edge_silence: float, gap_grace: float,
             counter: GapCounter | None = None) -> list[EdgeState]:
    """Raise and clear the hub's alarms from the edges' states, in one transaction; returns the states.
    ``counter``: the hub's `GapCounter`, which spaces the hole counts (without one, they are counted now)."""
    with conn.transaction():
        # one hub's evaluation at a time: otherwise a hub that read an edge's states before its rebirth committed
        # raised its gap and offline alarms again just after the other hub had cleared them (a CI dry run saw
        # the history hold them twice); serialized, that stale raise meets the alarm still open and does nothing
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (EVALUATE_LOCK,))
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        states = edge_states(conn, gap_grace, counter)
        wanted = []
        for e in states:
            wanted.append(("edge_offline", e, _offline_reason(e, now, edge_silence)))
            wanted.append(("edge_gap", e, f"{e.missing} Sparkplug message(s) missing since the edge's birth"
                           if e.missing else None))
        _set_alarms(conn, wanted)
        conn.execute("DELETE FROM edge_messages WHERE received_at < now() - make_interval(secs => %s)",
                     (GAP_WINDOW,))
    return states


def _offline_reason(e: EdgeState, now: dt.datetime, silence: float) -> str | None:
    if e.died_at is not None:
        return f"NDEATH (bdSeq {e.bdseq}) at {e.died_at.isoformat(timespec='seconds')}"
    if e.last_seen is not None and (now - e.last_seen).total_seconds() > silence:
        return f"silent since {e.last_seen.isoformat(timespec='seconds')} (more than {silence:g} s)"
    return None


def _set_alarms(conn: psycopg.Connection[Any], wanted: list[tuple[str, EdgeState, str | None]]) -> None:
    """Clear the alarms whose condition is gone and raise the new ones: two statements for the whole county
    (one a condition per edge took a round trip each, 1,000 of them for 500 edges every `health_interval`)."""
    clear = [(kind, e.node) for kind, e, detail in wanted if detail is None]
    if clear:
        conn.execute("UPDATE hub_alarms SET cleared_at = now() FROM unnest(%s::text[], %s::text[]) AS c(kind, node) "
                     "WHERE hub_alarms.kind = c.kind AND hub_alarms.node = c.node AND cleared_at IS NULL",
                     ([k for k, _ in clear], [n for _, n in clear]))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO hub_alarms (kind, node, sites, detail) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (kind, node) WHERE cleared_at IS NULL DO NOTHING",
                        [(kind, e.node, e.sites, detail) for kind, e, detail in wanted if detail is not None])


def open_alarms(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT kind, node, sites, detail, raised_at FROM hub_alarms WHERE cleared_at IS NULL "
                        "ORDER BY raised_at, id").fetchall()
    return [{"kind": k, "node": n, "sites": list(s), "detail": d, "raised_at": r.isoformat()}
            for k, n, s, d, r in rows]
