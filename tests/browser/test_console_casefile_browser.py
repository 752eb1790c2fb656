"""The episode's case file in headless Chromium, role by role: the industry records an obligation as done (how, to
whom, when, with its written report as a PDF upload) and enters the cause and corrective action with an
attachment; the operator and enforcement see them with who and when, and have no form to speak for the
industry; enforcement marks the episode invalid with a justification and the page strikes it through. Each
forbidden step is also tried from the page's own session and refused by the server. Screenshots for review in
tests/artifacts/."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.model import State
from tests.browser.harness import ACME, BOLT, PASSWORD, Plant, console, history, load, write_site, write_users
from tests.support import wait_until

VIEW = {"width": 1400, "height": 1100}
OVERDUE = f"{ACME}/obligations/obligation_overdue"
PDF = b"%PDF-1.4\n% written statement\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-casefile-browser")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    (folder / "statement.pdf").write_bytes(PDF)
    (folder / "pump.png").write_bytes(PNG)
    db = config.daemon.historian
    with Plant(config, obligations=True) as plant:
        plant.feed(sorted(history(config, ACME, hours=6) + history(config, BOLT, hours=6), key=lambda s: s.time))
        assert wait_until(lambda: any(t.alarm_id == OVERDUE and t.to_state is State.ACTIVE_UNACKED
                                      for t in plant.transitions))
        conn = sqlite3.connect(db)
        try:
            ep = conn.execute("SELECT MIN(id) FROM episode_events WHERE site = ? AND rule = 'ph_high'",
                              (ACME,)).fetchone()[0]
        finally:
            conn.close()
        with console(config, users) as (base, _app):
            yield {"base": base, "db": db, "episode": int(ep), "folder": folder, "plant": plant}


def _login(browser: Any, base: str, user: str) -> Any:
    page = browser.new_page(viewport=VIEW)
    page.goto(base + "/")
    page.fill("#username", user)
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def _episode(page: Any, env: dict[str, Any]) -> None:
    page.goto(f"{env['base']}/episodes/{env['episode']}")
    page.wait_for_selector("body[data-casefile='loaded']")


def _post_from_page(page: Any, path: str, body: dict[str, Any]) -> int:
    """A POST with the page's own session and CSRF token, as a tampered page would send it."""
    return int(page.evaluate("""async ([path, body]) => (await fetch(path, {method: "POST",
        credentials: "same-origin", headers: {"X-CSRF-Token": PT.me.csrf, "Content-Type": "application/json"},
        body: JSON.stringify(body)})).status""", [path, body]))


def _journal(db: Path, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = ? ORDER BY seq",
                                                      (kind,))]
    finally:
        conn.close()


def _row(page: Any, key_text: str) -> Any:
    return page.locator("#cf-obligations tbody tr", has_text=key_text)


def test_1_industry_records_fulfilment_with_its_report_and_the_cause(browser: Any, env: dict[str, Any],
                                                                     artifacts: Path) -> None:
    page = _login(browser, env["base"], "acme")
    page.wait_for_selector("body[data-obligations='loaded']")  # the overview lists what is not yet met
    overdue = page.locator("#ob-rows tr.outstanding")  # "immediately": outstanding, not overdue
    assert overdue.count() == 1 and "Town of Southeast § 112-5H" in overdue.inner_text()
    assert "immediately (no period stated), since" in overdue.inner_text()
    assert page.locator("#ob-rows tr.overdue").count() == 0
    assert page.locator("#ob-rows tr").count() == 3  # the CFR's two are open, not yet due
    assert page.locator(f"#ob-rows a[href='/episodes/{env['episode']}']").count() == 3
    page.screenshot(path=str(artifacts / "casefile-overview.png"), full_page=True)
    _episode(page, env)
    assert page.locator("#cf-obligations tbody tr").count() == 3
    tel = _row(page, "telephone and notify the POTW")
    assert "Town of Southeast § 112-5H" in tel.inner_text() and "outstanding" in tel.inner_text()
    assert page.locator("#cf-invalidate-form").is_hidden()  # the industry has no invalidation form ...
    ep = env["episode"]
    assert _post_from_page(page, f"/api/episodes/{ep}/invalidate", {"reason": "ours"}) == 403  # ... nor the right

    tel.locator("button.cf-record").click()
    page.fill("#cf-done-how", "telephone")
    page.fill("#cf-done-to", "POTW duty operator")
    page.fill("#cf-done-when", page.evaluate("""() => { const d = new Date(); d.setMinutes(d.getMinutes() - 5);
        const p = new Intl.DateTimeFormat('sv-SE', {timeZone: 'America/New_York', year: 'numeric', month: '2-digit',
        day: '2-digit', hour: '2-digit', minute: '2-digit'}).format(d); return p.replace(' ', 'T'); }"""))
    assert page.locator("#cf-done-report-label").is_hidden()  # a telephone notice has no written report
    page.click("#cf-done-submit")
    page.wait_for_selector("#cf-message:has-text('Recorded')")
    # the table is fetched again after the message: wait for the row to say so (a loaded machine is slower)
    page.wait_for_selector("#cf-obligations tbody tr:has-text('telephone and notify the POTW'):has-text('done')")

    rep = _row(page, "Repeat the sampling")
    rep.locator("button.cf-record").click()
    assert page.locator("#cf-done-report-label").is_visible()
    page.fill("#cf-done-how", "letter with the repeat analysis")
    page.fill("#cf-done-when", page.input_value("#cf-done-when") or _now_local(page))
    page.set_input_files("#cf-done-report", str(env["folder"] / "statement.pdf"))
    page.click("#cf-done-submit")
    page.wait_for_selector("#cf-obligations tbody tr:has-text('Repeat the sampling') a.file:has-text('statement.pdf')")
    link = _row(page, "Repeat the sampling").locator("a.file")
    assert page.request.get(env["base"] + link.get_attribute("href")).body() == PDF

    page.fill("#cf-cause", "Caustic dosing pump tripped on overload")
    page.fill("#cf-action", "Pump motor replaced; dosing alarm added to the operator's round")
    page.set_input_files("#cf-attachments", str(env["folder"] / "pump.png"))
    page.click("#cf-annotate-submit")
    page.wait_for_selector("#cf-annotations .note")
    assert "entered by acme" in page.inner_text("#cf-annotations")
    page.screenshot(path=str(artifacts / "casefile-industry.png"), full_page=True)
    assert [(p["user"], p["how"]) for p in _journal(env["db"], "fulfilment")] == [
        ("acme", "telephone"), ("acme", "letter with the repeat analysis")]
    [note] = _journal(env["db"], "annotation")
    assert note["user"] == "acme" and len(note["attachments"]) == 1
    page.close()


def _now_local(page: Any) -> str:
    return str(page.evaluate("""() => new Intl.DateTimeFormat('sv-SE', {timeZone: 'America/New_York',
        year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit'}).format(new Date())
        .replace(' ', 'T')"""))


def test_2_operator_sees_it_with_who_and_when_but_cannot_speak_for_the_industry(browser: Any,
                                                                               env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "op")
    page.wait_for_selector("body[data-obligations='loaded']")  # the plant's overview: only the 24-hour notice left
    acme = page.locator("#ob-rows tr", has_text=ACME)
    assert [r.get_attribute("class") for r in acme.all()] == ["open"]
    assert page.locator("#ob-rows tr", has_text=BOLT).count() == 3  # another company's, untouched
    _episode(page, env)
    text = page.inner_text("#cf")
    assert "Caustic dosing pump tripped on overload" in text and "entered by acme" in text
    assert "POTW duty operator" in text  # the fulfilment, to whom
    assert page.locator("button.cf-record").count() == 0
    assert page.locator("#cf-annotate-form").is_hidden() and page.locator("#cf-invalidate-form").is_hidden()
    ep = env["episode"]
    assert _post_from_page(page, f"/api/episodes/{ep}/annotation", {"cause": "op", "action": "op"}) == 403
    ob = page.locator("#cf-obligations tbody tr").first.get_attribute("data-obligation")
    assert _post_from_page(page, f"/api/obligations/{ob}/done", {"how": "x", "to": "y"}) == 403
    assert _post_from_page(page, f"/api/episodes/{ep}/invalidate", {"reason": "op"}) == 403
    assert len(_journal(env["db"], "annotation")) == 1 and not _journal(env["db"], "invalidation")
    page.close()


def test_3_enforcement_marks_the_episode_invalid_and_it_is_struck_through(browser: Any, env: dict[str, Any],
                                                                          artifacts: Path) -> None:
    page = _login(browser, env["base"], "enf")
    _episode(page, env)
    assert "entered by acme" in page.inner_text("#cf-annotations")
    assert page.locator("#cf-annotate-form").is_hidden() and page.locator("button.cf-record").count() == 0
    assert _post_from_page(page, f"/api/episodes/{env['episode']}/annotation", {"cause": "e", "action": "e"}) == 403
    reason = "pH probe failed its calibration check (record CAL-118)"
    page.fill("#cf-reason", reason)
    said: list[str] = []
    # a confirmation step first, stating that it cannot be undone; declined, nothing is marked
    page.once("dialog", lambda d: (said.append(d.message), d.dismiss()))
    page.click("#cf-invalidate-submit")
    page.wait_for_selector("#cf-message:has-text('Not marked invalid')")
    assert said and "cannot be undone" in said[0] and page.locator("#cf-invalid").is_hidden()
    page.once("dialog", lambda d: d.accept())
    page.click("#cf-invalidate-submit")
    page.wait_for_selector("#cf-invalid:not([hidden])")
    banner = page.inner_text("#cf-invalid")
    assert reason in banner and "enf" in banner
    assert "struck" in (page.get_attribute("#ep-title", "class") or "")
    decoration = page.evaluate("getComputedStyle(document.querySelector('#ep-title')).textDecorationLine")
    assert "line-through" in decoration
    assert page.locator("#cf-invalidate-form").is_hidden()  # once: it stays
    page.screenshot(path=str(artifacts / "casefile-invalidated.png"), full_page=True)
    [inv] = _journal(env["db"], "invalidation")
    assert inv["user"] == "enf" and inv["reason"] == reason
    page.goto(env["base"] + "/history")  # the history lists it still, struck through, the reason on hover
    row = page.locator(f"#h-rows tr:has(a[href='/episodes/{env['episode']}'])")
    row.wait_for()
    assert "struck" in (row.get_attribute("class") or "") and reason in (row.get_attribute("title") or "")
    assert page.locator("#h-rows tr.struck").count() == 1
    page.close()

    industry = _login(browser, env["base"], "acme")  # the industry sees the decision and its reason too
    _episode(industry, env)
    assert reason in industry.inner_text("#cf-invalid")
    # the obligations not met are closed with it: not required, never overdue, nothing left to record
    industry.wait_for_selector(f"#cf-obligations tbody tr:has-text('not required: episode invalidated ({reason})')")
    statuses = industry.eval_on_selector_all("#cf-obligations tbody td.status", "tds => tds.map(t => t.textContent)")
    assert "overdue" not in statuses and "not required" in statuses
    assert industry.locator("button.cf-record").count() == 0
    industry.close()
