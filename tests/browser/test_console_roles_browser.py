"""Per-role acknowledgement and alarm comments in headless Chromium, on the alarm list's scene
(`tests.browser.alarm_scene.stage`): the industry's "Ack (seen)" leaves the plant's alarm unacknowledged and the
operator's table shows both; comments are journaled with who and when and shown on the row. Also the pages
built for many sites (overview, alarm KPIs) and the history page. Screenshots at 1400×900 and 390×844 go to
tests/artifacts/."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.alarm_scene import ACME_HIGH, stage, wait
from tests.browser.harness import (
    ACME,
    BOLT,
    PASSWORD,
    Plant,
    console,
    csrf,
    history,
    load,
    login,
    write_site,
    write_users,
)
from tests.support import PATIENCE

WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-roles-browser")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    with Plant(config) as plant:
        plant.feed(sorted(history(config, ACME, hours=3) + history(config, BOLT, hours=3), key=lambda s: s.time))
        stage(plant, config)
        with console(config, users) as (base, _app):
            yield {"base": base, "plant": plant, "db": config.daemon.historian}


def _login(browser: Any, base: str, user: str, viewport: dict[str, int], path: str = "/") -> Any:
    page = browser.new_page(viewport=viewport)
    page.goto(base + path)
    page.fill("#username", user)
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def _until(page: Any, expression: str, timeout: float = PATIENCE) -> None:
    wait(lambda: page.evaluate(expression), timeout)


def _actions(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = 'action'")]
    finally:
        conn.close()


def test_industry_ack_is_seen_and_the_operator_sees_both_then_comments(browser: Any, env: dict[str, Any],
                                                                       artifacts: Path) -> None:
    row = f'#alarm-rows tr[data-alarm="{ACME_HIGH}"]'
    acme = _login(browser, env["base"], "acme", PHONE)
    acme.wait_for_selector(f'{row}[data-state="active-unacknowledged"]')
    assert acme.query_selector(f'{row} button[data-action="ack"]') is None  # only the plant acknowledges
    assert acme.query_selector(f'{row} button[data-action="shelve"]') is None
    box = acme.locator(f'{row} button[data-action="seen"]').bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]  # reachable on a phone
    acme.click(f'{row} button[data-action="seen"]')  # one click, as the operator's Ack
    acme.wait_for_selector("#act-status.ok", timeout=PATIENCE * 1000)
    assert "Recorded as seen by your company" in acme.inner_text("#act-status")
    acme.wait_for_selector(f"{row} .seen")
    assert acme.get_attribute(row, "data-state") == "active-unacknowledged"
    acme.wait_for_selector(f'{row}:not(:has(button[data-action="seen"]))')  # seen once per occurrence
    acme.screenshot(path=str(artifacts / "alarm-industry-seen-390x844.png"))
    acme.close()

    op = _login(browser, env["base"], "op", WIDE)
    op.wait_for_selector(f"{row} .seen")
    cell = op.inner_text(f"{row} td.state")
    assert cell.startswith("Active, unacknowledged") and "Industry seen: acme" in cell
    assert cell.rstrip().endswith(("EST", "EDT"))
    # a comment: the dialog shows the note only and wants text
    op.click(f'{row} button[data-action="comment"]')
    op.wait_for_selector("#act-dialog[open]")
    assert op.inner_text("#act-title") == "Comment on the alarm"
    assert op.is_visible("#act-note") and op.is_hidden("#act-until") and op.is_hidden("#act-reason")
    op.click("#act-submit")
    assert "Write the comment" in op.inner_text("#act-result")
    op.fill("#act-note", "phoned ACME: caustic dosing pump tripped, restarting")
    op.click("#act-submit")
    op.wait_for_selector(f"{row} .comment", timeout=PATIENCE * 1000)
    assert "Comment by op" in op.inner_text(f"{row} .comment") and "caustic dosing" in op.inner_text(f"{row} .comment")
    op.wait_for_selector('#journal li.j-action:has-text("comment by op")')
    op.click(f'{row} button[data-action="ack"]')  # the plant's own acknowledgement
    op.wait_for_selector(f'{row}[data-state="active-acknowledged"]', timeout=PATIENCE * 1000)
    assert "Industry seen: acme" in op.inner_text(f"{row} td.state")  # both shown
    op.screenshot(path=str(artifacts / "alarm-roles-1400x900.png"))
    op.close()
    said = [(a["action"], a["user"]) for a in _actions(env["db"]) if a["alarm"] == ACME_HIGH]
    assert said == [("seen", "acme"), ("comment", "op"), ("ack", "op")]


def _history(client: httpx.Client, **params: str) -> list[dict[str, Any]]:
    r = client.get("/api/history", params=params)
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def test_history_has_stable_ids_units_local_times_who_acknowledged_and_the_cause(
        browser: Any, env: dict[str, Any], artifacts: Path) -> None:
    """Runs after the acknowledgement test: ACME's pH high was seen by acme, then acknowledged by op."""
    op, acme = login(env["base"], "op"), login(env["base"], "acme")
    mine = [r for r in _history(op) if r["rule"] == "ph_high" and r["site"] == ACME]
    assert mine, "ACME's pH high episode is in the history"
    ep = mine[-1]
    r = acme.post(f"/api/episodes/{ep['episode_id']}/annotation", json={
        "cause": "Caustic dosing pump tripped", "action": "Pump restarted; trip alarm wired to the plant"},
        headers={"X-CSRF-Token": csrf(acme)})
    assert r.status_code == 200, r.text
    r = acme.post(f"/api/episodes/{ep['episode_id']}/annotation", json={  # a second entry replaces the first
        "cause": "Caustic dosing pump tripped on overload", "action": "Pump restarted; trip alarm wired to the plant"},
        headers={"X-CSRF-Token": csrf(acme)})
    assert r.status_code == 200, r.text
    # the same id whoever asks and whatever the filter (the running number n is not an id)
    theirs = {r["episode_name"]: r["episode_id"] for r in _history(acme)}
    everyone = {r["episode_name"]: r["episode_id"] for r in _history(op)}
    assert theirs[ep["episode_name"]] == everyone[ep["episode_name"]] == ep["episode_id"]
    assert {r["episode_id"] for r in _history(op, site=BOLT)}.isdisjoint(theirs.values())
    got = next(r for r in _history(op) if r["episode_id"] == ep["episode_id"])
    assert got["episode_name"].startswith(f"{ACME}/ph/ph_high@") and got["episode_name"].endswith("Z")
    assert got["peak_text"] == "9.5 pH" and got["limit_text"] == "9 pH"
    assert got["start_text"].endswith(("EST", "EDT")) and got["rule_label"] == "pH high"
    assert got["acknowledged"]["user"] == "op" and got["seen"]["user"] == "acme"
    assert (got["cause"], got["corrective_action"], got["annotated"]["user"]) == (
        "Caustic dosing pump tripped on overload", "Pump restarted; trip alarm wired to the plant", "acme")
    assert got["annotated"]["earlier"] == 1  # the page says an earlier entry exists and links to it
    assert got["duration_text"] and (got["measured_s"] is None) == (got["measured_text"] == "")
    for name, view in (("1400x900", WIDE), ("390x844", PHONE)):
        page = _login(browser, env["base"], "op", view, "/history")
        row = f'#h-rows tr[data-episode="{ep["episode_id"]}"]'
        page.wait_for_selector(row)
        text = page.inner_text(row)
        assert f"E{ep['episode_id']}" in text and "9.5 pH" in text and "Caustic dosing pump tripped" in text
        acked = page.inner_text(f"{row} td.acked")
        assert acked.startswith("op") and "industry seen: acme" in acked
        assert "replaces 1 earlier entry" in text
        assert page.inner_text(f"{row} td.onset").rstrip().endswith(("EST", "EDT"))
        assert page.get_attribute("#h-rows a[href^='/episodes/']", "href").startswith("/episodes/")
        if name == "390x844":  # cards: nothing wider than the phone
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.screenshot(path=str(artifacts / f"history-{name}.png"), full_page=name == "390x844")
        page.close()
    op.close()
    acme.close()
