"""Console users: names, roles and scrypt password hashes, kept in a small TOML file beside the site file.

Where: ``<site file>.users.toml`` by default (``/etc/pretreat/site.toml`` → ``/etc/pretreat/site.users.toml``),
or the file named by ``--users`` on both `pretreat user add` and `pretreat console`. Users are configuration
(who may do what), not monitoring data, so they live with the site file and not in the daemon's SQLite file,
which enforcement copies as evidence. The file is written atomically with mode 0600: it holds hashes, never
passwords. The console re-reads it when its modification time changes, so `pretreat user add` or a removal
takes effect at the next request without a restart (a removed user's sessions stop working at once)::

    [[user]]
    name = "jdoe"
    role = "operator"          # operator | industry | enforcement
    company = ""               # industry users: the company named by `company` on its [[site]]s
    hash = "scrypt$16384$8$1$<salt, base64>$<key, base64>"

Hashes: `hashlib.scrypt` (RFC 7914) with n=2**14, r=8, p=1 (16 MiB, about 50 ms here), a 16-byte random salt
and a 32-byte key. The parameters are stored with each hash, so raising them later leaves old hashes valid.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import logging
import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

log = logging.getLogger(__name__)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
_KEY_BYTES = 32
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
MIN_PASSWORD = 8


class Role(StrEnum):
    """What a user may do. ``operator``: every site, acknowledge/shelve/reset. ``industry``: only its
    company's sites, read and acknowledge their alarms. ``enforcement``: every site, read-only, history and
    exports."""

    OPERATOR = "operator"
    INDUSTRY = "industry"
    ENFORCEMENT = "enforcement"


class UsersError(Exception):
    """The users file cannot be read or a user entry is invalid (the message names the file and entry)."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role
    company: str
    hash: str


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """An scrypt hash string with its parameters and salt (see the module doc)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    key = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                         dklen=_KEY_BYTES)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """True when ``password`` matches ``stored``; False for a wrong password or a malformed hash."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(key, validate=True)
        got = hashlib.scrypt(password.encode("utf-8"), salt=base64.b64decode(salt, validate=True), n=int(n),
                             r=int(r), p=int(p), dklen=len(want), maxmem=256 * 1024 * 1024)
    except (ValueError, TypeError):  # binascii.Error is a ValueError; scrypt rejects bad parameters so
        return False
    return hmac.compare_digest(got, want)


@functools.cache
def dummy_hash() -> str:
    """A hash of nothing in particular: verified against when the user does not exist, so that a login for an
    unknown name costs the same time as one for a known name (no way to list users by timing)."""
    return hash_password("not a password", salt=b"\0" * 16)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def default_users_path(site_file: Path) -> Path:
    return site_file.with_name(site_file.stem + ".users.toml")


def load_users(path: Path) -> dict[str, User]:
    """Every user in the file by name; an absent file is no users (the console then lets nobody in)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsersError(f"{path}: {exc}") from exc
    users: dict[str, User] = {}
    raw_users = data.get("user", [])
    if not isinstance(raw_users, list):
        raise UsersError(f"{path}: 'user' must be an array of tables ([[user]])")
    for i, raw in enumerate(raw_users):
        where = f"{path}: user[{i}]"
        if not isinstance(raw, dict) or set(raw) - {"name", "role", "company", "hash"}:
            raise UsersError(f"{where}: expected only name, role, company and hash")
        name, role, company, digest = (raw.get(k, "") for k in ("name", "role", "company", "hash"))
        if not isinstance(name, str) or not NAME.match(name):
            raise UsersError(f"{where}.name: {name!r} is not a user name")
        if not isinstance(role, str) or role not in {r.value for r in Role}:
            raise UsersError(f"{where}.role: {role!r}, expected operator, industry or enforcement")
        if not isinstance(company, str) or not isinstance(digest, str) or not digest.startswith("scrypt$"):
            raise UsersError(f"{where}: company must be text and hash an scrypt hash")
        if Role(role) is Role.INDUSTRY and not company:
            raise UsersError(f"{where}.company: an industry user needs the company whose sites it sees")
        if name in users:
            raise UsersError(f"{where}.name: {name!r} appears twice")
        users[name] = User(name=name, role=Role(role), company=company, hash=digest)
    return users


def save_users(path: Path, users: dict[str, User]) -> None:
    """Write the file atomically (temporary file, fsync, rename), readable by its owner only."""
    lines = ["# pretreat console users: written by `pretreat user add`; passwords are scrypt hashes.", ""]
    for u in sorted(users.values(), key=lambda u: u.name):
        lines += ["[[user]]", f"name = {_toml_str(u.name)}", f"role = {_toml_str(u.role.value)}",
                  f"company = {_toml_str(u.company)}", f"hash = {_toml_str(u.hash)}", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _toml_str(s: str) -> str:
    """A TOML basic string (backslash, quote and control characters escaped)."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class UserStore:
    """The users file as the console sees it: re-read whenever its modification time or size changes.

    A file that cannot be read at construction raises `UsersError` (the console refuses to start, saying
    why). One that becomes unreadable while the console runs makes every look-up raise `UsersError` until it
    is fixed (the console answers 503 with the error, logged once per change of the file): falling back to
    the previous users would undo a removal that a typo broke."""

    def __init__(self, *, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, User] = {}
        self._error: UsersError | None = None
        self.refresh()

    def refresh(self) -> None:
        try:
            st = self.path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp or stamp is None:
            try:
                self._users, self._error = load_users(self.path), None
            except UsersError as exc:
                if self._error is None or str(exc) != str(self._error):
                    log.error("console users file unreadable; every request is refused until it is fixed: %s",
                              exc)
                self._users, self._error = {}, exc
            self._stamp = stamp
        if self._error is not None:
            raise self._error

    def get(self, name: str) -> User | None:
        self.refresh()
        return self._users.get(name)

    def authenticate(self, name: str, password: str) -> User | None:
        """The user if the password matches; None otherwise (same cost whether or not the name exists)."""
        user = self.get(name)
        ok = verify_password(password, user.hash if user is not None else dummy_hash())
        return user if ok and user is not None else None
