"""The README a newcomer reads first says what the code does: every subcommand is in its command table, every
Debian package the Makefile installs is named with its target, and the licence the package declares is there."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from monitor.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_the_command_table_lists_every_subcommand() -> None:
    table = section("Command line")
    missing = [name for name in SUBCOMMANDS if f"`pretreat {name}" not in table]
    assert not missing, f"subcommands missing from the README's command table: {missing}"


def test_every_debian_package_the_makefile_installs_is_named_in_the_readme() -> None:
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    packages = {"python3-venv"}
    for var in ("DEMO_DEBS", "TEST_DEBS", "BENCH_DEBS"):
        (line,) = re.findall(rf"^{var} := (.*)$", makefile, re.M)
        packages |= {pair.split(":")[0] for pair in line.split() if ":" in pair}
    assert {"mosquitto", "socat", "victoria-metrics", "chromium", "stress-ng", "nodejs", "npm"} <= packages
    table = section("Two commands")
    missing = sorted(p for p in packages if f"`{p}`" not in table)
    assert not missing, f"Debian packages make installs that the README does not name: {missing}"


def test_the_declared_licence_is_in_the_repository() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]["text"]
    assert declared == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
