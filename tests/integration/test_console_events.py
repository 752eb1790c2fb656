"""The console's live stream (server-sent events) against uvicorn on a free port, and `pretreat console` as
a real process: a snapshot first, then each alarm change within a second of its transition; only the user's
own company's events; readings for a watched site; a logout or a server stop ends the stream."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.harness import (
    ACME,
    ACME_PH_HIGH,
    BOLT,
    BOLT_PH_HIGH,
    Plant,
    console,
    csrf,
    load,
    login,
    write_site,
    write_users,
)
from tests.support import PATIENCE, eventually, free_port, wait_for_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    config = load(write_site(tmp_path))
    users = write_users(tmp_path / "users.toml")
    with Plant(config) as plant:
        for site in (ACME, BOLT):
            plant.value(site, "ph", 7.0)
        with console(config, users) as (base, app):
            yield {"base": base, "plant": plant, "app": app, "config": config, "users": users}


async def sse(resp: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    kind: str | None = None
    data: Any = None
    async for line in resp.aiter_lines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
        elif line == "" and kind is not None:
            yield kind, data
            kind = None


async def first(events: AsyncIterator[tuple[str, Any]], want: Callable[[str, Any], bool],
                within: float = PATIENCE) -> tuple[str, Any, float]:
    async def look() -> tuple[str, Any, float]:
        async for kind, data in events:
            if want(kind, data):
                return kind, data, time.time()
        raise AssertionError("stream ended")
    return await asyncio.wait_for(look(), within)


def client(env: dict[str, Any], user: str) -> httpx.AsyncClient:
    sync = login(env["base"], user)
    c = httpx.AsyncClient(base_url=env["base"], cookies=sync.cookies, timeout=10.0)
    sync.close()
    return c


async def test_alarm_changes_arrive_within_a_second_and_only_for_the_users_sites(env: dict[str, Any]) -> None:
    op, acme = client(env, "op"), client(env, "acme")
    try:
        async with op.stream("GET", "/api/events") as r_op, acme.stream("GET", "/api/events") as r_acme:
            assert r_op.headers["content-type"].startswith("text/event-stream")
            e_op, e_acme = sse(r_op), sse(r_acme)
            kind, snap, _ = await first(e_op, lambda k, d: True)
            assert kind == "snapshot" and {a["site"] for a in snap["alarms"]} == {ACME, BOLT}
            kind, snap, _ = await first(e_acme, lambda k, d: True)
            assert kind == "snapshot" and {a["site"] for a in snap["alarms"]} == {ACME}
            env["plant"].value(BOLT, "ph", 9.9)
            env["plant"].value(ACME, "ph", 9.7)
            _k, row, got = await first(e_op, lambda k, d: k == "alarm" and d["alarm"] == BOLT_PH_HIGH)
            raised = next(t for t in env["plant"].transitions if t.alarm_id == BOLT_PH_HIGH)
            assert row["state"] == "active-unacknowledged" and row["value"] == 9.9 and row["unit"] == "pH"
            assert got - raised.time < 1.0, f"{got - raised.time:.3f} s after the transition"
            seen: list[tuple[str, Any]] = []
            await first(e_acme, lambda k, d: seen.append((k, d)) or (k == "journal" and d["alarm"] == ACME_PH_HIGH))
            assert all(str(d.get("alarm", "")).startswith(ACME) for _k, d in seen)
    finally:
        await op.aclose()
        await acme.aclose()


async def test_a_watched_site_gets_its_readings_live(env: dict[str, Any]) -> None:
    acme = client(env, "acme")
    try:
        async with acme.stream("GET", f"/api/events?site={ACME}") as r:
            events = sse(r)
            await first(events, lambda k, d: k == "snapshot")
            hub, polls = env["app"].state.console.hub, env["app"].state.console.hub.polls
            assert await eventually(lambda: hub.polls >= polls + 2)  # the follower noted where the channels are
            env["plant"].value(ACME, "sampler_temperature", 4.4)
            env["plant"].value(BOLT, "sampler_temperature", 9.9)
            _k, d, _t = await first(events, lambda k, d: k == "readings" and d["channel"] == "sampler_temperature")
            assert d["site"] == ACME and d["readings"][-1][1:3] == [4.4, "good"]
        assert (await acme.get(f"/api/events?site={BOLT}")).status_code == 403
    finally:
        await acme.aclose()


async def test_logout_ends_the_stream(env: dict[str, Any]) -> None:
    sync = login(env["base"], "op")
    c = httpx.AsyncClient(base_url=env["base"], cookies=sync.cookies, timeout=10.0)
    try:
        async with c.stream("GET", "/api/events") as r:
            events = sse(r)
            await first(events, lambda k, d: k == "snapshot")
            assert sync.post("/logout", data={"csrf": csrf(sync)}).status_code == 303
            await first(events, lambda k, d: k == "logout")
    finally:
        sync.close()
        await c.aclose()


def test_pretreat_console_serves_and_stops_on_sigterm_with_a_stream_open(tmp_path: Path) -> None:
    site = write_site(tmp_path)
    write_users(tmp_path / "site.users.toml")  # the default users file beside the site file
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "console", "--config", str(site), "--port",
                             str(port)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=PATIENCE)
        c = login(f"http://127.0.0.1:{port}", "op")
        with c.stream("GET", "/api/events") as r:
            assert next(r.iter_lines()).startswith("retry:")
            proc.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            assert proc.wait(10) == 0
            assert time.monotonic() - t0 < 5
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert "console for" in out and "127.0.0.1" in out
