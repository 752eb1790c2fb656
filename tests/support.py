"""Helpers shared by the test suites: free loopback ports and real servers started as subprocesses.

Under ``CI=true`` a missing server binary fails the test (it never skips): a green CI must mean the
wire-level tests really ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from config.loader import load_config
from config.schema import SiteConfig

if TYPE_CHECKING:
    from monitor.app import Daemon

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# The seed ordinances' texts, which the profiles' quotes are checked against, are not in the repository: they are
# read from $PRETREAT_ORDINANCES, else from shared/seeds beside the clone (where CI lays them).
SEEDS = Path(os.environ.get("PRETREAT_ORDINANCES") or Path(__file__).resolve().parents[2] / "shared" / "seeds")


def normalize_quote(text: str) -> str:
    """A quote or a seed line as compared: NFKC, non-breaking hyphens as hyphens, runs of white space as one."""
    text = unicodedata.normalize("NFKC", text).replace("\u2011", "-")
    return re.sub(r"\s+", " ", text).strip()


PATIENCE = 30.0
"""Seconds a test waits for a condition before it fails. Generous on purpose: the suite runs on loaded machines
(``make test-loaded`` burns two cores beside it), and a condition that holds costs only the time it takes to
hold; only a failing test waits this long."""


async def eventually(check: Callable[[], Any], within: float = PATIENCE, interval: float = 0.02) -> bool:
    """Poll ``check()`` until it is true or ``within`` s have passed; True once it holds, else the last answer.

    The one way a test waits for something to happen (an async test: the code under test runs on the same
    event loop, so the wait yields to it). Use it as ``assert await eventually(lambda: ...), "what was awaited"``;
    never sleep a guessed number of milliseconds and hope the condition holds by then. A synchronous test uses
    ``wait_until`` (the same loop, blocking the thread instead).
    """
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() >= deadline:
            return bool(check())
        await asyncio.sleep(interval)
    return True


def wait_until(check: Callable[[], Any], within: float = PATIENCE, interval: float = 0.02) -> bool:
    """``eventually`` for synchronous tests (the code under test runs in other threads or processes)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() >= deadline:
            return bool(check())
        time.sleep(interval)
    return True


async def run_for(daemon: Daemon, seconds: float) -> None:
    """Run ``daemon`` for ``seconds`` (a scenario's length, not a wait for a condition), then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.wait_for(daemon.ready.wait(), PATIENCE)
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(task, PATIENCE)


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it), and never one this process handed out before:
    the OS may give a port again as soon as the probing socket closes, so two calls for one site file (an
    instrument per port) could get the same one, which the loader then rightly refuses (two instruments with
    one unit id on one link; seen under load). A session hands out a few thousand of the ~28,000."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no port left on 127.0.0.1 that this test process has not handed out already")


def require_binary(name: str) -> str:
    """Path of a server binary; fail under CI, skip on a developer machine that lacks it."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if Path(p).exists()), None
    )
    if path is None:
        msg = f"{name} is not installed (make test installs it: apt-get install -y {name})"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def wait_for_port(port: int, timeout: float = PATIENCE, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def wait_for_simulator(config: Any, within: float = PATIENCE) -> None:
    """Until a `pretreat sim` started in another process serves the site ``config`` (a `SiteConfig`): every
    Modbus TCP instrument's port answers and every RTU instrument's pty exists (MQTT instruments publish through
    a broker the test started itself)."""
    for inst in config.instruments:
        if inst.driver.value == "modbus_tcp":
            wait_for_port(inst.port, within)
        elif inst.serial is not None:
            tty = Path(inst.serial.port)
            if not wait_until(tty.exists, within):
                raise TimeoutError(f"the simulator made no pty at {tty} within {within}s")


class Mosquitto:
    """A real mosquitto broker on a free loopback port, which tests can stop and start again."""

    def __init__(self, workdir: Path) -> None:
        self.binary = require_binary("mosquitto")
        self.port = free_port()
        self.workdir = workdir
        self.conf = workdir / "mosquitto.conf"
        self.log = workdir / "broker.log"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "persistence false\n"
            "user root\n"
            f"log_dest file {self.log}\n"
            "max_queued_messages 100000\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class VictoriaMetrics:
    """A real VictoriaMetrics (it implements InfluxDB's ``/api/v2/write``) on a free loopback port.

    ``stop()``/``start()`` keep the data directory and the port, so a test can simulate an outage. Extra
    command-line flags (``-httpAuth.username=…``, ``-dedup.minScrapeInterval=1ms`` to emulate InfluxDB's
    overwrite of the same series and timestamp) go in ``extra_args``.
    """

    def __init__(self, workdir: Path, *, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = require_binary("victoria-metrics")
        self.port = free_port()
        self.workdir = workdir
        self.data = workdir / "vmdata"
        self.log = workdir / "victoria-metrics.log"
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = PATIENCE) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, f"-httpListenAddr=127.0.0.1:{self.port}", f"-storageDataPath={self.data}",
                 "-retentionPeriod=100y", "-search.latencyOffset=0s", "-search.disableCache",
                 *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"victoria-metrics exited at start; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=0.5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise TimeoutError(f"victoria-metrics not healthy on port {self.port} after {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def _get(self, path: str, auth: str | None = None) -> bytes:
        req = urllib.request.Request(self.url + path)
        if auth is not None:
            req.add_header("Authorization", auth)
        with urllib.request.urlopen(req, timeout=30) as r:
            return bytes(r.read())

    def export(self, match: str, *, auth: str | None = None) -> list[dict[str, Any]]:
        """Raw samples of every series matching a selector (e.g. ``{__name__=~"ph_.*"}``), after a flush.
        Each item: ``{"metric": {labels}, "values": [...], "timestamps": [ms ...]}``."""
        self._get("/internal/force_flush", auth)
        # export's default range ends "now": ask up to two days ahead so no fresh point is cut off
        query = {"match[]": match, "start": "0", "end": str(int(time.time()) + 2 * 86400)}
        body = self._get("/api/v1/export?" + urllib.parse.urlencode(query), auth)
        return [json.loads(line) for line in body.splitlines() if line.strip()]

    def wait_for_points(self, match: str, count: int, *, timeout: float = PATIENCE,
                        auth: str | None = None) -> list[dict[str, Any]]:
        """Poll until the matching series hold at least ``count`` samples in total (new series can take a
        few seconds to become searchable); returns the last export either way."""
        deadline = time.monotonic() + timeout
        while True:
            series = self.export(match, auth=auth)
            if sum(len(s["timestamps"]) for s in series) >= count or time.monotonic() > deadline:
                return series
            time.sleep(0.1)


DEMO_SITE = Path(__file__).resolve().parents[1] / "config" / "sites" / "demo.toml"


def demo_site_file(tmp_path: Path, broker_port: int) -> Path:
    """A copy of the shipped demo site with free loopback ports, its pty and historian inside tmp_path."""
    text = DEMO_SITE.read_text()
    for old, new in (('historian = "../../var/demo/pretreat.sqlite"', 'historian = "pretreat.sqlite"'),
                     ('state_dir = "../../var/demo/notify"', 'state_dir = "notify"'),
                     ('"../../var/demo/ttyPH"', '"ttyPH"'),
                     ("port = 15020", f"port = {free_port()}"),
                     ("port = 15021", f"port = {free_port()}"),
                     ("port = 15022", f"port = {free_port()}"),
                     ("port = 18830", f"port = {broker_port}")):
        assert old in text, f"demo.toml changed: {old!r} not found; update tests/support.py's copy of it"
        text = text.replace(old, new)
    # The demo's max_gap of 60 s is for its 20x clock (see demo.toml); tests run at the wall's pace on the defaults.
    assert "\nmax_gap = 60\n" in text, "demo.toml changed: its max_gap lines; update tests/support.py's copy of it"
    text = text.replace("\nmax_gap = 60\n", "\n")
    site = tmp_path / "site.toml"
    site.write_text(text)
    return site


def demo_like(tmp_path: Path, broker_port: int) -> SiteConfig:
    """The demo site with free loopback ports, the pty in tmp_path, and no historian anywhere shared."""
    return load_config(demo_site_file(tmp_path, broker_port))


def mqtt_only_site(tmp_path: Path, port: int) -> Path:
    """A site with one MQTT explosion-hazard meter on the broker at ``port`` (``pretreat sim`` publishes it)."""
    site = tmp_path / "mqtt_site.toml"
    site.write_text(f"""
[daemon]
historian = "h.sqlite"
[[site]]
id = "s1"
timezone = "UTC"
[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
host = "127.0.0.1"
port = {port}
poll_interval = 0.2
[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "s1/lel"
payload = "number"
kind = "lel"
unit = "%LEL"
""")
    return site


FLOW_METER_SITE = """
[daemon]
historian = "pretreat.sqlite"
commit_interval = 0.1
tick_interval = 0.2

[[site]]
id = "acme"
name = "ACME Plating"
timezone = "UTC"

[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = {port}
register_map = "flow_meter"
poll_interval = 0.2
timeout = 0.2

[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"
"""
"""The smallest site a daemon runs: one simulated Modbus TCP flow meter (fill in ``port``), polled every 0.2 s,
historian in the site file's folder. For tests that need a real daemon but not the demo's broker and pty."""


def recorded_readings_csv(historian: Path, site: str, channels: list[str], path: Path) -> Path:
    """Every recorded reading of ``channels`` of ``site``, good and bad, in time order, written as the CSV
    `pretreat replay` reads (``time,site,channel,value,quality``; times to the microsecond, values as
    ``repr``): for the tests that compare the episodes recorded live with the ones a replay finds."""
    import csv
    from datetime import UTC, datetime

    from monitor.stores.historian import Historian

    rows = sorted((s for ch in channels for s in Historian.read(path=historian, site=site, channel=ch)),
                  key=lambda s: s.time)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time", "site", "channel", "value", "quality"])
        for s in rows:
            when = datetime.fromtimestamp(s.time, tz=UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
            w.writerow([when, s.site, s.channel, "" if s.value is None else repr(s.value), s.quality.value])
    return path


CSV_TIME_TOLERANCE = 5e-6
"""Seconds a duration found by replaying `recorded_readings_csv` may differ from the one recorded live: the CSV
gives times to the microsecond, the record keeps exact floats, so a duration differs by up to 1 µs. Rounding both to
the millisecond would not do: 1.5054996 and 1.5055004 round apart (a dry run saw it)."""
EVENT_TIME_TOLERANCE = 6e-4
"""Seconds an event's ``time_s`` may differ: `pretreat replay` writes event times to the millisecond (0.5 ms), from
readings whose CSV times are to the microsecond."""


def assert_same_episodes(replayed: Sequence[dict[str, Any]], live: Sequence[dict[str, Any]],
                         exact: Callable[[dict[str, Any]], tuple[Any, ...]], numbers: Sequence[str]) -> None:
    """The episode events a replay of the exported readings found are the ones recorded live: the same ``exact``
    fields, and each of ``numbers`` (durations, seconds, within `CSV_TIME_TOLERANCE`; ``time_s`` among them, within
    `EVENT_TIME_TOLERANCE`) the same, or None in both."""
    def order(e: dict[str, Any]) -> tuple[str, float]:
        return repr(exact(e)), e["time_s"]

    a, b = sorted(replayed, key=order), sorted(live, key=order)
    assert [exact(e) for e in a] == [exact(e) for e in b]
    for x, y in zip(a, b, strict=True):
        for n in numbers:
            u, v = x.get(n), y.get(n)
            tolerance = EVENT_TIME_TOLERANCE if n == "time_s" else CSV_TIME_TOLERANCE
            assert (u is None) == (v is None) and (u is None or abs(u - v) <= tolerance), (n, x, y)


def run_on_terminal(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``pretreat argv`` with standard error on a pseudo-terminal (where progress bars show) and standard
    output piped; returns the finished process and everything the terminal showed."""
    import sys

    primary, secondary = os.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "monitor.cli", *argv], stdout=subprocess.PIPE,
                              stderr=secondary, text=True, timeout=120, check=False, cwd=cwd)
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    return done, shown.decode("utf-8", "replace")


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program (Debian keeps them off PATH in /usr/lib/postgresql/<version>/bin)."""
    found = shutil.which(name) or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)), None)
    if found is None:
        msg = f"PostgreSQL's {name} is not installed (make test installs it: apt-get install -y postgresql)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return found


class PostgreSQL:
    """A throw-away PostgreSQL cluster: ``initdb`` in a temp dir, the server on a free loopback port with its
    unix socket in that dir, trust authentication for the ``pretreat`` role. Run as root (CI, this VM), the
    cluster belongs to the ``postgres`` system user, since the server refuses to run as root.

    ``stop()``/``start()`` keep the data and the port, so a test can restart the database mid-stream; ``kill()``
    is a crash (SIGKILL). ``durable=False`` (tests) turns fsync off; benchmarks keep PostgreSQL's defaults."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.initdb, self.postgres = postgres_bin("initdb"), postgres_bin("postgres")
        self.port = free_port()
        # not under pytest's tmp_path: its parents are root's, closed to the server's user
        self.dir = Path(tempfile.mkdtemp(prefix="pretreat-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            shutil.chown(self.dir, self.user, self.user)
        subprocess.run([self.initdb, "-D", str(self.data), "-U", "pretreat", "--auth=trust", "-E", "UTF8",
                        "--no-sync", "--no-instructions"], check=True, user=self.user, group=self.user,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://pretreat@127.0.0.1:{self.port}/postgres"

    def start(self, timeout: float = PATIENCE) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.postgres, "-D", str(self.data), "-p", str(self.port), "-k", str(self.dir),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"fsync={'on' if self.durable else 'off'}",
                 "-c", "max_connections=40"],
                stdout=log, stderr=subprocess.STDOUT, user=self.user, group=self.user)
        import psycopg

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited at start; see {self.log}")
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                return True
            except psycopg.OperationalError:
                return False

        if not wait_until(ready, timeout, 0.05):
            raise TimeoutError(f"postgres not accepting connections on {self.port} after {timeout}s")

    def stop(self) -> None:
        """A fast shutdown (SIGINT: clients are disconnected, the data is consistent)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
