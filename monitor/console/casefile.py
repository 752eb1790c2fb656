"""The console's case-file API: an episode's obligations, the industry's fulfilment and annotation, enforcement's
invalidation, and the files uploaded for them (`monitor.stores.casefile` holds them; this is access only).

=========================================  ==========  =================  ===========
endpoint                                   operator    industry           enforcement
=========================================  ==========  =================  ===========
GET  /api/episodes/{id}/casefile           yes         its sites          yes
GET  /api/obligations[?site=S]             all sites   its sites          all sites
POST /api/obligations/{id}/done            403         its sites          403
POST /api/episodes/{id}/annotation         403         its sites          403
POST /api/episodes/{id}/invalidate         403         403                yes
POST /api/files?name=N  (raw PDF/PNG/JPEG)  403         yes                403
GET  /api/files/{sha256}                   yes         files of its       yes
                                                       sites, its own
=========================================  ==========  =================  ===========

The rules are checked here, on the server, whatever the page shows: the industry speaks for itself (an operator
cannot record a fulfilment or a cause for it), and only enforcement decides that an episode is invalid. Each
write is journaled with the console user's name (`monitor.stores.casefile`). POSTs need the CSRF token.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse

from monitor import clock
from monitor.console import queries
from monitor.console.api import allowed_sites, check_csrf, console_of, session_of, site_for
from monitor.console.app import Console
from monitor.console.auth import Session
from monitor.console.requests import writable_record
from monitor.console.users import Role
from monitor.read.episodes import episode_start
from monitor.reports.annotations import AnnotationError, annotate, episode_annotations
from monitor.stores import casefile as store
from monitor.stores.casefile import CaseFile, CaseFileError
from monitor.stores.readonly import has_table

router = APIRouter(prefix="/api")
UPLOAD_MEDIA = ("application/pdf", "image/png", "image/jpeg")


def _read(c: Console) -> sqlite3.Connection:
    try:
        conn = queries.connect(c.db)
    except sqlite3.Error as exc:
        raise HTTPException(503, f"the daemon's database cannot be read: {exc}") from exc
    if conn is None:
        raise HTTPException(404, "nothing recorded yet")
    return conn


def _need(s: Session, role: Role, what: str) -> None:
    if s.user.role is not role:
        raise HTTPException(403, f"only {role.value} users may {what}; you are signed in as {s.user.role.value}")


def _episode_of(c: Console, s: Session, conn: sqlite3.Connection, event_id: int) -> tuple[str, str]:
    """(episode id, site) of the episode whose start or end record is ``event_id``; 403/404 as the API does."""
    row = episode_start(conn, event_id, now=clock.wall())  # paired as the history pairs it
    if row is None:
        raise HTTPException(403 if s.user.role is Role.INDUSTRY else 404, f"no episode record {event_id}")
    site = site_for(c, s, row[0]).id
    return store.episode_key(*row), site


@router.get("/episodes/{event_id}/casefile")
def casefile(request: Request, event_id: int) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    conn = _read(c)
    try:
        episode, site = _episode_of(c, s, conn, event_id)
        now = clock.wall()
        obligations = [o.to_json(now) for o in store.obligations(conn, episode=episode)]
        notes = episode_annotations(conn, episode)
        inv = store.invalidation(conn, episode)
        shas = {o["done"]["report"] for o in obligations if o["done"] and o["done"]["report"]}
        shas |= {a for n in notes for a in n.attachments}
        files = {sha: _file_json(info) for sha in shas if (info := store.file_info(conn, sha)) is not None}
    finally:
        conn.close()
    role = s.user.role
    return {"episode": episode, "site": site, "timezone": c.config.site(site).timezone,
            "obligations": obligations,
            "annotations": [{"cause": n.cause, "action": n.action, "user": n.user, "time": n.time,
                             "attachments": list(n.attachments)} for n in notes],
            "invalidation": None if inv is None else {"reason": inv.reason, "user": inv.user, "time": inv.time},
            "files": files,
            "may": {"fulfil": role is Role.INDUSTRY, "annotate": role is Role.INDUSTRY,
                    "invalidate": role is Role.ENFORCEMENT and inv is None}}


def _file_json(f: store.StoredFile) -> dict[str, Any]:
    return {"sha256": f.sha256, "name": f.name, "media": f.media, "size": f.size, "user": f.user, "time": f.time}


@router.get("/obligations")
def obligation_list(request: Request, site: str | None = None) -> list[dict[str, Any]]:
    """Every obligation of the caller's sites (or one site), by due time, with its status now."""
    c, s = console_of(request), session_of(request)
    wanted = allowed_sites(c, s) if site is None else frozenset({site_for(c, s, site).id})
    conn = _read(c)
    try:
        now = clock.wall()
        out = [o.to_json(now) for o in store.obligations(conn, sites=wanted)]
        for o in out:  # the episode page's id: the start record's
            row = conn.execute("SELECT id FROM episode_events WHERE site = ? AND channel = ? AND rule = ? AND "
                               "event = 'start' AND time = ?", (o["site"], o["channel"], o["rule"], o["onset"]))
            found = row.fetchone()
            o["event_id"] = int(found[0]) if found else None
        return out
    finally:
        conn.close()


def _when(text: object, timezone: str, now: float) -> float:
    """Epoch s of an ISO 8601 time; one without an offset (a browser's date-time field) is the site's local time.
    Empty: now."""
    raw = str(text or "").strip()
    if not raw:
        return now
    try:
        dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise HTTPException(400, f"when it was done: {raw!r} is not a date and time (2026-12-01T09:30)") from exc
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=ZoneInfo(timezone))).timestamp()


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise HTTPException(400, "expected a JSON body") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, "expected a JSON object")
    return body


@router.post("/obligations/{obligation_id}/done")
async def fulfil(request: Request, obligation_id: int) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    _need(s, Role.INDUSTRY, "record that an obligation was met")
    body = await _body(request)
    conn = _read(c)
    try:
        found = store.obligations(conn, ids=[obligation_id])
    finally:
        conn.close()
    if not found or found[0].site not in allowed_sites(c, s):
        raise HTTPException(403, f"obligation {obligation_id} is not one of your company's")
    now = clock.wall()
    ob = found[0]
    report = str(body.get("report") or "").strip() or None
    cf = CaseFile.open(writable_record(c), {x.id: x.timezone for x in c.config.sites})
    try:
        cf.fulfil(obligation_id, done_at=_when(body.get("done_at"), c.config.site(ob.site).timezone, now),
                  how=str(body.get("how") or ""), recipient=str(body.get("to") or ""), note=str(body.get("note") or ""),
                  report=report, user=s.user.name, now=now)
    except CaseFileError as exc:
        raise HTTPException(409 if "already recorded" in str(exc) else 400, str(exc)) from exc
    finally:
        cf.close()
    conn = _read(c)
    try:
        return store.obligations(conn, ids=[obligation_id])[0].to_json(now)
    finally:
        conn.close()


@router.post("/episodes/{event_id}/annotation")
async def annotation(request: Request, event_id: int) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    _need(s, Role.INDUSTRY, "enter the cause and corrective action")
    body = await _body(request)
    conn = _read(c)
    try:
        episode, _site = _episode_of(c, s, conn, event_id)
        attachments = [str(a) for a in body.get("attachments") or []]
        missing = [a for a in attachments if store.file_info(conn, a) is None]
    finally:
        conn.close()
    if missing:
        raise HTTPException(400, f"no uploaded file {missing[0]}")
    cause, action = str(body.get("cause") or ""), str(body.get("action") or "")
    if len(cause) > store.MAX_TEXT or len(action) > store.MAX_TEXT:
        raise HTTPException(400, f"cause and corrective action are limited to {store.MAX_TEXT} characters each")
    try:
        a = annotate(writable_record(c), episode=episode, cause=cause, action=action, user=s.user.name,
                     now=clock.wall(), attachments=attachments)
    except AnnotationError as exc:
        raise HTTPException(400, str(exc)) from exc
    return {"episode": episode, "cause": a.cause, "action": a.action, "user": a.user, "time": a.time,
            "attachments": list(a.attachments)}


@router.post("/episodes/{event_id}/invalidate")
async def invalidate(request: Request, event_id: int) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    _need(s, Role.ENFORCEMENT, "mark an episode invalid")
    body = await _body(request)
    conn = _read(c)
    try:
        episode, site = _episode_of(c, s, conn, event_id)
    finally:
        conn.close()
    cf = CaseFile.open(writable_record(c), {x.id: x.timezone for x in c.config.sites})
    try:
        inv = cf.invalidate(episode, site=site, reason=str(body.get("reason") or ""), user=s.user.name,
                            now=clock.wall())
    except CaseFileError as exc:
        raise HTTPException(409 if "already" in str(exc) else 400, str(exc)) from exc
    finally:
        cf.close()
    return {"episode": episode, "reason": inv.reason, "user": inv.user, "time": inv.time}


@router.post("/files")
async def upload(request: Request, name: str = "upload.pdf") -> dict[str, Any]:
    """A written report (PDF) or an attachment (PNG, JPEG) as the raw request body, at most `store.MAX_FILE`
    bytes (the body limit refuses more before it is read); answers its id to name in a fulfilment or note."""
    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    _need(s, Role.INDUSTRY, "upload reports and attachments")
    data = await request.body()
    cf = CaseFile.open(writable_record(c), {x.id: x.timezone for x in c.config.sites})
    try:
        f = cf.store_file(data, name=name, user=s.user.name, now=clock.wall(), media=UPLOAD_MEDIA)
    except CaseFileError as exc:
        raise HTTPException(400, str(exc)) from exc
    finally:
        cf.close()
    return _file_json(f)


@router.get("/files/{sha256}")
def download(request: Request, sha256: str) -> FileResponse:
    """A stored file, to a user who may see a site whose case file names it (or who uploaded it)."""
    c, s = console_of(request), session_of(request)
    conn = _read(c)
    try:
        info = store.file_info(conn, sha256)
        visible = info is not None and (info.user == s.user.name or _names_file(conn, sha256, allowed_sites(c, s)))
    finally:
        conn.close()
    if info is None or not visible:
        raise HTTPException(403 if s.user.role is Role.INDUSTRY else 404, f"no file {sha256}")
    return FileResponse(store.file_path(writable_record(c), sha256), media_type=info.media, filename=info.name,
                        content_disposition_type="inline" if info.media == "application/pdf" else "attachment")


def _names_file(conn: sqlite3.Connection, sha256: str, sites: frozenset[str]) -> bool:
    if not sites:
        return False
    marks = ",".join("?" * len(sites))
    if has_table(conn, "obligation_fulfilments") and conn.execute(
            f"SELECT 1 FROM obligation_fulfilments f JOIN obligations o ON o.id = f.obligation "
            f"WHERE f.report = ? AND o.site IN ({marks})", [sha256, *sorted(sites)]).fetchone():
        return True
    try:
        return bool(has_table(conn, "report_annotations") and conn.execute(
            f"SELECT 1 FROM report_annotations WHERE site IN ({marks}) AND attachments LIKE ?",
            [*sorted(sites), f'%"{sha256}"%']).fetchone())
    except sqlite3.OperationalError:  # a file from before attachments: no column, so none names it
        return False
