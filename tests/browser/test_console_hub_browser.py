"""The county console in headless Chromium: `pretreat console --database postgresql://…` over the hub's database,
fed by two edge nodes (the Sparkplug load generator, one company's site each) through a real mosquitto and a
`pretreat hub`. An industry user sees its own company's site only, by page and by API; the operator and
enforcement see both; actions that would write into a site's record are refused (they belong to the edge)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.browser.harness import (
    ACME,
    ACME_PH_HIGH,
    BOLT,
    BOLT_PH_HIGH,
    browser_login,
    console,
    load,
    write_site,
    write_users,
)
from tests.hub_support import HubProcess
from tests.sparkplug_load import EdgeNode
from tests.support import Mosquitto, PostgreSQL, wait_until

VIEW = {"width": 1400, "height": 900}
CITATION = "Town of Southeast § 112-5A(1)(c)"


def _stored(db: PostgreSQL) -> tuple[int, int]:
    with psycopg.connect(db.url) as conn:
        return (conn.execute("SELECT count(*) FROM readings").fetchone()[0],  # type: ignore[index]
                conn.execute("SELECT count(*) FROM events").fetchone()[0])  # type: ignore[index]


def _feed(edge: EdgeNode, site: str, now: float, *, high: float) -> None:
    """Twenty readings of pH and LEL a minute apart up to now, an episode (pH above 9.5 for ten minutes, seq 1
    and 2 on every node, so the two nodes' ids meet) and its alarm, raised and still active."""
    first = int((now - 20 * 60) * 1000)
    for i in range(20):
        edge.data(site, first + i * 60_000)
    start, end = now - 15 * 60, now - 5 * 60
    common = {"channel": "ph", "rule": "ph_high", "limit": 9.5, "citation": CITATION}
    edge.event("episode", 1, site, event="start", time=start, value=high, **common)
    edge.event("episode", 2, site, event="end", time=end, value=7.1, peak=high, end_reason="cleared",
               measured_seconds=600.0, unmeasured_seconds=0.0, censored=False, confirmed=True, **common)
    alarm = {"type": "alarm", "seq": 1, "site": site, "alarm": f"{site}/ph/ph_high", "kind": "raise",
             "from": "normal", "state": "active-unacknowledged", "priority": "high", "time": start, "value": high,
             "who": "system", "why": "", **common}
    edge.publish(f"pretreat/v1/{edge.group}/{edge.node}/events", json.dumps(alarm).encode())


@pytest.fixture
def county(tmp_path: Path, mosquitto: Mosquitto, postgres: PostgreSQL) -> Iterator[dict[str, Any]]:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    hub = HubProcess(tmp_path, "hub-a", mosquitto, postgres)
    edges = [EdgeNode(mosquitto.port, "edge-acme", [ACME], ["ph", "lel"]),
             EdgeNode(mosquitto.port, "edge-bolt", [BOLT], ["ph", "lel"])]
    try:
        hub.start()
        now = time.time()
        for edge, site, high in zip(edges, (ACME, BOLT), (9.8, 10.4), strict=True):
            edge.connect()
            _feed(edge, site, now, high=high)
        assert wait_until(lambda: _stored(postgres) == (80, 6)), (_stored(postgres), hub.log.read_text()[-2000:])
        # the county page's material: Acme's edge loses a message (edge_gap: judged once the edge has sent
        # past it by gap_grace) and seals its journal; Bolt's edge dies (its NDEATH: edge_offline)
        acme, bolt = edges
        acme.event("seal", 40, ACME, sites=[ACME], hash="ab" * 32, time=now)
        acme.skip()
        sent = [int(now * 1000)]

        def gap_raised() -> bool:  # the edge goes on sending (its payload time is the wall clock) until judged
            sent.append(sent[-1] + 1000)
            acme.data(ACME, sent[-1])
            return ("edge_gap", "edge-acme") in _hub_alarms(postgres)

        assert wait_until(gap_raised, interval=0.3), (_hub_alarms(postgres), hub.log.read_text()[-2000:])
        bolt.close(die=True)
        assert wait_until(lambda: _hub_alarms(postgres) == [("edge_gap", "edge-acme"), ("edge_offline", "edge-bolt")]
                          ), (_hub_alarms(postgres), hub.log.read_text()[-2000:])
        with console(config, users, database=postgres.url) as (base, _app):
            yield {"base": base}
    finally:
        for edge in edges:
            edge.close()
        hub.stop()


def _hub_alarms(db: PostgreSQL) -> list[tuple[str, str]]:
    with psycopg.connect(db.url) as conn:
        return [(k, n) for k, n in conn.execute("SELECT kind, node FROM hub_alarms WHERE cleared_at IS NULL "
                                                "ORDER BY kind, node").fetchall()]


def _login(browser: Any, base: str, user: str) -> Any:
    return browser_login(browser, base, user, VIEW)


def _history_sites(page: Any, base: str) -> set[str]:
    page.goto(base + "/history")
    page.wait_for_selector('#h-rows tr[data-rule="ph_high"]')
    return set(page.eval_on_selector_all("#h-rows tr[data-site]", "r => r.map(x => x.dataset.site)"))


def test_two_companies_see_their_own_sites_and_the_operator_sees_all(browser: Any, county: dict[str, Any]) -> None:
    base = county["base"]
    for user, mine, other, alarm in (("acme", ACME, BOLT, ACME_PH_HIGH), ("bolt", BOLT, ACME, BOLT_PH_HIGH)):
        page = _login(browser, base, user)
        page.wait_for_selector(f'#alarm-rows tr[data-alarm="{alarm}"]')
        shown = page.eval_on_selector_all("tr[data-alarm]", "r => r.map(x => x.dataset.alarm.split('/')[0])")
        assert set(shown) == {mine}, shown
        assert _history_sites(page, base) == {mine}
        page.goto(base + f"/sites/{mine}")
        page.wait_for_selector("#channels .channel, #channels article, #channels > *")
        assert "pH" in page.inner_text("#channels")
        resp = page.goto(base + f"/sites/{other}")
        assert resp.status == 403
        api = page.request
        assert api.get(base + f"/api/sites/{other}").status == 403
        assert api.get(base + f"/api/sites/{other}/trend?channel=ph").status == 403
        assert api.get(base + f"/api/sites/{mine}/trend?channel=ph").status == 200
        history = api.get(base + "/api/history").text()
        assert history and {json.loads(x)["site"] for x in history.splitlines()} == {mine}
        site = api.get(base + f"/api/sites/{mine}").json()
        ph = next(c for c in site["channels"] if c["id"] == "ph")
        assert ph["last"] is not None and ph["last"]["quality"] == "good", ph
        token = page.get_attribute("body", "data-csrf")
        ack = api.post(base + f"/api/alarms/{alarm}/ack", data=json.dumps({"note": ""}),
                       headers={"X-CSRF-Token": token, "Content-Type": "application/json"})
        assert ack.status == 409 and "site's own console" in ack.text()
        page.close()
    for user in ("op", "enf"):
        page = _login(browser, base, user)
        assert _history_sites(page, base) == {ACME, BOLT}
        rows = [json.loads(x) for x in page.request.get(base + "/api/history").text().splitlines()]
        assert sorted((r["site"], r["peak"], r["limit"]) for r in rows) == [(ACME, 9.8, 9.5), (BOLT, 10.4, 9.5)]
        page.goto(base + "/")
        page.wait_for_selector(f'#alarm-rows tr[data-alarm="{BOLT_PH_HIGH}"]')
        page.wait_for_selector(f'#alarm-rows tr[data-alarm="{ACME_PH_HIGH}"][data-state="active-unacknowledged"]')
        page.close()


def _county_rows(page: Any, base: str) -> dict[str, Any]:
    page.goto(base + "/county")
    page.wait_for_selector("#c-edges tr[data-node]")
    page.wait_for_selector("#c-journal tr[data-type]")
    return {
        "edges": page.eval_on_selector_all("#c-edges tr", "r => r.map(x => [x.dataset.node, x.dataset.online, "
                                           "x.dataset.gap, x.children[1].textContent, x.children[2].textContent])"),
        "alarms": page.eval_on_selector_all("#c-alarms tr", "r => r.map(x => [x.dataset.kind, x.dataset.node, "
                                            "x.children[2].textContent])"),
        "journal": page.eval_on_selector_all("#c-journal tr", "r => r.map(x => [x.dataset.type, x.dataset.site])"),
        "headline": page.inner_text("#c-headline"),
    }


def test_the_county_page_shows_each_company_its_own_edges_and_journal(browser: Any, county: dict[str, Any]) -> None:
    """The hub's health of the edges (online or not, gaps, last birth and seq) and the journal feed, by role."""
    base = county["base"]
    page = _login(browser, base, "op")
    seen = _county_rows(page, base)
    assert [e[:4] for e in seen["edges"]] == [["edge-acme", "true", "true", ACME],
                                              ["edge-bolt", "false", "false", BOLT]]
    assert "NDEATH (bdSeq 0)" in seen["edges"][1][4], seen
    assert sorted(seen["alarms"]) == [["edge_gap", "edge-acme", ACME], ["edge_offline", "edge-bolt", BOLT]]
    assert sorted(seen["journal"]) == [["alarm", ACME], ["alarm", BOLT], ["seal", ACME]]
    assert "2 edge(s): 1 offline, 1 with missing messages" in seen["headline"]
    edges = page.request.get(base + "/api/county/edges").json()["edges"]
    acme = next(e for e in edges if e["node"] == "edge-acme")
    assert acme["bdseq"] == 0 and acme["born"] is not None and acme["last_seq"] is not None, acme
    assert "1 Sparkplug message(s) missing" in acme["gap_detail"], acme
    page.close()
    for user, mine, node, alarm, journal in (
            ("acme", ACME, "edge-acme", "edge_gap", [["alarm", ACME], ["seal", ACME]]),
            ("bolt", BOLT, "edge-bolt", "edge_offline", [["alarm", BOLT]])):
        page = _login(browser, base, user)
        seen = _county_rows(page, base)
        assert [e[0] for e in seen["edges"]] == [node] and seen["edges"][0][3] == mine, seen
        assert seen["alarms"] == [[alarm, node, mine]], seen
        assert sorted(seen["journal"]) == journal, seen
        api = page.request.get(base + "/api/county/journal").json()
        assert {r["site"] for r in api} == {mine}, api
        page.close()
