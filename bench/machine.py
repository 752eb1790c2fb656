"""The machine description every benchmark prints beside its figures (figures mean nothing without it)."""

from __future__ import annotations

import os
import platform
import sqlite3
from pathlib import Path


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; "
            f"{platform.system()} {platform.release()}")
