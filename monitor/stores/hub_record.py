"""The hub's PostgreSQL record read as the daemon's SQLite record: the ``record`` schema of views, and the one
read-only connection the read side opens on it.

The county's hub (`monitor.hub.store`) keeps what every edge sends in its own shape: ``readings`` keyed by
(site, channel, time, rseq) with the quality's name, ``channels`` from the edges' DBIRTH, and the record's
events (episodes, revisions, alarm transitions, seals) as JSON in ``events``. The read side (`monitor.read`,
the commands and the console) asks its questions of the SQLite record's tables. Rather than a second copy of
every query, the schema ``record`` presents the hub's tables under the SQLite names and columns:

- ``record.channels (id, site, channel, unit)``: one series per (site, channel); ``id`` is a 64-bit hash of
  the pair (stable, so a page or a link that names a series id keeps naming it);
- ``record.readings (channel_id, time, seq, value, quality, reason)``: ``time`` epoch seconds (the hub keeps
  milliseconds, the Sparkplug timestamp), ``seq`` the edge historian's row seq (rseq), ``quality`` the
  historian's code for the quality name (`monitor.sample.QUALITY_CODES`), ``reason`` '' for a good reading;
- ``record.episode_events``: the edges' episode events; ``id`` is the edge's episode store row id (unique per
  node only) shifted left by 20 bits, with 20 bits of a hash of the node below: ordered as the edge recorded
  them, below 2**53 (a page's JavaScript keeps it exact) for 8.5 billion episodes per node, and distinct across
  nodes unless two nodes share both the hash bits and a row id. The read side therefore keys an episode's
  rows by (site, id), which is exact; only a console link by id alone could name the other node's episode;
- ``record.episode_events.withdrawn`` and the figures of a row (value, limit, peak, coverage, ...) follow the
  edge's ``revision`` events (`monitor.uplink.events`): a row has the figures of the latest revision that
  updated it (``record.episode_revised``), and is withdrawn when the latest revision that names it withdrew it
  (``record.episode_withdrawn``; one that withdraws and re-adds a transition leaves it standing, as the edge's
  store does). ``record.episode_withdrawn_ids`` lists the withdrawn rows' ids from the revisions alone (few),
  which `monitor.read.revisions.withdrawn_ids` reads rather than filtering every episode event by the flag.
  A row's key (site, channel, rule, event, time, end reason) never changes, so it is read from the episode event
  itself and the ``events_episode_key`` index finds a rule's rows; PostgreSQL leaves the revision joins out of a
  query that reads no figure (they are unique per row). ``withdrawn`` and ``maintenance`` come last: a hub
  created before them replaces the view in place;
- ``record.episode_revisions``: the revision history as the edge's ``episode_revisions`` table, ``id`` made
  as the episode events' (``withdrawn`` and ``added`` the transitions' JSON, ``changes`` the lines);
- ``record.alarm_state (alarm_id, state, priority, seq, record)``: each alarm's latest transition as its edge
  reported it (the edge's engine owns the state; the hub only mirrors it).

The hub creates the views with its schema (`create_views`, under its schema lock); a reader never writes.
Readers connect with ``search_path = record, public`` in read-only transactions (`connect_hub`), so the read
side's SQL runs unchanged where both dialects share it; where they differ (temporary tables, ``PRAGMA``) the
read module asks `dialect` and says so beside the query.

Cost: a predicate on ``record.readings.time`` is evaluated per row of the channel (it is computed from the
hub's ``timestamptz``), while the channel is found through the hub's primary key (site, channel, …).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from monitor.sample import QUALITY_CODES

_QUALITY = " ".join(f"WHEN '{q.value}' THEN {c}" for q, c in QUALITY_CODES.items())
VIEWS = f"""
CREATE SCHEMA IF NOT EXISTS record;
CREATE OR REPLACE VIEW record.channels AS
    SELECT hashtextextended(site || '/' || channel, 0) AS id, site, channel, coalesce(unit, '') AS unit
    FROM public.channels;
CREATE OR REPLACE VIEW record.readings AS
    SELECT c.id AS channel_id, extract(epoch FROM r.time)::float8 AS time, r.rseq AS seq, r.value,
           CASE r.pretreat_quality {_QUALITY} ELSE -1 END AS quality, coalesce(r.reason, '') AS reason,
           r.site, r.channel, r.node
    FROM public.readings r JOIN record.channels c ON c.site = r.site AND c.channel = r.channel;
CREATE OR REPLACE VIEW record.episode_revised AS
    SELECT DISTINCT ON (r.node, (u->>'seq')::bigint) r.node, (u->>'seq')::bigint AS seq, r.seq AS revision, u AS body
    FROM public.events r CROSS JOIN LATERAL jsonb_array_elements(coalesce(r.body->'updated', '[]')) u
    WHERE r.type = 'revision' ORDER BY r.node, (u->>'seq')::bigint, r.seq DESC;
CREATE OR REPLACE VIEW record.episode_withdrawn AS
    SELECT r.node, w::bigint AS seq, max(r.seq) AS revision
    FROM public.events r CROSS JOIN LATERAL jsonb_array_elements_text(coalesce(r.body->'withdrawn_rows', '[]')) w
    WHERE r.type = 'revision' GROUP BY r.node, w::bigint;
CREATE OR REPLACE VIEW record.episode_withdrawn_ids AS
    SELECT (w.seq << 20) | (hashtext(w.node) & 1048575) AS id
    FROM record.episode_withdrawn w LEFT JOIN record.episode_revised u ON u.node = w.node AND u.seq = w.seq
    WHERE w.revision > coalesce(u.revision, -1);
CREATE OR REPLACE VIEW record.episode_events AS
    SELECT (e.seq << 20) | (hashtext(e.node) & 1048575) AS id, (e.body->>'time')::float8 AS time, e.site,
           e.body->>'channel' AS channel, e.body->>'rule' AS rule, e.body->>'event' AS event,
           (b->>'value')::float8 AS value, (b->>'limit')::float8 AS limit_value,
           (b->>'peak')::float8 AS peak, coalesce(b->>'citation', '') AS citation,
           b->>'end_reason' AS end_reason, (b->>'measured_seconds')::float8 AS measured,
           (b->>'unmeasured_seconds')::float8 AS unmeasured,
           CASE WHEN (b->>'censored')::boolean THEN 1 ELSE 0 END AS censored,
           CASE jsonb_typeof(b->'confirmed') WHEN 'number' THEN (b->>'confirmed')::float8 END AS confirmed,
           e.node,
           CASE WHEN w.revision > coalesce(u.revision, -1) THEN 1 ELSE 0 END AS withdrawn,
           (b->>'maintenance_seconds')::float8 AS maintenance
    FROM public.events e
    LEFT JOIN record.episode_revised u ON u.node = e.node AND u.seq = e.seq
    LEFT JOIN record.episode_withdrawn w ON w.node = e.node AND w.seq = e.seq
    CROSS JOIN LATERAL (SELECT coalesce(u.body, e.body) AS b) x
    WHERE e.type = 'episode';
CREATE OR REPLACE VIEW record.episode_revisions AS
    SELECT (seq << 20) | (hashtext(node) & 1048575) AS id, (body->>'recorded')::float8 AS recorded, site,
           body->>'channel' AS channel, body->>'rule' AS rule, body->>'reason' AS reason,
           (body->>'late')::float8 AS late, coalesce(body->'changes', '[]')::text AS changes,
           coalesce(body->'withdrawn', '[]')::text AS withdrawn, coalesce(body->'added', '[]')::text AS added,
           node
    FROM public.events WHERE type = 'revision';
CREATE OR REPLACE VIEW record.alarm_state AS
    SELECT DISTINCT ON (site, body->>'alarm') body->>'alarm' AS alarm_id, body->>'state' AS state,
           coalesce(body->>'priority', '') AS priority, seq,
           jsonb_build_object('changed', body->'time', 'value', body->'value', 'limit', body->'limit',
                              'citation', body->'citation')::text AS record
    FROM public.events WHERE type = 'alarm' ORDER BY site, body->>'alarm', seq DESC;
"""
"""The read side's views over the hub's tables (see the module doc); idempotent."""
INDEXES = """
CREATE INDEX IF NOT EXISTS events_episode_key ON events (site, (body->>'channel'), (body->>'rule'))
    WHERE type = 'episode';
CREATE INDEX IF NOT EXISTS events_revision ON events (node, seq) WHERE type = 'revision';
"""
"""Pairing episodes reads one (site, channel, rule) at a time: the first finds its events without a scan. Each
such read also applies the revisions (``record.episode_revised``, ``record.episode_withdrawn``): the second
finds them (few: corrections after late readings) without scanning every event of every edge."""


def create_views(conn: Any) -> None:
    """Create (or replace) the ``record`` views and the read side's index on a hub connection (psycopg)."""
    conn.execute(VIEWS)
    conn.execute(INDEXES)


_PLACEHOLDER = re.compile(r"%|\?")
_TABLE_INFO = re.compile(r"^\s*PRAGMA\s+table_info\((\w+)\)\s*$", re.IGNORECASE)
_DATA_VERSION = re.compile(r"^\s*PRAGMA\s+data_version\s*$", re.IGNORECASE)


def placeholders(sql: str) -> str:
    """SQLite's ``?`` parameters as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return _PLACEHOLDER.sub(lambda m: "%%" if m.group() == "%" else "%s", sql)


class HubReader:
    """A read-only connection to the hub's database that the read side uses like its SQLite connection:
    ``execute``/``executemany`` with ``?`` parameters, cursors with ``fetchone``/``fetchall``/``fetchmany``
    and iteration. Two SQLite questions are answered in PostgreSQL's terms: ``PRAGMA table_info(t)`` (the
    columns of a view or table, as (cid, name) rows) and ``PRAGMA data_version`` (a number that changes when
    any transaction commits: the snapshot's xmax), which the console's change feed polls."""

    dialect = "postgresql"

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        import psycopg

        self.url = url
        self.conn = psycopg.connect(url, connect_timeout=max(1, round(timeout)), autocommit=True,
                                    options="-c default_transaction_read_only=on -c search_path=record,public")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        if (m := _TABLE_INFO.match(sql)) is not None:
            cur.execute("SELECT ordinal_position, column_name FROM information_schema.columns "
                        "WHERE table_schema = ANY(current_schemas(false)) AND table_name = %s "
                        "ORDER BY ordinal_position", (m.group(1),))
        elif _DATA_VERSION.match(sql):
            cur.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        elif sql.strip().upper() in ("BEGIN", "COMMIT", "ROLLBACK"):
            cur.execute(sql)
        else:
            cur.execute(placeholders(sql), tuple(params))
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        cur = self.conn.cursor()
        cur.executemany(placeholders(sql), [tuple(r) for r in rows])
        return cur

    def close(self) -> None:
        self.conn.close()


def is_database_url(text: str | None) -> bool:
    """Whether ``--database`` names a PostgreSQL database (the only kind the hub writes)."""
    return bool(text) and str(text).startswith(("postgresql://", "postgres://"))
