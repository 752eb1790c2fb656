"""The one way to open the daemon's SQLite file for reading: every tool and query that only reads it uses this.

Read-only through a ``mode=ro`` URI of the resolved path, so a reader never creates a missing file (a typo in
``--db`` stays an error instead of becoming an empty database) and can never write into the record; it reads
beside the running daemon (WAL). ``timeout`` (s) is SQLite's busy timeout: how long a read waits for the
writer's checkpoint before failing with "database is locked".

The county hub's PostgreSQL database is the other record a read can name (``--database postgresql://…``):
`connect_record` opens either, read-only, and `has_table`/`dialect` answer for both.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import weakref
from pathlib import Path
from typing import Any

from monitor.stores.hub_record import HubReader, is_database_url


def record_errors() -> tuple[type[Exception], ...]:
    """What reading a record raises when the record cannot be read (either kind), for an ``except`` clause.

    A function, not a tuple built at import: psycopg is imported only by a connection to the hub's database
    (`HubReader`), so that every command that never reads one starts without it (tests/unit/test_cli.py); while
    it is not imported, no psycopg error can be raised."""
    pg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if pg is None else (sqlite3.Error, pg.Error)


def connect_readonly(path: Path | str, *, timeout: float = 5.0, check_same_thread: bool = True) -> sqlite3.Connection:
    """A read-only connection to ``path``. ``check_same_thread=False`` for a caller that hands the connection
    to a worker thread (the console's request handlers)."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                           check_same_thread=check_same_thread)


def connect_record(location: Path | str, *, timeout: float = 5.0, check_same_thread: bool = True) -> Any:
    """A read-only connection to a record: the daemon's SQLite file, or (a ``postgresql://`` URL) the county
    hub's database, read through its ``record`` views (`monitor.stores.hub_record.HubReader`). Both take the
    read side's SQL with ``?`` parameters; `dialect` tells them apart where the SQL must differ."""
    if isinstance(location, str) and is_database_url(location):
        return HubReader(location, timeout=timeout)
    return connect_readonly(location, timeout=timeout, check_same_thread=check_same_thread)


def dialect(conn: Any) -> str:
    """"sqlite" or "postgresql": which SQL the connection speaks where the two differ."""
    return str(getattr(conn, "dialect", "sqlite"))


def has_table(conn: Any, name: str) -> bool:
    """Whether the record has table ``name`` yet (the daemon creates each store's tables when it first runs;
    on the hub's database, whether the ``record`` schema or the hub's own has that table or view)."""
    if dialect(conn) == "postgresql":
        return bool(conn.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()[0])
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def has_column(conn: Any, table: str, column: str) -> bool:
    """Whether the record's ``table`` has ``column``: the hub's views always present the current shape; a daemon's
    file has what its schema version gave it (an older one, read without the daemon, may lack a later column)."""
    return dialect(conn) == "postgresql" or column in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


_STANDING: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def standing(conn: Any) -> str:
    """``" AND withdrawn = 0"`` where the record marks withdrawn transitions (episode schema 3 on, and the hub's
    view), else ``""``: appended to a query of ``episode_events`` that picks an episode's transitions one by one
    (its latest start, the end after it), so a transition a correction withdrew is never taken for the record's.
    Known once per connection (the console asks per alarm row)."""
    try:
        return _STANDING[conn]
    except (KeyError, TypeError):
        pass
    if dialect(conn) == "postgresql":
        found = " AND withdrawn = 0"
    else:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(episode_events)")}
        found = " AND withdrawn = 0" if "withdrawn" in cols else ""
    with contextlib.suppress(TypeError):  # a connection that takes no weak reference is asked every time
        _STANDING[conn] = found
    return found
