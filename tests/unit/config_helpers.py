"""Helpers for the site-file tests: a site file written to disk, a small site built from its parts, and the
mistakes check-config reports for a text."""

from __future__ import annotations

import textwrap
from pathlib import Path

from config.loader import check_config


def write(tmp_path: Path, text: str, name: str = "site.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def site(instrument: str = "", channel: str = "", extra: str = "") -> str:
    inst = instrument or """
        [[site.instrument]]
        id = "fm"
        driver = "modbus_tcp"
        host = "127.0.0.1"
        port = 5020
        register_map = "flow_meter"
        """
    ch = channel or """
        [[site.channel]]
        id = "flow"
        instrument = "fm"
        point = "flow_rate"
        kind = "flow"
        unit = "gpm"
        """
    return f"""
        [[site]]
        id = "s1"
        timezone = "America/New_York"
        {extra}
        {textwrap.dedent(inst)}
        {textwrap.dedent(ch)}
        """


def errors_of(tmp_path: Path, text: str) -> list[str]:
    return [f"{e.path}: {e.expected}" for e in check_config(write(tmp_path, text))]
