"""The overview of many sites (24 here) over HTTP and in headless Chromium: one tile per site with its status,
worst standing alarm, the newest reading's age and this month's exceedances, worst first; the search and status
filter narrow it and stay in the URL; the top bar no longer lists every site; an industry user gets its own
sites only. Also the alarm KPI page (ISA-18.2 / EEMUA 191) on the same plant. Screenshots at 1400×900 and
390×844 go to tests/artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.alarm_scene import wait
from tests.browser.harness import (
    ACME,
    BOLT,
    BOLT_PH_HIGH,
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
OTHERS = [(f"plant-{i:02d}", f"Riverside Industry {i:02d} — MH-{i}", f"Riverside {i:02d} LLC") for i in range(22)]
SITES = [(ACME, "ACME Plating Co. — MH-1", "ACME Plating Co."), (BOLT, "Bolt Works — MH-7", "Bolt Works Inc."),
         *OTHERS]
ACME_LEL = f"{ACME}/lel/lel_single"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """24 sites: ACME and BOLT with three hours of readings, the others none; a critical LEL alarm at ACME
    (latched, unacknowledged) and a high pH at BOLT, acknowledged."""
    folder = tmp_path_factory.mktemp("console-overview")
    config = load(write_site(folder, sites=SITES))
    users = write_users(folder / "users.toml")
    with Plant(config) as plant:
        plant.feed(sorted(history(config, ACME, hours=3) + history(config, BOLT, hours=3), key=lambda s: s.time))
        plant.value(ACME, "lel", 14.0)
        plant.value(BOLT, "ph", 9.9)
        wait(lambda: {t.alarm_id for t in plant.transitions} >= {ACME_LEL, BOLT_PH_HIGH})
        with console(config, users) as (base, _app):
            op = login(base, "op")
            r = op.post(f"/api/alarms/{BOLT_PH_HIGH}/ack", json={}, headers={"X-CSRF-Token": csrf(op)})
            assert r.status_code == 200, r.text
            yield {"base": base, "plant": plant, "op": op}
            op.close()


def _tiles(client: httpx.Client, q: str = "") -> dict[str, Any]:
    r = client.get("/api/overview", params={"q": q} if q else {})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_tiles_worst_first_with_status_worst_alarm_age_and_compliance(env: dict[str, Any]) -> None:
    got = wait(lambda: (o := _tiles(env["op"]))["sites"][1]["unacked"] == 0 and o)  # the follower caught up
    tiles = got["sites"]
    assert (got["total"], got["shown"], len(tiles)) == (24, 24, 24)
    acme, bolt = tiles[0], tiles[1]
    assert (acme["id"], acme["status"], acme["unacked"], acme["active"]) == (ACME, "critical", 1, 1)
    assert acme["worst"]["rule_label"].startswith("Explosive vapour") and acme["worst"]["symbol"] == "◆1"
    assert (bolt["id"], bolt["status"], bolt["unacked"], bolt["active"]) == (BOLT, "high", 0, 1)  # acknowledged
    assert bolt["worst"]["state"] == "active-acknowledged"
    assert acme["last_reading_age_s"] is not None and acme["last_reading_age_s"] < 600
    assert acme["last_reading_text"].endswith(" ago")
    assert acme["exceedances_this_month"] >= 1 and "this month" in acme["compliance_text"]
    rest = tiles[2:]
    assert {t["status"] for t in rest} == {"no-data"} and all(t["last_reading_text"] == "no readings" for t in rest)
    assert [t["name"] for t in rest] == sorted(t["name"] for t in rest)  # then by name
    assert all(t["compliance_text"] == "in compliance so far this month" for t in rest)


def test_search_and_roles(env: dict[str, Any]) -> None:
    assert [t["id"] for t in _tiles(env["op"], "riverside 07")["sites"]] == ["plant-07"]
    assert [t["id"] for t in _tiles(env["op"], "bolt")["sites"]] == [BOLT]
    assert _tiles(env["op"], "nowhere")["sites"] == []
    acme = login(env["base"], "acme")
    assert [t["id"] for t in _tiles(acme)["sites"]] == [ACME] and _tiles(acme)["total"] == 1
    acme.close()


def _login(browser: Any, base: str, viewport: dict[str, int], path: str) -> Any:
    page = browser.new_page(viewport=viewport)
    page.goto(base + path)
    page.fill("#username", "op")
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def test_overview_page_search_in_the_url_and_a_short_top_bar(browser: Any, env: dict[str, Any],
                                                             artifacts: Any) -> None:
    page = _login(browser, env["base"], WIDE, "/overview")
    page.wait_for_selector(".site-tile[data-site]")
    wait(lambda: page.eval_on_selector_all(".site-tile", "ts => ts.length") == 24)
    first = page.eval_on_selector_all(".site-tile", "ts => ts.slice(0, 2).map(t => t.dataset.site)")
    assert first == [ACME, BOLT]
    assert "◆1 Critical" in page.inner_text(f'.site-tile[data-site="{ACME}"]')
    nav = page.inner_text("header nav")
    assert "Sites" in nav and "Riverside" not in nav and "ACME" not in nav  # 24 sites: not one link each
    page.screenshot(path=str(artifacts / "overview-1400x900.png"))
    page.fill("#ov-q", "riverside 1")
    names = {i: n for i, n, _c in OTHERS}
    want = sorted((i for i, n, c in OTHERS if "1" in f"{i} {n} {c}"), key=names.__getitem__)
    wait(lambda: page.eval_on_selector_all(".site-tile", "ts => ts.map(t => t.dataset.site)") == want, PATIENCE)
    assert page.evaluate("location.search") == "?q=riverside+1"
    page.reload()
    wait(lambda: page.eval_on_selector_all(".site-tile", "ts => ts.length") == len(want))
    assert page.input_value("#ov-q") == "riverside 1"
    page.fill("#ov-q", "")
    page.select_option("#ov-status", "alarm")
    wait(lambda: page.eval_on_selector_all(".site-tile", "ts => ts.map(t => t.dataset.site)") == [ACME, BOLT])
    page.click(f'.site-tile[data-site="{ACME}"] a.name')
    page.wait_for_url(f"**/sites/{ACME}")
    page.close()
    phone = _login(browser, env["base"], PHONE, "/overview")
    phone.wait_for_selector(".site-tile[data-site]")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone.screenshot(path=str(artifacts / "overview-390x844.png"))
    phone.close()


def test_kpi_page_per_site_and_overall_with_the_period_in_the_url(browser: Any, env: dict[str, Any],
                                                                  artifacts: Any) -> None:
    got = env["op"].get("/api/kpi", params={"period": "24h"}).json()
    assert got["overall"]["alarms"] == 2 and got["overall"]["standing"] == 2
    assert {t["alarm"] for t in got["top"]} == {ACME_LEL, BOLT_PH_HIGH}
    assert (got["overall"]["acknowledged"], got["overall"]["not_acknowledged"]) == (1, 1)
    assert len(got["sites"]) == 24 and next(s for s in got["sites"] if s["site"] == BOLT)["acknowledged"] == 1
    assert env["op"].get("/api/kpi", params={"period": "1y"}).status_code == 422
    acme = login(env["base"], "acme")
    assert [s["site"] for s in acme.get("/api/kpi").json()["sites"]] == [ACME]
    assert acme.get("/api/kpi", params={"site": BOLT}).status_code == 403
    acme.close()
    for name, view in (("1400x900", WIDE), ("390x844", PHONE)):
        page = _login(browser, env["base"], view, "/kpi?period=24h")
        wait(lambda p=page: p.evaluate("window.__kpiLoaded >= 1"))
        assert page.input_value("#k-period") == "24h"
        assert page.inner_text('.kpi[data-kpi="Alarms"] b') == "2"
        rows = page.eval_on_selector_all("#k-top-rows tr[data-alarm]", "rs => rs.map(r => r.dataset.alarm)")
        assert set(rows) == {ACME_LEL, BOLT_PH_HIGH}
        if name == "1400x900":
            page.select_option("#k-period", "30d")
            wait(lambda p=page: p.evaluate("location.search") == "?period=30d")
        else:
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.screenshot(path=str(artifacts / f"kpi-{name}.png"))
        page.close()
