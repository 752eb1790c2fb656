"""The console's Calibration page in headless Chromium: an industry user sees its own channels' calibration
status (a 30-day pH interval set by the site, nothing recorded yet: overdue), fills in the form after a pH
two-buffer check, and the page shows the channel in date; the entry is journaled with who calibrated and who
typed it in. Another company's site and the enforcement role may not record (403); the enforcement user reads
the page without the form. Screenshot for review: tests/artifacts/console-calibration.png."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.stores.calibration import read_entries
from tests.browser.harness import ACME, BOLT, PASSWORD, Plant, console, csrf, load, login, write_site, write_users

VIEW = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-calibration")
    path = write_site(folder)
    text = path.read_text().replace('timezone = "America/New_York"\n',
                                    'timezone = "America/New_York"\n\n[site.calibration]\nph = 30\n')
    path.write_text(text)
    config = load(path)
    users = write_users(folder / "users.toml")
    with Plant(config), console(config, users) as (base, app):
        yield {"base": base, "config": config, "db": config.daemon.historian, "app": app}


def _login(browser: Any, base: str, user: str) -> Any:
    page = browser.new_page(viewport=VIEW)
    page.goto(base + "/calibration")
    page.fill("#username", user)
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def test_industry_user_records_a_calibration_in_the_form(browser: Any, env: dict[str, Any], artifacts: Path) -> None:
    page = _login(browser, env["base"], "acme")
    assert page.url.endswith("/calibration")
    row = page.locator(f'tr[data-channel="{ACME}/ph"]')
    row.wait_for()
    assert "calibration OVERDUE: no calibration recorded; every 30 days (site setting" in row.inner_text()
    assert page.locator(f'tr[data-channel^="{BOLT}/"]').count() == 0  # another company's site: not shown
    assert "no calibration interval stated" in page.locator(f'tr[data-channel="{ACME}/lel"]').inner_text()
    page.select_option("#c-channel", f"{ACME}/ph")
    page.fill("#c-date", "2026-11-30T09:15")
    page.fill("#c-who", "J. Smith, ACME EHS")
    page.select_option("#c-method", "ph_two_buffer")
    for field, value in (("#c-f1r", "4.01"), ("#c-f1v", "4.12"), ("#c-f2r", "7.00"), ("#c-f2v", "7.09"),
                         ("#c-l1r", "4.01"), ("#c-l1v", "4.01"), ("#c-l2r", "7.00"), ("#c-l2v", "7.00")):
        page.fill(field, value)
    page.fill("#c-note", "probe cleaned, junction refreshed")
    page.click("#c-form button[type=submit]")
    page.locator("#c-result", has_text="Recorded (journal record").wait_for()
    page.locator(f'tr[data-channel="{ACME}/ph"] td.status', has_text="calibration in date").wait_for()
    assert "J. Smith, ACME EHS (ph_two_buffer): as found 4.01 read 4.12, 7 read 7.09" in row.inner_text()
    page.screenshot(path=str(artifacts / "console-calibration.png"), full_page=True)
    (entry,) = read_entries(env["db"])
    assert (entry.site, entry.channel, entry.who) == (ACME, "ph", "J. Smith, ACME EHS")
    assert entry.as_found == ((4.01, 4.12), (7.0, 7.09)) and entry.note.endswith("[entered in the console by acme]")
    conn = sqlite3.connect(env["db"])
    try:
        (payload,) = [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = 'calibration'")]
    finally:
        conn.close()
    assert payload["who"] == "J. Smith, ACME EHS" and "entered in the console by acme" in payload["note"]
    # a mistake is refused with the reason, nothing recorded
    page.select_option("#c-channel", f"{ACME}/ph")
    page.fill("#c-date", "2026-11-30T10:00")
    page.fill("#c-who", "J. Smith")
    page.select_option("#c-method", "flow_reference")
    page.fill("#c-f1r", "10")
    page.fill("#c-f1v", "11")
    page.fill("#c-l1r", "10")
    page.fill("#c-l1v", "10")
    page.click("#c-form button[type=submit]")
    page.locator("#c-result", has_text="Not recorded").wait_for()
    assert "for a flow channel" in page.locator("#c-result").inner_text()
    assert len(read_entries(env["db"])) == 1
    page.close()


def test_who_may_record(browser: Any, env: dict[str, Any]) -> None:
    body = {"site": BOLT, "channel": "ph", "date": "2026-11-30T09:00:00Z", "who": "x", "method": "ph_two_buffer",
            "found": ["4:4.1", "7:7.1"], "left": ["4:4", "7:7"]}
    acme = login(env["base"], "acme")
    enf = login(env["base"], "enf")
    op = login(env["base"], "op")
    try:
        r = acme.post("/api/calibration", json=body, headers={"X-CSRF-Token": csrf(acme)})
        assert r.status_code == 403 and "not one of ACME Plating Co.'s sites" in r.json()["detail"]
        r = enf.post("/api/calibration", json={**body, "site": ACME}, headers={"X-CSRF-Token": csrf(enf)})
        assert r.status_code == 403 and "enforcement" in r.json()["detail"]
        r = op.post("/api/calibration", json={**body, "site": ACME}, headers={})
        assert r.status_code == 403  # no CSRF token
        r = op.post("/api/calibration", json=body, headers={"X-CSRF-Token": csrf(op)})
        assert r.status_code == 200 and r.json()["recorded"]["who"] == "x"
        channels = {(c["site"], c["channel"]) for c in enf.get("/api/calibration").json()["channels"]}
        assert (ACME, "ph") in channels and (BOLT, "ph") in channels
        assert {c["site"] for c in acme.get("/api/calibration").json()["channels"]} == {ACME}
    finally:
        for c in (acme, enf, op):
            c.close()
    page = _login(browser, env["base"], "enf")
    page.locator(f'tr[data-channel="{BOLT}/ph"]').wait_for()
    assert "calibration in date" in page.locator(f'tr[data-channel="{BOLT}/ph"]').inner_text()
    assert not page.locator("#c-form").is_visible()
    page.close()
