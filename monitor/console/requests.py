"""What every console request handler needs first: the console, the caller's session, the sites the caller may
see, the CSRF check, and the daemon's file opened read-only. The JSON API, the report downloads and the HTML
pages all take them from here, so the access rules are written once (`monitor.console.api`'s table).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fastapi import HTTPException, Request

from config.schema import Site
from monitor.console import queries
from monitor.console.app import Console
from monitor.console.auth import SESSION_COOKIE, Session, site_ids, visible_sites
from monitor.console.users import Role
from monitor.stores.readonly import record_errors


def console_of(request: Request) -> Console:
    c: Console = request.app.state.console
    return c


def session_or_none(request: Request) -> Session | None:
    """The caller's live session, or None (the pages send the browser to the login page)."""
    c = console_of(request)
    return c.sessions.get(request.cookies.get(SESSION_COOKIE), c.users.get)


def session_of(request: Request) -> Session:
    """The caller's live session; 401 without one."""
    s = session_or_none(request)
    if s is None:
        raise HTTPException(401, "log in first")
    return s


def allowed_sites(c: Console, s: Session) -> frozenset[str]:
    return site_ids(visible_sites(s.user, c.config))


def site_for(c: Console, s: Session, site_id: str) -> Site:
    """The site if the caller may see it: 403 if not (or if it does not exist, for industry users)."""
    if site_id not in allowed_sites(c, s):
        if s.user.role is Role.INDUSTRY:
            raise HTTPException(403, f"site {site_id!r} is not one of {s.user.company}'s sites")
        raise HTTPException(404, f"no site {site_id!r}")
    return c.config.site(site_id)


def check_csrf(request: Request, s: Session) -> None:
    if not s.csrf_ok(request.headers.get("x-csrf-token")):
        raise HTTPException(403, "missing or wrong CSRF token: reload the page")


def open_db(c: Console) -> sqlite3.Connection | None:
    """The daemon's file read-only, None before the daemon created it; 503 if it cannot be read."""
    try:
        return queries.connect(c.db)
    except record_errors() as exc:
        raise HTTPException(503, f"the daemon's database cannot be read: {exc}") from exc


def writable_record(c: Console) -> Path:
    """The daemon's file, for an action that writes into it (acknowledge, calibrate, annotate). The county
    console reads the hub's database, a mirror of what the edges report: an action belongs to the edge that
    owns the site (its own console), so it is refused here with 409 rather than lost."""
    if isinstance(c.db, str):
        raise HTTPException(409, "this console reads the county hub's database: act on the site's own console "
                                 "(the edge daemon that records it)")
    return c.db
