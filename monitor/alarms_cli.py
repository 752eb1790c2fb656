"""`pretreat alarms …`, `pretreat journal verify` and `pretreat gateway map`: operating alarms from a terminal.

    pretreat alarms list  (--config FILE | --db PATH) [--site S] [--state active|unacked|shelved|out-of-service]
    pretreat alarms ack   ID [--user U [--password-stdin]] [--note TEXT]   (also: reset, unshelve, in-service)
    pretreat alarms shelve ID --until T --reason TEXT [--user U]         (also: out-of-service ID --reason TEXT)
    pretreat alarms watch [--last N] [--duration S] [--format text|json]
    pretreat journal verify [--anchor SEQ:HASH]
    pretreat gateway map --config FILE [--format table|csv]

``--config`` names the site file whose ``[daemon].historian`` is the daemon's SQLite file (alarm state,
journal, command queue); ``--db PATH`` names the file directly. ``ID`` is ``site/channel/rule``. ``list``
shows the alarms that are active or unacknowledged; ``--all`` every alarm the site file configures (one per
compiled rule and channel): the engine stores a row only once an alarm first changes, so one never changed is
listed as normal with its citation and an empty priority (its settings live in the daemon's configuration).
The tables' times are each site's local time with its zone (``--utc``: UTC), readings at the channel's
resolution with its unit; JSON times are Unix seconds as stored.

**Acting on alarms.** The running daemon owns the alarm engine, so an action is queued in the file
(`alarms.commands`) and this command waits (``--wait``, default 5 s) for the daemon's answer, then prints the
transitions it made (with their journal numbers) or its reason for refusing. If nothing answers, the daemon
does not appear to be running: the command is withdrawn, so it cannot take effect later by surprise (an
acknowledgement is of what the operator saw), and the exit code is 1. ``--no-wait`` instead leaves it
queued for ``--ttl`` seconds (default 300), for the daemon to carry out when it picks it up.
The action carries an authenticated user (`monitor.cli_auth`): ``--user NAME`` is a console user whose
password is asked (or read with ``--password-stdin``) and whose role allows the action; without it, the
daemon's service account (run as the owner of its database file). ``--until`` is ISO 8601 with ``Z`` or an
offset, or a duration from now such as ``30m``, ``2h``, ``1h30m``, ``1d``.

Exit codes: 0 done (verify: intact), 1 refused / no answer / journal not intact / file unreadable, 2 bad
usage (unknown alarm id in the site file, bad time, no database).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from alarms.commands import ACTIONS, CommandQueue, Status
from alarms.model import AlarmKey, State
from config.errors import ConfigErrors
from config.loader import load_config
from monitor.cli_auth import AuthError, acting_user, add_auth_options
from monitor.cli_render import Render, add_utc_option
from monitor.exceedances_render import iso
from monitor.read.alarms import (
    FILTERS,
    alarm_rows,
    configured_alarms,
    has_journal,
    journal_end,
    select_alarms,
    transitions_after,
    transitions_start,
)
from monitor.read.source import open_record
from monitor.read.times import UsageError, parse_until
from monitor.stores.readonly import connect_readonly


def _source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="site file (TOML); its [daemon].historian is used")
    p.add_argument("--db", metavar="PATH", help="the daemon's SQLite file (instead of, or over, --config)")


def add_alarms(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="alarms_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="alarms that are active or unacknowledged (--all: every configured alarm)")
    _source(ls)
    ls.add_argument("--site")
    ls.add_argument("--state", choices=sorted(FILTERS), help="only alarms in this condition")
    ls.add_argument("--all", action="store_true", help="every configured alarm, normal ones too")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    add_utc_option(ls)
    ls.set_defaults(func=_list)
    helps = {"ack": "acknowledge", "reset": "release a latched alarm whose condition has gone",
             "unshelve": "put a shelved alarm back in service", "shelve": "shelve until a time, with a reason",
             "out-of-service": "take out of service (maintenance), with a reason", "in-service": "back in service",
             "seen": "record that the industry has seen it (an industry user's ack; the state is unchanged)",
             "comment": "add a comment (--note TEXT), journaled with who and when"}
    for action in ACTIONS:
        a = sub.add_parser(action, help=helps[action])
        _source(a)
        a.add_argument("alarm_id", metavar="ID", help="site/channel/rule")
        add_auth_options(a)
        if action in ("shelve", "out-of-service"):
            a.add_argument("--reason", required=True)
        else:
            a.add_argument("--note", default="")
        if action == "shelve":
            a.add_argument("--until", required=True, metavar="T", help="ISO 8601 time, or e.g. 30m, 2h, 1d")
        a.add_argument("--wait", type=float, default=5.0, metavar="S", help="seconds to wait for the daemon")
        a.add_argument("--no-wait", action="store_true", help="queue it and return at once")
        a.add_argument("--ttl", type=float, default=300.0, metavar="S", help="with --no-wait: valid this long")
        a.set_defaults(func=_act, action=action)
    w = sub.add_parser("watch", help="follow alarm transitions as the daemon journals them")
    _source(w)
    w.add_argument("--last", type=int, default=0, metavar="N", help="first show the last N transitions")
    w.add_argument("--duration", type=float, default=0.0, metavar="S", help="stop after S s (default: Ctrl-C)")
    w.add_argument("--interval", type=float, default=0.25, metavar="S", help="seconds between looks")
    w.add_argument("--format", choices=("text", "json"), default="text")
    add_utc_option(w)
    w.set_defaults(func=_watch)


def add_journal(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="journal_command", required=True, metavar="ACTION")
    v = sub.add_parser("verify", help="re-check the hash chain; name the first altered or missing record")
    _source(v)
    v.add_argument("--anchor", metavar="SEQ:HASH|FILE",
                   help="a head kept elsewhere, or an anchor file (<historian>.anchors): detects a cut-off end")
    v.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), metavar="N",
                   help="worker processes recomputing the day seals (default: the cores, at most 4)")
    v.set_defaults(func=_verify)


def add_gateway(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="gateway_command", required=True, metavar="ACTION")
    m = sub.add_parser("map", help="print the Modbus register map the daemon serves to the plant's SCADA")
    m.add_argument("--config", required=True, metavar="FILE", help="site file (TOML)")
    m.add_argument("--format", choices=("table", "csv"), default="table")
    m.set_defaults(func=_gateway_map)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    name = " ".join(w for w in (args.command, getattr(args, "alarms_command", None),
                                getattr(args, "journal_command", None)) if w)
    print(f"pretreat {name}: {message}", file=sys.stderr)
    return code


# ---- list ------------------------------------------------------------------------------------------------

def _list(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        config, db = open_record(args.config, args.db)
        conn = connect_readonly(db)
        try:
            rows = alarm_rows(conn, config)
        finally:
            conn.close()
    except UsageError as exc:
        return _fail(args, str(exc), 2)
    except sqlite3.Error as exc:
        return _fail(args, f"cannot read the alarm state: {exc}", 1)
    rows = select_alarms(rows, site=args.site, state=args.state)
    if not args.state and not args.all:
        rows = [r for r in rows if _needs_attention(State(r["state"]))]
    if args.format == "json":
        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        return 0
    render = Render(config, utc=args.utc)
    head = ["ID", "STATE", "PRIORITY", f"SINCE ({'UTC' if render.utc else 'local time'})", "VALUE", "LIMIT",
            "CITATION / NOTE"]
    table = [[r["alarm"], r["state"], r["priority"], render.time(r["since"], _site(r)),
              _value(render, r, r["value"]), _value(render, r, r["limit"]), _note(r)] for r in rows]
    widths = [max([len(h)] + [len(t[i]) for t in table]) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    out.write(fmt.format(*head).rstrip() + "\n")
    out.writelines(fmt.format(*t).rstrip() + "\n" for t in table)
    return 0


def _needs_attention(state: State) -> bool:
    """The default list: what an operator must see (active, or not yet acknowledged)."""
    return FILTERS["active"](state) or FILTERS["unacked"](state)


def _site(r: dict[str, Any]) -> str:
    return str(r["alarm"]).split("/", 1)[0]


def _value(render: Render, r: dict[str, Any], v: float | None) -> str:
    """A reading at its channel's resolution, with the channel's unit where the site file gives it."""
    site, channel = str(r["alarm"]).split("/")[:2]
    unit = render.unit(site, channel)
    return "" if v is None else f"{render.number(v, site, channel)} {unit}".strip()


def _note(r: dict[str, Any]) -> str:
    note = r["citation"]
    if r["state"] in (State.SHELVED.value, State.OUT_OF_SERVICE.value):
        until = f" until {iso(r['until'])}" if r["until"] else ""
        note = f"{r['state']}{until} by {r['by']}: {r['reason']}"
    return note if r["configured"] else f"{note} (no longer configured)".strip()


# ---- ack, shelve, reset … ---------------------------------------------------------------------------------

def _act(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        config, db = open_record(args.config, args.db)
        AlarmKey.parse(args.alarm_id)
        if config is not None and args.alarm_id not in configured_alarms(config):
            raise UsageError(f"{args.alarm_id} is not an alarm of {args.config} "
                             "(`pretreat alarms list` shows them)")
        now = time.time()
        until = parse_until(args.until, now) if args.action == "shelve" else None
        if not db.exists():
            raise UsageError(f"no database at {db}: has the daemon run?")
        args.user = acting_user(args, config, db, args.action, args.alarm_id.split("/", 1)[0])
        queue = CommandQueue(path=db, create=False)
    except AuthError as exc:
        return _fail(args, str(exc), 1)
    except (UsageError, ValueError) as exc:
        return _fail(args, str(exc), 2)
    except (OSError, sqlite3.Error) as exc:
        return _fail(args, f"cannot queue the command: {exc}", 1)
    try:
        return _submit_and_wait(args, queue, until, now, out)
    finally:
        queue.close()


def _submit_and_wait(args: argparse.Namespace, queue: CommandQueue, until: float | None, now: float,
                     out: TextIO) -> int:
    ttl = args.ttl if args.no_wait else args.wait + 30.0  # a withdrawn command is cancelled anyway
    cid = queue.submit(alarm_id=args.alarm_id, action=args.action, user=args.user,
                       note=getattr(args, "note", ""), until=until, reason=getattr(args, "reason", ""),
                       ttl=ttl, now=now)
    if args.no_wait:
        out.write(f"queued as command {cid}: the daemon carries it out if it picks it up by "
                  f"{iso(now + ttl)}\n")
        return 0
    cmd = queue.wait(cid, args.wait)
    if not cmd.status.final and queue.cancel(cid, why=f"no answer from the daemon within {args.wait:g} s"):
        return _fail(args, f"no answer within {args.wait:g} s: the daemon does not appear to be running. "
                           "The command was withdrawn; nothing was done (--no-wait queues it instead).", 1)
    if not cmd.status.final:  # taken just now: the answer follows at once
        cmd = queue.wait(cid, 10.0)
    if cmd.status is Status.DONE:
        if not cmd.transitions:  # seen, comment: journaled, the alarm's state unchanged
            out.write(f"{args.alarm_id}: {args.action} by {args.user} journaled; the alarm's state is unchanged\n")
        for t in cmd.transitions:
            out.write(f"{t['alarm']}: {t['kind']} by {t['who']} ({t['from']} -> {t['to']}), "
                      f"journal record {t['seq']}\n")
        return 0
    return _fail(args, f"{cmd.status.value}: {cmd.why_not}", 1)


# ---- watch -----------------------------------------------------------------------------------------------

def _watch(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        config, db = open_record(args.config, args.db)
        conn = connect_readonly(db)
    except UsageError as exc:
        return _fail(args, str(exc), 2)
    except sqlite3.Error as exc:
        return _fail(args, f"cannot read the journal: {exc}", 1)
    render = Render(config, utc=getattr(args, "utc", False))
    deadline = time.monotonic() + args.duration if args.duration > 0 else float("inf")
    try:
        after = transitions_start(conn, args.last)
        while True:
            after = _show(conn, after, args.format, out, render)
            if time.monotonic() >= deadline:
                return 0
            time.sleep(min(args.interval, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        return 0
    except sqlite3.Error as exc:
        return _fail(args, f"cannot read the journal: {exc}", 1)
    finally:
        conn.close()


def _show(conn: sqlite3.Connection, after: int, fmt: str, out: TextIO, render: Render) -> int:
    """Write the transitions journaled after record ``after`` (JSON as journaled, or a line each in the site's
    local time, ``--utc``); returns the newest record number seen."""
    if not has_journal(conn):
        return after
    for seq, t in transitions_after(conn, after):
        after = seq
        if fmt == "json":
            out.write(json.dumps({**t, "seq": seq}, ensure_ascii=False) + "\n")
            continue
        cond = (f"  value {_value(render, t, t['value'])} limit {_value(render, t, t['limit'])}"
                if t.get("value") is not None else "")
        out.write(f"{render.time(t['time'], _site(t))}  #{seq}  {t['alarm']}  {t['kind'].upper()}  "
                  f"{t['from']} -> {t['to']}  [{t['priority']}]  {t['who']}: {t['why']}{cond}\n")
    out.flush()
    return max(after, journal_end(conn))


# ---- journal verify, gateway map ------------------------------------------------------------------------

def _verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Chain, chain end (``alarm_state``, anchors) and seals: `monitor.record_check`."""
    from monitor.record_check import check_record, render
    from monitor.stores.seal_verify import read_anchors

    out = out or sys.stdout
    try:
        anchors: list[tuple[int, str]] = []
        if args.anchor:
            seq, _, digest = args.anchor.partition(":")
            if seq.isdigit() and re.fullmatch(r"[0-9a-f]{64}", digest):
                anchors = [(int(seq), digest)]
            elif Path(args.anchor).is_file():
                anchors = read_anchors(Path(args.anchor))
            else:
                raise UsageError(f"--anchor {args.anchor!r}: expected SEQ:HASH (64 hex digits) or an anchor file")
        _config, db = open_record(args.config, args.db)
        conn = connect_readonly(db)
    except UsageError as exc:
        return _fail(args, str(exc), 2)
    except (sqlite3.Error, OSError) as exc:
        return _fail(args, f"cannot read {args.anchor if args.anchor else args.db or args.config}: {exc}", 1)
    try:
        if not has_journal(conn):
            return _fail(args, f"no journal in {db} (nothing journaled yet, or the table was removed)", 1)
        check = check_record(conn, anchors=anchors, path=db, jobs=max(1, args.jobs))
    except sqlite3.Error as exc:
        return _fail(args, f"cannot read the journal: {exc}", 1)
    finally:
        conn.close()
    out.write(render(check))
    return 0 if check.ok else 1


def _gateway_map(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from alarms.gateway import register_table  # pymodbus: import only for this command
    from config.gateway import gateway_settings

    out = out or sys.stdout
    try:
        config = load_config(args.config)
    except ConfigErrors as exc:
        return _fail(args, f"invalid site file:\n{exc}", 2)
    settings = gateway_settings(config)
    out.write(register_table(config, settings, fmt=args.format))
    return 0
