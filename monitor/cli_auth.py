"""Who acts on an alarm from the command line: an authenticated person, never just the login name.

- ``--user NAME``: a console user (`pretreat user add`), whose password is asked on the terminal or read from
  standard input (``--password-stdin``, for scripts: never an argument, which ``ps`` would show). The users
  file is the console's (``--users``, default ``<site file>.users.toml``). The user may do what the console
  lets that role do (`monitor.console.auth.ALARM_ACTIONS`), at the sites the role sees.
- No ``--user``: the daemon's service account. Only the account that owns the daemon's database file is
  that (``sudo -u pretreat pretreat alarms …``); the action is recorded as ``service:<account>``, and may be
  any action (taking an alarm out of service for maintenance is the service account's).

The journal records the authenticated name, so an action can be traced to a person or to the service.

The case file's entries from the command line (`pretreat obligations done`, `pretreat report annotate`) use
the same mechanism with the console's role rules (`acting_person`): the industry speaks for itself, so only
a console user of the industry role, for its company's sites, may record them; the service account may not.
"""

from __future__ import annotations

import argparse
import getpass
import os
import pwd
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from config.schema import SiteConfig

if TYPE_CHECKING:
    from monitor.console.users import User

SERVICE = "service:"


class AuthError(Exception):
    """The actor could not be authenticated or may not do this (the message says which and why)."""


def add_auth_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", metavar="NAME",
                   help="console user acting (password asked, or --password-stdin); default: the daemon's "
                        "service account, if you run as the owner of its database file")
    p.add_argument("--password-stdin", action="store_true", help="read --user's password from standard input")
    p.add_argument("--users", metavar="FILE", help="console users file (default: <site file>.users.toml)")


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise AuthError("no terminal to ask the password on: give --password-stdin")
    return getpass.getpass(f"password for {args.user}: ")


def acting_user(args: argparse.Namespace, config: SiteConfig | None, db: Path, action: str, site: str) -> str:
    """The authenticated name to record for ``action`` on an alarm of ``site``; raises AuthError."""
    if not args.user:
        return _service_account(db)
    from monitor.console.auth import ALARM_ACTIONS, role_action

    user = _authenticated(args, config, site)
    action = role_action(user.role, action)
    if hasattr(args, "action"):  # an industry's "ack" is recorded as seen (monitor.console.auth.role_action)
        args.action = action
    if action not in ALARM_ACTIONS[user.role]:
        article = "an" if user.role.value[0] in "aeiou" else "a"
        raise AuthError(f"{article} {user.role.value} user may not {action} alarms")
    return user.name


def acting_person(args: argparse.Namespace, config: SiteConfig, site: str, role: str, what: str) -> str:
    """The authenticated console user (of ``role``, seeing ``site``) recording ``what``; raises AuthError.
    Never the service account: the entry is a person's statement."""
    if not args.user:
        raise AuthError(f"give --user with the console user who may {what} ({role} role), and the password "
                        "on the terminal or with --password-stdin")
    user = _authenticated(args, config, site)
    if user.role.value != role:
        article = "an" if user.role.value[0] in "aeiou" else "a"
        raise AuthError(f"{article} {user.role.value} user may not {what}: only {role} users may")
    return user.name


def _authenticated(args: argparse.Namespace, config: SiteConfig | None, site: str) -> User:
    """The console user ``--user`` names, once its password checks out and ``site`` is one it sees."""
    from monitor.console.auth import may_see
    from monitor.console.users import UsersError, default_users_path, dummy_hash, load_users, verify_password

    if args.users:
        users_path = Path(args.users)
    elif getattr(args, "config", None):
        users_path = default_users_path(Path(args.config).resolve())
    else:
        raise AuthError("--users FILE is needed with --db (the console's users file)")
    try:
        user = load_users(users_path).get(args.user)
    except UsersError as exc:
        raise AuthError(f"cannot read the users file {users_path}: {exc}") from exc
    password = _password(args)
    ok = verify_password(password, user.hash if user is not None else dummy_hash())  # same cost either way
    if user is None or not ok:
        raise AuthError(f"unknown user or wrong password for {args.user!r} ({users_path})")
    if config is not None and not may_see(user, config, site):
        raise AuthError(f"site {site!r} is not one of {user.company or user.name}'s sites")
    return user


def _service_account(db: Path) -> str:
    owner = db.stat().st_uid
    if os.geteuid() != owner:
        raise AuthError(f"you are not the daemon's service account (the owner of {db}): give --user with a "
                        "console user's name, or run as that account")
    try:
        name = pwd.getpwuid(owner).pw_name
    except KeyError:
        name = f"uid {owner}"
    return SERVICE + name
