"""`make demo` with one of its loopback ports taken stops at once, naming the port and what it is for, before it
touches anything: a second demo must neither poll nothing while its errors sit in log files nor delete the
running demo's record (scripts/demo.sh).

The test takes the console's port (``DEMO_PORT``, a free one it holds open), never the site file's fixed ports."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "var" / "demo"


def test_a_port_in_use_stops_the_demo_before_it_touches_the_record() -> None:
    RUN.mkdir(parents=True, exist_ok=True)
    marker = RUN / "pretreat.sqlite-test-marker"  # matched by the demo's clean-up of its record, were it reached
    marker.write_text("a running demo's record")
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {**os.environ, "DEMO_PORT": str(port)}
        out = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
        assert f"{port} (the console (DEMO_PORT))" in out.stderr and "Is another demo running?" in out.stderr
        assert out.stdout == ""  # nothing checked, seeded or started
        assert marker.exists()
    finally:
        held.close()
        marker.unlink(missing_ok=True)
