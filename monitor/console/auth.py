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

Login rate limiting (`LoginLimiter`): after 20 failures within 5 minutes from one client address, or 5 for
one user name from a client that has itself failed, further attempts are refused with 429 (and
``Retry-After``) *before* the password is checked, until the window has passed; the right password from a
client that has not failed still logs in, so guessing cannot lock the real user out. The scrypt hash already
makes each guess cost ~50 ms. The client address is the connection's peer: ``X-Forwarded-For`` is ignored
unless `pretreat console --trusted-proxy ADDR` names the reverse proxy it may come from (otherwise anyone
could pick a new address for each guess). Request bodies are capped (`monitor.console.app.BodyLimit`), so a
20 MB user name never reaches the limiter.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from config.schema import Site, SiteConfig
from monitor.console.users import Role, User

SESSION_COOKIE = "pretreat_session"
LOGIN_CSRF_COOKIE = "pretreat_login"
DEFAULT_LIFETIME = 12 * 3600.0

# What each role may do to an alarm from the console (out-of-service stays a CLI/maintenance action). Only
# the plant side acknowledges, shelves and resets plant alarms; an industry's acknowledgement is ``seen``
# (journaled, the alarm's state untouched: `alarms.model.Seen`), and both sides may comment.
ALARM_ACTIONS: dict[Role, frozenset[str]] = {
    Role.OPERATOR: frozenset({"ack", "shelve", "unshelve", "reset", "comment"}),
    Role.INDUSTRY: frozenset({"seen", "comment"}),
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
    """Failed logins per client address and per user name in a sliding window (see the module doc).

    The two limits are kept apart so that an attacker cannot lock a user out: a user name with
    ``per_name`` recent failures is refused only to clients that have failed themselves within the window,
    so the right password from a client that has not failed still logs in (and a wrong one from it counts,
    and locks that client out of the name too). ``per_client`` failures from one address refuse it whatever
    the name. Memory is bounded: at most ``max_keys`` addresses and names are remembered, least recently
    failed first out, each entry with at most its limit of times, and entries whose newest failure has left
    the window are dropped. A name is remembered by its first `NAME_KEY` characters, lower-cased (no user name
    is longer, see `monitor.console.users.NAME`).
    """

    per_name: int = 5
    per_client: int = 20
    window: float = 300.0
    max_keys: int = 10_000
    clock: Callable[[], float] = time.time
    _fails: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)

    def retry_after(self, name: str, client: str) -> float:
        """Seconds until this client may try this name; 0 when it may try now."""
        now = self.clock()
        self._expire(now)
        wait = self._wait(_client_key(client), self.per_client, now)
        if _client_key(client) in self._fails:  # only a client that has failed is held to the name's limit
            wait = max(wait, self._wait(_name_key(name), self.per_name, now))
        return wait

    def failed(self, name: str, client: str) -> None:
        now = self.clock()
        self._expire(now)
        for key, limit in ((_name_key(name), self.per_name), (_client_key(client), self.per_client)):
            q = self._fails.pop(key, None) or deque(maxlen=limit)
            q.append(now)
            self._fails[key] = q  # now the most recently failed
        while len(self._fails) > self.max_keys:
            self._fails.popitem(last=False)

    def succeeded(self, name: str) -> None:
        self._fails.pop(_name_key(name), None)

    def clear(self) -> None:
        self._fails.clear()

    def __len__(self) -> int:
        return len(self._fails)

    def _wait(self, key: str, limit: int, now: float) -> float:
        q = self._fails.get(key)
        if q is None or len(q) < limit:
            return 0.0
        return max(0.0, q[0] + self.window - now)  # the oldest of the last ``limit`` failures leaves then

    def _expire(self, now: float) -> None:
        """Drop the entries whose newest failure has left the window (oldest first: insertion order)."""
        while self._fails:
            key, q = next(iter(self._fails.items()))
            if q and q[-1] > now - self.window:
                return
            del self._fails[key]


NAME_KEY = 65  # characters of a failed name remembered: one more than the longest user name


def _name_key(name: str) -> str:
    return "name:" + name[:NAME_KEY].lower()


def _client_key(client: str) -> str:
    return "client:" + client


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


def role_action(role: Role, action: str) -> str:
    """The action an "acknowledge" by ``role`` stands for: an industry's acknowledgement records that the
    industry has seen the alarm (``seen``) and never acknowledges the plant operator's alarm."""
    return "seen" if role is Role.INDUSTRY and action == "ack" else action


def site_ids(sites: Iterable[Site]) -> frozenset[str]:
    return frozenset(s.id for s in sites)
