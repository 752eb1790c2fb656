"""`pretreat status`: the health of a running daemon, read from what it leaves on disk.

The command talks to no daemon socket: it reads the health snapshot the daemon rewrites atomically every
second or so next to the historian (``<historian>.health.json``, see `monitor.health`), the latest readings
in the historian, and the ``alarm_state`` table the alarm engine keeps in the same SQLite file. It works
for any user who can read those files (members of the ``pretreat`` group under the shipped unit), beside a
running daemon (read-only connections; WAL lets readers and the writer proceed together).

Exit codes, so that a monitoring agent (Nagios/Icinga style) or a shell script can act on them:

* 0 healthy: the daemon is running and every check below passes;
* 1 not running: no snapshot, a snapshot older than ``--max-age`` seconds (the daemon stopped, hung or
  crashed), a snapshot marked ``"state": "stopped"``, or one naming a process that no longer exists;
* 2 the site file is invalid or a file cannot be read (as for every `pretreat` command);
* 3 degraded: running, but something in the *monitoring* needs attention: a stale channel, an instrument
  link or broker connection down, an alarm-notification channel down, a historian backlog, the InfluxDB
  copy failing or its queue alarming.

Active alarms are process conditions, not daemon faults: they are listed, never folded into the exit code
(`pretreat alarms list` is the tool for them).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from typing import TYPE_CHECKING, Any

from monitor.read.readings import GOOD_LOOKBACK
from monitor.read.status import (
    EXIT_ERROR,
    AlarmStatus,
    ChannelStatus,
    Report,
    ago,
    collect,
    delivery,
)

if TYPE_CHECKING:
    from monitor.cli_render import Render


# -- rendering -----------------------------------------------------------------------------------------
def render(report: Report, *, now: float, numbers: Render | None = None) -> str:
    """The report for people; ``numbers`` (the site file's) rounds each reading and limit to its channel's
    resolution, as the daemon's log does (without it: four significant digits, `monitor.cli_render`)."""
    from monitor.cli_render import Render

    fmt = numbers or Render(None)
    lines = [_headline(report)]
    lines += [f"  ! {p}" for p in report.problems]
    snap = report.snapshot or {}
    h = snap.get("historian") or {}
    lines.append(f"historian  {report.historian}: {h.get('samples_written', '?')} samples written, "
                 f"queue {h.get('queue_depth', '?')}, write errors {h.get('write_errors', '?')}")
    mem, lag = snap.get("memory"), snap.get("loop_lag")
    if isinstance(mem, dict) and isinstance(lag, dict):
        sq = mem.get("sqlite_kib")
        lines.append(f"process    RSS {_mib(mem.get('rss_kib'))} (SQLite {_mib(sq)}), "
                     f"event-loop lag p99 {lag.get('p99_ms', '?')} ms, worst {lag.get('max_ms', '?')} ms")
    checks = snap.get("checks")
    if isinstance(checks, dict):
        lines.append(f"checks     late readings re-judged {checks.get('late', 0)}, "
                     f"revisions {checks.get('revisions', 0)}, retractions {checks.get('retractions', 0)}, "
                     f"rebuilt from the historian {checks.get('rebuilt_from_history', 0)}, "
                     f"rejected {checks.get('rejected', 0)}, unknown channel {checks.get('unknown', 0)}")
    influx = snap.get("influx")
    if isinstance(influx, dict):
        lines.append(f"influx     queue {influx.get('queue_depth', 0)} points "
                     f"({influx.get('queue_fill_pct', 0.0):.1f} % of budget), "
                     f"{'server up' if influx.get('server_up') else 'server down'}, "
                     f"write errors {influx.get('write_errors', 0)}")
    uplink = snap.get("uplink")
    if isinstance(uplink, dict):
        up = "broker up" if uplink.get("connected") else "broker down"
        lines.append(f"uplink     bdSeq {uplink.get('bdseq')}, {up}, queue {uplink.get('queue_depth', 0)}"
                     + (f" (oldest {ago(float(uplink.get('oldest_unsent_age_s') or 0))})"
                        if uplink.get("queue_depth") else "")
                     + f", sent {uplink.get('readings_sent', 0)} readings ({uplink.get('historical_sent', 0)} as "
                       f"history), dropped {uplink.get('dropped_over_budget', 0)}")
    for nid, lane in delivery(snap).items():
        lines.append(f"delivery   {nid}: {'up' if lane.get('up') else 'DOWN'}, queue {lane.get('depth', 0)}"
                     + (f" (oldest {ago(float(lane.get('oldest_age_s') or 0))})" if lane.get("depth") else ""))
    lines.append("instruments")
    for inst in report.instruments:
        lines.append(f"  {inst.key:<30} {inst.driver:<19} link {inst.link:<4}  {_counters(inst.counters)}")
        site = inst.key.split("/", 1)[0]
        for ch in inst.channels:
            lines.append("    " + _channel_line(ch, now, fmt, site))
    lines += _alarm_lines(report.alarms, now, fmt)
    return "\n".join(lines)


def _mib(kib: Any) -> str:
    return f"{kib / 1024:.1f} MiB" if isinstance(kib, int | float) else "?"


def _headline(report: Report) -> str:
    if not report.running:
        return f"pretreat-monitor: NOT RUNNING - {report.reason}"
    snap = report.snapshot or {}
    word = "DEGRADED" if report.problems else "healthy"
    pid = f"pid {snap['pid']}, " if "pid" in snap else ""
    return (f"pretreat-monitor: {word} - running ({pid}up {ago(float(snap.get('uptime_s', 0)))}, "
            f"snapshot {report.snapshot_age:.1f} s old)")


_SHOWN = ("polls", "skipped", "bad_samples", "messages", "decode_errors", "link_comm_failures",
          "link_device_exceptions", "link_outages", "reconnects")


_WHEN_ANY = ("link_stray_replies",)  # shown only once it happened: late Modbus TCP replies our client dropped


def _counters(c: dict[str, Any]) -> str:
    shown = [k for k in _SHOWN if k in c] + [k for k in _WHEN_ANY if c.get(k)]
    return "  ".join(f"{k.removeprefix('link_')} {c[k]}" for k in shown)


def _channel_line(ch: ChannelStatus, now: float, fmt: Render, site: str) -> str:
    def num(v: float | None) -> str:
        return fmt.number(v, site, ch.id)

    flag = "  STALE" if ch.stale else ""
    if ch.last is None:
        return f"{ch.id:<22} no reading recorded{flag}"
    last = ch.last
    shown = f"{num(last.value)} {ch.unit}" if last.value is not None else "-"
    text = f"{ch.id:<22} {shown:<18} {last.quality:<17} {ago(now - last.time)} ago"
    if last.quality != "good":
        why = f" ({last.reason})" if last.reason else ""
        good = (f"last good {num(ch.last_good.value)} {ch.unit} {ago(now - ch.last_good.time)} ago"
                if ch.last_good is not None else _no_good(ch, now))
        text += f"{why}; {good}"
    return text + flag


def _no_good(ch: ChannelStatus, now: float) -> str:
    """No good reading among those searched: for how long, in time, and how many readings that was."""
    if ch.bad_since is None:
        return f"no good reading among its last {GOOD_LOOKBACK:,} readings"
    which = f"its last {ch.searched:,} readings" if ch.searched >= GOOD_LOOKBACK else \
        f"none of the {ch.searched:,} readings recorded"
    return f"no good reading for at least {ago(now - ch.bad_since)} ({which})"


def _alarm_lines(alarms: list[AlarmStatus] | None, now: float, fmt: Render) -> list[str]:
    if alarms is None:
        return ["alarms     no alarm state recorded in this file"]
    if not alarms:
        return ["alarms     all normal"]
    out = [f"alarms     {len(alarms)} not normal"]
    for a in alarms:
        since = f"since {ago(now - a.changed)} ago" if a.changed is not None else ""
        site, channel = [*a.id.split("/"), "", ""][:2]
        vals = "".join(f" {n} {fmt.number(v, site, channel)}" for n, v in (("value", a.value), ("limit", a.limit))
                       if v is not None)
        out.append(f"  {a.id:<40} {a.state:<34} {a.priority:<10} {since}{vals}")
    return out


# -- CLI -----------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="the site file the daemon runs")
    p.add_argument("--max-age", type=float, default=None, metavar="SECONDS",
                   help="a health snapshot older than this means the daemon is not running "
                        "(default: 5 snapshot intervals, at least 15 s)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for monitoring agents)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from config.loader import load_config_or_report

    config = load_config_or_report(args.config)
    if config is None:
        return EXIT_ERROR
    now = time.time()
    try:
        report = collect(config, now=now, max_age=args.max_age)
    except (OSError, ValueError, sqlite3.Error) as exc:
        print(f"pretreat status: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        from monitor.cli_render import Render

        print(render(report, now=now, numbers=Render(config)))
    return report.exit_code
