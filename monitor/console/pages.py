"""The console's HTML pages, login and logout.

Pages are small static shells (``monitor/console/pages/*.html``, filled with `string.Template` and
`html.escape`): the data comes from the API and the event stream, drawn by the page's own script, which
inserts text only as text (never as HTML), so nothing recorded (a reason typed by an operator, a device's
error text) can become markup. Each page checks access itself: without a session the browser is sent to
the login page; a site or episode outside an industry user's company answers 403 with an explanation, not
an empty page.
"""

from __future__ import annotations

import html
import secrets
import sqlite3
import urllib.parse
from functools import cache
from pathlib import Path
from string import Template

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from monitor.console import queries
from monitor.console.app import Console
from monitor.console.auth import LOGIN_CSRF_COOKIE, SESSION_COOKIE, Session, visible_sites
from monitor.console.requests import console_of, session_or_none
from monitor.console.users import Role
from monitor.read.episodes import episode_key

router = APIRouter()
PAGES = Path(__file__).parent / "pages"
NAV_SITES = 3  # with more sites than this the top bar links the overview ("Sites") instead of each site


@cache
def template(name: str) -> Template:
    return Template((PAGES / name).read_text(encoding="utf-8"))


def _login_redirect(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/login?" + urllib.parse.urlencode({"next": target}), status_code=303)


def render(c: Console, s: Session, *, page: str, title: str, script: str, data: dict[str, str] | None = None,
           status: int = 200, **fields: str) -> HTMLResponse:
    """A page for a logged-in user: the shell with navigation, the page's body and its script."""
    body = template(f"{page}.html").substitute({k: html.escape(v) for k, v in fields.items()})
    mine = visible_sites(s.user, c.config)
    nav = ['<a href="/">Alarms</a>', '<a href="/overview">Sites</a>']
    if len(mine) <= NAV_SITES:  # a few sites are named in the bar; more are found on the overview
        nav += [f'<a href="/sites/{html.escape(x.id)}">{html.escape(x.name)}</a>' for x in mine]
    nav += ['<a href="/history">History</a>', '<a href="/reports">Reports</a>', '<a href="/kpi">KPIs</a>',
            '<a href="/calibration">Calibration</a>', '<a href="/health">Health</a>']
    if isinstance(c.db, str):  # the county hub's database: its edges and journal feed (monitor.console.county)
        nav.append('<a href="/county">Edges</a>')
    zones = {x.timezone for x in visible_sites(s.user, c.config)}  # times in the sites' zone, else UTC, named
    data = {"timezone": zones.pop() if len(zones) == 1 else "UTC", **(data or {})}
    attrs = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    text = template("base.html").substitute(
        title=html.escape(title), csrf=html.escape(s.csrf), user=html.escape(s.user.name),
        role=html.escape(s.user.role.value), company=html.escape(s.user.company), page=page, data=attrs,
        nav="".join(nav), body=body, script=script)
    return HTMLResponse(text, status_code=status)


def forbidden(c: Console, s: Session, message: str) -> HTMLResponse:
    return render(c, s, page="error", title="Not allowed", script="common.js", status=403, heading="403 Not allowed",
                  message=message)


@router.get("/calibration", response_model=None)
def calibration_page(request: Request) -> Response:
    """Each channel's calibration status and log, and the entry form (`monitor.console.calibration`)."""
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="calibration", title="Calibration", script="calibration.js",
                  data={"may-record": "false" if s.user.role is Role.ENFORCEMENT else "true"})


@router.get("/", response_model=None)
def alarms_page(request: Request) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="alarms", title="Alarms", script="alarms.js")


@router.get("/sites/{site}", response_model=None)
def site_page(request: Request, site: str) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    chosen = next((x for x in visible_sites(s.user, c.config) if x.id == site), None)
    if chosen is None:
        if s.user.role is Role.INDUSTRY:
            return forbidden(c, s, f"Site {site!r} is not one of {s.user.company}'s sites.")
        return render(c, s, page="error", title="Not found", script="common.js", status=404,
                      heading="404 Not found", message=f"There is no site {site!r} in this site file.")
    return render(c, s, page="site", title=chosen.name, script="site.js",
                  data={"site": chosen.id, "timezone": chosen.timezone},
                  name=chosen.name)


@router.get("/overview", response_model=None)
def overview_page(request: Request) -> Response:
    """Site tiles for many sites, searchable (`monitor.console.overview`)."""
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="overview", title="Sites", script="overview.js")


@router.get("/kpi", response_model=None)
def kpi_page(request: Request) -> Response:
    """Alarm KPIs per ISA-18.2 / EEMUA 191 (`monitor.console.kpi`)."""
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="kpi", title="Alarm KPIs", script="kpi.js")


@router.get("/history", response_model=None)
def history_page(request: Request) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="history", title="Exceedance history", script="history.js")


@router.get("/reports", response_model=None)
def reports_page(request: Request) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="reports", title="Reports", script="reports.js")


@router.get("/episodes/{event_id}", response_model=None)
def episode_page(request: Request, event_id: int) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    site = _episode_site(c, event_id)
    if site is not None and site not in {x.id for x in visible_sites(s.user, c.config)}:
        return forbidden(c, s, "This episode is not at one of your company's sites.")
    if site is None and s.user.role is Role.INDUSTRY:
        return forbidden(c, s, "This episode is not at one of your company's sites.")
    return render(c, s, page="episode", title=f"Episode {event_id}", script="episode.js",
                  data={"episode": str(event_id)})


def _episode_site(c: Console, event_id: int) -> str | None:
    conn = queries.connect(c.db)
    if conn is None:
        return None
    try:
        key = episode_key(conn, event_id)
        return None if key is None else key[0]
    except sqlite3.Error:
        return None
    finally:
        conn.close()


@router.get("/health", response_model=None)
def health_page(request: Request) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is None:
        return _login_redirect(request)
    return render(c, s, page="health", title="Health", script="health.js")


# ---- login and logout ----------------------------------------------------------------------------------------

def _safe_next(target: str) -> str:
    """Only a path on this console (no scheme, no host, no '//'): never an open redirect."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login_page(c: Console, *, next_path: str, message: str = "", status: int = 200,
                headers: dict[str, str] | None = None) -> HTMLResponse:
    token = secrets.token_urlsafe(24)
    text = template("login.html").substitute(csrf=html.escape(token), next=html.escape(_safe_next(next_path)),
                                             message=html.escape(message), hidden="" if message else "hidden")
    resp = HTMLResponse(text, status_code=status, headers=headers)
    resp.set_cookie(LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=c.secure_cookies,
                    path="/login")
    return resp


@router.get("/login", response_model=None)
def login_form(request: Request) -> Response:
    return _login_page(console_of(request), next_path=request.query_params.get("next", "/"))


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    import anyio.to_thread

    c = console_of(request)
    form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    name, password, token, next_path = (form.get(k, [""])[0] for k in ("username", "password", "csrf", "next"))
    cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not token or not cookie or not secrets.compare_digest(token, cookie):
        return _login_page(c, next_path=next_path, message="The login form expired; please try again.",
                           status=403)
    client = request.client.host if request.client else "?"
    wait = c.limiter.retry_after(name, client)
    if wait > 0:
        return _login_page(c, next_path=next_path, status=429, headers={"Retry-After": str(int(wait) + 1)},
                           message=f"Too many failed logins: try again in {int(wait) + 1} s.")
    user = await anyio.to_thread.run_sync(c.users.authenticate, name, password)  # scrypt: ~50 ms
    if user is None:
        c.limiter.failed(name, client)
        return _login_page(c, next_path=next_path, message="Unknown user name or wrong password.", status=401)
    c.limiter.succeeded(name)
    session = c.sessions.create(user)
    home = "/" if user.role is not Role.ENFORCEMENT else "/history"
    target = _safe_next(next_path) if next_path and next_path != "/" else home
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(SESSION_COOKIE, session.token, httponly=True, samesite="strict", secure=c.secure_cookies)
    resp.delete_cookie(LOGIN_CSRF_COOKIE, path="/login")
    return resp


@router.post("/logout", response_model=None)
async def logout(request: Request) -> Response:
    c, s = console_of(request), session_or_none(request)
    if s is not None:
        form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"))
        if not s.csrf_ok(form.get("csrf", [""])[0] or request.headers.get("x-csrf-token")):
            return forbidden(c, s, "Missing or wrong CSRF token: reload the page and log out again.")
        c.sessions.end(s.token)
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(SESSION_COOKIE)
    return resp
