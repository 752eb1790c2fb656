"""The console's JSON API (and the event stream). Every endpoint needs a session; the rules per role:

=================================  ==========  =================  ===========
endpoint                           operator    industry           enforcement
=================================  ==========  =================  ===========
GET  /api/me, /api/sites           yes         its company's      yes
GET  /api/overview[?q=]            all sites   its sites          all sites
GET  /api/kpi[?period=&site=]      all sites   its sites          all sites
GET  /api/alarms, /api/journal,    all sites   its sites          all sites
     /api/alarm-summary
POST /api/alarms/{id}/ack          yes         as ``seen``        403
POST /api/alarms/{id}/seen         403         its sites' alarms  403
POST /api/alarms/{id}/comment      yes         its sites' alarms  403
POST /api/alarms/{id}/shelve,      yes         403                403
     unshelve, reset
GET  /api/sites/{site}[/trend,     yes         its sites, else    yes
     /slug]                                    403
GET  /api/history (json, csv)      yes         its sites          yes
GET  /api/episodes/{id}            yes         its sites          yes
GET  /api/health                   yes         its instruments    yes
GET  /api/events[?site=S]          yes         its sites          yes
     [&normal=0]
GET  /api/reports[?site=S]         all sites   its sites          all sites
GET  /api/reports/{site}/{kind}/   yes         its sites, else    yes
     {name}  (`reports` module)                403
=================================  ==========  =================  ===========

No session: 401. A site (or alarm, episode) outside the user's sites: 403, also when it does not exist, so an
industry user cannot probe for other companies' site names (operators and enforcement get 404 for a site
that does not exist). POST requests need the session's CSRF token in ``X-CSRF-Token`` and a JSON body.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from alarms.commands import ACTIONS
from alarms.model import AlarmKey
from monitor import clock
from monitor.console import history_view, kpi, overview, queries
from monitor.console.actions import carry_out
from monitor.console.app import Console
from monitor.console.auth import may_act, role_action, site_ids, visible_sites
from monitor.console.requests import (
    allowed_sites,
    check_csrf,
    console_of,
    open_db,
    session_of,
    site_for,
    writable_record,
)
from monitor.console.trend_slug import slug_line
from monitor.console.trends import trend
from monitor.console.users import Role
from monitor.exceedances_render import episode_record, json_line, write_csv, write_json
from monitor.read import episodes
from monitor.read.alarms import configured_alarms
from monitor.read.baselines import daemon_snapshot, site_baselines
from monitor.read.readings import limits, site_summary
from monitor.read.status import stale_channels
from monitor.read.times import UsageError, time_range
from monitor.stores.readonly import has_table

router = APIRouter(prefix="/api")
HEARTBEAT = 15.0  # s between comments on an idle stream (keeps proxies from closing it)


@router.get("/me")
def me(request: Request) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    return {"name": s.user.name, "role": s.user.role.value, "company": s.user.company, "csrf": s.csrf,
            "actions": sorted(a for a in ACTIONS if may_act(s.user, a)),
            "sites": [{"id": x.id, "name": x.name} for x in visible_sites(s.user, c.config)]}


@router.get("/sites")
def sites(request: Request) -> list[dict[str, Any]]:
    c, s = console_of(request), session_of(request)
    counts: dict[str, int] = {}
    for row in c.hub.rows.values():
        if row["tier"] < 3:
            counts[row["site"]] = counts.get(row["site"], 0) + 1
    return [{"id": x.id, "name": x.name, "company": x.company, "jurisdiction": x.jurisdiction,
             "timezone": x.timezone, "alarms": counts.get(x.id, 0)} for x in visible_sites(s.user, c.config)]


@router.get("/alarms")
def alarm_list(request: Request, site: str | None = None, include_normal: bool = True) -> list[dict[str, Any]]:
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s) if site is None else frozenset({site_for(c, s, site).id})
    conn = open_db(c)
    if conn is None:
        return []
    try:
        rows = queries.alarms(conn, c.config, wanted)
    finally:
        conn.close()
    return rows if include_normal else [r for r in rows if r["tier"] < 4]


@router.get("/overview")
def overview_tiles(request: Request, q: str = "") -> dict[str, Any]:
    """One tile per site the caller sees (`monitor.console.overview`), worst first; ``q`` keeps the sites
    whose id, name, company or jurisdiction contains it (case-insensitive)."""
    c, s = console_of(request), session_of(request)
    mine = visible_sites(s.user, c.config)
    total = len(mine)
    words = q.strip().lower().split()
    if words:
        mine = [x for x in mine if all(w in f"{x.id} {x.name} {x.company} {x.jurisdiction}".lower() for w in words)]
    conn = open_db(c)
    try:
        tiles = overview.tiles(conn, mine, c.hub.rows.values(), now=clock.wall())
    finally:
        if conn is not None:
            conn.close()
    return {"sites": tiles, "total": total, "shown": len(tiles)}


PERIODS = {"24h": 86400.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}


@router.get("/kpi")
def alarm_kpis(request: Request, period: str = Query("7d", pattern="^(24h|7d|30d)$"),
               site: str | None = None) -> dict[str, Any]:
    """ISA-18.2 / EEMUA 191 alarm KPIs over the last ``period`` (`monitor.console.kpi`), per site and overall."""
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s) if not site else frozenset({site_for(c, s, site).id})
    now = clock.wall()
    conn = open_db(c)
    try:
        out = kpi.kpis(conn, c.config, wanted, start=now - PERIODS[period], end=now, now=now,
                       source=str(c.db))
    finally:
        if conn is not None:
            conn.close()
    return {**out, "period": period}


@router.get("/alarm-summary")
def alarm_summary(request: Request) -> list[dict[str, Any]]:
    """The caller's alarms that are not normal, as the live follower holds them (no database read): what
    the header on every page counts per priority."""
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s)
    rows = [r for r in c.hub.rows.values() if r["site"] in wanted and r["tier"] < 4]
    return [{"alarm": r["alarm"], "priority": r["priority"], "state": r["state"]}
            for r in sorted(rows, key=queries.alarm_sort_key)]


@router.post("/alarms/{site}/{channel}/{rule}/{action}")
async def act(request: Request, site: str, channel: str, rule: str, action: str) -> JSONResponse:
    """Queue an operator action for the daemon and answer with its outcome (see `monitor.console.actions`)."""
    import anyio.to_thread

    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    site_for(c, s, site)
    action = role_action(s.user.role, action)
    if action not in ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    if not may_act(s.user, action):
        raise HTTPException(403, f"a {s.user.role.value} user may not {action} alarms")
    try:
        alarm_id = AlarmKey(site, channel, rule).id
    except ValueError as exc:
        raise HTTPException(404, str(exc)) from exc
    if alarm_id not in configured_alarms(c.config):
        raise HTTPException(404, f"{alarm_id} is not an alarm of this site file")
    if "json" not in request.headers.get("content-type", ""):
        raise HTTPException(415, "send the action as JSON")
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise HTTPException(400, "the body is not JSON") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, "the body must be a JSON object")
    outcome = await anyio.to_thread.run_sync(
        lambda: carry_out(writable_record(c), alarm_id=alarm_id, action=action, user=s.user.name, body=body,
                          wait=c.action_wait))
    return JSONResponse(outcome.to_json(), status_code=outcome.http_status)


@router.get("/journal")
def journal(request: Request, alarm: str | None = None, limit: int = Query(50, ge=1, le=1000)) -> list[dict[str, Any]]:
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s)
    if alarm is not None:
        site_for(c, s, alarm.split("/")[0])
    conn = open_db(c)
    if conn is None:
        return []
    try:
        return queries.journal(conn, sites=wanted, alarm=alarm, limit=limit, config=c.config)
    finally:
        conn.close()


@router.get("/sites/{site}")
def site_view(request: Request, site: str) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    chosen = site_for(c, s, site)
    stale = stale_channels(c.db) if isinstance(c.db, Path) else []  # the hub's database: no daemon snapshot
    snapshot, why = daemon_snapshot(c.db)  # the slug baselines in force: the running daemon's own
    now = clock.wall()
    conn = open_db(c)
    try:
        return {**site_summary(conn, c.config, chosen, now=now, stale=stale),
                "slug_baselines": site_baselines(c.config, chosen, snapshot, why, now=now)}
    finally:
        if conn is not None:
            conn.close()


@router.get("/sites/{site}/trend")
def site_trend(request: Request, site: str, channel: str, start: float | None = None, end: float | None = None,
               buckets: int = Query(800, ge=1, le=4000)) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    chosen = site_for(c, s, site)
    if channel not in {ch.id for ch in chosen.channels}:
        raise HTTPException(404, f"no channel {channel!r} at {site}")
    now = clock.wall()
    end = now if end is None else end
    start = end - 86400.0 if start is None else start
    conn = open_db(c)
    try:
        return trend(conn, c.config, chosen, channel, start=start, end=end, buckets=buckets, now=now,
                     source=str(c.db))
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from exc
    finally:
        if conn is not None:
            conn.close()


@router.get("/sites/{site}/slug")
def site_slug_line(request: Request, site: str, channel: str, start: float, end: float) -> list[dict[str, Any]]:
    """The slug threshold in force per local day of the window (`monitor.console.trend_slug`)."""
    c, s = console_of(request), session_of(request)
    chosen = site_for(c, s, site)
    if channel not in {ch.id for ch in chosen.channels}:
        raise HTTPException(404, f"no channel {channel!r} at {site}")
    if not end > start or end - start > 31 * 86400.0:
        raise HTTPException(400, "the window must end after its start and cover at most 31 days")
    if not isinstance(c.db, Path):
        return []  # the hub's database: the daemon's rebuild reads the historian file
    snapshot, _why = daemon_snapshot(c.db)
    live = ((snapshot or {}).get("slug_baselines") or {}).get(f"{chosen.id}/{channel}")
    return slug_line(c.config, chosen, channel, start=start, end=end, now=clock.wall(), live=live)


@router.get("/history")
def history(request: Request, site: str | None = None, rule: str | None = None, channel: str | None = None,
            start: str | None = Query(None, alias="from"), end: str | None = Query(None, alias="to"),
            data_quality: bool = False, evidence: bool = False, limit: int | None = Query(None, ge=0),
            format: str = Query("json", pattern="^(json|csv)$"), download: bool = False) -> Response:
    """The exceedance history with `pretreat exceedances`'s filters, as JSON Lines or CSV (same writers)."""
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s) if site is None else frozenset({site_for(c, s, site).id})
    try:
        t0, t1 = time_range(start, end, names=("'from'", "'to'"))
    except UsageError as exc:
        raise HTTPException(400, str(exc)) from exc
    out = io.StringIO()
    total = 0
    conn = open_db(c)
    if conn is not None:
        try:
            found = episodes.history(
                conn, config=c.config, now=clock.wall(), sites=(None,) if wanted == _all(c) else sorted(wanted),
                rule=rule or None, channel=channel or None, start=t0, end=t1, data_quality=data_quality,
                evidence=evidence, limit=limit or 0)
            total = found.total
            if format == "csv":
                write_csv(out, found.numbered(), evidence=evidence)
            elif download:
                write_json(out, found.numbered(), evidence=evidence)
            else:  # the page's rows: the stable record id, local times, units, who acknowledged, the cause
                records = [{**episode_record(n, e, evidence=evidence), "episode_id": i}
                           for (n, e), i in zip(found.numbered(), found.record_ids(), strict=True)]
                history_view.enrich(conn, c.config, records, found.shown, source=str(c.db))
                out.writelines(json_line(r) for r in records)
        finally:
            conn.close()
    elif format == "csv":
        write_csv(out, [], evidence=evidence)
    media = "text/csv; charset=utf-8" if format == "csv" else "application/x-ndjson; charset=utf-8"
    headers = {"X-Total-Count": str(total)}
    if download:
        headers["Content-Disposition"] = f'attachment; filename="exceedances.{"csv" if format == "csv" else "jsonl"}"'
    return Response(out.getvalue(), media_type=media, headers=headers)


def _all(c: Console) -> frozenset[str]:
    return frozenset(x.id for x in c.config.sites)


@router.get("/episodes/{event_id}")
def episode(request: Request, event_id: int) -> dict[str, Any]:
    """One episode (named by the id of its start or end record) and the window for its chart."""
    c, s = console_of(request), session_of(request)
    conn = open_db(c)
    if conn is None:
        raise HTTPException(404, "no episodes recorded")
    try:
        if not has_table(conn, "episode_events"):
            raise HTTPException(404, "no episodes recorded")
        key = episodes.episode_key(conn, event_id)
        if key is None:
            if s.user.role is Role.INDUSTRY:
                raise HTTPException(403, "not one of your company's episodes")
            raise HTTPException(404, f"no episode record {event_id}")
        site, channel, rule = key
        chosen = site_for(c, s, site)
        shown = episodes.episode_by_record(conn, event_id, config=c.config, now=clock.wall())
    finally:
        conn.close()
    if shown is None:
        raise HTTPException(404, f"no episode record {event_id}")
    at, until = shown.at, shown.until if shown.until is not None else shown.at
    margin = max(3600.0, 0.25 * (until - at))
    return {"episode": episode_record(1, shown, evidence=False), "site": site, "site_name": chosen.name,
            "channel": channel, "rule": rule, "limits": limits(chosen, channel),
            "window": {"start": at - margin, "end": until + margin},
            "channel_known": channel in {ch.id for ch in chosen.channels}}


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    """`pretreat status`'s report (`monitor.read.status.collect`), trimmed to the caller's sites.

    For an industry user the report is rebuilt from its own sites only: the instruments, stale channels and
    alarms kept are those whose (site, instrument), (site, channel) or site the site file gives its
    company, compared whole, and its problems are recomputed from that trimmed report (`status.problems`),
    without the daemon's own queues. Never by searching message texts for a site id: ``acme`` is part of
    ``acme-plating``."""
    from monitor.read.status import collect, problems

    c, s = console_of(request), session_of(request)
    try:
        rep = collect(c.config)
    except (OSError, ValueError, sqlite3.Error) as exc:
        raise HTTPException(503, f"cannot read the daemon's health: {exc}") from exc
    mine = visible_sites(s.user, c.config)
    wanted = site_ids(mine)
    instruments = {f"{site.id}/{inst.id}" for site in mine for inst in site.instruments}
    channels = {f"{site.id}/{ch.id}" for site in mine for ch in site.channels}
    rep.instruments = [i for i in rep.instruments if i.key in instruments]
    rep.stale = [x for x in rep.stale if x in channels]
    if rep.alarms is not None:
        rep.alarms = [a for a in rep.alarms if a.id.split("/", 1)[0] in wanted]  # site/channel/rule
    if s.user.role is Role.INDUSTRY:  # the daemon's own queues and other sites' problems are not theirs
        rep.snapshot = industry_snapshot(rep.snapshot, instruments)
        rep.problems = problems(rep) if rep.running else []
    return rep.to_dict()


def industry_snapshot(snap: dict[str, Any] | None, instruments: set[str]) -> dict[str, Any] | None:
    """What an industry user sees of the daemon's health snapshot: its age, and what its own instruments say of
    their readings (a units register that disagrees, a fault bit: `drivers.modbus.device_state`; a device clock
    too far ahead: `drivers.mqtt.intake`)."""
    if not snap:
        return None
    out = {k: v for k, v in snap.items() if k in ("time", "uptime_s")}
    out["devices"] = {k: v for k, v in (snap.get("devices") or {}).items() if k in instruments}
    out["streaming"] = {k: {"clock_ahead": v["clock_ahead"]} for k, v in (snap.get("streaming") or {}).items()
                        if k in instruments and isinstance(v, dict) and v.get("clock_ahead")}
    return out


@router.get("/events")
async def events(request: Request, site: str | None = None, normal: bool = True) -> StreamingResponse:
    """Server-sent events: ``snapshot`` (without normal alarms when ``normal=0``), then ``alarm``, ``journal``
    and (with ``site``) ``readings``."""
    c, s = console_of(request), session_of(request)
    sites_ok = allowed_sites(c, s)
    if site is not None:
        site_for(c, s, site)
    sub, first = c.hub.subscribe(sites=sites_ok, readings_site=site, normal=normal)

    async def stream() -> AsyncIterator[bytes]:
        import asyncio

        try:
            yield b"retry: 1000\n" + first
            idle = 0.0
            while not c.hub.closing and not sub.overflowed:
                try:
                    yield await asyncio.wait_for(sub.queue.get(), timeout=1.0)
                    idle = 0.0
                except TimeoutError:
                    idle += 1.0
                    if c.sessions.get(s.token, c.users.get) is None:  # logged out, expired or removed
                        yield b"event: logout\ndata: {}\n\n"
                        return
                    if idle >= HEARTBEAT:
                        idle = 0.0
                        yield b": keep-alive\n\n"
        finally:
            c.hub.unsubscribe(sub)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
