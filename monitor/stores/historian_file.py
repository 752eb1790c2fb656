"""The historian's file as a thing that can vanish: detect it deleted or replaced, and re-create it.

Why: SQLite writes through the file descriptors it opened. If the file is deleted (``rm``) or replaced
(``mv other.sqlite pretreat.sqlite``, a restore from a backup) while the daemon runs, every later commit
succeeds into the unlinked inode, which disappears when the daemon stops: readings the MQTT broker was told
were stored (PUBACK) are gone, and nobody is told. So after each commit the writer compares the file it holds
(``os.fstat`` of its own descriptor: link count 0 means deleted) with what the path names now (``os.stat``:
another inode means replaced). Such a commit does not count as durable: its samples go back to the queue
(so the MQTT acknowledgements that wait for the commit wait on), and the file is re-created:

1. whatever is at the path now (a replacement) is moved aside as ``<name>.replaced-<UTC time>``, kept as
   evidence, never read;
2. the daemon's own view of the database (the unlinked inode, still open, with its WAL) is copied to the path
   with SQLite's backup API: readings, episodes, alarm state and the journal continue where they were;
3. the rows of the batch that was not counted are removed from the copy (they are committed again, with the
   same sequence numbers, from memory), and a ``historian_recreated`` journal record says why.

Other connections of the daemon to the file (episode store, alarm journal) must reopen the path afterwards
(the daemon does that on the event loop when told, see `monitor.app`); a write they made to the old inode
between the detection and their reopening is in the moved-aside/unlinked copy only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from alarms.journal import Entry, append_in_transaction, ensure_schema

log = logging.getLogger(__name__)


class FileLost(Exception):
    """The historian file was deleted or replaced under the writer (see the module doc)."""


@dataclass(slots=True)
class FileWatch:
    """The identity of the file the writer opened, and a descriptor of our own on it."""

    path: Path
    fd: int
    ident: tuple[int, int]

    @classmethod
    def open(cls, path: Path) -> FileWatch:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)
        return cls(path=path, fd=fd, ident=(st.st_dev, st.st_ino))

    def problem(self) -> str:
        """Empty while the path still names the file we write; otherwise what happened to it."""
        held = os.fstat(self.fd)
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return f"historian file {self.path} was deleted while the daemon was writing it"
        if (now.st_dev, now.st_ino) != self.ident:
            return f"historian file {self.path} was replaced by another file while the daemon was writing it"
        if held.st_nlink == 0:
            return f"historian file {self.path} was unlinked while the daemon was writing it"
        return ""

    def close(self) -> None:
        os.close(self.fd)


def recreate(conn: sqlite3.Connection, path: Path, reason: str, *, next_seq: int) -> str:
    """Steps 1–3 of the module doc; returns where a replacement was moved ("" if none). ``conn`` is the
    writer's connection to the lost file (left open: the caller closes it)."""
    stamp = datetime.fromtimestamp(time.time(), UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = ""
    if path.exists():
        target = path.with_name(f"{path.name}.replaced-{stamp}")
        os.replace(path, target)
        aside = str(target)
        for suffix in ("-wal", "-shm"):  # the replacement's own WAL must not be applied to our copy
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
    else:
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
    fresh = sqlite3.connect(path, isolation_level=None)
    try:
        conn.backup(fresh)
        fresh.execute("PRAGMA journal_mode=WAL")
        fresh.execute("BEGIN IMMEDIATE")
        fresh.execute("DELETE FROM readings WHERE seq >= ?", (next_seq,))
        fresh.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (next_seq,))
        ensure_schema(fresh)
        append_in_transaction(fresh, [Entry("historian_recreated", {
            "reason": reason, "replacement_moved_to": aside,
            "restored_from": "the daemon's open handle on the lost file"}, time.time())])
        fresh.execute("COMMIT")
    finally:
        fresh.close()
    log.error("%s; re-created it from the daemon's own copy%s; recording goes on", reason,
              f", the replacement kept as {aside}" if aside else "")
    return aside
