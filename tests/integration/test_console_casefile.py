"""The case file over HTTP against uvicorn on a free port, with the daemon's part played by the real stores, the
real alarm engine and the real obligation watch (tests.browser.harness.Plant): the obligations a confirmed pH
episode opens at a Town of Southeast site, the overdue alarm it raises and clears, and who may do what, role by
role, checked on the server (an industry user cannot invalidate, an operator cannot speak for the industry, an
industry user cannot touch another company's case file); uploads limited by size and type; every step journaled
with the console user."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from alarms.model import State
from monitor.stores.casefile import MAX_FILE
from tests.browser.harness import ACME, BOLT, Plant, console, csrf, history, load, login, write_site, write_users
from tests.support import wait_until

OVERDUE = f"{ACME}/obligations/obligation_overdue"
PDF = b"%PDF-1.4\n% written report\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def episode_id(db: Path, site: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT MIN(id) FROM episode_events WHERE rule = 'ph_high' AND site = ? "
                                "AND event = 'start'", (site,)).fetchone()[0])
    finally:
        conn.close()


def journal(db: Path, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = ? ORDER BY seq",
                                                      (kind,))]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-casefile")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    db = config.daemon.historian
    with Plant(config, obligations=True) as plant:
        plant.feed(sorted(history(config, ACME, hours=6) + history(config, BOLT, hours=6), key=lambda s: s.time))
        assert wait_until(lambda: any(t.alarm_id == OVERDUE and t.to_state is State.ACTIVE_UNACKED
                                      for t in plant.transitions))  # "immediately": notice outstanding
        with console(config, users) as (base, _app):
            clients = {name: login(base, name) for name in ("op", "acme", "bolt", "enf")}
            yield {"db": db, "plant": plant, "acme_ep": episode_id(db, ACME), **clients}
            for c in clients.values():
                c.close()


def post(client: httpx.Client, path: str, body: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return client.post(path, json=body or {}, headers={"X-CSRF-Token": csrf(client)}, **kw)


def upload(client: httpx.Client, data: bytes, name: str = "report.pdf") -> httpx.Response:
    return client.post("/api/files", params={"name": name}, content=data,
                       headers={"X-CSRF-Token": csrf(client), "Content-Type": "application/pdf"})


def test_a_confirmed_episode_opens_its_cited_obligations_visible_to_every_role(env: dict[str, Any]) -> None:
    ep = env["acme_ep"]
    for name in ("op", "acme", "enf"):
        r = env[name].get(f"/api/episodes/{ep}/casefile")
        assert r.status_code == 200, (name, r.text)
        d = r.json()
        assert [(o["key"], o["citation"], o["due_text"]) for o in d["obligations"]] == [
            ("telephone_notice", "Town of Southeast § 112-5H", "immediately (no period stated)"),
            ("notice_24h", "40 CFR 403.12(g)(2)", "within 24 hours of becoming aware"),
            ("repeat_sampling", "40 CFR 403.12(g)(2)", "within 30 days after becoming aware")]
        assert d["may"] == {"fulfil": name == "acme", "annotate": name == "acme", "invalidate": name == "enf"}
    assert env["bolt"].get(f"/api/episodes/{ep}/casefile").status_code == 403  # another company's
    listed = {a["alarm"]: a for a in env["op"].get("/api/alarms").json()}  # on the plant's alarm list ...
    assert OVERDUE in listed and "Town of Southeast § 112-5H" in listed[OVERDUE]["citation"]
    assert OVERDUE in {a["alarm"] for a in env["acme"].get("/api/alarms").json()}  # ... and the industry's
    assert OVERDUE not in {a["alarm"] for a in env["bolt"].get("/api/alarms").json()}
    assert listed[OVERDUE]["configured"]
    r = post(env["acme"], f"/api/alarms/{OVERDUE}/ack", {"note": "calling the POTW now"})  # the industry acks it
    assert r.status_code == 200 and r.json()["status"] == "done", r.text
    assert {o["site"] for o in env["bolt"].get("/api/obligations").json()} == {BOLT}


def test_roles_are_checked_on_the_server(env: dict[str, Any]) -> None:
    ep = env["acme_ep"]
    ob = env["acme"].get(f"/api/episodes/{ep}/casefile").json()["obligations"][0]["id"]
    done = {"how": "telephone", "to": "POTW", "done_at": ""}
    note = {"cause": "x", "action": "y"}
    for name in ("op", "enf"):  # only the industry speaks for itself
        assert post(env[name], f"/api/obligations/{ob}/done", done).status_code == 403
        assert post(env[name], f"/api/episodes/{ep}/annotation", note).status_code == 403
        assert upload(env[name], PDF).status_code == 403
    for name in ("op", "acme", "bolt"):  # only enforcement decides an episode is invalid
        r = post(env[name], f"/api/episodes/{ep}/invalidate", {"reason": "mine"})
        assert r.status_code == 403, (name, r.text)
    assert post(env["bolt"], f"/api/obligations/{ob}/done", done).status_code == 403  # not Bolt's
    assert post(env["bolt"], f"/api/episodes/{ep}/annotation", note).status_code == 403
    no_token = env["acme"].post(f"/api/episodes/{ep}/annotation", json=note)
    assert no_token.status_code == 403 and "CSRF" in no_token.text
    assert not journal(env["db"], "invalidation") and not journal(env["db"], "fulfilment")


def test_uploads_are_limited_by_type_and_size(env: dict[str, Any]) -> None:
    assert upload(env["acme"], b"MZ\x90\x00 an executable").status_code == 400
    assert upload(env["acme"], b"%PDF-" + b"0" * MAX_FILE).status_code == 413
    r = upload(env["acme"], PDF, "../statement.pdf")
    assert r.status_code == 200 and r.json()["name"] == "statement.pdf" and r.json()["size"] == len(PDF)


def test_fulfilment_clears_the_overdue_alarm_and_is_journaled_with_the_user(env: dict[str, Any]) -> None:
    ep, acme, db = env["acme_ep"], env["acme"], env["db"]
    obs = {o["key"]: o for o in acme.get(f"/api/episodes/{ep}/casefile").json()["obligations"]}
    assert obs["telephone_notice"]["status"] == "outstanding"  # "immediately": no period stated
    assert obs["notice_24h"]["status"] == "open"
    r = post(acme, f"/api/obligations/{obs['repeat_sampling']['id']}/done", {"how": "lab report", "to": "CA"})
    assert r.status_code == 400 and "written report" in r.json()["detail"]  # a written report needs its PDF
    sha = upload(acme, PDF).json()["sha256"]
    r = post(acme, f"/api/obligations/{obs['repeat_sampling']['id']}/done",
             {"how": "letter with lab results", "to": "Town of Southeast", "report": sha})
    assert r.status_code == 200 and r.json()["status"] == "done" and r.json()["done"]["report"] == sha
    r = post(acme, f"/api/obligations/{obs['telephone_notice']['id']}/done",
             {"how": "telephone", "to": "POTW duty operator", "done_at": "2026-01-02T03:04"})
    assert r.status_code == 400 and "before the episode started" in r.json()["detail"]
    r = post(acme, f"/api/obligations/{obs['telephone_notice']['id']}/done",
             {"how": "telephone", "to": "POTW duty operator", "note": "volume about 200 gal"})  # now: late
    assert r.status_code == 200 and r.json()["status"] == "done" and r.json()["done"]["user"] == "acme"
    again = post(acme, f"/api/obligations/{obs['telephone_notice']['id']}/done", {"how": "e-mail", "to": "POTW"})
    assert again.status_code == 409 and "already recorded as done" in again.json()["detail"]  # the first stands
    assert "telephone to POTW duty operator" in again.json()["detail"]
    plant: Plant = env["plant"]
    ok = wait_until(lambda: any(t.alarm_id == OVERDUE and t.to_state in (State.RTN_UNACKED, State.NORMAL)
                                  for t in plant.transitions))  # every overdue one is done: the alarm returns
    assert ok, [(t.to_state, t.why, t.citation) for t in plant.transitions if t.alarm_id == OVERDUE]
    assert [(p["user"], p["how"]) for p in journal(db, "fulfilment")] == [
        ("acme", "letter with lab results"), ("acme", "telephone")]
    assert env["op"].get(f"/api/files/{sha}").content == PDF  # the operator reads the report
    assert env["bolt"].get(f"/api/files/{sha}").status_code == 403  # another company does not


def test_annotation_and_invalidation_with_who_and_when(env: dict[str, Any]) -> None:
    ep, db = env["acme_ep"], env["db"]
    r = post(env["acme"], f"/api/episodes/{ep}/annotation",
             {"cause": "Caustic dosing pump tripped", "action": "Motor replaced; alarm added"})
    assert r.status_code == 200, r.text
    for name in ("op", "enf"):
        [a] = env[name].get(f"/api/episodes/{ep}/casefile").json()["annotations"]
        assert a["user"] == "acme" and a["cause"] == "Caustic dosing pump tripped" and a["time"] > 0
    assert post(env["enf"], f"/api/episodes/{ep}/invalidate", {"reason": " "}).status_code == 400
    short = post(env["enf"], f"/api/episodes/{ep}/invalidate", {"reason": "x"})
    assert short.status_code == 400 and "at least 10 characters" in short.json()["detail"]  # a reason, not a mark
    r = post(env["enf"], f"/api/episodes/{ep}/invalidate", {"reason": "Test discharge agreed in advance (letter 12)"})
    assert r.status_code == 200 and r.json()["user"] == "enf"
    statuses = {o["key"]: (o["status"], o["closed"]) for o in
                env["op"].get(f"/api/episodes/{ep}/casefile").json()["obligations"]}
    closed = "not required: episode invalidated (Test discharge agreed in advance (letter 12))"
    assert statuses["telephone_notice"] == ("done", None)  # met before: stays as met
    assert statuses["notice_24h"] == ("not required", closed)  # open: closed with the invalidation
    assert journal(db, "obligation_closed")
    assert post(env["enf"], f"/api/episodes/{ep}/invalidate", {"reason": "again"}).status_code == 409
    inv = env["acme"].get(f"/api/episodes/{ep}/casefile").json()["invalidation"]
    assert inv["reason"] == "Test discharge agreed in advance (letter 12)" and inv["user"] == "enf"
    assert [p["user"] for p in journal(db, "invalidation")] == ["enf"]
    assert [p["user"] for p in journal(db, "annotation")] == ["acme"]
