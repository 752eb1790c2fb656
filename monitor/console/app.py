"""The console's FastAPI application: `create_app` wires the users file, sessions, the follower and the routes.

Everything the handlers share is one `Console` object on ``app.state.console``. Pages and API are separate
routers (`monitor.console.pages`, `monitor.console.api`); static files (JavaScript, CSS: no CDN, nothing
fetched from elsewhere) are served from ``monitor/console/static``.

Every response carries a strict Content-Security-Policy (scripts, styles and connections only from the
console itself, no inline script, no framing) and ``X-Content-Type-Options: nosniff``; API answers are
``Cache-Control: no-store``, so a shared computer's browser cache keeps no alarm or reading.

`ConsoleServer` runs the app under uvicorn, and ends the live streams when asked to stop (a browser's open
event stream would otherwise hold a graceful shutdown until it times out).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from config.schema import SiteConfig
from monitor.console.auth import DEFAULT_LIFETIME, LoginLimiter, Sessions
from monitor.console.events import Hub
from monitor.console.users import UsersError, UserStore
from monitor.stores.casefile import MAX_FILE

STATIC = Path(__file__).parent / "static"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "media-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(slots=True)
class Console:
    """What the handlers share. ``secure_cookies``: mark cookies Secure (served over TLS by a proxy).
    ``reports_dir``: where the daemon writes its reports (read only, `monitor.console.reports`)."""

    config: SiteConfig
    db: Path | str
    """The daemon's SQLite file, or the county hub's database URL (``--database``: every site, read only)."""
    reports_dir: Path
    users: UserStore
    sessions: Sessions
    limiter: LoginLimiter
    hub: Hub
    secure_cookies: bool = False
    action_wait: float = 5.0
    started: float = field(default_factory=time.time)


def create_app(*, config: SiteConfig, users_path: Path, secure_cookies: bool = False,
               session_lifetime: float = DEFAULT_LIFETIME, poll_interval: float = 0.05,
               action_wait: float = 5.0, limiter: LoginLimiter | None = None, database: str | None = None
               ) -> FastAPI:
    """The console app for ``config``'s daemon file, or (``database``, a ``postgresql://`` URL) for the county
    hub's database, whose sites ``config`` states. ``users_path`` is the users file (`users`)."""
    from monitor.console import (  # routes import FastAPI machinery: only when an app is built
        api,
        calibration,
        casefile,
        county,
        pages,
        reports,
    )
    from monitor.reports.schedule import reports_dir

    db: Path | str = database if database is not None else config.daemon.historian
    limiter = limiter if limiter is not None else LoginLimiter()  # (an empty limiter is falsy: it has a len)
    console = Console(config=config, db=db, reports_dir=reports_dir(config), users=UserStore(path=users_path),
                      sessions=Sessions(lifetime=session_lifetime), limiter=limiter,
                      hub=Hub(db=db, config=config, interval=poll_interval), secure_cookies=secure_cookies,
                      action_wait=action_wait)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(console.hub.prime)
        stop = threading.Event()
        tasks = [asyncio.create_task(console.hub.run(), name="console-follower"),
                 asyncio.create_task(_warm_trends(db, stop), name="console-trend-warmup")]
        try:
            yield
        finally:
            console.hub.close()
            stop.set()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = FastAPI(title="pretreat-monitor console", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.console = console
    app.include_router(api.router)
    app.include_router(casefile.router)
    app.include_router(reports.router)
    app.include_router(reports.nov_router)
    app.include_router(calibration.router)
    app.include_router(county.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_exception_handler(UsersError, _users_file_broken)
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders)
    return app


async def _users_file_broken(_request: Request, exc: Exception) -> Response:
    """The users file was changed into one that cannot be read while the console runs: nobody is let in
    (a removal must not be undone by a typo), and every request says why instead of a bare 500."""
    return JSONResponse({"detail": f"the console's users file is invalid, nobody can log in until it is "
                                   f"fixed: {exc}"}, status_code=503)


LOGIN_BODY_MAX = 4 * 1024  # bytes: a login form (name, password, two tokens) is well under 1 KiB
API_BODY_MAX = 64 * 1024  # bytes: an alarm action's JSON (a reason, an expiry) is well under 1 KiB
UPLOAD_PATH = "/api/files"  # a written report (PDF) or an attachment: up to `monitor.stores.casefile.MAX_FILE`


class BodyLimit:
    """Refuses a request body over `LOGIN_BODY_MAX` (the login and logout forms), `MAX_FILE` (an upload to
    `UPLOAD_PATH`) or `API_BODY_MAX` (everything else) with 413, before any handler buffers it: by its
    declared ``Content-Length``, or while reading it for a chunked one. Bodies under the limit are read here
    and handed on unchanged; a request without a body (GET, the event stream) passes straight through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        path = scope.get("path")
        limit = LOGIN_BODY_MAX if path in ("/login", "/logout") else MAX_FILE if path == UPLOAD_PATH else API_BODY_MAX
        headers = dict(scope.get("headers", []))
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            declared = 0
        body, more = b"", declared <= limit
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message, receive), send)
                return
            body += message.get("body", b"")
            more = message.get("more_body", False) and len(body) <= limit
        if declared > limit or len(body) > limit:
            await _too_large(send, limit)
            return
        await self.app(scope, _replay({"type": "http.request", "body": body, "more_body": False}, receive), send)


def _replay(first: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``first`` once, then whatever the connection sends (a disconnect)."""
    pending = [first]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body over {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """Adds the security headers to every response (a plain ASGI middleware: it leaves streams alone)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = str(scope.get("path", "")).startswith("/api/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _v in headers}
                extra = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                         (b"referrer-policy", b"same-origin"), (b"x-frame-options", b"DENY")]
                if api and b"cache-control" not in names:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = headers + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _warm_trends(db: Path | str, stop: threading.Event) -> None:
    """Keep the trend rollups of the densest series warm (`monitor.console.trends.warm`): at start, then every
    `WARM_EVERY` s, in a worker thread (SQLite does the work outside the event loop)."""
    from monitor.console import queries, trends

    def once() -> None:
        conn = queries.connect(db) if isinstance(db, Path) else None  # the hub's PostgreSQL: no rollups
        if conn is None:
            return
        try:
            trends.warm(conn, str(db), time.time(), stop)
        except sqlite3.Error as exc:  # a busy or re-created file: the requests build what they need
            trends.log.warning("trend rollups not warmed: %s", exc)
        finally:
            conn.close()

    while not stop.is_set():
        await asyncio.to_thread(once)
        await asyncio.sleep(trends.WARM_EVERY)


class ConsoleServer(uvicorn.Server):
    """uvicorn's server, which also ends the console's event streams when it is told to stop."""

    def __init__(self, app: FastAPI, *, host: str, port: int, log_level: str = "warning",
                 trusted_proxy: str | None = None) -> None:
        # The client address limits logins: X-Forwarded-For may set it only when it comes from the reverse
        # proxy named by ``trusted_proxy`` (uvicorn's default trusts it from 127.0.0.1, i.e. from anyone who
        # can reach a loopback-bound console directly).
        super().__init__(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                                        timeout_graceful_shutdown=3, lifespan="on",
                                        proxy_headers=trusted_proxy is not None,
                                        forwarded_allow_ips=trusted_proxy))
        self.console: Console = app.state.console
        self._thread: threading.Thread | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop gracefully on SIGTERM/SIGINT (a second SIGINT forces it) and exit 0 afterwards: unlike
        uvicorn's own handler, the signal is not raised again once stopped (a service manager would log a
        clean stop as killed by a signal)."""
        self.console.hub.closing = True  # a plain flag: safe from a signal handler
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True

    # ---- in a thread (tests, benchmarks) ------------------------------------------------------------------

    def start_in_thread(self, timeout: float = 10.0) -> None:
        self._thread = threading.Thread(target=self.run, name="console-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the console server did not start")
            time.sleep(0.01)

    def stop_thread(self, timeout: float = 10.0) -> None:
        self.console.hub.closing = True
        self.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("the console server did not stop")
