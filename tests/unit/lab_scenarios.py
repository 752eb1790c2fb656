"""Lab-result scenarios shared by the lab import, SNC screen and permit pollutant tests: a site file with one
MQTT flow channel per site (`lab_config`), an import of CSV text the way `pretreat labs import` does it
(`import_lab`), and an import screened over the first half of 2026 (`screen_imported`)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from alarms.journal import Journal
from config.loader import load_config
from config.schema import SiteConfig
from monitor.reports.aggregates_db import connect
from monitor.reports.labs import ImportResult, import_csv, read_results
from monitor.reports.snc import SncScreen, screen, window_ending

SITES = """
[daemon]
historian = "{db}"
{sites}
"""
SITE = """
[[site]]
id = "{id}"
name = "{id}"
jurisdiction = "{jurisdiction}"
timezone = "America/New_York"

[[site.instrument]]
id = "m"
driver = "mqtt"
host = "127.0.0.1"

[[site.channel]]
id = "flow"
instrument = "m"
topic = "{id}/flow"
payload = "number"
kind = "flow"
unit = "gpm"
"""
TODAY = date(2026, 7, 15)


def lab_config(tmp_path: Path, sites: dict[str, str] | None = None) -> SiteConfig:
    sites = sites or {"plating": "southeast", "bakery": "southeast", "wilson-co": "wilson"}
    text = SITES.format(db=tmp_path / "pretreat.sqlite",
                        sites="".join(SITE.format(id=i, jurisdiction=j) for i, j in sites.items()))
    (tmp_path / "site.toml").write_text(text)
    return load_config(tmp_path / "site.toml")


def import_lab(tmp_path: Path, config: SiteConfig, text: str, name: str = "results.csv") -> ImportResult:
    path = tmp_path / name
    path.write_text(text)
    conn = connect(config.daemon.historian)
    journal = Journal(path=config.daemon.historian)
    try:
        return import_csv(conn, path, config, now=1_780_000_000.0, today=TODAY, journal=journal)
    finally:
        journal.close()
        conn.close()


def screen_imported(tmp_path: Path, config: SiteConfig, csv_text: str, count: int) -> SncScreen:
    """Import ``csv_text`` (``count`` results) and screen every result over the first half of 2026."""
    assert import_lab(tmp_path, config, csv_text).imported == count
    first, last = window_ending(date(2026, 6, 30))
    assert (first, last) == (date(2026, 1, 1), date(2026, 6, 30))
    conn = connect(config.daemon.historian)
    try:
        return screen(read_results(conn), config, first, last)
    finally:
        conn.close()
