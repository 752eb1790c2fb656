"""Cause and corrective action for each exceedance episode, filled in by the industry, stored and journaled.

An episode is named by ``site/channel/rule@start`` (start in ISO 8601 UTC as the episode store records it,
e.g. ``acme/ph/ph_high@2026-03-07T15:00:00Z``): the reports print this id beside each episode so it can be
copied into ``pretreat report annotate``. Annotations are never edited in place: a later one for the same
episode supersedes the earlier for display, and both stay in the table and in the hash-chained journal, which
is the record that the explanation was given, by whom and when.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from monitor.checks.events import iso_utc, parse_iso
from monitor.stores.episodes import Episode, EpisodeStore
from monitor.stores.readonly import has_table

_SCHEMA = """CREATE TABLE IF NOT EXISTS report_annotations (
    id INTEGER PRIMARY KEY,
    episode TEXT NOT NULL,        -- site/channel/rule@start
    site TEXT NOT NULL, channel TEXT NOT NULL, rule TEXT NOT NULL, start REAL NOT NULL,
    cause TEXT NOT NULL, action TEXT NOT NULL, user TEXT NOT NULL,
    time REAL NOT NULL,           -- when it was entered (epoch s UTC)
    journal_seq INTEGER,          -- the journal record that carries it
    attachments TEXT NOT NULL DEFAULT '[]'  -- JSON list of file ids (sha256, `monitor.stores.casefile`)
) STRICT"""


@dataclass(frozen=True, slots=True)
class Annotation:
    episode: str
    cause: str
    action: str
    user: str
    time: float
    attachments: tuple[str, ...] = ()  # file ids (sha256) of what the industry attached


class AnnotationError(ValueError):
    pass


def episode_id(e: Episode) -> str:
    return f"{e.site}/{e.channel}/{e.rule}@{iso_utc(e.start)}"


def parse_episode_id(text: str) -> tuple[str, str, str, float]:
    try:
        head, start = text.rsplit("@", 1)
        site, channel, rule = head.split("/", 2)
        return site, channel, rule, parse_iso(start.replace("Z", "+00:00"))
    except ValueError as exc:
        raise AnnotationError(f"episode id {text!r}: expected site/channel/rule@2026-03-07T15:00:00Z") from exc


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(_SCHEMA)
    if "attachments" not in {r[1] for r in conn.execute("PRAGMA table_info(report_annotations)")}:
        conn.execute("ALTER TABLE report_annotations ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'")


def annotate(path: Path, *, episode: str, cause: str, action: str, user: str, now: float,
             attachments: Sequence[str] = ()) -> Annotation:
    """Record an annotation for an existing episode, journaled in the same transaction. ``attachments``: ids
    of files already stored in the case file (`monitor.stores.casefile.CaseFile.store_file`)."""
    from alarms.journal import Entry, Journal

    site, channel, rule, start = parse_episode_id(episode)
    if not cause.strip() or not action.strip() or not user.strip():
        raise AnnotationError("cause, corrective action and user are all required")
    store = EpisodeStore(path=path)
    try:
        # the id's start is rounded to the millisecond, so the stored start may be up to half of one either side
        found = [e for e in store.episodes(site=site, rule=rule, start=start - 0.001, end=start + 0.001)
                 if e.channel == channel and abs(e.start - start) <= 0.0005]
    finally:
        store.close()
    if not found:
        raise AnnotationError(f"no episode {episode} in {path}")
    journal = Journal(path=path)
    try:
        ensure_schema(journal.connection)
        payload: dict[str, object] = {"episode": episode, "cause": cause, "action": action, "user": user}
        if attachments:
            payload["attachments"] = list(attachments)

        def row(seqs: list[int]) -> list[tuple[str, list[tuple[object, ...]]]]:
            return [("INSERT INTO report_annotations (episode, site, channel, rule, start, cause, action, user, "
                     "time, journal_seq, attachments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     [(episode, site, channel, rule, found[0].start, cause, action, user, now, seqs[0],
                       json.dumps(list(attachments)))])]

        journal.append_many([Entry("annotation", payload, now)], also=row)
    finally:
        journal.close()
    return Annotation(episode=episode, cause=cause, action=action, user=user, time=now,
                      attachments=tuple(attachments))


def all_annotations(conn: sqlite3.Connection, site: str) -> dict[str, tuple[Annotation, ...]]:
    """Every annotation of each episode of ``site``, oldest first: the report shows each entry with who and
    when, so a later one never hides an earlier one."""
    if not has_table(conn, "report_annotations"):  # (either record: the hub's database has none)
        return {}
    out: dict[str, list[Annotation]] = {}
    for r in conn.execute("SELECT episode, cause, action, user, time FROM report_annotations WHERE site = ? "
                          "ORDER BY time, id", (site,)):
        out.setdefault(r[0], []).append(Annotation(*r))
    return {k: tuple(v) for k, v in out.items()}


def episode_annotations(conn: sqlite3.Connection, episode: str) -> list[Annotation]:
    """Every annotation of one episode, oldest first (the latest is the one in force), with attachments."""
    if not has_table(conn, "report_annotations"):
        return []
    cols = {r[1] for r in conn.execute("PRAGMA table_info(report_annotations)")}
    extra = ", attachments" if "attachments" in cols else ", '[]'"
    rows = conn.execute(f"SELECT episode, cause, action, user, time{extra} FROM report_annotations "
                        "WHERE episode = ? ORDER BY time, id", (episode,))
    return [Annotation(episode=r[0], cause=r[1], action=r[2], user=r[3], time=r[4],
                       attachments=tuple(json.loads(r[5]))) for r in rows]
