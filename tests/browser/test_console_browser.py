"""The console in headless Chromium: each role logs in; a simulator scenario's pH alarm appears live and is
acknowledged from the page (the ack reaches the journal, with the user); an industry user cannot see or act
on another company's alarm by page or API; the history page lists the daemon's reports a user may see, each a
download; screenshots of the alarm list and a site view for review (tests/artifacts/)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor.reports.schedule import reports_dir
from tests.browser.harness import (
    ACME,
    ACME_PDF,
    ACME_PH_HIGH,
    ACME_PH_LOW,
    BOLT,
    BOLT_PH_HIGH,
    PASSWORD,
    REPORT_PDF,
    Plant,
    console,
    history,
    load,
    write_reports,
    write_site,
    write_users,
)
from tests.support import PATIENCE, wait_until

VIEW = {"width": 1400, "height": 900}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-browser")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    with Plant(config) as plant:
        plant.feed(sorted(history(config, ACME) + history(config, BOLT), key=lambda x: x.time))
        plant.value(BOLT, "ph", 9.8)  # another company's alarm, active before anyone logs in
        raised = sum(t.alarm_id == ACME_PH_HIGH for t in plant.transitions)
        plant.value(ACME, "ph", 9.4)  # ACME: an episode in the history
        assert wait_until(lambda: sum(t.alarm_id == ACME_PH_HIGH for t in plant.transitions) > raised)  # judged
        plant.value(ACME, "ph", 7.2)
        assert wait_until(lambda: any(t.alarm_id == BOLT_PH_HIGH for t in plant.transitions))
        write_reports(config)
        with console(config, users) as (base, app):
            yield {"base": base, "plant": plant, "config": config, "db": config.daemon.historian, "app": app}


def _login(browser: Any, base: str, user: str) -> Any:
    page = browser.new_page(viewport=VIEW)
    page.goto(base + "/")
    assert "/login" in page.url
    page.fill("#username", user)
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def _journal(db: Path, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = ?", (kind,))]
    finally:
        conn.close()


def test_operator_sees_a_scenario_ph_alarm_live_and_acknowledges_it(browser: Any, env: dict[str, Any],
                                                                    artifacts: Path) -> None:
    page = _login(browser, env["base"], "op")
    row = f'tr[data-alarm="{ACME_PH_LOW}"]'
    page.wait_for_selector(f'tr[data-alarm="{BOLT_PH_HIGH}"]')
    assert page.query_selector(row) is None
    loaded = page.evaluate("location.href")
    # ph_excursion: pH ramps from ~7 to 4.6 from t=300 s; played 10x from t=340 s it crosses 5 within ~2 s
    env["plant"].play("ph_excursion", site=ACME, speed=10.0, start_at=340.0)
    page.wait_for_selector(f'{row}[data-state="active-unacknowledged"]', timeout=PATIENCE * 1000)
    seen = time.time()
    raised = next(t for t in env["plant"].transitions if t.alarm_id == ACME_PH_LOW and t.kind.value == "raise")
    assert page.evaluate("location.href") == loaded  # live, no reload
    assert seen - raised.time < 1.5, f"shown {seen - raised.time:.2f} s after the transition"
    cells = page.inner_text(row)
    assert "▲2 High" in cells and "pH low" in cells and "pH\n/ limit 5 pH" in cells and "§ 112-5A(1)(c)" in cells
    page.screenshot(path=str(artifacts / "console-alarm-list.png"), full_page=True)

    page.click(f'{row} button[data-action="ack"]')  # one click: no dialog, no note asked
    page.wait_for_selector("#act-status.ok", timeout=PATIENCE * 1000)
    assert page.is_hidden("#act-dialog")
    assert "Acknowledged: ACME Plating Co. — MH-1 · ph · pH low (journal record" in page.inner_text("#act-status")
    page.wait_for_selector(f'{row}[data-state="active-acknowledged"]')
    page.wait_for_selector("#journal li.j-action")
    assert "ACME Plating Co. — MH-1 · ph · pH low: ack requested by op" in page.inner_text("#journal")
    acks = [a for a in _journal(env["db"], "action") if a["alarm"] == ACME_PH_LOW]
    assert [(a["action"], a["user"], a["note"]) for a in acks] == [("ack", "op", "")]
    page.close()


def test_new_critical_alarm_gives_a_visual_and_audible_cue(browser: Any, env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "op")
    page.wait_for_selector("#alarm-rows tr[data-alarm]")
    page.check("#sound")
    assert page.is_hidden("#cue")
    env["plant"].value(ACME, "lel", 14.0)  # lel_single: critical
    page.wait_for_selector("#cue:not([hidden])", timeout=PATIENCE * 1000)
    assert "◆1 ACME Plating Co. — MH-1 · lel · Explosive vapour (single): 14 %LEL (limit 10 %LEL)" == page.inner_text(
        "#cue-text")
    assert page.evaluate("window.__cues") >= 1
    # the vapour is gone at once (the scenario's LEL is normal): latched until an operator resets it
    lel = 'tr[data-alarm="acme-plating/lel/lel_single"]'
    page.wait_for_selector(f'{lel}[data-state="latched-unacknowledged"]')
    assert "p-critical" in page.get_attribute(lel, "class").split()
    assert page.query_selector(f'{lel} button[data-action="reset"]') is not None
    page.close()


def test_industry_user_sees_only_its_company_and_cannot_act_on_another(browser: Any, env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "acme")
    page.wait_for_selector("#alarm-rows tr[data-alarm]")
    page.check("#show-normal")
    page.wait_for_selector('#alarm-rows tr[data-state="normal"]')
    sites = {s.split("/")[0] for s in page.eval_on_selector_all("tr[data-alarm]", "r => r.map(x => x.dataset.alarm)")}
    assert sites == {ACME}
    assert page.query_selector('button[data-action="shelve"]') is None  # industry: acknowledge only
    nav = page.inner_text("header nav")
    assert "ACME Plating" in nav and "Bolt" not in nav
    resp = page.goto(env["base"] + f"/sites/{BOLT}")
    assert resp.status == 403 and "not one of ACME Plating Co.'s sites" in page.inner_text("#error-message")
    token = page.get_attribute("body", "data-csrf")
    api = page.request
    r = api.post(env["base"] + f"/api/alarms/{BOLT_PH_HIGH}/ack", data=json.dumps({"note": "x"}),
                 headers={"X-CSRF-Token": token, "Content-Type": "application/json"})
    assert r.status == 403
    assert api.get(env["base"] + f"/api/events?site={BOLT}").status == 403
    assert api.get(env["base"] + f"/api/sites/{BOLT}/trend?channel=ph").status == 403
    assert all(a["site"] == ACME for a in api.get(env["base"] + "/api/alarms").json())
    assert not [a for a in _journal(env["db"], "action") if a["alarm"] == BOLT_PH_HIGH]
    page.close()


def test_enforcement_reads_history_and_exports_but_cannot_act(browser: Any, env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "enf")
    assert page.url.endswith("/history")
    page.wait_for_selector('#h-rows tr[data-rule="ph_high"]')
    text = page.inner_text("#h-rows")
    assert "ACME Plating Co. — MH-1" in text and "Bolt Works — MH-7" in text  # site names, not ids
    csv = page.request.get(env["base"] + str(page.get_attribute("#dl-csv", "href")))
    assert csv.status == 200 and csv.text().startswith("n,site,channel,rule,status,start,end")
    page.click('#h-rows tr[data-rule="ph_high"] a')
    page.wait_for_selector('#ep-chart[data-drawn]')
    assert "ph_high" in page.inner_text("#ep-title")
    page.goto(env["base"] + "/")
    page.wait_for_selector("#alarm-rows tr[data-alarm]")
    assert page.query_selector("button.act") is None
    page.close()


def test_reports_page_lists_the_reports_of_the_users_sites(browser: Any, env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "enf")
    page.click('nav a[href="/reports"]')
    page.wait_for_selector("#r-rows tr[data-report]")
    rows = page.eval_on_selector_all("#r-rows tr[data-report]", "r => r.map(x => x.dataset.report)")
    assert rows == [f"{ACME}/periodic/{ACME_PDF}", f"{ACME}/periodic/{ACME_PDF[:-3]}html",
                    f"{BOLT}/daily/2026-07-01.json", f"{BOLT}/daily/2026-07-01.csv"]  # newest first
    first = page.inner_text(f'#r-rows tr[data-report="{ACME}/periodic/{ACME_PDF}"]')
    assert all(x in first for x in (ACME, "periodic", "2026-01-01 to 2026-06-30", ACME_PDF, f"{len(REPORT_PDF)} B"))
    assert "4 report(s)" in page.inner_text("#r-count")
    link = page.get_attribute(f'#r-rows a[download="{ACME_PDF}"]', "href")
    got = page.request.get(env["base"] + str(link))
    assert got.status == 200 and got.body() == REPORT_PDF and got.headers["content-type"] == "application/pdf"
    read = page.get_attribute(f'#r-rows tr[data-report="{ACME}/periodic/{ACME_PDF}"] a.read', "href")
    assert read is not None and read.endswith("?inline=true")
    assert page.query_selector(f'#r-rows tr[data-report="{BOLT}/daily/2026-07-01.json"] a.read') is None
    page.select_option("#r-site", BOLT)
    page.click("#r-filters button[type=submit]")
    shown = "r => r.map(x => x.dataset.report.split('/')[0])"
    # the site filter
    assert wait_until(lambda: page.eval_on_selector_all("#r-rows tr[data-report]", shown) == [BOLT, BOLT])
    page.close()
    page = _login(browser, env["base"], "acme")
    page.goto(env["base"] + "/reports")
    page.wait_for_selector("#r-rows tr[data-report]")
    assert page.eval_on_selector_all("#r-rows tr[data-report]", shown) == [ACME, ACME]
    page.close()


def test_generate_for_period_and_the_notice_button(browser: Any, env: dict[str, Any]) -> None:
    page = _login(browser, env["base"], "op")
    page.goto(env["base"] + "/reports")
    page.wait_for_selector("#gen-site option", state="attached")
    page.select_option("#gen-site", BOLT)
    page.fill("#gen-from", "2026-06-01")
    page.fill("#gen-to", "2026-06-30")
    page.click("#gen-go")
    page.wait_for_selector("#gen-msg[data-done]", timeout=PATIENCE * 4 * 1000)  # drawing takes seconds
    assert page.get_attribute("#gen-msg", "data-done") == "ok", page.inner_text("#gen-msg")
    assert "due during December 2026" in page.inner_text("#gen-msg")  # 40 CFR 403.12(e)(1)'s words
    name = f"{BOLT}_2026-06-01_2026-06-30.pdf"
    page.wait_for_selector(f'#r-rows tr[data-report="{BOLT}/periodic/{name}"]')
    for path in (reports_dir(env["config"]) / BOLT / "periodic").glob(f"{BOLT}_2026-06-01_2026-06-30.*"):
        path.unlink()  # the other tests count the reports folder's files
    page.goto(env["base"] + "/history")
    page.wait_for_selector('#h-rows tr[data-rule="ph_high"] a')
    page.click('#h-rows tr[data-rule="ph_high"] a')
    page.wait_for_selector("#ep-title")
    assert page.is_hidden("#ep-nov")  # operators do not draft notices
    episode = page.url
    page.close()
    page = _login(browser, env["base"], "enf")
    page.goto(episode)
    page.wait_for_selector("#ep-nov:not([hidden])")
    with page.expect_download() as dl:
        page.click("#nov-pdf")
    saved = Path(dl.value.path())
    assert saved.read_bytes().startswith(b"%PDF") and dl.value.suggested_filename.startswith("nov_")
    page.close()


def test_site_view_shows_values_trends_sampler_and_live_readings(browser: Any, env: dict[str, Any],
                                                                 artifacts: Path) -> None:
    # the held part of ph_excursion (4.6 from 360 s to 960 s), played in real time: ten minutes of live readings
    # at one value, whatever an earlier test left playing and however long the tests before this one took
    env["plant"].stop_playing()
    env["plant"].play("ph_excursion", site=ACME, speed=1.0, start_at=400.0)
    page = _login(browser, env["base"], "op")
    page.goto(env["base"] + f"/sites/{ACME}")
    page.wait_for_selector('.trend[data-channel="ph"][data-drawn]')
    assert "Sampler fridge temperature" in page.inner_text("#sampler")
    assert "% complete" in page.inner_text("#ch-ph")
    ph = '.trend[data-channel="ph"]'  # the scenario keeps playing: each live reading redraws
    drawn = int(page.get_attribute(ph, "data-drawn"))
    assert wait_until(lambda: int(page.get_attribute(ph, "data-drawn")) > drawn + 3)
    assert wait_until(lambda: page.inner_text("#ch-ph .value") == "4.6 pH")  # the held value, as last received
    assert "% complete over " in page.inner_text("#ch-ph .complete")  # the window it covers, in site time
    page.screenshot(path=str(artifacts / "console-site-view.png"), full_page=True)
    drawn = int(page.get_attribute(ph, "data-drawn"))
    page.click('[data-range="604800"]')  # a week: the server downsamples again
    assert wait_until(lambda: int(page.get_attribute(ph, "data-drawn")) > drawn)
    page.goto(env["base"] + "/health")
    page.wait_for_selector('#h-instruments tr[data-instrument]')
    assert "running" in page.inner_text("#h-headline") or "healthy" in page.inner_text("#h-headline")
    page.close()


def test_no_page_logs_an_error_in_the_browser_console(browser: Any, env: dict[str, Any]) -> None:
    """Every page an operator opens (login included) loads without a console error, an uncaught exception
    or a failed request (a missing favicon is one: Chromium asks for /favicon.ico unless the page names an
    icon)."""
    problems: list[str] = []
    page = browser.new_page(viewport=VIEW)
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"exception: {e}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)
    page.goto(env["base"] + "/")
    page.fill("#username", "op")
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    for path in ("/", "/overview", "/kpi?period=30d", "/history", f"/sites/{ACME}"):
        page.goto(env["base"] + path)
        page.wait_for_load_state("networkidle")
    page.close()
    assert problems == [], "\n".join(problems)
