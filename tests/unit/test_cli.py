"""`pretreat` itself: the parser is built from SUBCOMMANDS without importing what the command line does not run.

Why it matters: `pretreat --help` imported every subcommand's module to list them (pymodbus, influxdb-client,
FastAPI, matplotlib: 2 s); now each command's start pays only for itself (bench/bench_peers.py times them).
These tests look at what a fresh interpreter imported, which is a fact, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor import cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pymodbus", "influxdb_client", "fastapi", "matplotlib")
# what no command's own `--help` may import: each of these costs 40 ms to 0.8 s of CPU at every start
START_HEAVY = (*HEAVY, "uvicorn", "numpy", "paho", "apscheduler", "google", "tqdm", "reportlab", "psycopg",
               "aiohttp", "docx", "PIL")

PROBE = """
import contextlib, io, json, sys
from monitor import cli
out, err = io.StringIO(), io.StringIO()
code = None
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(%r)))
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "heavy": heavy}))
"""


def run_cli(*argv: str, heavy: tuple[str, ...] = HEAVY) -> dict[str, object]:
    """`pretreat ARGV` in a fresh interpreter: its exit code, output and which heavy packages it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE % json.dumps(heavy), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_help_lists_every_command_without_importing_any() -> None:
    got = run_cli("--help")
    assert got["code"] == 0
    assert got["heavy"] == [], f"`pretreat --help` imported {got['heavy']}"
    out = str(got["out"])
    for name, (_target, help_text) in cli.SUBCOMMANDS.items():
        assert name in out
        assert help_text.split()[0] in out


@pytest.mark.parametrize("argv", [(), ("no-such-command",), ("--log-level", "DEBUG")])
def test_a_missing_or_unknown_command_is_a_usage_error_without_imports(argv: tuple[str, ...]) -> None:
    got = run_cli(*argv)
    assert got["code"] == 2
    assert got["heavy"] == []
    assert "usage: pretreat" in str(got["err"])


def test_a_commands_own_help_still_shows_its_arguments() -> None:
    """The listing parser is only for listing: `pretreat check-config --help` builds that command for real."""
    got = run_cli("check-config", "--help")
    assert got["code"] == 0
    assert "FILE" in str(got["out"])
    assert "pymodbus" not in got["heavy"]


@pytest.mark.parametrize("command", sorted(cli.SUBCOMMANDS))
def test_every_commands_help_starts_without_the_heavy_libraries(command: str) -> None:
    """`pretreat CMD --help` (what every start of CMD pays before its work) imports none of the libraries that
    only the work needs: the daemon's scheduler, paho, protobuf, pymodbus, matplotlib, tqdm. bench_peers
    times these starts; this checks the cause of a slow start, not a timing."""
    got = run_cli(command, "--help", heavy=START_HEAVY)
    assert got["code"] == 0, got["err"]
    assert "usage: pretreat " + command in str(got["out"])
    assert got["heavy"] == [], f"`pretreat {command} --help` imported {got['heavy']}"


def test_check_config_of_the_demo_site_loads_no_driver_library() -> None:
    """The representative quick command: validating the demo site file reads TOML, it polls nothing."""
    got = run_cli("check-config", str(ROOT / "config" / "sites" / "demo.toml"), heavy=START_HEAVY)
    assert got["code"] == 0, got["err"]
    assert "OK" in str(got["out"])
    assert got["heavy"] == [], f"`pretreat check-config` imported {got['heavy']}"


def test_the_full_parser_still_has_every_command() -> None:
    """`build_parser()` without arguments (used by tests of the systemd unit) imports and builds them all."""
    parser = cli.build_parser()
    checked = parser.parse_args(["check-config", "site.toml"])
    assert checked.command == "check-config" and callable(checked.func)


def test_a_closed_pipe_ends_quietly() -> None:
    """`pretreat rules … | head -1`: the reader goes away before the command writes; no traceback, exit 0."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line
    try:
        done = subprocess.run([sys.executable, "-m", "monitor.cli", "rules", "--config",
                               str(repo / "config" / "sites" / "demo.toml")], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=repo, timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
