"""Can the daemon create and write its historian where the site file says? Told before anything starts.

Why here and not when the historian opens: a path that is a directory, under ``/proc``, or on a read-only
mount made `pretreat run` stop with an `sqlite3` traceback after the drivers were built, and `pretreat
check-config` said the file was fine. The check creates nothing: no folder and no database. It does create,
in the nearest folder that exists, one anonymous temporary file (``O_TMPFILE``: it never has a name and is
gone when closed), because asking the kernel is the only reliable test — ``os.access`` says yes to root on
``/proc`` and to anyone on a folder whose file system refuses the file for another reason.

Only `pretreat run` and `pretreat check-config` ask (`config.loader.load_config` with ``for_daemon``): the
commands that only read the record (``readings``, ``status``, ``report``, the console) are run by users who
may read the historian but not write it. The answer is for the user asking: run ``check-config`` as the
daemon's user (``sudo -u pretreat pretreat check-config FILE``) to know what the service will meet.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def historian_problem(path: Path) -> str | None:
    """Why a SQLite database at ``path`` could not be created or written by this user, or None if it can.

    SQLite in WAL mode also creates ``-wal`` and ``-shm`` files beside the database, so the folder must
    take new files even when the database exists."""
    if path.is_dir():
        return "it is a directory"
    if path.exists() or path.is_symlink():
        if not path.is_file():
            return "it is not a regular file"
        if not os.access(path, os.R_OK | os.W_OK):
            return "the file is not readable and writable by this user"
    folder = path.parent
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    problem = _cannot_create_in(existing)
    if problem is None:
        return None
    if existing == folder:
        return f"cannot create files in {folder} ({problem})"
    return f"cannot create the folder {folder}: {existing} takes no new files ({problem})"


def _cannot_create_in(folder: Path) -> str | None:
    """Why no file can be created in ``folder`` (the kernel's words), or None."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None
