"""Which record a read names: the daemon's SQLite file given directly, the historian a site file names, or the
county hub's PostgreSQL database.

The commands take ``--config FILE``, ``--db PATH`` or ``--database postgresql://…``; the messages name those
options because they are what the user typed. With a site file, the configuration comes back too
(completeness needs poll intervals, alarm lists need the configured rules); with the file alone it is None
and the reads do without.

**The hub's database** holds every edge's sites. The site metadata a read needs (names, time zones,
companies, channels, poll intervals, the rules in force with their citations) is not in it: Sparkplug's
births carry channels and units only. It comes from a site file as everywhere else: ``--config`` names the
edge's site file (or a county file whose ``[[site]]`` tables are the county's sites, as the edges' files state
them); its ``[daemon].historian`` is then not read. The record is opened with
`monitor.stores.readonly.connect_record`, which takes either a path or the URL.
"""

from __future__ import annotations

from pathlib import Path

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import SiteConfig
from monitor.read.times import UsageError
from monitor.stores.hub_record import is_database_url


def open_source(config_path: str | None, db_path: str | None, database: str | None
                ) -> tuple[SiteConfig | None, Path | str]:
    """`open_record`, or with ``database`` (a PostgreSQL URL, the hub's) the site file (if given) and the URL.
    Raises `UsageError` for both ``--db`` and ``--database``, or a URL that is not PostgreSQL's."""
    if database is None:
        return open_record(config_path, db_path)
    if db_path:
        raise UsageError("give --db PATH or --database URL, not both")
    if not is_database_url(database):
        raise UsageError(f"--database {database!r}: expected a postgresql:// URL (the hub's database)")
    return _load(config_path), database


def open_record(config_path: str | None, db_path: str | None) -> tuple[SiteConfig | None, Path]:
    """The site file (if given) and the daemon's SQLite file: ``db_path``, or the historian named by the
    site file. Raises `UsageError` with what to give instead, also when the file does not exist (yet)."""
    if not config_path and not db_path:
        raise UsageError("give --config FILE (or --db PATH, or --database URL)")
    config = _load(config_path)
    db = Path(db_path) if db_path else config.daemon.historian  # type: ignore[union-attr]
    if not db.is_file():
        raise UsageError(f"no database at {db}: has the daemon run with this site file?")
    return config, db


def _load(config_path: str | None) -> SiteConfig | None:
    if not config_path:
        return None
    try:
        return load_config(config_path)
    except ConfigErrors as exc:
        raise UsageError(f"invalid site file:\n{exc}") from None
