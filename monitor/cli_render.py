"""How command-line tables show times and numbers to people (machine formats, CSV and JSON, stay UTC and
unrounded).

- Times in the site's local time with its zone's abbreviation (``2026-11-10 10:00:00 EST``), since operators
  and enforcement think in the site's days; ``--utc`` shows ISO 8601 UTC (``2026-11-10T15:00:00Z``). Without a
  site file the zone is unknown, so times are UTC.
- Readings at the channel's resolution (`Channel.decimals`: 0.01 → two places); a channel of unknown
  resolution (a float register, MQTT), or without a site file, shows four significant digits, trailing zeros
  dropped, as the log lines do (`monitor.number_text.number`): more would be precision nobody stated. The
  machine formats keep every digit recorded.
- Fractions of a second: rounded to the millisecond, as the ISO 8601 times and the episode ids are, so a
  local time and the id of the same moment never disagree.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from zoneinfo import ZoneInfo

from config.schema import SiteConfig
from monitor.exceedances_render import iso
from monitor.number_text import number


def add_utc_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--utc", action="store_true", help="tables: times in UTC (default: each site's local time)")


class Render:
    def __init__(self, config: SiteConfig | None, *, utc: bool = False) -> None:
        self.utc = utc or config is None
        self._zones: dict[str, ZoneInfo] = {} if config is None else {s.id: ZoneInfo(s.timezone)
                                                                      for s in config.sites}
        self._places: dict[tuple[str, str], int | None] = {} if config is None else {
            (s.id, c.id): c.decimals for s in config.sites for c in s.channels}
        self._units: dict[tuple[str, str], str] = {} if config is None else {
            (s.id, c.id): c.unit for s in config.sites for c in s.channels}

    def unit(self, site: str, channel: str) -> str:
        """The channel's unit from the site file ("" without one)."""
        return self._units.get((site, channel), "")

    def time(self, t: float | None, site: str) -> str:
        if t is None:
            return ""
        tz = None if self.utc else self._zones.get(site)
        if tz is None:
            return iso(t)
        secs, ms = divmod(round(t * 1000), 1000)  # rounded as `iso` and the episode id round
        local = datetime.fromtimestamp(secs, tz)
        frac = f".{ms:03d}" if ms else ""
        return local.strftime("%Y-%m-%d %H:%M:%S") + frac + local.strftime(" %Z")

    def number(self, v: float | None, site: str, channel: str) -> str:
        if v is None:
            return ""
        return number(v, self._places.get((site, channel)))
