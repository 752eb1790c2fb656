"""The hub's PostgreSQL record: schema, monthly partitions, and one idempotent transaction per batch.

``readings``' primary key is the contract's idempotence key (site, channel, time, rseq): a message redelivered
after a hub died before acknowledging it, or an edge's replayed backlog, adds nothing. A batch's readings are
``COPY``ed straight into ``readings`` under a savepoint; when that meets a row already stored, they go by
``COPY`` into a session-local staging table and one ``INSERT … SELECT … ON CONFLICT DO NOTHING`` instead (the
idempotent path costs about twice the database time, and duplicates are rare: measured in bench/bench_hub.py).
``readings`` is partitioned by month (declarative range partitions made as the data needs them); when the
TimescaleDB extension is available it becomes a hypertable with monthly chunks instead (never required).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from monitor.hub.sparkplug import READING_COLUMNS, month_start
from monitor.stores.hub_record import create_views

EVENT_TYPES = ("episode", "revision", "alarm", "seal")  # `monitor.uplink.events`
SCHEMA_LOCK = 0x70726574  # advisory lock key: two hubs starting together create the schema once
READINGS = """
CREATE TABLE IF NOT EXISTS readings (
    site text NOT NULL, channel text NOT NULL, time timestamptz NOT NULL, rseq bigint NOT NULL,
    value double precision, quality integer, pretreat_quality text, reason text,
    historical boolean NOT NULL DEFAULT false, node text NOT NULL, received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, channel, time, rseq)){partitioning}"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS channels (
    site text NOT NULL, channel text NOT NULL, node text NOT NULL, unit text, kind text,
    eng_low double precision, eng_high double precision, updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, channel));
CREATE TABLE IF NOT EXISTS events (
    node text NOT NULL, type text NOT NULL, seq bigint NOT NULL, site text, body jsonb NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (node, type, seq));
CREATE OR REPLACE VIEW episodes AS SELECT node, seq, site, body, received_at FROM events WHERE type = 'episode';
CREATE OR REPLACE VIEW revisions AS SELECT node, seq, site, body, received_at FROM events WHERE type = 'revision';
CREATE OR REPLACE VIEW alarms AS SELECT node, seq, site, body, received_at FROM events WHERE type = 'alarm';
CREATE OR REPLACE VIEW seals AS SELECT node, seq, site, body, received_at FROM events WHERE type = 'seal';
CREATE TABLE IF NOT EXISTS edges (
    node text PRIMARY KEY, bdseq integer, birth_ms bigint, born_at timestamptz, died_at timestamptz,
    last_seen timestamptz, sites text[] NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS edge_messages (
    node text NOT NULL, seq smallint NOT NULL, sent_ms bigint NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS edge_messages_node_time ON edge_messages (node, received_at);
CREATE TABLE IF NOT EXISTS hub_alarms (
    id bigserial PRIMARY KEY, kind text NOT NULL, node text NOT NULL, sites text[] NOT NULL, detail text NOT NULL,
    raised_at timestamptz NOT NULL DEFAULT now(), cleared_at timestamptz);
CREATE UNIQUE INDEX IF NOT EXISTS hub_alarms_open ON hub_alarms (kind, node) WHERE cleared_at IS NULL;
CREATE TABLE IF NOT EXISTS hub_rejects (
    id bigserial PRIMARY KEY, topic text NOT NULL, reason text NOT NULL, payload bytea,
    received_at timestamptz NOT NULL DEFAULT now());
"""
STAGE = """CREATE TEMP TABLE IF NOT EXISTS readings_stage (
    site text, channel text, time timestamptz, rseq bigint, value double precision, quality integer,
    pretreat_quality text, reason text, historical boolean, node text) ON COMMIT DELETE ROWS"""
COLUMNS = ", ".join(READING_COLUMNS)
COPY_TYPES = ["text", "text", "timestamptz", "int8", "float8", "int4", "text", "text", "bool", "text"]
MERGE = f"INSERT INTO readings ({COLUMNS}) SELECT {COLUMNS} FROM readings_stage ON CONFLICT DO NOTHING"


@dataclass
class Batch:
    """What one transaction writes: the decoded content of up to ``max_batch`` MQTT messages."""

    readings: list[tuple[Any, ...]] = field(default_factory=list)
    channels: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[str, str, int, str | None, str]] = field(default_factory=list)
    births: list[tuple[str, int, int]] = field(default_factory=list)
    """(node, bdSeq, birth payload timestamp ms) of each NBIRTH."""
    deaths: list[tuple[str, int]] = field(default_factory=list)
    device_births: list[tuple[str, str]] = field(default_factory=list)
    seqs: list[tuple[str, int, int]] = field(default_factory=list)
    """(node, Sparkplug seq, payload timestamp ms) of each message that carries a seq."""
    seen: set[str] = field(default_factory=set)
    rejects: list[tuple[str, str, bytes | None]] = field(default_factory=list)
    months: set[dt.datetime] = field(default_factory=set)
    """The month starts of the readings' times (the partitions they need), gathered while decoding."""

    def extend(self, other: Batch) -> None:
        for name in ("readings", "channels", "events", "births", "deaths", "device_births", "seqs", "rejects"):
            getattr(self, name).extend(getattr(other, name))
        self.seen |= other.seen
        self.months |= other.months


class Store:
    """One connection of one hub; `write` is the batch's single transaction (commit or nothing)."""

    def __init__(self, url: str, *, seen_every: float = 0.0) -> None:
        """``seen_every``: s between two updates of one edge's ``last_seen`` (0: after every batch)."""
        self.url = url
        self.conn: psycopg.Connection[Any] | None = None
        self.timescale = False
        self._months: set[dt.datetime] = set()
        self.seen_every = seen_every
        self._seen_at: dict[str, float] = {}

    def connect(self) -> None:
        self.close()
        # autocommit: every write is an explicit transaction, and no read leaves one open (holding locks)
        conn = psycopg.connect(self.url, connect_timeout=5, autocommit=True)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            self.timescale = conn.execute(
                "SELECT count(*) FROM pg_available_extensions WHERE name = 'timescaledb'").fetchone() == (1,)
            if self.timescale:
                conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
                conn.execute(READINGS.format(partitioning=""))
                conn.execute("SELECT create_hypertable('readings', 'time', chunk_time_interval => interval '1 month',"
                             " if_not_exists => true)")
            else:
                conn.execute(READINGS.format(partitioning=" PARTITION BY RANGE (time)"))
            conn.execute(SCHEMA)
            create_views(conn)  # the read side's `record` views (monitor.stores.hub_record)
            conn.execute(STAGE)
        self._months.clear()
        self.conn = conn

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None

    def _partitions(self, conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]],
                    months: set[dt.datetime]) -> None:
        """Create the month partitions the rows need (under an advisory lock: another hub may be making it).
        ``months``: theirs as the decoder gathered them (a batch built otherwise has none: computed here)."""
        if self.timescale:
            return
        for month in (months or {month_start(r[2]) for r in rows}) - self._months:
            nxt = (month + dt.timedelta(days=32)).replace(day=1)
            name = f"readings_y{month.year}m{month.month:02d}"
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK + 1,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF readings "
                         f"FOR VALUES FROM ('{month.isoformat()}') TO ('{nxt.isoformat()}')")
            self._months.add(month)

    def write(self, batch: Batch) -> int:
        """Write the batch in one transaction; returns the readings newly inserted (duplicates add none)."""
        conn = self.conn
        if conn is None:
            raise psycopg.OperationalError("not connected")
        try:
            with conn.transaction(), conn.cursor() as cur:
                inserted = self._write_readings(conn, cur, batch.readings, batch.months)
                self._write_record(cur, batch)
        except BaseException:
            self._months.clear()  # a partition made in the failed transaction was rolled back with it
            raise
        now = time.monotonic()
        due = sorted(n for n in batch.seen if now - self._seen_at.get(n, -1e9) >= self.seen_every)
        if due:
            # after the commit, in a statement of its own: every batch of every hub touches these rows, and
            # holding their locks through the batch's transaction would make the hubs take turns; at most every
            # `seen_every` s per edge (each is a commit of its own: one after every batch cost a tenth of ingest)
            conn.execute("INSERT INTO edges (node, last_seen) SELECT unnest(%s::text[]), now() ON CONFLICT (node) "
                         "DO UPDATE SET last_seen = greatest(edges.last_seen, EXCLUDED.last_seen)", (due,))
            self._seen_at.update(dict.fromkeys(due, now))
        return inserted

    def _write_readings(self, conn: psycopg.Connection[Any], cur: psycopg.Cursor[Any],
                        rows: list[tuple[Any, ...]], months: set[dt.datetime]) -> int:
        if not rows:
            return 0
        self._partitions(conn, rows, months)
        # Nearly every batch is new readings: COPY them straight into `readings` (as fast as the database takes
        # rows). A duplicate (a redelivery, a replayed backlog, another hub's commit of the same message) fails
        # that COPY as a whole: its savepoint is rolled back, and the rows go through the staging table and the
        # idempotent insert instead, which adds only the rows not yet there.
        try:
            with conn.transaction():
                self._copy(cur, "readings", rows)
            return len(rows)
        except psycopg.errors.UniqueViolation:
            self._copy(cur, "readings_stage", rows)
            cur.execute(MERGE)
            return cur.rowcount

    @staticmethod
    def _copy(cur: psycopg.Cursor[Any], table: str, rows: list[tuple[Any, ...]]) -> None:
        with cur.copy(f"COPY {table} ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(COPY_TYPES)
            for row in rows:
                copy.write_row(row)

    def _write_record(self, cur: psycopg.Cursor[Any], b: Batch) -> None:
        if b.channels:
            cur.executemany(
                "INSERT INTO channels (node, site, channel, unit, kind, eng_low, eng_high) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (site, channel) DO UPDATE SET node = "
                "EXCLUDED.node, unit = EXCLUDED.unit, kind = EXCLUDED.kind, eng_low = EXCLUDED.eng_low, "
                "eng_high = EXCLUDED.eng_high, updated_at = now()", b.channels)
        if b.events:
            cur.executemany("INSERT INTO events (node, type, seq, site, body) VALUES (%s, %s, %s, %s, %s) "
                            "ON CONFLICT DO NOTHING", b.events)
        if b.rejects:
            cur.executemany("INSERT INTO hub_rejects (topic, reason, payload) VALUES (%s, %s, %s)", b.rejects)
        if b.seqs:
            with cur.copy("COPY edge_messages (node, seq, sent_ms) FROM STDIN") as copy:
                for row in b.seqs:
                    copy.write_row(row)
        self._write_edges(cur, b)

    @staticmethod
    def _write_edges(cur: psycopg.Cursor[Any], b: Batch) -> None:
        """Births, deaths and the sites of device births, node by node in name order (two hubs never deadlock
        on them)."""
        changed = sorted({n for n, *_ in b.births} | {n for n, _ in b.deaths} | {n for n, _ in b.device_births})
        if changed:  # rare (births and deaths): the rows they update must exist
            cur.execute("INSERT INTO edges (node, last_seen) SELECT unnest(%s::text[]), now() "
                        "ON CONFLICT (node) DO NOTHING", (changed,))
        for node, bdseq, birth_ms in sorted(b.births):
            # a birth redelivered late never overrides a newer one (the edge's birth timestamp orders them)
            cur.execute("UPDATE edges SET bdseq = %s, birth_ms = %s, born_at = now(), died_at = NULL "
                        "WHERE node = %s AND (birth_ms IS NULL OR birth_ms <= %s)", (bdseq, birth_ms, node, birth_ms))
        for node, bdseq in sorted(b.deaths):
            cur.execute("UPDATE edges SET died_at = now() WHERE node = %s AND bdseq = %s AND died_at IS NULL",
                        (node, bdseq))
        for node, site in sorted(set(b.device_births)):
            cur.execute("UPDATE edges SET sites = array(SELECT DISTINCT unnest(sites || ARRAY[%s]::text[]) "
                        "ORDER BY 1) WHERE node = %s", (site, node))


def event_row(node: str, raw: bytes, topic: str) -> tuple[str, str, int, str | None, str]:
    """One JSON event message as an ``events`` row; `ValueError` names what is wrong with it."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{topic}: not JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ValueError(f"{topic}: expected a JSON object, got {type(body).__name__}")
    kind, seq = body.get("type"), body.get("seq")
    if kind not in EVENT_TYPES:
        raise ValueError(f"{topic}: \"type\" must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ValueError(f"{topic}: \"seq\" must be an integer, got {seq!r}")
    site = body.get("site")
    return node, kind, seq, site if isinstance(site, str) else None, json.dumps(body)
