"""The one way to open the daemon's SQLite file for reading: every tool and query that only reads it uses this.

Read-only through a ``mode=ro`` URI of the resolved path, so a reader never creates a missing file (a typo in
``--db`` stays an error instead of becoming an empty database) and can never write into the record; it reads
beside the running daemon (WAL). ``timeout`` (s) is SQLite's busy timeout: how long a read waits for the
writer's checkpoint before failing with "database is locked".
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect_readonly(path: Path | str, *, timeout: float = 5.0, check_same_thread: bool = True) -> sqlite3.Connection:
    """A read-only connection to ``path``. ``check_same_thread=False`` for a caller that hands the connection
    to a worker thread (the console's request handlers)."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                           check_same_thread=check_same_thread)


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has table ``name`` yet (the daemon creates each store's tables when it first runs)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None
