"""The console under the attacks of issue 15, over HTTP against uvicorn on a free loopback port: another
company's problems in /api/health, oversized bodies, a user locked out by someone else's guesses, a rotating
X-Forwarded-For, and a malformed users file."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import httpx
import pytest

from alarms.commands import CommandQueue
from config.schema import SiteConfig
from monitor.cli import main
from monitor.console.app import ConsoleServer, create_app
from monitor.console.auth import LoginLimiter
from monitor.console.users import Role, User, hash_password, save_users
from monitor.health import health_path
from tests.browser.harness import PASSWORD, console, csrf, load, login, login_token, write_site, write_users
from tests.support import free_port

# Two companies whose site ids share a prefix: "acme" is part of "acme-plating".
FOODS, PLATING = "acme", "acme-plating"


def two_companies(folder: Path) -> tuple[SiteConfig, Path]:
    config = load(write_site(folder, sites=((FOODS, "Acme Foods — MH-2", "Acme Foods"),
                                            (PLATING, "ACME Plating Co. — MH-1", "ACME Plating Co."))))
    digest = hash_password(PASSWORD)
    users = folder / "users.toml"
    save_users(users, {"op": User(name="op", role=Role.OPERATOR, company="", hash=digest),
                       "foods": User(name="foods", role=Role.INDUSTRY, company="Acme Foods", hash=digest)})
    CommandQueue(path=config.daemon.historian).close()  # the daemon's file exists
    return config, users


def write_health(config: SiteConfig, *, stale: list[str], down: list[str], fast: tuple[str, ...] = ()) -> None:
    """A running daemon's snapshot (monitor.health's format): MQTT instruments under ``streaming`` by
    site/instrument, the ``down`` ones disconnected, the ``fast`` ones' clocks an hour ahead; a historian backlog
    (a daemon-wide problem)."""
    streaming = {f"{s.id}/{i.id}": {"messages": 10, "connected": f"{s.id}/{i.id}" not in down,
                                    "clock_ahead": 3600.0 if f"{s.id}/{i.id}" in fast else None}
                 for s in config.sites for i in s.instruments}
    snap = {"time": time.time(), "uptime_s": 60.0, "pid": os.getpid(), "state": "running", "instruments": {},
            "links": {}, "streaming": streaming, "stale_channels": stale, "episode_events": 0, "influx": None,
            "historian": {"samples_written": 1, "batches": 1, "write_errors": 0, "queue_depth": 50_000}}
    health_path(config.daemon.historian).write_text(json.dumps(snap))


def test_health_for_an_industry_user_is_built_from_its_own_sites(tmp_path: Path) -> None:
    config, users = two_companies(tmp_path)
    write_health(config, stale=[f"{PLATING}/ph", f"{FOODS}/lel"], down=[f"{PLATING}/ph-meter"],
                 fast=(f"{FOODS}/lel-meter", f"{PLATING}/lel-meter"))
    with console(config, users) as (base, _app):
        foods, op = login(base, "foods"), login(base, "op")
        mine, everything = foods.get("/api/health").json(), op.get("/api/health").json()
        foods.close()
        op.close()
    assert PLATING not in json.dumps(mine), mine  # not in a problem, an instrument, a stale channel
    assert mine["problems"] == [f"1 stale channel(s): {FOODS}/lel",  # and its own instrument's clock, not theirs
                                f"{FOODS}/lel-meter: device clock 3600 s ahead, its readings recorded as clock_skew "
                                "(not judged): set the instrument's clock"]
    assert mine["stale"] == [f"{FOODS}/lel"]
    assert {i["key"] for i in mine["instruments"]} == {f"{FOODS}/{i}" for i in ("ph-meter", "lel-meter", "sampler")}
    assert mine["status"] == "degraded"
    assert f"link down: {PLATING}/ph-meter" in everything["problems"]  # the operator sees every site's problems
    assert any("historian backlog" in p for p in everything["problems"])
    assert any(p.startswith(f"{PLATING}/lel-meter: device clock") for p in everything["problems"])
    assert not any("backlog" in p for p in mine["problems"])


def test_request_bodies_are_capped(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    CommandQueue(path=config.daemon.historian).close()
    with console(config, users) as (base, _app), httpx.Client(base_url=base, timeout=30) as c:
        token = login_token(c)
        r = c.post("/login", data={"username": "x" * 5000, "password": "p", "csrf": token})
        assert r.status_code == 413 and "4096" in r.json()["detail"]
        r = c.post("/login", content=b"username=" + b"y" * 20_000_000,
                   headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 413
        op = login(base, "op")  # a normal form still logs in
        r = op.post("/api/alarms/acme-plating/ph/ph_high/ack", json={"note": "z" * 70_000},
                    headers={"X-CSRF-Token": csrf(op)})
        assert r.status_code == 413 and "65536" in r.json()["detail"]

        def chunks() -> object:
            for _ in range(100):
                yield b"{" + b" " * 1000

        r = op.post("/api/alarms/acme-plating/ph/ph_high/ack", content=chunks(),  # type: ignore[arg-type]
                    headers={"X-CSRF-Token": csrf(op), "content-type": "application/json"})
        assert r.status_code == 413  # chunked, no length declared: counted while read
        assert op.get("/api/me").status_code == 200
        op.close()


def _client_from(base: str, address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127.x.y.z is this machine's loopback)."""
    return httpx.Client(base_url=base, timeout=30, transport=httpx.HTTPTransport(local_address=address))


def test_guesses_from_one_client_do_not_lock_the_user_out_of_another(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    CommandQueue(path=config.daemon.historian).close()
    with console(config, users) as (base, _app):
        with _client_from(base, "127.0.0.2") as attacker:
            for _ in range(5):
                r = attacker.post("/login", data={"username": "enf", "password": "guess",
                                                  "csrf": login_token(attacker)})
                assert r.status_code == 401
            r = attacker.post("/login", data={"username": "enf", "password": PASSWORD,
                                              "csrf": login_token(attacker)})
            assert r.status_code == 429  # the guessing client is held off the name, right password or not
        with _client_from(base, "127.0.0.3") as user:
            r = user.post("/login", data={"username": "enf", "password": PASSWORD, "csrf": login_token(user)})
            assert r.status_code == 303  # the real user, from a client that has not failed, logs in
            assert user.get("/api/me").json()["name"] == "enf"


def _guess(c: httpx.Client, i: int, forwarded: str) -> int:
    r = c.post("/login", data={"username": f"nobody{i}", "password": "guess", "csrf": login_token(c)},
               headers={"X-Forwarded-For": forwarded})
    return r.status_code


def test_a_rotating_forwarded_for_does_not_escape_the_client_limit(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    CommandQueue(path=config.daemon.historian).close()
    with console(config, users) as (base, _app), httpx.Client(base_url=base, timeout=30) as c:
        codes = [_guess(c, i, f"203.0.113.{i}") for i in range(21)]
    assert codes == [401] * 20 + [429]


def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    CommandQueue(path=config.daemon.historian).close()
    app = create_app(config=config, users_path=users, limiter=LoginLimiter(per_client=3))
    server = ConsoleServer(app, host="127.0.0.1", port=free_port(), trusted_proxy="127.0.0.1")
    server.start_in_thread()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.config.port}", timeout=30) as c:
            assert [_guess(c, i, "198.51.100.7") for i in range(4)] == [401, 401, 401, 429]
            assert _guess(c, 9, "198.51.100.8") == 401  # another client behind the proxy
    finally:
        server.stop_thread()


def test_a_malformed_users_file_stops_the_console_at_start_with_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = write_site(tmp_path)
    users = tmp_path / "users.toml"
    users.write_text('[[user]]\nname = "op"\nrole = ["operator"]\nhash = "scrypt$x"\n')
    code = main(["console", "--config", str(site), "--users", str(users), "--port", str(free_port())])
    assert code == 2
    assert f"{users}: user[0].role: ['operator']" in capsys.readouterr().err


def test_a_users_file_broken_while_running_is_a_clear_503(tmp_path: Path) -> None:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    good = users.read_text()
    CommandQueue(path=config.daemon.historian).close()
    with console(config, users) as (base, _app):
        op = login(base, "op")
        users.write_text(good + "\n[[user]\n")  # a typo while editing
        r = op.get("/api/me")
        assert r.status_code == 503 and re.search(r"users file is invalid.*users\.toml", r.json()["detail"])
        with httpx.Client(base_url=base, timeout=30) as c:
            assert c.get("/login").status_code == 200  # the page; logging in is refused with the reason
            r = c.post("/login", data={"username": "op", "password": PASSWORD, "csrf": login_token(c)})
            assert r.status_code == 503
        users.write_text(good)
        assert op.get("/api/me").status_code == 200
        op.close()
