"""The site page shows the slug baseline in force on the card of the channel it judges: the running daemon's own
(from its health snapshot), in the words `pretreat rules --config` prints for the same record; without a
snapshot it says so instead of a number."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_config
from monitor.cli import main
from monitor.health import health_path
from monitor.read.baselines import NO_SNAPSHOT
from tests.browser.harness import browser_login, console, write_users
from tests.unit.checks_helpers import channel, daemon_health, record_flow_days, site_toml

VIEW = {"width": 1400, "height": 900}


def test_the_site_page_shows_the_baseline_in_force_as_pretreat_rules_prints_it(
        browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "site.toml"
    path.write_text(site_toml(channel("flow"), extra="[site.rules.slug]\nloading = false\n"), encoding="utf-8")
    config = load_config(path)
    now = time.time()
    now -= 600.0 if now % 86400.0 < 600.0 else 0.0  # some readings of today are needed: not just after midnight
    record_flow_days(config, [10.0, 14.0], now=now)  # two days of normal operation before today: 12 gpm
    daemon_health(config, now=now)  # the daemon's start: its engine rebuilt, its snapshot written
    assert main(["rules", "--config", str(path)]) == 0
    [rules] = [x.strip().removeprefix("baseline today: ") for x in capsys.readouterr().out.splitlines()
               if x.strip().startswith("baseline today: ")]
    assert rules.startswith("12 gpm on ")
    users = write_users(tmp_path / "users.toml")
    with console(config, users) as (base, _app):
        page = browser_login(browser, base, "op", VIEW)
        try:
            page.goto(base + "/sites/acme")
            shown = page.wait_for_selector("#ch-flow .slug-baseline .slug-text")
            assert shown is not None and shown.text_content() == rules
            block = page.text_content("#ch-flow .slug-baseline") or ""
            assert "Town of Southeast § 112-5A(1)(j)" in block
            assert "Reading in force: read as more than five times the baseline" in block
            assert "the daemon's check engine, as of" in block
            assert "Batch operation: a batch discharger is measured against its own 24-hour average" in block
            health_path(config.daemon.historian).unlink()  # no snapshot: said so, no number
            page.reload()
            shown = page.wait_for_selector("#ch-flow .slug-baseline .slug-text.unavailable")
            assert shown is not None and shown.text_content() == NO_SNAPSHOT
        finally:
            page.close()
