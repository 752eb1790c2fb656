"""Who is asking, and may they: sessions, CSRF tokens, login rate limiting and the role rules.

Sessions live in the console process's memory, keyed by a 256-bit random token carried in an HttpOnly,
``SameSite=Strict`` cookie (``Secure`` when the console is served over TLS by a reverse proxy). Restarting the
console logs everyone out, which is harmless: it holds no other state. A session ends after
``lifetime`` seconds (a shift, 12 h by default), at logout, or as soon as its user is removed from the users
file or changes role or company.

CSRF: every session has its own random token, handed to the pages (``data-csrf`` on ``<body>``); every
state-changing request (POST) must carry it in ``X-CSRF-Token`` (API) or a ``csrf`` form field (logout),
compared in constant time. ``SameSite=Strict`` alone would stop most cross-site posts, but not from a sibling
sub-domain, hence both. The login form, before any session exists, uses a double-submit token: a random
cookie that the form must echo.

Login rate limiting: after 5 failures within 5 minutes for one user name, or 20 from one client address,
further attempts are refused with 429 (and ``Retry-After``) *before* the password is checked, until the
window has passed. The scrypt hash already makes each guess cost ~50 ms. Behind a reverse proxy the client
address is the one uvicorn takes from ``X-Forwarded-For`` (it trusts that header from 127.0.0.1 only).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from config.schema import Site, SiteConfig
from monitor.console.users import Role, User

SESSION_COOKIE = "pretreat_session"
LOGIN_CSRF_COOKIE = "pretreat_login"
DEFAULT_LIFETIME = 12 * 3600.0

# What each role may do to an alarm from the console (out-of-service stays a CLI/maintenance action).
ALARM_ACTIONS: dict[Role, frozenset[str]] = {
    Role.OPERATOR: frozenset({"ack", "shelve", "unshelve", "reset"}),
    Role.INDUSTRY: frozenset({"ack"}),
    Role.ENFORCEMENT: frozenset(),
}


@dataclass(slots=True)
class Session:
    token: str
    user: User
    csrf: str
    created: float
    expires: float

    def csrf_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


class Sessions:
    """The live sessions. Methods run on the event loop or in worker threads: each is one dict operation."""

    def __init__(self, *, lifetime: float = DEFAULT_LIFETIME, clock: Callable[[], float] = time.time) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._by_token: dict[str, Session] = {}

    def create(self, user: User) -> Session:
        now = self._clock()
        self._expire(now)
        s = Session(token=secrets.token_urlsafe(32), user=user, csrf=secrets.token_urlsafe(32), created=now,
                    expires=now + self.lifetime)
        self._by_token[s.token] = s
        return s

    def get(self, token: str | None, current: Callable[[str], User | None]) -> Session | None:
        """The live session for ``token``, if it has not expired and its user still exists unchanged
        (``current`` looks the user up in the users file as it is now)."""
        if not token:
            return None
        s = self._by_token.get(token)
        if s is None:
            return None
        if self._clock() >= s.expires or current(s.user.name) != s.user:
            self._by_token.pop(token, None)
            return None
        return s

    def end(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)

    def __len__(self) -> int:
        return len(self._by_token)

    def _expire(self, now: float) -> None:
        for token in [t for t, s in self._by_token.items() if now >= s.expires]:
            del self._by_token[token]


@dataclass(slots=True)
class LoginLimiter:
    """Failed logins per user name and per client address in a sliding window (see the module doc)."""

    per_name: int = 5
    per_client: int = 20
    window: float = 300.0
    clock: Callable[[], float] = time.time
    _fails: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, name: str, client: str) -> float:
        """Seconds until another attempt is allowed; 0 when it is allowed now."""
        now = self.clock()
        waits = [self._wait(f"name:{name.lower()}", self.per_name, now),
                 self._wait(f"client:{client}", self.per_client, now)]
        return max(waits)

    def failed(self, name: str, client: str) -> None:
        now = self.clock()
        for key in (f"name:{name.lower()}", f"client:{client}"):
            self._fails.setdefault(key, deque()).append(now)

    def succeeded(self, name: str) -> None:
        self._fails.pop(f"name:{name.lower()}", None)

    def _wait(self, key: str, limit: int, now: float) -> float:
        q = self._fails.get(key)
        if q is None:
            return 0.0
        while q and q[0] <= now - self.window:
            q.popleft()
        if not q:
            del self._fails[key]
            return 0.0
        return 0.0 if len(q) < limit else q[0] + self.window - now


# ---- the role rules ----------------------------------------------------------------------------------------

def visible_sites(user: User, config: SiteConfig) -> list[Site]:
    """The sites a user may see: all of them, or for an industry user those of its company."""
    if user.role is Role.INDUSTRY:
        return [s for s in config.sites if s.company and s.company == user.company]
    return list(config.sites)


def may_see(user: User, config: SiteConfig, site_id: str) -> bool:
    return any(s.id == site_id for s in visible_sites(user, config))


def may_act(user: User, action: str) -> bool:
    return action in ALARM_ACTIONS[user.role]


def site_ids(sites: Iterable[Site]) -> frozenset[str]:
    return frozenset(s.id for s in sites)
