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
symbolic link leading out of the folder all answer 404. Files are sent as attachments (never rendered in the
console's origin) with their own content type.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse

from monitor.console.app import Console
from monitor.console.auth import Session
from monitor.console.requests import allowed_sites, console_of, session_of, site_for
from monitor.reports.schedule import ReportFile, list_reports

router = APIRouter(prefix="/api/reports")
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


@router.get("/{site}/{kind}/{name}")
def report_file(request: Request, site: str, kind: str, name: str) -> FileResponse:
    """One report's bytes, as written, with its content type; 403/404 as the module doc says."""
    c, s = console_of(request), session_of(request)
    sites = _sites(c, s, site)  # 403 outside an industry user's sites, before anything is looked up
    if not (_COMPONENT.match(kind) and _COMPONENT.match(name)):
        raise HTTPException(404, "no such report")
    found = next((r for r in _servable(c, sites) if (r.kind, r.name) == (kind, name)), None)
    if found is None:
        raise HTTPException(404, f"no report {kind}/{name} for {site}")
    return FileResponse(found.path, media_type=MEDIA_TYPES[found.format], filename=found.name)
