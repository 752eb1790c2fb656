"""Alarms as the record holds them: every configured alarm with its stored state, and the journal's records.

The engine stores an ``alarm_state`` row only once an alarm first changes, so an alarm the site file
configures but that never changed is listed as normal with its citation and an empty priority. The journal
(`alarms.journal`) is append-only and numbered (``seq``); transitions, operator actions and refused actions
are its records that people read. Times are epoch seconds UTC.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any

from alarms.model import AlarmKey, State
from config.calibration import CALIBRATION_OVERDUE
from config.obligations import OBLIGATION_CHANNEL, OBLIGATION_OVERDUE, obligations_of
from config.schema import SiteConfig
from monitor.stores.readonly import has_table

ACTIVE = frozenset({State.ACTIVE_UNACKED, State.ACTIVE_ACKED, State.LATCHED_UNACKED, State.LATCHED_ACKED})
FILTERS: dict[str, Callable[[State], bool]] = {
    "active": lambda s: s in ACTIVE,
    "unacked": lambda s: s.unacknowledged,
    "shelved": lambda s: s is State.SHELVED,
    "out-of-service": lambda s: s is State.OUT_OF_SERVICE,
}
"""The conditions an alarm list can be narrowed to, by name."""

JOURNAL_KINDS = ("transition", "action", "refusal")
"""The journal records people read (seals and checkpoints are the record's own bookkeeping)."""


_CONFIGURED: list[tuple[SiteConfig, Mapping[str, tuple[str, str]]]] = []  # the last configuration's, by identity


def configured_alarms(config: SiteConfig) -> Mapping[str, tuple[str, str]]:
    """alarm id -> (site id, citation) of every alarm the daemon creates: one per rule binding of a site, and
    the overdue-obligation alarm of each site whose episodes oblige anything (`monitor.obligation_watch`), and
    one per channel with a calibration interval in force (`monitor.calibration`), and each site's
    record-integrity alarm (`monitor.integrity`), which must be acknowledgeable like any other.

    Kept for the last configuration object asked about (a console asks on every alarm change: tens of
    milliseconds for 200 sites); a configuration is never changed in place, so the same object gives the same
    answer, which is read-only."""
    cached = _CONFIGURED[:1]
    if cached and cached[0][0] is config:
        return cached[0][1]
    out = MappingProxyType(_configured(config))
    _CONFIGURED[:] = [(config, out)]
    return out


def _configured(config: SiteConfig) -> dict[str, tuple[str, str]]:
    from config.alarms import RECORD_CHANNEL, RECORD_CITATION, RECORD_INTEGRITY
    from monitor.calibration import CALIBRATION_CITATION, watched

    out = {AlarmKey(b.site, b.channel, b.rule).id: (s.id, b.citation) for s in config.sites for b in s.checks}
    out.update({AlarmKey(s.id, RECORD_CHANNEL, RECORD_INTEGRITY).id: (s.id, RECORD_CITATION) for s in config.sites})
    out.update({AlarmKey(s.id, OBLIGATION_CHANNEL, OBLIGATION_OVERDUE).id: (s.id, "obligations past their due time")
                for s in config.sites if obligations_of(s)})
    for site, channel in watched(config.sites):
        out[AlarmKey(site, channel, CALIBRATION_OVERDUE).id] = (site, CALIBRATION_CITATION)
    return out


def alarm_rows(conn: sqlite3.Connection, config: SiteConfig | None,
               ids: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Every alarm: the configured ones (normal if the engine never stored a row for them) and any stored; with
    ``ids``, only those of them (a few changed alarms, read through the table's key)."""
    stored: dict[str, tuple[str, str, str]] = {}
    sql = "SELECT alarm_id, state, priority, record FROM alarm_state"
    if has_table(conn, "alarm_state"):
        wanted = sorted(ids) if ids is not None else []
        rows = conn.execute(sql).fetchall() if ids is None else [
            r for i in range(0, len(wanted), 500) for r in conn.execute(
                f"{sql} WHERE alarm_id IN ({','.join('?' * len(wanted[i:i + 500]))})", wanted[i:i + 500])]
        stored = {r[0]: (r[1], r[2], r[3]) for r in rows}
    known = configured_alarms(config) if config is not None else {}
    chosen = set(known) | set(stored) if ids is None else {i for i in ids if i in known or i in stored}
    out = []
    for alarm_id in sorted(chosen):
        state, priority, text = stored.get(alarm_id, (State.NORMAL.value, "", "{}"))
        rec: dict[str, Any] = json.loads(text)
        out.append({"alarm": alarm_id, "state": state, "priority": priority, "since": rec.get("changed"),
                    "value": rec.get("value"), "limit": rec.get("limit"),
                    "citation": rec.get("citation") or known.get(alarm_id, ("", ""))[1],
                    "until": rec.get("mode_until"), "by": rec.get("mode_by", ""),
                    "reason": rec.get("mode_reason", ""), "configured": alarm_id in known or config is None})
    return out


def select_alarms(rows: list[dict[str, Any]], *, site: str | None = None, state: str | None = None
                  ) -> list[dict[str, Any]]:
    """The rows of ``site`` (None: all) in the condition named ``state`` (a `FILTERS` key; None: any)."""
    keep = FILTERS.get(state or "", lambda _s: True)
    return [r for r in rows if (not site or r["alarm"].split("/")[0] == site) and keep(State(r["state"]))]


# ---- the journal -----------------------------------------------------------------------------------------

def has_journal(conn: sqlite3.Connection) -> bool:
    return has_table(conn, "journal")


def journal_end(conn: sqlite3.Connection) -> int:
    """The number of the newest journal record (0: none)."""
    return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM journal").fetchone()[0])


def transitions_start(conn: sqlite3.Connection, last: int) -> int:
    """Where to follow the journal from so that the ``last`` newest transitions come first (0: only new ones)."""
    if not has_journal(conn):
        return 0
    if last <= 0:
        return journal_end(conn)
    row = conn.execute("SELECT MIN(seq) FROM (SELECT seq FROM journal WHERE kind = 'transition' "
                       "ORDER BY seq DESC LIMIT ?)", (last,)).fetchone()
    return int(row[0]) - 1 if row[0] is not None else 0


def transitions_after(conn: sqlite3.Connection, after: int) -> list[tuple[int, dict[str, Any]]]:
    """(seq, payload) of the transitions journaled after record ``after``, oldest first."""
    if not has_journal(conn):
        return []
    return [(int(seq), json.loads(payload)) for seq, payload in conn.execute(
        "SELECT seq, payload FROM journal WHERE seq > ? AND kind = 'transition' ORDER BY seq", (after,)).fetchall()]


def journal_records(conn: sqlite3.Connection, *, sites: Collection[str], alarm: str | None = None,
                    limit: int = 50) -> list[dict[str, Any]]:
    """The latest transition, action and refusal records of ``alarm`` (or of every alarm of ``sites``),
    newest first, each as its payload plus ``seq``, ``record`` (its kind) and ``time``."""
    if not has_journal(conn):
        return []
    marks = ",".join("?" * len(JOURNAL_KINDS))
    sql = f"SELECT seq, time, kind, payload FROM journal WHERE kind IN ({marks})"
    params: list[Any] = list(JOURNAL_KINDS)
    if alarm is not None:
        sql += " AND json_extract(payload, '$.alarm') = ?"
        params.append(alarm)
    sql += " ORDER BY seq DESC"
    out: list[dict[str, Any]] = []
    for seq, t, kind, text in conn.execute(sql, params):  # newest first; stop once enough are found
        payload = json.loads(text)
        if str(payload.get("alarm", "")).split("/")[0] not in sites:
            continue
        out.append({**payload, "seq": seq, "record": kind, "time": t})
        if len(out) >= limit:
            break
    return out
