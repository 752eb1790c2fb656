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
import math
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from config.schema import Channel, Instrument, SiteConfig
from monitor.health import health_path

EXIT_HEALTHY = 0
EXIT_NOT_RUNNING = 1
EXIT_ERROR = 2
EXIT_DEGRADED = 3

HISTORIAN_BACKLOG = 10_000  # samples queued for the historian: a writer this far behind is failing
GOOD_LOOKBACK = 100_000  # readings searched back for a channel's last good one (bounds the cost)
_PRIORITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3, "diagnostic": 4}


def default_max_age(config: SiteConfig) -> float:
    """Seconds after which a snapshot means "not running": the daemon rewrites it every
    max(tick_interval, 1 s); five missed rewrites, never under 15 s, tolerate a busy machine."""
    return max(15.0, 5 * max(config.daemon.tick_interval, 1.0))


@dataclass(frozen=True, slots=True)
class Reading:
    time: float
    value: float | None
    quality: str
    reason: str = ""


@dataclass(slots=True)
class ChannelStatus:
    id: str
    unit: str
    stale: bool
    last: Reading | None = None
    last_good: Reading | None = None  # None: no good reading among the last GOOD_LOOKBACK


@dataclass(slots=True)
class InstrumentStatus:
    key: str  # site/instrument
    driver: str
    link: str  # "up", "down" or "?" (the snapshot does not say)
    counters: dict[str, Any]
    channels: list[ChannelStatus] = field(default_factory=list)


@dataclass(slots=True)
class AlarmStatus:
    id: str
    state: str
    priority: str
    changed: float | None
    value: float | None
    limit: float | None


@dataclass(slots=True)
class Report:
    running: bool
    reason: str  # why not running, or ""
    snapshot: dict[str, Any] | None
    snapshot_age: float | None
    historian: str
    instruments: list[InstrumentStatus] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    alarms: list[AlarmStatus] | None = None  # None: the file has no alarm state yet
    problems: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if not self.running:
            return EXIT_NOT_RUNNING
        return EXIT_DEGRADED if self.problems else EXIT_HEALTHY

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["exit_code"] = self.exit_code
        out["status"] = {0: "healthy", 1: "not running", 3: "degraded"}[self.exit_code]
        return out


# -- collecting ----------------------------------------------------------------------------------------
def read_snapshot(path: Path) -> dict[str, Any] | None:
    """The snapshot, or None if there is none. Writes are atomic (rename), so a read is never torn."""
    for attempt in range(3):
        try:
            data = json.loads(path.read_text())
            break
        except FileNotFoundError:
            return None
        except ValueError:  # a snapshot being rewritten in place (full disk, see monitor.health): read again
            if attempt == 2:
                raise
            time.sleep(0.05)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a health snapshot (a JSON object expected)")
    return data


def liveness(snapshot: dict[str, Any] | None, *, now: float, max_age: float) -> tuple[bool, str]:
    """(running, why not): judged on the snapshot's age, its state and, when it names one, its process."""
    if snapshot is None:
        return False, "no health snapshot: the daemon has not run with this site file"
    age = now - float(snapshot.get("time", 0.0))
    if snapshot.get("state") == "stopped":
        return False, f"not running: the daemon stopped cleanly {_ago(age)} ago"
    if age > max_age:
        return False, f"health snapshot is {_ago(age)} old (over {max_age:.0f} s): the daemon is not running or hangs"
    pid = snapshot.get("pid")
    if isinstance(pid, int) and not _process_exists(pid):
        return False, f"the daemon's process {pid} no longer exists"
    return True, ""


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user (the daemon runs as `pretreat`)
        return True
    return True


def collect(config: SiteConfig, *, now: float | None = None, max_age: float | None = None) -> Report:
    """Everything `pretreat status` shows, for ``config``'s historian. ``now`` (epoch s) is injectable."""
    now = time.time() if now is None else now
    max_age = default_max_age(config) if max_age is None else max_age
    db = config.daemon.historian
    snapshot = read_snapshot(health_path(db))
    running, reason = liveness(snapshot, now=now, max_age=max_age)
    snap = snapshot or {}
    report = Report(running=running, reason=reason, snapshot=snapshot,
                    snapshot_age=None if snapshot is None else now - float(snap.get("time", 0.0)),
                    historian=str(db), stale=sorted(snap.get("stale_channels", [])))
    stale = set(report.stale)
    with _historian(db) as conn:
        for site in config.sites:
            for inst in site.instruments:
                chans = [c for c in site.channels if c.instrument == inst.id]
                report.instruments.append(_instrument(inst, chans, snap, conn, stale))
        report.alarms = _alarms(conn) if conn is not None else None
    if running:
        report.problems = problems(report)
    return report


@contextmanager
def _historian(db: Path) -> Iterator[sqlite3.Connection | None]:
    if not db.is_file():
        yield None
        return
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)) as conn:
        yield conn


def _instrument(inst: Instrument, channels: list[Channel], snap: dict[str, Any],
                conn: sqlite3.Connection | None, stale: set[str]) -> InstrumentStatus:
    key = f"{inst.site}/{inst.id}"
    if inst.driver.is_modbus:
        counters = dict(snap.get("instruments", {}).get(key, {}))
        link_info = snap.get("links", {}).get(inst.link_key, {})
        counters.update({f"link_{k}": v for k, v in link_info.items() if k != "up"})
        up = link_info.get("up")
    else:
        streams = snap.get("streaming", {})
        counters = dict(streams.get(key) or streams.get(inst.id) or {})
        up = counters.pop("connected", None)
    link = "?" if up is None else ("up" if up else "down")
    out = InstrumentStatus(key=key, driver=inst.driver.value, link=link, counters=counters)
    for ch in channels:
        last, good = _last_readings(conn, inst.site, ch.id) if conn is not None else (None, None)
        out.channels.append(ChannelStatus(id=ch.id, unit=ch.unit, stale=f"{inst.site}/{ch.id}" in stale,
                                          last=last, last_good=good))
    return out


def _last_readings(conn: sqlite3.Connection, site: str, channel: str) -> tuple[Reading | None, Reading | None]:
    """The latest reading of any quality and the latest good one, across the channel's unit series."""
    from monitor.stores.historian_db import QUALITY_BY_CODE

    last: Reading | None = None
    good: Reading | None = None
    try:
        ids = [r[0] for r in conn.execute("SELECT id FROM channels WHERE site = ? AND channel = ?",
                                          (site, channel))]
    except sqlite3.OperationalError:  # no historian tables yet
        return None, None
    for cid in ids:
        row = conn.execute("SELECT time, value, quality, reason FROM readings WHERE channel_id = ? "
                           "ORDER BY time DESC, seq DESC LIMIT 1", (cid,)).fetchone()
        if row is not None and (last is None or row[0] > last.time):
            q = QUALITY_BY_CODE.get(row[2])
            last = Reading(row[0], row[1], q.value if q else f"code {row[2]}", row[3])
        row = conn.execute("SELECT time, value FROM (SELECT time, seq, value, quality FROM readings "
                           "WHERE channel_id = ? ORDER BY time DESC, seq DESC LIMIT ?) WHERE quality = 0 "
                           "ORDER BY time DESC, seq DESC LIMIT 1", (cid, GOOD_LOOKBACK)).fetchone()
        if row is not None and (good is None or row[0] > good.time):
            good = Reading(row[0], row[1], "good")
    return last, good


def _alarms(conn: sqlite3.Connection) -> list[AlarmStatus] | None:
    """Alarms not in the normal state, most urgent first; None when the file has no alarm state."""
    try:
        rows = conn.execute("SELECT alarm_id, state, priority, changed, record FROM alarm_state "
                            "WHERE state != 'normal'").fetchall()
    except sqlite3.OperationalError:
        return None
    out = []
    for alarm_id, state, prio, changed, record in rows:
        try:
            rec = json.loads(record)
        except ValueError:
            rec = {}
        out.append(AlarmStatus(id=alarm_id, state=state, priority=prio, changed=changed,
                               value=rec.get("value"), limit=rec.get("limit")))
    out.sort(key=lambda a: (_PRIORITY_RANK.get(a.priority, 9), -(a.changed or 0.0), a.id))
    return out


def problems(report: Report) -> list[str]:
    """What makes a running daemon degraded (exit 3); empty when healthy."""
    snap = report.snapshot or {}
    out = []
    if report.stale:
        out.append(f"{len(report.stale)} stale channel(s): {', '.join(report.stale)}")
    down = [i.key for i in report.instruments if i.link == "down"]
    if down:
        out.append(f"link down: {', '.join(down)}")
    record = snap.get("record")
    if isinstance(record, dict):
        out += [f"record integrity: {p}" for p in record.get("problems") or []]
    hist = snap.get("historian") or {}
    if hist.get("failing"):
        out.append(f"historian write failures ({hist.get('write_errors', 0)} failed attempts, "
                   f"{hist.get('queue_depth', 0)} samples held in memory): {hist['failing']}")
    queue = hist.get("queue_depth", 0)
    if queue >= HISTORIAN_BACKLOG:
        out.append(f"historian backlog: {queue} samples waiting to be written")
    for nid, lane in _delivery(snap).items():
        if lane.get("up") is False:
            out.append(f"alarm delivery {nid} down ({lane.get('depth', 0)} queued): {lane.get('last_error') or '?'}")
    influx = snap.get("influx")
    if isinstance(influx, dict):
        if influx.get("queue_alarm"):
            out.append(f"InfluxDB queue alarm: {influx.get('queue_fill_pct', 0):.0f} % of its disk budget")
        elif influx.get("server_up") is False and influx.get("queue_depth", 0) > 0:
            out.append(f"InfluxDB unreachable: {influx.get('queue_depth')} points queued")
    return out


# -- rendering -----------------------------------------------------------------------------------------
def render(report: Report, *, now: float) -> str:
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
    influx = snap.get("influx")
    if isinstance(influx, dict):
        lines.append(f"influx     queue {influx.get('queue_depth', 0)} points "
                     f"({influx.get('queue_fill_pct', 0.0):.1f} % of budget), "
                     f"{'server up' if influx.get('server_up') else 'server down'}, "
                     f"write errors {influx.get('write_errors', 0)}")
    for nid, lane in _delivery(snap).items():
        lines.append(f"delivery   {nid}: {'up' if lane.get('up') else 'DOWN'}, queue {lane.get('depth', 0)}"
                     + (f" (oldest {_ago(float(lane.get('oldest_age_s') or 0))})" if lane.get("depth") else ""))
    lines.append("instruments")
    for inst in report.instruments:
        lines.append(f"  {inst.key:<30} {inst.driver:<19} link {inst.link:<4}  {_counters(inst.counters)}")
        for ch in inst.channels:
            lines.append("    " + _channel_line(ch, now))
    lines += _alarm_lines(report.alarms, now)
    return "\n".join(lines)


def _mib(kib: Any) -> str:
    return f"{kib / 1024:.1f} MiB" if isinstance(kib, int | float) else "?"


def _delivery(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per alarm-notification channel: queue depth, oldest age, up (the dispatcher's health)."""
    alarms = snap.get("alarms")
    delivery = alarms.get("delivery") if isinstance(alarms, dict) else None
    return {str(k): v for k, v in delivery.items() if isinstance(v, dict)} if isinstance(delivery, dict) else {}


def _headline(report: Report) -> str:
    if not report.running:
        return f"pretreat-monitor: NOT RUNNING - {report.reason}"
    snap = report.snapshot or {}
    word = "DEGRADED" if report.problems else "healthy"
    pid = f"pid {snap['pid']}, " if "pid" in snap else ""
    return (f"pretreat-monitor: {word} - running ({pid}up {_ago(float(snap.get('uptime_s', 0)))}, "
            f"snapshot {report.snapshot_age:.1f} s old)")


_SHOWN = ("polls", "skipped", "bad_samples", "messages", "decode_errors", "link_comm_failures",
          "link_device_exceptions", "link_outages", "reconnects")


def _counters(c: dict[str, Any]) -> str:
    return "  ".join(f"{k.removeprefix('link_')} {c[k]}" for k in _SHOWN if k in c)


def _channel_line(ch: ChannelStatus, now: float) -> str:
    flag = "  STALE" if ch.stale else ""
    if ch.last is None:
        return f"{ch.id:<22} no reading recorded{flag}"
    last = ch.last
    shown = f"{_num(last.value)} {ch.unit}" if last.value is not None else "-"
    text = f"{ch.id:<22} {shown:<18} {last.quality:<17} {_ago(now - last.time)} ago"
    if last.quality != "good":
        why = f" ({last.reason})" if last.reason else ""
        good = (f"last good {_num(ch.last_good.value)} {ch.unit} {_ago(now - ch.last_good.time)} ago"
                if ch.last_good is not None else f"no good reading in the last {GOOD_LOOKBACK}")
        text += f"{why}; {good}"
    return text + flag


def _alarm_lines(alarms: list[AlarmStatus] | None, now: float) -> list[str]:
    if alarms is None:
        return ["alarms     no alarm state recorded in this file"]
    if not alarms:
        return ["alarms     all normal"]
    out = [f"alarms     {len(alarms)} not normal"]
    for a in alarms:
        since = f"since {_ago(now - a.changed)} ago" if a.changed is not None else ""
        vals = "".join(f" {n} {_num(v)}" for n, v in (("value", a.value), ("limit", a.limit)) if v is not None)
        out.append(f"  {a.id:<40} {a.state:<34} {a.priority:<10} {since}{vals}")
    return out


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.6g}" if math.isfinite(v) else str(v)


def _ago(s: float) -> str:
    s = max(s, 0.0)
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


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
        print(render(report, now=now))
    return report.exit_code
