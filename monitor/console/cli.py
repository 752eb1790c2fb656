"""`pretreat console` (serve the operator console) and `pretreat user add|list|remove` (its users).

    pretreat console --config FILE [--database postgresql://…] [--host 127.0.0.1] [--port 8080] [--users FILE]
                     [--secure-cookies] [--trusted-proxy ADDR]
    pretreat user add --config FILE --name N --role operator|industry|enforcement [--company C]
                      [--password-stdin] [--users FILE]
    pretreat user list|remove --config FILE [--name N] [--users FILE]

``--users`` defaults to ``<site file>.users.toml`` beside the site file (`monitor.console.users`). The password
is asked for twice on the terminal, or read as one line from standard input with ``--password-stdin``
(for provisioning scripts); it is never a command-line argument, which other users could see in ``ps``.
An industry user's ``--company`` must be the ``company`` of at least one ``[[site]]`` of the site file.

``--database`` serves the county hub's PostgreSQL database instead of the daemon's file: every site the
site file states (a county file whose ``[[site]]`` tables are the edges' sites: names, time zones, companies,
channels and rules, which the hub's database does not hold), with the same roles; actions that write into a
site's record (acknowledge, calibrate, case file) stay with the edge's own console (409 here).

This module imports no web framework: `pretreat user` stays light; the app is imported by `pretreat
console` only. Exit codes: 0 done, 1 the server or the users file failed, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import logging
import re
import sys
from pathlib import Path

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from monitor.console.users import (
    MIN_PASSWORD,
    NAME,
    Role,
    User,
    UsersError,
    default_users_path,
    hash_password,
    load_users,
    save_users,
)
from monitor.stores.hub_record import is_database_url

log = logging.getLogger(__name__)


def add_console(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="the site file the daemon runs")
    p.add_argument("--database", metavar="URL",
                   help="serve the county hub's PostgreSQL database (postgresql://…) for the site file's sites")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--users", metavar="FILE", help="users file (default: <site file>.users.toml)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="mark cookies Secure: set when browsers reach the console over HTTPS (reverse proxy)")
    p.add_argument("--session-hours", type=float, default=12.0, metavar="H", help="session lifetime (default 12)")
    p.add_argument("--trusted-proxy", metavar="ADDR",
                   help="the reverse proxy's address: only its X-Forwarded-For header names the client (default: "
                        "the header is ignored; the login limiter counts by the connection's address)")
    p.set_defaults(func=_serve)


def add_user(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="user_command", required=True, metavar="ACTION")
    a = sub.add_parser("add", help="add a console user (or replace one's password and role with --replace)")
    _common(a)
    a.add_argument("--name", required=True)
    a.add_argument("--role", required=True, choices=[r.value for r in Role])
    a.add_argument("--company", default="", help="industry users: the company whose sites they see")
    a.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    a.add_argument("--replace", action="store_true", help="replace an existing user of that name")
    a.set_defaults(func=_add)
    ls = sub.add_parser("list", help="list the console users (names, roles, companies)")
    _common(ls)
    ls.set_defaults(func=_list)
    rm = sub.add_parser("remove", help="remove a console user (their sessions end at once)")
    _common(rm)
    rm.add_argument("--name", required=True)
    rm.set_defaults(func=_remove)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="the site file")
    p.add_argument("--users", metavar="FILE", help="users file (default: <site file>.users.toml)")


def _load(args: argparse.Namespace) -> tuple[SiteConfig, Path] | int:
    try:
        config = load_config(args.config)
    except ConfigErrors as exc:
        print(f"pretreat {args.command}: invalid site file:\n{exc}", file=sys.stderr)
        return 2
    users = Path(args.users) if args.users else default_users_path(Path(args.config).resolve())
    return config, users


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    print(f"pretreat {args.command}: {message}", file=sys.stderr)
    return code


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ")
    return first


def _add(args: argparse.Namespace) -> int:
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    config, path = loaded
    role = Role(args.role)
    companies = sorted({s.company for s in config.sites if s.company})
    if not NAME.match(args.name):
        return _fail(args, f"--name {args.name!r}: letters, digits, '_', '.', '@' or '-' (at most 64)", 2)
    if role is Role.INDUSTRY and args.company not in companies:
        return _fail(args, f"--company {args.company!r}: an industry user needs the company of one of the site "
                           f"file's sites ({', '.join(companies) or 'no [[site]] has a company key'})", 2)
    if role is not Role.INDUSTRY and args.company:
        return _fail(args, "--company is only for industry users (operators and enforcement see every site)", 2)
    try:
        users = load_users(path)
        if args.name in users and not args.replace:
            return _fail(args, f"user {args.name!r} exists already in {path} (--replace to change it)", 2)
        password = _password(args)
        if len(password) < MIN_PASSWORD:
            return _fail(args, f"the password must have at least {MIN_PASSWORD} characters", 2)
        users[args.name] = User(name=args.name, role=role, company=args.company, hash=hash_password(password))
        save_users(path, users)
    except (UsersError, OSError, ValueError) as exc:
        return _fail(args, str(exc), 1)
    print(f"user {args.name} ({role.value}{', ' + args.company if args.company else ''}) saved in {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    _config, path = loaded
    try:
        users = load_users(path)
    except UsersError as exc:
        return _fail(args, str(exc), 1)
    for u in sorted(users.values(), key=lambda u: u.name):
        print(f"{u.name}\t{u.role.value}\t{u.company}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    _config, path = loaded
    try:
        users = load_users(path)
        if users.pop(args.name, None) is None:
            return _fail(args, f"no user {args.name!r} in {path}", 2)
        save_users(path, users)
    except (UsersError, OSError) as exc:
        return _fail(args, str(exc), 1)
    print(f"user {args.name} removed from {path}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    config, users = loaded
    database = getattr(args, "database", None)
    if database is not None and not is_database_url(database):
        return _fail(args, f"--database {database!r}: expected a postgresql:// URL (the hub's database)", 2)
    try:
        count = len(load_users(users))
    except UsersError as exc:
        return _fail(args, str(exc), 2)
    if count == 0:
        log.warning("no console users in %s: nobody can log in (pretreat user add --config %s ...)", users,
                    args.config)
    if not _loopback(args.host) and not args.secure_cookies:
        log.warning("listening on %s without --secure-cookies: serve the console to other machines only through "
                    "a TLS reverse proxy (see monitor.console)", args.host)
    from monitor.console.app import ConsoleServer, create_app

    app = create_app(config=config, users_path=users, secure_cookies=args.secure_cookies,
                     session_lifetime=args.session_hours * 3600.0, database=database)
    server = ConsoleServer(app, host=args.host, port=args.port, log_level="info", trusted_proxy=args.trusted_proxy)
    log.info("console for %s on http://%s:%d/ (users: %s)", _shown(database) or config.daemon.historian, args.host,
             args.port, users)
    server.run()
    return 0 if server.started else 1


def _shown(url: str | None) -> str:
    """The database URL without its password, for the log."""
    if not url:
        return ""
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
