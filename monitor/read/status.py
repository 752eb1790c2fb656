"""The health of a running daemon, read from what it leaves on disk: what `pretreat status` prints and the
console's health page shows (`collect`).

Nothing talks to a daemon socket: the health snapshot the daemon rewrites atomically every second or so next
to the historian (``<historian>.health.json``, see `monitor.health`), the latest readings in the historian,
and the ``alarm_state`` table the alarm engine keeps in the same SQLite file, all read-only beside the
running daemon (WAL lets readers and the writer proceed together).

The verdict (`Report.exit_code`): healthy; not running (no snapshot, a snapshot older than ``max_age``
seconds, one marked ``"state": "stopped"``, or one naming a process that no longer exists); degraded
(running, but something in the *monitoring* needs attention, `problems`). Active alarms are process
conditions, not daemon faults: they are listed, never folded into the verdict.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from config.schema import Channel, Instrument, SiteConfig
from monitor.health import health_path
from monitor.read.readings import latest_good_row, latest_row, reading, searched_back, series
from monitor.stores.readonly import connect_readonly

EXIT_HEALTHY = 0
EXIT_NOT_RUNNING = 1
EXIT_ERROR = 2
EXIT_DEGRADED = 3

HISTORIAN_BACKLOG = 10_000  # samples queued for the historian: a writer this far behind is failing
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
    bad_since: float | None = None  # no good reading: the oldest of the readings searched (none good since)
    searched: int = 0  # how many readings were searched for a good one, when none was found


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


def stale_channels(db: Path) -> list[str]:
    """The channels (``site/channel``) the daemon's last snapshot calls stale; none when it cannot be read."""
    try:
        snap = json.loads(health_path(db).read_text())
        return list(snap.get("stale_channels", []))
    except (OSError, ValueError, AttributeError):
        return []


def liveness(snapshot: dict[str, Any] | None, *, now: float, max_age: float) -> tuple[bool, str]:
    """(running, why not): judged on the snapshot's age, its state and, when it names one, its process."""
    if snapshot is None:
        return False, "no health snapshot: the daemon has not run with this site file"
    age = now - float(snapshot.get("time", 0.0))
    if snapshot.get("state") == "stopped":
        return False, f"not running: the daemon stopped cleanly {ago(age)} ago"
    if age > max_age:
        return False, f"health snapshot is {ago(age)} old (over {max_age:.0f} s): the daemon is not running or hangs"
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
    with closing(connect_readonly(db)) as conn:
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
        status = ChannelStatus(id=ch.id, unit=ch.unit, stale=f"{inst.site}/{ch.id}" in stale, last=last,
                               last_good=good)
        if conn is not None and last is not None and good is None:  # since when, in time: not a row count
            status.bad_since, status.searched = searched_back(conn, [c for c, _u in series(conn, inst.site,
                                                                                             ch.id)])
        out.channels.append(status)
    return out


def _last_readings(conn: sqlite3.Connection, site: str, channel: str) -> tuple[Reading | None, Reading | None]:
    """The latest reading of any quality and the latest good one, across the channel's unit series."""
    ids = [cid for cid, _unit in series(conn, site, channel)]
    last, good = latest_row(conn, ids), latest_good_row(conn, ids)
    return (None if last is None else Reading(last[0], last[1], reading(last)["quality"], last[3]),
            None if good is None else Reading(good[0], good[1], "good"))


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
    for key, dev in (snap.get("devices") or {}).items():  # see drivers.modbus.device_state
        for channel, why in (dev.get("unit_mismatch") or {}).items():
            out.append(f"{key} channel {channel}: {why}")
        if dev.get("faults"):
            out.append(f"{key} reports a fault: {'; '.join(dev['faults'])}")
    for key, stream in (snap.get("streaming") or {}).items():  # see drivers.mqtt.intake
        if isinstance(stream, dict) and stream.get("clock_ahead"):
            out.append(f"{key}: device clock {stream['clock_ahead']:.0f} s ahead, its readings recorded as "
                       "clock_skew (not judged): set the instrument's clock")
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
    for nid, lane in delivery(snap).items():
        if lane.get("up") is False:
            out.append(f"alarm delivery {nid} down ({lane.get('depth', 0)} queued): {lane.get('last_error') or '?'}")
    influx = snap.get("influx")
    if isinstance(influx, dict):
        if influx.get("queue_alarm"):
            out.append(f"InfluxDB queue alarm: {influx.get('queue_fill_pct', 0):.0f} % of its disk budget")
        elif influx.get("server_up") is False and influx.get("queue_depth", 0) > 0:
            out.append(f"InfluxDB unreachable: {influx.get('queue_depth')} points queued")
    return out


def delivery(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per alarm-notification channel: queue depth, oldest age, up (the dispatcher's health)."""
    alarms = snap.get("alarms")
    delivery = alarms.get("delivery") if isinstance(alarms, dict) else None
    return {str(k): v for k, v in delivery.items() if isinstance(v, dict)} if isinstance(delivery, dict) else {}


def ago(s: float) -> str:
    """A span of ``s`` seconds as people say it: 42 s, 12 min, 3.5 h, 2.0 d."""
    s = max(s, 0.0)
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"
