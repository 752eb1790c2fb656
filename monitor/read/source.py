"""Which file a read names: the daemon's SQLite file given directly, or the historian a site file names.

The commands take ``--config FILE`` or ``--db PATH``; the messages name those options because they are what
the user typed. With a site file, the configuration comes back too (completeness needs poll intervals,
alarm lists need the configured rules); with the file alone it is None and the reads do without.
"""

from __future__ import annotations

from pathlib import Path

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from monitor.read.times import UsageError


def open_record(config_path: str | None, db_path: str | None) -> tuple[SiteConfig | None, Path]:
    """The site file (if given) and the daemon's SQLite file: ``db_path``, or the historian named by the
    site file. Raises `UsageError` with what to give instead, also when the file does not exist (yet)."""
    if not config_path and not db_path:
        raise UsageError("give --config FILE (or --db PATH)")
    config = None
    if config_path:
        try:
            config = load_config(config_path)
        except ConfigErrors as exc:
            raise UsageError(f"invalid site file:\n{exc}") from None
    db = Path(db_path) if db_path else config.daemon.historian  # type: ignore[union-attr]
    if not db.is_file():
        raise UsageError(f"no database at {db}: has the daemon run with this site file?")
    return config, db
