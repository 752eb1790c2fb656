"""The ``[gateway]`` table of a site file: where the Modbus TCP gateway for plant SCADA listens and which unit
id each site answers on.

The settings live here, with the rest of the site file, so that reading and checking a site file
(`pretreat check-config`) never loads the gateway's server, pymodbus or the historian
(`alarms.gateway` serves the registers these settings lay out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.reader import Reader

if TYPE_CHECKING:
    from config.schema import SiteConfig

_KEYS = {"enabled", "host", "port", "first_unit", "units", "word_order"}


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """The ``[gateway]`` table. ``host`` defaults to loopback: serving the plant network is a decision
    (``host = "0.0.0.0"`` or the plant-side address). 502 is the standard Modbus port; binding it needs root
    or CAP_NET_BIND_SERVICE, hence the default 5020."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 5020
    first_unit: int = 1
    units: dict[str, int] = field(default_factory=dict)  # site id -> unit id, overriding first_unit + index
    word_order: str = "big"


def parse_gateway(doc: dict[str, Any], reader: Reader, base: Path) -> GatewaySettings | None:
    """The ``[gateway]`` table of a site file (None when absent); mistakes go to ``reader``. ``base`` (the
    site file's folder) is unused today: no gateway setting is a path."""
    del base
    if "gateway" not in doc:
        return None
    raw = reader.table(doc, "gateway", "")
    reader.unknown_keys(raw, "gateway", _KEYS)
    raw_sites = doc.get("site", [])
    sites = [s.get("id") for s in raw_sites if isinstance(s, dict)] if isinstance(raw_sites, list) else []
    units_raw = reader.table(raw, "units", "gateway")
    units: dict[str, int] = {}
    for site_id in units_raw:
        if site_id not in sites:
            reader.error(f"gateway.units.{site_id}", site_id, f"the id of a site of this file {sites}")
        units[site_id] = reader.integer(units_raw, site_id, "gateway.units", minimum=1, maximum=247)
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        reader.error("gateway.enabled", enabled, "true or false")
    settings = GatewaySettings(
        enabled=enabled is True,
        host=reader.text(raw, "host", "gateway", default="127.0.0.1"),
        port=reader.integer(raw, "port", "gateway", default=5020, minimum=0, maximum=65535),
        first_unit=reader.integer(raw, "first_unit", "gateway", default=1, minimum=1, maximum=247),
        units=units,
        word_order=reader.text(raw, "word_order", "gateway", default="big", check=lambda v: v in ("big", "little"),
                              expected="'big' (high word first) or 'little'"),
    )
    for where, problem in check_layout(sites=[str(s) for s in sites], settings=settings):
        reader.error(where, problem[0], problem[1])
    return settings


def check_layout(*, sites: list[str], settings: GatewaySettings) -> list[tuple[str, tuple[Any, str]]]:
    """Unit ids must be distinct and within 1–247 once assigned."""
    errors: list[tuple[str, tuple[Any, str]]] = []
    seen: dict[int, str] = {}
    for i, site in enumerate(sites):
        unit = settings.units.get(site, settings.first_unit + i)
        where = f"gateway.units.{site}" if site in settings.units else "gateway.first_unit"
        if not 1 <= unit <= 247:
            errors.append((where, (unit, f"a unit id 1–247 for site {site!r}")))
        elif unit in seen:
            errors.append((where, (unit, f"a unit id not already given to site {seen[unit]!r}")))
        seen[unit] = site
    return errors


def gateway_settings(config: SiteConfig) -> GatewaySettings:
    """The site file's ``[gateway]`` settings (``SiteConfig.gateway``), else the defaults."""
    return config.gateway if config.gateway is not None else GatewaySettings()
