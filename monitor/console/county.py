"""The county console's own page: the hub's view of the edges, and the journal feed the edges send.

Served only when the console reads the county hub's database (``pretreat console --database postgresql://…``);
on an edge's own console the page answers 404 (its health page is the daemon's). Two parts:

- **Edges**: every edge node the hub has heard from, with its sites, whether it is online (an open
  ``edge_offline`` hub alarm says not, with why: its NDEATH or its silence), its last birth (bdSeq and when),
  when it was last heard, the Sparkplug seq of its latest message (in the edge's own order: its payload
  timestamps), and the seqs missing since its birth (an open ``edge_gap``). The hub alarms (open, and the
  latest cleared ones) are listed with the sites they affect. All of it is what `pretreat hub` evaluates every
  ``health_interval`` into ``edges`` and ``hub_alarms`` (`monitor.hub.edges`): the console reads, never judges.
- **Journal feed**: the alarm transitions and journal seals the edges published (``pretreat/v1/…/events``), the
  newest first, as each edge recorded them (its journal seq, time, who and why).

Roles as everywhere in the console (`monitor.console.auth.visible_sites`): an industry user sees the edges that
record one of its company's sites, with those sites only, the hub alarms of those sites, and the journal
records of its sites (a seal of a node with several sites shows only the user's); operators and enforcement see
the whole county.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from monitor.console.app import Console
from monitor.console.requests import allowed_sites, console_of, open_db, session_of, session_or_none
from monitor.console.users import Role

router = APIRouter()
CLEARED_SHOWN = 50
"""Cleared hub alarms listed below the open ones (the latest first)."""
JOURNAL_MAX = 500

EDGES = """
SELECT e.node, e.sites, e.bdseq, extract(epoch FROM e.born_at)::float8, extract(epoch FROM e.died_at)::float8,
       extract(epoch FROM e.last_seen)::float8,
       (SELECT m.seq FROM public.edge_messages m WHERE m.node = e.node ORDER BY m.sent_ms DESC, m.received_at DESC
        LIMIT 1)
FROM public.edges e ORDER BY e.node"""
ALARMS = """
SELECT id, kind, node, sites, detail, extract(epoch FROM raised_at)::float8, extract(epoch FROM cleared_at)::float8
FROM public.hub_alarms WHERE cleared_at IS NULL OR id IN (
    SELECT id FROM public.hub_alarms WHERE cleared_at IS NOT NULL ORDER BY cleared_at DESC LIMIT ?)
ORDER BY cleared_at IS NOT NULL, raised_at DESC, id DESC"""
JOURNAL = """
SELECT node, type, seq, site, body, extract(epoch FROM received_at)::float8 FROM public.events
WHERE type IN ('alarm', 'seal') AND (? OR site = ANY(?) OR jsonb_exists_any(coalesce(body->'sites', '[]'), ?))
ORDER BY (body->>'time')::float8 DESC NULLS LAST, received_at DESC LIMIT ?"""


def _hub_only(c: Console) -> None:
    if not isinstance(c.db, str):
        raise HTTPException(404, "the county page needs the hub's database (pretreat console --database …)")


def _whole_county(c: Console, request: Request) -> tuple[bool, frozenset[str]]:
    s = session_of(request)
    return s.user.role is not Role.INDUSTRY, allowed_sites(c, s)


def edges_view(conn: Any, *, everything: bool, sites: Collection[str]) -> dict[str, Any]:
    """The edges and hub alarms ``sites`` may see (all of them with ``everything``), JSON-ready."""
    mine = set(sites)
    alarms = []
    for aid, kind, node, asites, detail, raised, cleared in conn.execute(ALARMS, (CLEARED_SHOWN,)).fetchall():
        shown = list(asites) if everything else [x for x in asites if x in mine]
        if shown or everything:
            alarms.append({"id": aid, "kind": kind, "node": node, "sites": shown, "detail": detail,
                           "raised": raised, "cleared": cleared})
    open_ = {(a["kind"], a["node"]): a for a in alarms if a["cleared"] is None}
    out = []
    for node, esites, bdseq, born, died, seen, last_seq in conn.execute(EDGES).fetchall():
        shown = list(esites) if everything else [x for x in esites if x in mine]
        if not shown and not everything:
            continue
        offline, gap = open_.get(("edge_offline", node)), open_.get(("edge_gap", node))
        out.append({"node": node, "sites": shown, "online": offline is None and died is None,
                    "offline_detail": offline["detail"] if offline else None, "bdseq": bdseq, "born": born,
                    "died": died, "last_seen": seen, "last_seq": last_seq,
                    "gap_detail": gap["detail"] if gap else None})
    return {"edges": out, "alarms": alarms}


def journal_view(conn: Any, *, everything: bool, sites: Collection[str], limit: int) -> list[dict[str, Any]]:
    """The edges' alarm transitions and seals ``sites`` may see, newest first (by the edge's time)."""
    mine = sorted(sites)
    rows = conn.execute(JOURNAL, (everything, mine, mine, limit)).fetchall()
    out = []
    for node, kind, seq, site, body, received in rows:
        body = dict(body)
        if kind == "seal":
            listed = body.get("sites") or ([site] if site else [])
            body["sites"] = [x for x in listed if everything or x in sites]
        out.append({"node": node, "type": kind, "seq": seq, "site": site, "received": received, **{
            k: body.get(k) for k in ("time", "alarm", "kind", "from", "state", "priority", "who", "why", "value",
                                     "limit", "citation", "hash", "sites")}})
    return out


@router.get("/api/county/edges")
def api_edges(request: Request) -> dict[str, Any]:
    c = console_of(request)
    everything, sites = _whole_county(c, request)
    _hub_only(c)
    conn = open_db(c)
    try:
        return edges_view(conn, everything=everything, sites=sites)
    finally:
        if conn is not None:
            conn.close()


@router.get("/api/county/journal")
def api_journal(request: Request, limit: int = 100) -> list[dict[str, Any]]:
    c = console_of(request)
    everything, sites = _whole_county(c, request)
    _hub_only(c)
    conn = open_db(c)
    try:
        return journal_view(conn, everything=everything, sites=sites, limit=max(1, min(limit, JOURNAL_MAX)))
    finally:
        if conn is not None:
            conn.close()


@router.get("/county", response_model=None)
def county_page(request: Request) -> Response:
    from monitor.console.pages import render

    c, s = console_of(request), session_or_none(request)
    if s is None:
        return RedirectResponse("/login?next=/county", status_code=303)
    if not isinstance(c.db, str):
        return render(c, s, page="error", title="Not found", script="common.js", status=404,
                      heading="404 Not found", message="The county page is served by a console of the hub's "
                      "database (pretreat console --database …).")
    return render(c, s, page="county", title="County edges", script="county.js")
