"""The shipped systemd unit: `systemd-analyze verify` passes, `systemd-analyze security --offline=yes` rates it
2.0 or lower, its command lines are ones our CLI accepts, its user comes from the sysusers.d snippet, and
the daemon really runs inside its system-call filter, address families and W^X memory rule.

No systemd runs as PID 1 here, so the sandbox itself cannot be started. Instead the daemon runs under
strace with every system call the unit's SystemCallFilter= denies made to fail with EPERM (exactly what
SystemCallErrorNumber=EPERM makes the kernel do), against the demo site's simulators; the trace is then
checked for socket families outside RestrictAddressFamilies= and for the memory mappings that
MemoryDenyWriteExecute= refuses.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from config.loader import load_config
from monitor.cli import build_parser
from monitor.health import health_path
from monitor.stores.readonly import connect_readonly
from tests.support import (
    FLOW_METER_SITE,
    PATIENCE,
    Mosquitto,
    demo_site_file,
    free_port,
    require_binary,
    wait_for_port,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "pretreat-monitor.service"
SYSUSERS = ROOT / "systemd" / "sysusers.d" / "pretreat-monitor.conf"
INSTALLED = "/opt/pretreat-monitor/bin/pretreat"
MAX_EXPOSURE = 2.0


def settings(text: str) -> dict[str, list[str]]:
    """Unit file assignments, key -> every value in order (units repeat keys; configparser cannot)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def rendered(tmp_path: Path, text: str | None = None) -> Path:
    """The unit as installed, with ExecStart pointing at this checkout's `pretreat` (verify checks that the
    binary exists and is executable)."""
    pretreat = Path(sys.executable).with_name("pretreat")
    assert pretreat.exists(), f"{pretreat} missing: run `pip install -e .` in the venv"
    text = UNIT.read_text() if text is None else text
    out = tmp_path / "units" / "pretreat-monitor.service"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text.replace(INSTALLED, str(pretreat)))
    return out


def verify(unit: Path) -> tuple[int, str]:
    """`systemd-analyze verify` offline. Unknown keys and bad values are only warnings (exit code 0), so
    any output at all counts as a finding."""
    binary = require_binary("systemd-analyze")
    p = subprocess.run([binary, "verify", "--man=no", "--generators=no", str(unit)], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).strip()


def exposure(unit: Path) -> float:
    binary = require_binary("systemd-analyze")
    p = subprocess.run([binary, "security", "--offline=yes", "--no-pager", str(unit)], capture_output=True,
                       text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", p.stdout)
    assert m is not None, f"no score in the output:\n{p.stdout}\n{p.stderr}"
    return float(m.group(1))


def test_unit_verifies_without_a_single_warning(tmp_path: Path) -> None:
    assert verify(rendered(tmp_path)) == (0, "")


def test_verify_check_reports_a_misspelt_setting_and_a_missing_binary(tmp_path: Path) -> None:
    broken = UNIT.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict").replace(
        "Type=notify", "Type=notfy")
    rc, out = verify(rendered(tmp_path, broken))
    assert "ProtectSytem" in out and "notfy" in out
    rc, out = verify(UNIT)  # as shipped, /opt/pretreat-monitor does not exist on this machine
    assert rc != 0 and "is not executable" in out


def test_security_exposure_is_at_most_2(tmp_path: Path) -> None:
    score = exposure(rendered(tmp_path))
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}: see systemd-analyze security"
    # the parser reads the real number: the same unit without its hardening scores far worse
    bare = "[Service]\nType=notify\nExecStart=" + INSTALLED + " run --config /etc/x.toml\nUser=pretreat\n"
    assert exposure(rendered(tmp_path, bare)) > 8.0


def test_the_unit_keeps_its_service_contract() -> None:
    s = settings(UNIT.read_text())
    one = {k: v[-1] for k, v in s.items()}
    assert (one["Type"], one["NotifyAccess"], one["Restart"]) == ("notify", "main", "on-failure")
    assert float(one["WatchdogSec"]) >= 10 and one["KillSignal"] == "SIGTERM"
    assert (one["User"], one["StateDirectory"], one["ConfigurationDirectory"]) == (
        "pretreat", "pretreat-monitor", "pretreat-monitor")
    assert one["ProtectSystem"] == "strict" and one["NoNewPrivileges"] == "yes" and one["PrivateTmp"] == "yes"
    assert one["CapabilityBoundingSet"] == "" and one["UMask"] == "0027"
    assert set(one["RestrictAddressFamilies"].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert {c.split(":")[0] for c in s["LoadCredential"]} >= {"influx-token", "smtp-password"}
    assert "SupplementaryGroups" in s and any("ttyUSB" in d for d in s["DeviceAllow"])


def test_exec_lines_are_command_lines_our_cli_accepts() -> None:
    """ExecStartPre validates exactly the file ExecStart runs, with arguments `pretreat` parses."""
    s = settings(UNIT.read_text())
    pre, run = s["ExecStartPre"][0].split(), s["ExecStart"][0].split()
    assert pre[0] == run[0] == INSTALLED
    parser = build_parser()
    checked = parser.parse_args([w.replace("%E", "/etc") for w in pre[1:]])
    started = parser.parse_args([w.replace("%E", "/etc") for w in run[1:]])
    assert (checked.command, started.command) == ("check-config", "run")
    assert checked.config == started.config == "/etc/pretreat-monitor/site.toml"


def test_sysusers_snippet_creates_the_units_user_with_the_state_directory_as_home(tmp_path: Path) -> None:
    binary = require_binary("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    p = subprocess.run([binary, "--dry-run", f"--root={tmp_path}", "-"], input=SYSUSERS.read_text(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Creating user 'pretreat'" in p.stderr + p.stdout
    fields = next(ln.split() for ln in SYSUSERS.read_text().splitlines() if ln.startswith("u "))
    one = {k: v[-1] for k, v in settings(UNIT.read_text()).items()}
    assert fields[1] == one["User"] and fields[-1] == "/var/lib/" + one["StateDirectory"]


# -- the daemon inside the unit's system-call filter ----------------------------------------------------
@functools.cache
def expand(group: str) -> frozenset[str]:
    """A systemd syscall group, nested groups resolved (as systemd-analyze syscall-filter lists them)."""
    out = subprocess.run([require_binary("systemd-analyze"), "syscall-filter", group], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    calls: set[str] = set()
    for line in out.splitlines()[1:]:
        word = line.strip()
        if word and not word.startswith("#"):
            calls |= expand(word) if word.startswith("@") else {word}
    return frozenset(calls)


def denied_syscalls() -> frozenset[str]:
    """What the unit's SystemCallFilter= lines deny: everything outside the allow-lists, and the ~lists."""
    allowed: set[str] = set()
    denied: set[str] = set()
    for value in settings(UNIT.read_text())["SystemCallFilter"]:
        target = denied if value.startswith("~") else allowed
        for item in value.lstrip("~").split():
            target |= expand(item) if item.startswith("@") else {item}
    return expand("@known") - (allowed - denied)


def good_channels(db: Path) -> set[str]:
    if not db.exists():
        return set()
    try:
        with connect_readonly(db) as conn:
            return {c for (c,) in conn.execute("SELECT DISTINCT c.channel FROM readings r JOIN channels c "
                                               "ON c.id = r.channel_id WHERE r.quality = 0")}
    except sqlite3.Error:
        return set()


def test_daemon_runs_inside_the_units_syscall_filter_families_and_wx_rule(tmp_path: Path,
                                                                           mosquitto: Mosquitto) -> None:
    strace = require_binary("strace")
    require_binary("socat")
    site = demo_site_file(tmp_path, mosquitto.port)
    # every state file beside the historian, as under the unit (the demo keeps its alarm outboxes elsewhere)
    site.write_text(site.read_text().replace('state_dir = "../../var/demo/notify"', 'state_dir = "notify"'))
    config = load_config(site)
    denied = denied_syscalls()
    assert {"mbind", "setuid", "reboot", "chown"} <= denied and "read" not in denied
    sim = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config",
                            str(site), "--no-broker"], cwd=ROOT, stdout=subprocess.DEVNULL)
    trace = tmp_path / "strace.txt"
    daemon = None
    try:
        for inst in config.instruments:
            if inst.driver.value == "modbus_tcp":
                wait_for_port(inst.port)
        inject = ",".join("?" + name for name in sorted(denied))
        daemon = subprocess.Popen([strace, "-f", "-qq", "-o", str(trace), "-e", f"inject={inject}:error=EPERM",
                                   sys.executable, "-m", "monitor.cli", "run", "--config", str(site)],
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True,
                                  # under the unit the code is read-only: no bytecode is written there
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        channels = {c.id for c in config.channels}
        recorded = wait_until(lambda: good_channels(config.daemon.historian) >= channels, 60)  # under strace -f
        child = int(Path(f"/proc/{daemon.pid}/task/{daemon.pid}/children").read_text().split()[0])
        subprocess.run(["kill", "-TERM", str(child)], check=True)
        _, err = daemon.communicate(timeout=30)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        sim.send_signal(signal.SIGTERM)
        sim.wait(20)
    assert recorded, f"not every channel recorded a good reading:\n{err[-3000:]}"
    assert daemon.returncode == 0 and "stopped;" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    text = trace.read_text()
    # the filter was exercised, not bypassed: numpy's OpenBLAS calls mbind() at import, and SQLite running
    # as root (as here) fchown()s its journal; both got EPERM and the daemon carried on
    injected = set(re.findall(r"\b(\w+)\(.*\(INJECTED\)", text))
    assert injected and injected <= denied, injected
    families = set(re.findall(r"\bsocket\((AF_\w+)", text))
    assert families and families <= {"AF_UNIX", "AF_INET", "AF_INET6"}, families
    # ([^)\n]: strace -f interleaves threads, so an "<unfinished ...>" call's arguments end at the line's end)
    wx = re.findall(r"\b(?:mmap|mprotect|pkey_mprotect)\([^)\n]*PROT_WRITE\|PROT_EXEC", text)
    assert wx == [], wx[:5]  # MemoryDenyWriteExecute= refuses writable+executable mappings
    assert not re.search(r"\b(?:mprotect|pkey_mprotect)\([^)\n]*PROT_EXEC", text)  # nor making memory executable
    # ProtectSystem=strict: files are written only beside the historian (the StateDirectory) and to the
    # serial device; ProcSubset=pid: nothing in /proc but the process's own entries is read (the state directory
    # itself is opened O_TMPFILE once: config.paths asks whether the historian's folder takes new files)
    state_dir = str(config.daemon.historian.parent) + "/"
    written = set(re.findall(r'\bopen(?:at)?\([^"\n]*"([^"]+)", [^)\n]*O_(?:WRONLY|RDWR|CREAT)', text))
    assert written and all(f"{w}/".startswith(state_dir) or w.startswith("/dev/") for w in written), written
    proc = set(re.findall(r'"(/proc/[^"]*)"', text))
    assert all(re.match(r"/proc/(self|thread-self|\d+)(/|$)", p) for p in proc), proc


# -- the daemon's side of Type=notify -------------------------------------------------------------------
def receive(sock: socket.socket, until: float) -> list[tuple[float, str]]:
    out = []
    while time.monotonic() < until:
        sock.settimeout(max(until - time.monotonic(), 0.01))
        try:
            out.append((time.monotonic(), sock.recv(4096).decode()))
        except TimeoutError:
            break
    return out


def ready_or_running(sock: socket.socket, health: Path) -> list[tuple[float, str]]:
    """The first notification; give up 2 s after the daemon shows it runs (its health snapshot) without
    having sent one, or after PATIENCE (a cold start on a slow or loaded machine)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        got = receive(sock, time.monotonic() + 0.2)
        if got:
            return got[:1]
        if health.exists() and time.time() - health.stat().st_mtime < 60:
            deadline = min(deadline, time.monotonic() + 2)
    return []


def test_pretreat_run_sends_ready_then_watchdog_pets_then_stopping(tmp_path: Path) -> None:
    """`pretreat run` as systemd starts it: $NOTIFY_SOCKET and $WATCHDOG_USEC in its environment."""
    port = free_port()
    site = tmp_path / "site.toml"
    site.write_text(FLOW_METER_SITE.format(port=port))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sim = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "sim", "--config",
                            str(site), "--no-broker"], cwd=ROOT, stdout=subprocess.DEVNULL)
    daemon = None
    try:
        wait_for_port(port)
        env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "600000"}
        daemon = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config", str(site)], cwd=ROOT,
                                  env=env, stderr=subprocess.PIPE, text=True)
        first = ready_or_running(sock, health_path(load_config(site).daemon.historian))
        assert first and first[0][1].startswith("READY=1\n"), first
        assert (tmp_path / "pretreat.sqlite").exists()  # stores open before READY
        pets: list[tuple[float, str]] = []  # five pets, every 0.2 s (a third of 0.6 s)
        deadline = time.monotonic() + PATIENCE
        while sum(m == "WATCHDOG=1\n" for _, m in pets) < 5 and time.monotonic() < deadline:
            pets += receive(sock, time.monotonic() + 0.2)
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=PATIENCE)
        after = receive(sock, time.monotonic() + 0.5)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        sim.send_signal(signal.SIGTERM)
        sim.wait(20)
        sock.close()
    assert daemon.returncode == 0, err[-2000:]
    assert sum(m == "WATCHDOG=1\n" for _, m in pets) >= 5
    assert any(m.startswith("STOPPING=1") for _, m in pets + after)
