"""The generated reports in the console: the list a user may see (history page) and their download.

The daemon's scheduled jobs (`monitor.reports.schedule`) write daily summaries and periodic compliance reports
into its reports folder (`schedule.reports_dir`: ``reports/`` beside the historian, the same for the daemon and
for ``pretreat console --config`` with the same site file); the console only reads it. Role rules are those of
every other endpoint (`monitor.console.api`, `monitor.console.requests`): an industry user sees its company's
sites' reports only, and a site outside them answers 403 (also when it does not exist), operators and
enforcement see every site's.

A download is named by three components, site, kind and file name, each checked against a strict pattern and
then looked up among the files `schedule.list_reports` finds: no path is ever built from what the client sent.
So ``..``, an encoded slash, a hidden temporary file (a report being written), a format we do not serve or a
symbolic link leading out of the folder all answer 404. Files are sent as attachments with their own content
type; ``?inline=true`` shows a PDF or HTML report to read in the browser, an HTML one under a sandboxing
Content-Security-Policy (no script, a unique origin), so a report never runs in the console's origin.

``POST /api/reports/generate`` (``{"site", "from", "to"}``, local days, both included; CSRF token required)
writes the periodic compliance report of a chosen period into the same folder (PDF, HTML and CSV, each written
to a temporary name and renamed, as the scheduled job does), due on the jurisdiction's next report date.
``GET /api/nov/{event_id}?format=pdf|docx|md`` (enforcement only; any event id of the episode, its start or its
end) drafts the notice of violation of an episode
(`monitor.notices`) and sends it as an attachment; nothing is stored.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
import time
import urllib.parse
from datetime import date
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, Response

from monitor.console import queries
from monitor.console.app import Console
from monitor.console.auth import Session
from monitor.console.requests import allowed_sites, check_csrf, console_of, session_of, site_for
from monitor.console.users import Role
from monitor.reports.schedule import ReportFile, list_reports

router = APIRouter(prefix="/api/reports")
nov_router = APIRouter(prefix="/api/nov")
MAX_PERIOD_DAYS = 400  # a year's report and some: longer requests are refused rather than tying up a worker
_SANDBOX = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MEDIA_TYPES = {"pdf": "application/pdf", "html": "text/html; charset=utf-8", "csv": "text/csv; charset=utf-8",
               "json": "application/json"}
_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")  # a site id, a kind, a report file name


def _servable(c: Console, sites: frozenset[str]) -> list[ReportFile]:
    """The reports of ``sites`` in a format we serve and really inside the reports folder, newest first."""
    root = c.reports_dir.resolve()
    return [r for r in list_reports(c.reports_dir)
            if r.site in sites and r.format in MEDIA_TYPES and r.path.resolve().is_relative_to(root)]


def _sites(c: Console, s: Session, site: str | None) -> frozenset[str]:
    return allowed_sites(c, s) if site is None else frozenset({site_for(c, s, site).id})


@router.get("")
def report_list(request: Request, site: str | None = None) -> list[dict[str, Any]]:
    """Every report the caller may see (of one site with ``site``), newest first. ``size`` in bytes,
    ``modified`` (when it was written) in Unix seconds; ``url`` downloads it."""
    c, s = console_of(request), session_of(request)
    names = {x.id: x.name for x in c.config.sites}
    return [{"site": r.site, "site_name": names.get(r.site, r.site), "kind": r.kind, "name": r.name,
             "format": r.format, "period": r.period, "size": r.size, "modified": r.modified,
             "url": "/api/reports/" + "/".join(urllib.parse.quote(x, safe="") for x in (r.site, r.kind, r.name))}
            for r in _servable(c, _sites(c, s, site))]


@router.post("/generate")
async def generate(request: Request) -> dict[str, Any]:
    """Write the periodic report of ``site`` for the local days ``from``..``to``; answers the files and due date."""
    import anyio.to_thread

    from monitor.reports.periods import period_of_days
    from monitor.reports.schedule import write_periodic

    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    try:
        body = await request.json()
        site = site_for(c, s, str(body["site"]))
        first, last = date.fromisoformat(str(body["from"])), date.fromisoformat(str(body["to"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise HTTPException(400, f"expected {{site, from, to}} with days as YYYY-MM-DD ({exc})") from exc
    if last < first or (last - first).days >= MAX_PERIOD_DAYS:
        raise HTTPException(400, f"'to' must be on or after 'from', at most {MAX_PERIOD_DAYS} days apart")
    period = period_of_days(site, first, last)
    try:
        paths = await anyio.to_thread.run_sync(
            lambda: write_periodic(c.config, site, period, c.reports_dir, now=time.time()))
    except (OSError, sqlite3.Error) as exc:
        raise HTTPException(503, f"the report could not be written: {exc}") from exc
    return {"files": [p.name for p in paths], "period": period.label, "due": period.due_label}


@router.get("/{site}/{kind}/{name}")
def report_file(request: Request, site: str, kind: str, name: str, inline: bool = False) -> Response:
    """One report's bytes, as written, with its content type; 403/404 as the module doc says."""
    c, s = console_of(request), session_of(request)
    sites = _sites(c, s, site)  # 403 outside an industry user's sites, before anything is looked up
    if not (_COMPONENT.match(kind) and _COMPONENT.match(name)):
        raise HTTPException(404, "no such report")
    found = next((r for r in _servable(c, sites) if (r.kind, r.name) == (kind, name)), None)
    if found is None:
        raise HTTPException(404, f"no report {kind}/{name} for {site}")
    if inline and found.format in ("pdf", "html"):
        headers = {"Content-Security-Policy": _SANDBOX} if found.format == "html" else {}
        return FileResponse(found.path, media_type=MEDIA_TYPES[found.format], filename=found.name,
                            content_disposition_type="inline", headers=headers)
    return FileResponse(found.path, media_type=MEDIA_TYPES[found.format], filename=found.name)


NOV_TYPES = {"pdf": "application/pdf",  # Markdown drafts carry their chart as a second file: CLI only
             "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}


def _episode_id(c: Console, event_id: int) -> str:
    """The episode id (site/channel/rule@start) of any event row of the episode (its start, or its end: the
    start it closes, as the history pairs them), as the episode page names it."""
    from monitor.checks.events import iso_utc
    from monitor.read.episodes import episode_start

    try:
        conn = queries.connect(c.db)
        if conn is None:
            raise sqlite3.OperationalError("no database yet")
        try:
            row = episode_start(conn, event_id, now=time.time())  # paired as the history pairs it
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise HTTPException(503, f"the daemon's database cannot be read: {exc}") from exc
    if row is None:
        raise HTTPException(404, f"no episode {event_id}")
    return f"{row[0]}/{row[1]}/{row[2]}@{iso_utc(row[3])}"


@nov_router.get("/{event_id}")
async def notice_of_violation(request: Request, event_id: int, format: str = "pdf") -> Response:
    """The draft notice of violation of episode ``event_id`` (enforcement only), as an attachment."""
    import anyio.to_thread

    from monitor.notices.cli import default_name, write_notice
    from monitor.notices.facts import NoticeError

    c, s = console_of(request), session_of(request)
    if s.user.role is not Role.ENFORCEMENT:
        raise HTTPException(403, "only enforcement staff draft notices of violation")
    if format not in NOV_TYPES:
        raise HTTPException(400, f"format must be one of {sorted(NOV_TYPES)}")
    ident = _episode_id(c, event_id)
    site_for(c, s, ident.split("/", 1)[0])

    def draft() -> bytes:
        with tempfile.TemporaryDirectory(prefix="pretreat-nov-") as tmp:
            path = Path(tmp) / default_name(ident, format)
            write_notice(c.config, ident, format, path, now=time.time())
            return path.read_bytes()

    try:
        data = await anyio.to_thread.run_sync(draft)
    except NoticeError as exc:
        raise HTTPException(409, str(exc)) from exc
    except ImportError as exc:
        raise HTTPException(501, str(exc)) from exc
    name = default_name(ident, format)
    return Response(data, media_type=NOV_TYPES[format],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
