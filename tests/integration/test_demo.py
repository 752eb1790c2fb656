"""`make demo` as a newcomer runs it (scripts/demo.sh, non-interactive, DEMO_SECONDS short): every rule family the
product exists for produces its episode, and the console answers with the demo users it printed.

Slow (about three minutes: a day and a half of seeded history, then the 90-second live part). It runs the demo's
own fixed loopback ports (config/sites/demo.toml), like a newcomer's `make demo`; the repository's .venv must hold
the package (`make test` makes it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]
PRETREAT = ROOT / ".venv" / "bin" / "pretreat"
USERS = {"operator": "demo-operator-pass", "industry": "demo-industry-pass",
         "enforcement": "demo-enforcement-pass"}
# one episode of each: pH, explosive vapour (5 % twice, 10 % once), hot influent, slug, sampler fridge, silence
FAMILIES = {("acme-plating", "ph", "ph_low"), ("acme-plating", "lel", "lel_successive"),
            ("acme-plating", "lel", "lel_single"), ("southeast-wwtp", "influent_temperature", "temperature_high"),
            ("acme-plating", "flow", "slug"), ("acme-plating", "sampler_temperature", "sampler_temperature"),
            ("acme-plating", "flow", "stale")}

pytestmark = pytest.mark.slow


class Demo:
    """The demo script as a process, its output collected line by line as it comes."""

    def __init__(self, port: int) -> None:
        env = {**os.environ, "DEMO_SECONDS": "170", "DEMO_PORT": str(port)}
        env.pop("PRETREAT_DEMO_CLOCK", None)
        self.proc = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, limit: float) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for line in self.lines:
                if re.search(pattern, line):
                    return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.2)
        pytest.fail(f"demo never printed /{pattern}/; its output:\n" + "\n".join(self.lines[-80:]))


@pytest.fixture
def demo() -> Iterator[Demo]:
    if not PRETREAT.exists():
        pytest.fail(f"{PRETREAT} missing: run `make test` (it installs the package into .venv)")
    d = Demo(free_port())
    try:
        yield d
    finally:
        if d.proc.poll() is None:
            d.proc.terminate()
        d.proc.wait(60)


def log_in(port: int, name: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    client.get("/login")  # its CSRF cookie
    r = client.post("/login", data={"username": name, "password": password, "csrf": client.cookies["pretreat_login"],
                                    "next": "/"})
    assert r.status_code == 303, (name, r.status_code, r.text[:300])
    return client


def test_make_demo_shows_every_rule_family_and_serves_the_console_to_its_demo_users(demo: Demo) -> None:
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", demo.wait_for(r"the operator console:", 240)).group(1))
    for name, password in USERS.items():
        assert f"{name} / {password}" in "\n".join(demo.lines)  # printed for the newcomer
    demo.wait_for(r"the daemon and the console keep running", 400)
    sites = {}
    for name, password in USERS.items():
        client = log_in(port, name, password)
        try:
            r = client.get("/api/sites")
        finally:
            client.close()
        assert r.status_code == 200, r.text
        sites[name] = {s["id"] for s in r.json()}
    assert sites["operator"] == sites["enforcement"] == {"acme-plating", "southeast-wwtp"}
    assert sites["industry"] == {"acme-plating"}  # an industry sees its own company's sites only
    assert demo.proc.wait(120) == 0
    out = "\n".join(demo.lines)
    assert "journal intact" in out
    assert "readings are stamped in simulated time" in out
    found = subprocess.run([str(PRETREAT), "exceedances", "--config", "config/sites/demo.toml", "--format", "json",
                            "--data-quality"],
                           cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ})
    episodes = [json.loads(line) for line in found.stdout.splitlines() if line.strip()]
    seen = {(e["site"], e["channel"], e["rule"]) for e in episodes}
    assert FAMILIES <= seen, f"missing: {FAMILIES - seen}; demo output:\n{out[-4000:]}"
    slug = next(e for e in episodes if e["rule"] == "slug")
    assert slug["status"] == "closed" and slug["duration_s"] > 60


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
