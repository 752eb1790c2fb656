"""Every console endpoint's authorisation, over HTTP against uvicorn on a free port, with the daemon's part
played by real stores and a real alarm engine (tests.browser.harness.Plant): who gets 200, 401, 403, 404;
CSRF, cookies, login rate limiting, logout, removing a user, and acknowledging through the command queue; the
reports in the daemon's reports folder listed and downloaded byte for byte, and every path out of it refused."""

from __future__ import annotations

import html
import http.client
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.console.users import load_users, save_users
from tests.browser.harness import (
    ACME,
    ACME_HTML,
    ACME_PDF,
    ACME_PH_HIGH,
    BOLT,
    BOLT_PH_HIGH,
    REPORT_PDF,
    Plant,
    console,
    csrf,
    history,
    load,
    login,
    login_token,
    write_reports,
    write_site,
    write_users,
)
from tests.support import PATIENCE, wait_until


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-api")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    with Plant(config) as plant:
        plant.feed(sorted(history(config, ACME, hours=6) + history(config, BOLT, hours=6), key=lambda s: s.time))
        plant.value(ACME, "ph", 9.6)
        plant.value(BOLT, "ph", 9.9)
        assert wait_until(lambda: {t.alarm_id for t in plant.transitions} >= {ACME_PH_HIGH, BOLT_PH_HIGH})
        reports = write_reports(config)
        with console(config, users) as (base, app):
            clients = {name: login(base, name) for name in ("op", "acme", "bolt", "enf")}
            yield {"base": base, "plant": plant, "db": config.daemon.historian, "users": users, "app": app,
                   "reports": reports, **clients}
            for c in clients.values():
                c.close()


def episode_ids(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {site: int(i) for site, i in conn.execute(
            "SELECT site, MIN(id) FROM episode_events WHERE rule = 'ph_high' GROUP BY site")}
    finally:
        conn.close()


GETS = ["/api/me", "/api/sites", "/api/alarms", "/api/journal", f"/api/sites/{ACME}",
        f"/api/sites/{ACME}/trend?channel=ph", "/api/history", "/api/health", "/api/reports",
        f"/api/reports/{ACME}/periodic/{ACME_PDF}", "/api/episodes/1"]
PAGES = ["/", f"/sites/{ACME}", "/history", "/reports", "/health", "/episodes/1"]


@pytest.mark.parametrize("path", GETS)
def test_every_api_endpoint_needs_a_session(env: dict[str, Any], path: str) -> None:
    r = httpx.get(env["base"] + path)
    assert r.status_code == 401 and r.json()["detail"] == "log in first"
    assert r.headers["cache-control"] == "no-store"


def test_event_stream_and_actions_need_a_session(env: dict[str, Any]) -> None:
    assert httpx.get(env["base"] + "/api/events").status_code == 401
    r = httpx.post(env["base"] + f"/api/alarms/{ACME_PH_HIGH}/ack", json={})
    assert r.status_code == 401


@pytest.mark.parametrize("path", PAGES)
def test_pages_send_a_visitor_without_session_to_the_login(env: dict[str, Any], path: str) -> None:
    r = httpx.get(env["base"] + path)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")


# (user, path, expected status) for every read endpoint and page, with another company's site for industry
READS = [
    *[(u, p, 200) for u in ("op", "acme", "enf") for p in GETS[:-1] + PAGES[:-1]],
    *[(u, f"/api/sites/{BOLT}", 200) for u in ("op", "enf")],
    ("acme", f"/api/sites/{BOLT}", 403), ("acme", f"/sites/{BOLT}", 403),
    ("acme", f"/api/sites/{BOLT}/trend?channel=ph", 403), ("acme", f"/api/alarms?site={BOLT}", 403),
    ("acme", f"/api/history?site={BOLT}", 403), ("acme", f"/api/journal?alarm={BOLT_PH_HIGH}", 403),
    ("acme", f"/api/events?site={BOLT}", 403), ("bolt", f"/api/sites/{ACME}", 403),
    ("acme", "/api/sites/no-such-site", 403), ("op", "/api/sites/no-such-site", 404),
    ("op", "/sites/no-such-site", 404), ("op", f"/api/sites/{ACME}/trend?channel=nope", 404),
    ("op", f"/api/sites/{ACME}/trend?channel=ph&start=0&end=1e9", 400),
    ("acme", f"/api/sites/{BOLT}/slug?channel=ph&start=0&end=3600", 403),
    ("op", f"/api/sites/{ACME}/slug?channel=ph&start=0&end=3600", 200),
    ("op", f"/api/sites/{ACME}/slug?channel=nope&start=0&end=3600", 404),
    ("op", f"/api/sites/{ACME}/slug?channel=ph&start=0&end=1e9", 400),
    ("acme", f"/api/reports?site={BOLT}", 403), ("acme", f"/api/reports/{BOLT}/daily/2026-07-01.json", 403),
    ("bolt", f"/api/reports/{ACME}/periodic/{ACME_PDF}", 403), ("acme", "/api/reports/no-such-site/daily/x.csv", 403),
    ("op", "/api/reports/no-such-site/daily/x.csv", 404), ("op", "/api/reports?site=no-such-site", 404),
    ("bolt", f"/api/reports/{BOLT}/daily/2026-07-01.csv", 200), ("op", f"/api/reports/{ACME}/daily/x.csv", 404),
]


@pytest.mark.parametrize(("user", "path", "status"), READS)
def test_read_access_by_role(env: dict[str, Any], user: str, path: str, status: int) -> None:
    r = env[user].get(path)
    assert r.status_code == status, r.text[:200]
    if status == 403 and not path.startswith("/api/"):
        assert "not one of ACME Plating Co.'s sites" in html.unescape(r.text)  # says so: not an empty page


def test_episode_pages_and_api_follow_the_episode_site(env: dict[str, Any]) -> None:
    ids = episode_ids(env["db"])
    for user, site, status in (("op", BOLT, 200), ("enf", BOLT, 200), ("acme", BOLT, 403), ("acme", ACME, 200)):
        assert env[user].get(f"/api/episodes/{ids[site]}").status_code == status
        assert env[user].get(f"/episodes/{ids[site]}").status_code == status
    ep = env["acme"].get(f"/api/episodes/{ids[ACME]}").json()
    assert (ep["episode"]["rule"], ep["episode"]["limit"], ep["site"]) == ("ph_high", 9.0, ACME)
    assert env["acme"].get("/api/episodes/999999").status_code == 403
    assert env["op"].get("/api/episodes/999999").status_code == 404


def test_industry_sees_only_its_company_in_lists(env: dict[str, Any]) -> None:
    acme, op = env["acme"], env["op"]
    assert {a["site"] for a in acme.get("/api/alarms").json()} == {ACME}
    assert {a["site"] for a in op.get("/api/alarms").json()} == {ACME, BOLT}
    assert [s["id"] for s in acme.get("/api/sites").json()] == [ACME]
    assert {json.loads(line)["site"] for line in acme.get("/api/history").text.splitlines()} == {ACME}
    assert {json.loads(line)["site"] for line in op.get("/api/history").text.splitlines()} == {ACME, BOLT}
    assert all(j["alarm"].startswith(ACME + "/") for j in acme.get("/api/journal").json())
    health = acme.get("/api/health").json()
    assert {i["key"].split("/")[0] for i in health["instruments"]} == {ACME}
    assert "historian" not in health["snapshot"]  # the daemon's own queues: operators and enforcement only
    assert "historian" in env["enf"].get("/api/health").json()["snapshot"]
    me = acme.get("/api/me").json()
    assert (me["role"], me["actions"], [s["id"] for s in me["sites"]]) == ("industry", ["comment", "seen"], [ACME])
    assert env["enf"].get("/api/me").json()["actions"] == []


def test_history_downloads_csv_and_json_with_the_cli_columns(env: dict[str, Any]) -> None:
    r = env["enf"].get("/api/history", params={"format": "csv", "download": "true", "rule": "ph_high"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="exceedances.csv"'
    lines = r.text.splitlines()
    assert lines[0].startswith("n,site,channel,rule,status,start,end,duration_s")
    assert int(r.headers["x-total-count"]) == len(lines) - 1 >= 2
    j = env["enf"].get("/api/history", params={"format": "json", "download": "true", "site": BOLT})
    rows = [json.loads(x) for x in j.text.splitlines()]
    # the download is `pretreat exceedances --format json`: its episode_id is the text id site/channel/rule@start
    assert rows and all(x["site"] == BOLT and x["episode_id"].startswith(f"{BOLT}/ph/") for x in rows)
    assert env["enf"].get("/api/history", params={"from": "yesterday"}).status_code == 400


def test_reports_are_listed_newest_first_for_the_users_sites(env: dict[str, Any]) -> None:
    listed = env["op"].get("/api/reports").json()
    assert [(r["site"], r["kind"], r["name"]) for r in listed] == [  # no temporary file, .txt or link out
        (ACME, "periodic", ACME_PDF), (ACME, "periodic", ACME_HTML),
        (BOLT, "daily", "2026-07-01.json"), (BOLT, "daily", "2026-07-01.csv")]
    pdf = listed[0]
    assert (pdf["format"], pdf["period"], pdf["size"], pdf["site_name"]) == (
        "pdf", "2026-01-01 to 2026-06-30", len(REPORT_PDF), "ACME Plating Co. — MH-1")
    assert pdf["url"] == f"/api/reports/{ACME}/periodic/{ACME_PDF}"
    assert pdf["modified"] == pytest.approx(env["reports"]["pdf"].stat().st_mtime)
    assert (listed[2]["period"], listed[2]["size"]) == ("2026-07-01", env["reports"]["json"].stat().st_size)
    assert env["enf"].get("/api/reports").json() == listed
    assert [r["name"] for r in env["acme"].get("/api/reports").json()] == [ACME_PDF, ACME_HTML]
    assert [r["name"] for r in env["bolt"].get("/api/reports").json()] == ["2026-07-01.json", "2026-07-01.csv"]
    assert [r["site"] for r in env["op"].get("/api/reports", params={"site": BOLT}).json()] == [BOLT, BOLT]
    page = env["acme"].get("/reports").text  # the Reports page, apart from the exceedance history
    assert 'id="r-rows"' in page and 'id="gen-form"' in page and 'href="/reports"' in page
    assert 'id="r-rows"' not in env["acme"].get("/history").text


@pytest.mark.parametrize(("key", "media"), [("pdf", "application/pdf"), ("html", "text/html; charset=utf-8"),
                                            ("json", "application/json"), ("csv", "text/csv; charset=utf-8")])
def test_a_report_downloads_as_its_exact_bytes_and_type(env: dict[str, Any], key: str, media: str) -> None:
    path: Path = env["reports"][key]
    r = env["enf"].get(f"/api/reports/{path.parent.parent.name}/{path.parent.name}/{path.name}")
    assert r.status_code == 200 and r.content == path.read_bytes() and len(r.content) > 50
    assert r.headers["content-type"] == media
    assert r.headers["content-disposition"] == f'attachment; filename="{path.name}"'  # never shown in our origin
    assert r.headers["cache-control"] == "no-store" and r.headers["x-content-type-options"] == "nosniff"


TRAVERSALS = [
    f"/api/reports/{ACME}/periodic/../../../site.toml", f"/api/reports/{ACME}/periodic/..%2F..%2F..%2Fsite.toml",
    f"/api/reports/{ACME}/..%2F..%2F..%2F/site.toml", "/api/reports/..%2F..%2F/x/site.toml",
    f"/api/reports/{ACME}/daily/%2E%2E%2F%2E%2E%2F%2E%2E%2Fusers.toml", f"/api/reports/{ACME}/periodic/%2Fetc%2Fpasswd",
    f"/api/reports/{ACME}/periodic/..%5C..%5C..%5Csite.toml",
    f"/api/reports/{ACME}/..%2F{BOLT}%2Fdaily/2026-07-01.json",
    f"/api/reports/{ACME}/periodic/{ACME_PDF}%00.txt", f"/api/reports/{ACME}/periodic/.{ACME_PDF}.tmp",
    f"/api/reports/{ACME}/daily/notes.txt", f"/api/reports/{ACME}/daily/2026-07-02.csv",  # a link to the site file
    f"/api/reports/{ACME}/../site.toml", f"/api/reports/{ACME}/./periodic/{ACME_PDF}", "/api/reports/./../../site.toml",
]


@pytest.mark.parametrize("user", ["op", "acme"])
def test_no_path_leads_out_of_the_reports_folder(env: dict[str, Any], user: str) -> None:
    client, base = env[user], httpx.URL(env["base"])
    for path in TRAVERSALS:  # sent as written: httpx would resolve the dot segments itself
        conn = http.client.HTTPConnection(base.host, base.port, timeout=10)
        try:
            conn.request("GET", path, headers={"Cookie": f"pretreat_session={client.cookies['pretreat_session']}"})
            resp = conn.getresponse()
            status, body = resp.status, resp.read()
        finally:
            conn.close()
        assert status == 404, (path, status, body[:200])
        assert b"[daemon]" not in body and b"scrypt$" not in body


ACTS = [("enf", ACME_PH_HIGH, "ack", 403), ("acme", BOLT_PH_HIGH, "ack", 403),
        ("acme", ACME_PH_HIGH, "shelve", 403), ("acme", ACME_PH_HIGH, "reset", 403),
        ("bolt", ACME_PH_HIGH, "ack", 403), ("op", "acme-plating/ph/no_rule", "ack", 404),
        ("op", ACME_PH_HIGH, "explode", 404), ("op", ACME_PH_HIGH, "out-of-service", 403)]


@pytest.mark.parametrize(("user", "alarm", "action", "status"), ACTS)
def test_actions_refused_by_role_never_reach_the_queue(env: dict[str, Any], user: str, alarm: str, action: str,
                                                       status: int) -> None:
    c = env[user]
    r = c.post(f"/api/alarms/{alarm}/{action}", json={"note": "x", "reason": "y", "until": "1h"},
               headers={"X-CSRF-Token": csrf(c)})
    assert r.status_code == status, r.text
    conn = sqlite3.connect(env["db"])
    try:
        queued = conn.execute("SELECT COUNT(*) FROM operator_commands WHERE user = ? AND action = ?",
                              (user, action)).fetchone()[0]
    finally:
        conn.close()
    assert queued == 0


def test_state_changes_need_the_sessions_csrf_token_and_json(env: dict[str, Any]) -> None:
    op = env["op"]
    url = f"/api/alarms/{BOLT_PH_HIGH}/ack"
    assert op.post(url, json={}).status_code == 403
    assert op.post(url, json={}, headers={"X-CSRF-Token": csrf(env["enf"])}).status_code == 403  # another's
    assert op.post(url, content=b"note=x", headers={"X-CSRF-Token": csrf(op),
                                                     "Content-Type": "application/x-www-form-urlencoded"}
                   ).status_code == 415


def test_an_industrys_acknowledgement_is_seen_and_leaves_the_plants_alarm_unacknowledged(env: dict[str, Any]) -> None:
    """Per-role acknowledgement: ACME's "ack" is journaled as ``seen`` (who, when, note), the plant's alarm stays
    unacknowledged, the operator's table shows both; only the plant side acknowledges, shelves and resets."""
    acme, op = env["acme"], env["op"]
    r = acme.post(f"/api/alarms/{ACME_PH_HIGH}/ack", json={"note": "operator on site"},
                  headers={"X-CSRF-Token": csrf(acme)})
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["transitions"]) == ("done", [])  # no transition of the plant's alarm
    journal = acme.get("/api/journal", params={"alarm": ACME_PH_HIGH}).json()
    assert journal[0]["record"] == "action" and (journal[0]["action"], journal[0]["user"], journal[0]["note"]) == (
        "seen", "acme", "operator on site")

    def row(client: httpx.Client) -> dict[str, Any]:
        return next(a for a in client.get("/api/alarms").json() if a["alarm"] == ACME_PH_HIGH)

    got = row(op)
    assert got["state"] == "active-unacknowledged"  # still the operator's to acknowledge
    assert [(x["user"], x["note"]) for x in got["seen"]] == [("acme", "operator on site")]
    assert got["seen"][0]["time_text"].endswith(("EST", "EDT"))
    for action in ("shelve", "reset", "unshelve"):  # the plant's actions stay the plant's
        refused = acme.post(f"/api/alarms/{ACME_PH_HIGH}/{action}", json={"until": "1h", "reason": "x"},
                            headers={"X-CSRF-Token": csrf(acme)})
        assert refused.status_code == 403 and "industry user may not" in refused.json()["detail"]
    assert op.post(f"/api/alarms/{ACME_PH_HIGH}/seen", json={}, headers={"X-CSRF-Token": csrf(op)}).status_code == 403
    # the live follower rebuilds the rows on a seen record although alarm_state did not move
    assert wait_until(lambda: any(x["user"] == "acme" for x in
                                  env["app"].state.console.hub.rows[ACME_PH_HIGH].get("seen", [])))
    done = op.post(f"/api/alarms/{ACME_PH_HIGH}/ack", json={}, headers={"X-CSRF-Token": csrf(op)})
    assert done.status_code == 200 and [t["to"] for t in done.json()["transitions"]] == ["active-acknowledged"]
    assert row(op)["seen"][0]["user"] == "acme"  # both shown: the plant acknowledged, the industry has seen it


def test_comments_are_journaled_with_who_and_when_and_shown_on_the_row(env: dict[str, Any]) -> None:
    acme, op, enf = env["acme"], env["op"], env["enf"]
    for client, text in ((op, "called ACME, they are dosing caustic"), (acme, "caustic pump restarted")):
        r = client.post(f"/api/alarms/{ACME_PH_HIGH}/comment", json={"note": text},
                        headers={"X-CSRF-Token": csrf(client)})
        assert r.status_code == 200 and r.json()["status"] == "done", r.text
    empty = op.post(f"/api/alarms/{ACME_PH_HIGH}/comment", json={"note": " "}, headers={"X-CSRF-Token": csrf(op)})
    assert empty.status_code == 409 and "needs its text" in empty.json()["detail"]
    assert enf.post(f"/api/alarms/{ACME_PH_HIGH}/comment", json={"note": "x"},
                    headers={"X-CSRF-Token": csrf(enf)}).status_code == 403
    assert acme.post(f"/api/alarms/{BOLT_PH_HIGH}/comment", json={"note": "x"},
                     headers={"X-CSRF-Token": csrf(acme)}).status_code == 403
    row = next(a for a in op.get("/api/alarms").json() if a["alarm"] == ACME_PH_HIGH)
    assert row["comments"] == 2 and (row["last_comment"]["user"], row["last_comment"]["note"]) == (
        "acme", "caustic pump restarted")
    assert row["last_comment"]["time_text"].endswith(("EST", "EDT"))
    said = [(j["user"], j["note"]) for j in op.get("/api/journal", params={"alarm": ACME_PH_HIGH}).json()
            if j["record"] == "action" and j["action"] == "comment"]
    assert said == [("acme", "caustic pump restarted"), ("op", "called ACME, they are dosing caustic")]


def test_operator_shelves_with_expiry_and_reason(env: dict[str, Any]) -> None:
    op = env["op"]
    h = {"X-CSRF-Token": csrf(op)}
    bad = op.post(f"/api/alarms/{BOLT}/lel/lel_single/shelve", json={"until": "2h"}, headers=h)
    assert bad.status_code == 400 and "reason" in bad.json()["detail"]
    r = op.post(f"/api/alarms/{BOLT}/lel/lel_single/shelve", json={"until": "2h", "reason": "meter swap"}, headers=h)
    assert r.status_code == 200 and r.json()["transitions"][0]["to"] == "shelved"
    row = next(a for a in op.get("/api/alarms").json() if a["alarm"] == f"{BOLT}/lel/lel_single")
    assert (row["state"], row["by"], row["reason"]) == ("shelved", "op", "meter swap")
    assert 7000 < row["until"] - time.time() < 7300


def test_login_cookies_rate_limit_and_logout(env: dict[str, Any]) -> None:
    base = env["base"]
    with httpx.Client(base_url=base) as c:
        assert c.post("/login", data={"username": "op", "password": "x", "csrf": "forged"}).status_code == 403
        token = login_token(c)
        for _ in range(5):  # each answer is a fresh form with a fresh token
            r = c.post("/login", data={"username": "enf", "password": "wrong", "csrf": token})
            assert r.status_code == 401 and "wrong password" in r.text
            token = re.findall(r'name="csrf" value="([^"]+)"', r.text)[0]
        r = c.post("/login", data={"username": "enf", "password": "correct horse 1", "csrf": token})
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 200  # even the right password now
    env["app"].state.console.limiter.clear()
    with httpx.Client(base_url=base) as c:
        r = c.post("/login", data={"username": "enf", "password": "correct horse 1", "csrf": login_token(c)})
        cookie = r.headers["set-cookie"]
        assert r.status_code == 303 and r.headers["location"] == "/history"
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
        assert c.post("/logout", data={"csrf": "nope"}).status_code == 403
        assert c.get("/api/me").status_code == 200
        assert c.post("/logout", data={"csrf": csrf(c)}).status_code == 303
        assert c.get("/api/me").status_code == 401


def test_removing_a_user_ends_their_sessions_at_once(env: dict[str, Any]) -> None:
    c = login(env["base"], "bolt")
    assert c.get("/api/me").status_code == 200
    saved = load_users(env["users"])
    try:
        save_users(env["users"], {k: v for k, v in saved.items() if k != "bolt"})
        assert c.get("/api/me").status_code == 401
    finally:
        save_users(env["users"], saved)
        c.close()


def test_security_headers(env: dict[str, Any]) -> None:
    r = env["op"].get("/")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert "unsafe-inline" not in r.headers["content-security-policy"]


def test_an_action_without_a_running_daemon_is_withdrawn(tmp_path: Path) -> None:
    from alarms.commands import CommandQueue

    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    CommandQueue(path=config.daemon.historian).close()  # the file exists; no daemon serves the queue
    with console(config, users, action_wait=0.3) as (base, _app):
        op = login(base, "op")
        r = op.post(f"/api/alarms/{ACME_PH_HIGH}/ack", json={}, headers={"X-CSRF-Token": csrf(op)})
        op.close()
    assert r.status_code == 504 and "withdrawn" in r.json()["detail"]
    q = CommandQueue(path=config.daemon.historian)
    try:
        assert q.get(r.json()["command"]).status.value == "cancelled"
    finally:
        q.close()


def test_a_report_opens_to_read_in_the_browser(env: dict[str, Any]) -> None:
    pdf, page = (env["enf"].get(f"/api/reports/{ACME}/periodic/{name}", params={"inline": "true"})
                 for name in (ACME_PDF, ACME_HTML))
    assert pdf.status_code == 200 and pdf.content == REPORT_PDF
    assert pdf.headers["content-disposition"] == f'inline; filename="{ACME_PDF}"'
    assert page.headers["content-disposition"] == f'inline; filename="{ACME_HTML}"'
    assert page.headers["content-security-policy"].startswith("sandbox;")  # no script, not our origin
    data = env["bolt"].get(f"/api/reports/{BOLT}/daily/2026-07-01.json", params={"inline": "true"})
    assert data.headers["content-disposition"].startswith("attachment;")  # only PDF and HTML are shown


def test_notice_of_violation_drafts_are_for_enforcement_only(env: dict[str, Any]) -> None:
    ids = episode_ids(env["db"])
    for user in ("op", "acme"):
        r = env[user].get(f"/api/nov/{ids[ACME]}")
        assert r.status_code == 403 and "enforcement" in r.json()["detail"]
    pdf = env["enf"].get(f"/api/nov/{ids[ACME]}")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"].startswith('attachment; filename="nov_acme')
    docx = env["enf"].get(f"/api/nov/{ids[BOLT]}", params={"format": "docx"})
    assert docx.status_code == 200 and docx.content.startswith(b"PK")  # a Word file is a zip
    assert env["enf"].get(f"/api/nov/{ids[ACME]}", params={"format": "rtf"}).status_code == 400
    assert env["enf"].get("/api/nov/999999").status_code == 404
    # any event id of the episode names it: its end's too, as the episode page may link either
    conn = sqlite3.connect(env["db"])
    try:
        end = conn.execute("SELECT MIN(id) FROM episode_events WHERE site = ? AND rule = 'ph_high' AND "
                           "event = 'end' AND id > ?", (ACME, ids[ACME])).fetchone()[0]
    finally:
        conn.close()
    assert end is not None
    by_end = env["enf"].get(f"/api/nov/{end}", params={"format": "docx"})
    by_start = env["enf"].get(f"/api/nov/{ids[ACME]}", params={"format": "docx"})
    assert by_end.status_code == 200, by_end.text
    assert by_end.headers["content-disposition"] == by_start.headers["content-disposition"]


def test_generate_a_report_for_a_period(env: dict[str, Any]) -> None:
    """Last in this module: it adds files to the reports folder that the listing tests above count."""
    body = {"site": ACME, "from": "2026-06-01", "to": "2026-06-30"}
    op = env["op"]
    assert op.post("/api/reports/generate", json=body).status_code == 403  # no CSRF token
    assert env["bolt"].post("/api/reports/generate", json=body,
                            headers={"X-CSRF-Token": csrf(env["bolt"])}).status_code == 403
    bad = {**body, "to": "2026-05-01"}
    assert op.post("/api/reports/generate", json=bad, headers={"X-CSRF-Token": csrf(op)}).status_code == 400
    # drawing the PDF and HTML takes seconds, more on a loaded machine: past the client's usual 10 s
    r = op.post("/api/reports/generate", json=body, headers={"X-CSRF-Token": csrf(op)}, timeout=PATIENCE * 4)
    assert r.status_code == 200, r.text
    names = [f"{ACME}_2026-06-01_2026-06-30.{x}" for x in ("pdf", "html", "csv")]
    # due in the CFR's words (403.12(e)(1): "during the months of June and December"), never an invented day
    assert r.json() == {"files": names, "period": "2026-06-01 to 2026-06-30", "due": "during December 2026"}
    listed = {x["name"]: x for x in env["acme"].get("/api/reports").json()}
    assert set(names) <= set(listed)
    got = env["acme"].get(listed[names[0]]["url"])
    assert got.status_code == 200 and got.content.startswith(b"%PDF")
