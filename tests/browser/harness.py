"""What the console's integration tests, browser tests and benchmark share: a two-company site file, users,
the console served by uvicorn on a free loopback port, and `Plant`, which plays the daemon.

`Plant` runs the daemon's data path for real, minus the instrument wire: in its own thread and event loop it
records samples with the real `Historian`, judges them with the real `CheckEngine`, stores episodes with the
real `EpisodeStore`, raises alarms with the real `AlarmEngine` (settings from `config.alarms`), and on every
tick carries out queued operator commands with `alarms.commands.apply_pending`, as the daemon's clock tick
does. Samples come from the test, or from a simulator scenario (`play`): the simulators' own process model
and scenario playback compute each channel's value at an accelerated simulated time, so the pH excursion of
``ph_excursion`` reaches the console exactly as the daemon would record it. It also writes the health
snapshot in the format of `monitor.health` (``<historian>.health.json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import queue
import re
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from alarms.commands import CommandQueue, apply_pending
from alarms.engine import AlarmEngine
from alarms.model import AlarmInput
from config.alarms import alarm_specs
from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.events import START, EpisodeEvent
from monitor.console.app import ConsoleServer, create_app
from monitor.console.auth import LoginLimiter
from monitor.console.users import Role, User, hash_password, save_users
from monitor.health import health_path
from monitor.obligation_watch import ObligationWatch, condition_of, obligation_alarm_specs
from monitor.reports.schedule import reports_dir, write_daily
from monitor.sample import Quality, Sample, judge_value
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian import Historian
from tests.support import free_port

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--autoplay-policy=no-user-gesture-required"]
"""How the browser tests and the console bench launch Debian's chromium (headless, nothing fetched)."""
PASSWORD = "correct horse 1"
ACME, BOLT = "acme-plating", "bolt-works"
ACME_PH_LOW = f"{ACME}/ph/ph_low"
ACME_PH_HIGH = f"{ACME}/ph/ph_high"
BOLT_PH_HIGH = f"{BOLT}/ph/ph_high"
ACME_LEL = f"{ACME}/lel/lel_single"

_SITE = """
[[site]]
id = "{id}"
name = "{name}"
company = "{company}"
jurisdiction = "southeast"
timezone = "America/New_York"

[[site.instrument]]
id = "ph-meter"
driver = "mqtt"
client_id = "{id}-ph"

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
client_id = "{id}-lel"

[[site.instrument]]
id = "sampler"
driver = "mqtt"
client_id = "{id}-sampler"
poll_interval = 5.0

[[site.channel]]
id = "ph"
instrument = "ph-meter"
topic = "{id}/ph"
payload = "number"
kind = "ph"
unit = "pH"
valid_min = 0
valid_max = 14

[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "{id}/lel"
payload = "number"
kind = "lel"
unit = "%LEL"
valid_min = 0
valid_max = 100

[[site.channel]]
id = "sampler_temperature"
instrument = "sampler"
topic = "{id}/fridge"
payload = "number"
kind = "sampler_temperature"
unit = "degC"

[[site.channel]]
id = "sampler_count"
instrument = "sampler"
topic = "{id}/count"
payload = "number"
kind = "sampler_count"
unit = "count"
"""


def write_site(folder: Path, *, sites: Sequence[tuple[str, str, str]] = (
        (ACME, "ACME Plating Co. — MH-1", "ACME Plating Co."), (BOLT, "Bolt Works — MH-7", "Bolt Works Inc."))) -> Path:
    """A site file with one site per (id, name, company): pH, LEL and a sampler each, over MQTT."""
    text = '[daemon]\nhistorian = "pretreat.sqlite"\ncommit_interval = 0.05\n'
    text += "".join(_SITE.format(id=i, name=n, company=c) for i, n, c in sites)
    path = folder / "site.toml"
    path.write_text(text, encoding="utf-8")
    return path


USERS: dict[str, tuple[Role, str]] = {
    "op": (Role.OPERATOR, ""), "acme": (Role.INDUSTRY, "ACME Plating Co."),
    "bolt": (Role.INDUSTRY, "Bolt Works Inc."), "enf": (Role.ENFORCEMENT, ""),
}
_HASH = hash_password(PASSWORD)  # once per test run: scrypt is slow on purpose


def write_users(path: Path) -> Path:
    save_users(path, {n: User(name=n, role=r, company=c, hash=_HASH) for n, (r, c) in USERS.items()})
    return path


def history(config: SiteConfig, site: str, *, hours: float = 24.0, step: float = 30.0,
            end: float | None = None) -> list[Sample]:
    """A day of a site's readings, every ``step`` s up to ``end``: pH swinging 6.8–7.6 with one excursion to
    9.4 (20 min, five hours ago), a 30-minute instrument outage (bad quality, ten hours ago), LEL near
    zero, the sampler's fridge at about 4 °C and its count rising."""
    end = time.time() - 60 if end is None else end
    out: list[Sample] = []
    n = int(hours * 3600 / step)
    for i in range(n):
        t = end - (n - i) * step
        ago = end - t
        ph = 7.2 + 0.4 * math.sin(t / 5400)
        if 5 * 3600 - 1200 <= ago <= 5 * 3600:
            ph = 9.4
        for ch, v in (("ph", ph), ("lel", 0.3 + 0.2 * math.sin(t / 700)),
                      ("sampler_temperature", 4.0 + 0.3 * math.sin(t / 2000)), ("sampler_count", float(i // 30))):
            unit = config.site(site).channel(ch).unit
            if ch == "ph" and 10 * 3600 - 1800 <= ago <= 10 * 3600:
                out.append(Sample.bad(time=t, site=site, channel=ch, unit=unit, quality=Quality.COMM_FAILURE,
                                      reason="no reply from ph-meter within 1 s"))
            else:
                out.append(Sample(time=t, site=site, channel=ch, value=v, unit=unit))
    return out


# ---- the daemon's part ---------------------------------------------------------------------------------------

def to_input(e: EpisodeEvent) -> AlarmInput:
    return AlarmInput(time=e.time, site=e.site, channel=e.channel, rule=e.rule, active=e.event == START,
                      value=e.value, limit=e.limit, citation=e.citation)


class Plant:
    """The daemon's data path in a thread (see the module doc). Use as a context manager."""

    def __init__(self, config: SiteConfig, *, tick: float = 0.05, obligations: bool = False) -> None:
        """``obligations``: open the obligations of confirmed episodes and raise the overdue-obligation alarm
        (`monitor.obligation_watch`), as the daemon's `monitor.alarming` does, looking every tick."""
        self.config = config
        self.tick = tick
        self.obligations = obligations
        self.inbox: queue.SimpleQueue[list[Sample]] = queue.SimpleQueue()
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.transitions: list[Any] = []
        self._players: list[Any] = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="plant", daemon=True)

    def __enter__(self) -> Plant:
        self.thread.start()
        if not self.ready.wait(15):
            raise RuntimeError(f"the plant did not start: {self.error!r}")
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(15)
        assert not self.thread.is_alive(), "the plant thread did not stop"
        if self.error is not None:
            raise self.error

    def feed(self, samples: Sequence[Sample]) -> None:
        self.inbox.put(list(samples))

    def value(self, site: str, channel: str, value: float, *, t: float | None = None) -> None:
        ch = self.config.site(site).channel(channel)
        self.feed([judge_value(value, time=time.time() if t is None else t, site=site, channel=channel,
                               unit=ch.unit, valid_min=ch.valid_min, valid_max=ch.valid_max)])

    def play(self, scenario: str, *, site: str, speed: float, start_at: float = 0.0) -> None:
        """Play a shipped simulator scenario on ``site``'s channels from simulated ``start_at`` s, ``speed``
        simulated seconds per wall second, a sample of every channel per tick (wall-clock timestamps)."""
        from simulators.playback import Playback, day_offset, resolve
        from simulators.process import SiteProcess
        from simulators.scenario import load_scenario

        sc = load_scenario(scenario)
        resolved = resolve(sc, self.config)
        s = self.config.site(site)
        process = SiteProcess(site=s, seed=sc.seed, params=resolved.params.get(site),
                              day_offset=day_offset(s, sc.start_hour, time.time()))
        playback = Playback(resolved)
        with self._lock:
            self._players.append((site, process, playback, time.monotonic(), speed, start_at))

    def stop_playing(self) -> None:
        """Stop every scenario started with `play` (later ticks carry only what is fed)."""
        with self._lock:
            self._players.clear()

    def _played(self) -> list[Sample]:
        out: list[Sample] = []
        now = time.time()
        with self._lock:
            players = list(self._players)
        for site, process, playback, wall0, speed, start_at in players:
            t = start_at + (time.monotonic() - wall0) * speed
            playback.due(t, lambda ch, at, p=process: p.base_value(ch.id, at))
            for cid, v in process.step(t, playback.overrides.get(site)).items():
                ch = self.config.site(site).channel(cid)
                out.append(judge_value(v, time=now, site=site, channel=cid, unit=ch.unit,
                                       valid_min=ch.valid_min, valid_max=ch.valid_max))
        return out

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by __exit__ / __enter__
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        db = self.config.daemon.historian
        historian = Historian(path=db, commit_interval=0.05)
        await historian.start()
        episodes = EpisodeStore(path=db)
        checks = CheckEngine.for_config(self.config)
        specs = alarm_specs(self.config.sites, None)
        engine = AlarmEngine(path=db, alarms=[*specs, *(obligation_alarm_specs(self.config.sites)
                                                         if self.obligations else [])], now=time.time())
        watch = ObligationWatch(sites=self.config.sites if self.obligations else [], journal=engine.journal,
                                every=0.0)
        commands = CommandQueue(path=db)
        started, last_health = time.time(), 0.0
        try:
            self.ready.set()
            while not self.stop.is_set():
                samples: list[Sample] = []
                while not self.inbox.empty():  # first: they were stamped before this tick's played values
                    samples += self.inbox.get()
                samples += self._played()
                now = time.time()
                if samples:
                    historian.submit(samples)
                    events = checks.process_many(samples)
                    if events:
                        episodes.record(events)
                        self.transitions += engine.apply_many([to_input(e) for e in events], now)
                        watch.on_episodes(events, now)
                self.transitions += apply_pending(commands, engine, now)
                self.transitions += engine.apply_many(watch.inputs(now, condition_of(engine)), now)
                self.transitions += engine.tick(now)
                if now - last_health >= 0.5:
                    last_health = now
                    _write_health(db, historian, started)
                await asyncio.sleep(self.tick)
        finally:
            await historian.close()
            commands.close()
            engine.close()
            episodes.close()


def _write_health(db: Path, historian: Historian, started: float) -> None:
    """A health snapshot as `monitor.health.HealthWriter` writes it (MQTT instruments: ``streaming``)."""
    h = historian.counters
    snap = {"time": time.time(), "uptime_s": round(time.time() - started, 1), "pid": os.getpid(), "instruments": {},
            "links": {}, "streaming": {}, "stale_channels": [], "episode_events": 0, "influx": None,
            "historian": {"samples_written": h.samples_written, "batches": h.batches,
                          "write_errors": h.write_errors, "queue_depth": h.queue_depth}}
    path = health_path(db)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(snap))
    os.replace(tmp, path)


# ---- the daemon's reports ------------------------------------------------------------------------------------

REPORT_PDF = b"%PDF-1.4\n%" + bytes(range(256)) + b"\n%%EOF\n"  # every byte value: a download must alter none
ACME_PDF = f"{ACME}_2026-01-01_2026-06-30.pdf"
ACME_HTML = f"{ACME}_2026-01-01_2026-06-30.html"
REPORT_DAY = date(2026, 7, 1)


def write_reports(config: SiteConfig) -> dict[str, Path]:
    """Reports in the daemon's reports folder (`schedule.reports_dir`) as its jobs leave them: Bolt's daily
    summary written by the real job (JSON and CSV), ACME's periodic report as PDF and HTML; and what must never be
    listed or served: a half-written temporary file, a file of a format not served, and a symbolic link out of
    the folder to the site file. Times written, newest first: ACME's PDF, ACME's HTML, Bolt's daily files."""
    root = reports_dir(config)
    now = time.time()
    daily = write_daily(config, config.site(BOLT), REPORT_DAY, root, now=now)
    periodic = root / ACME / "periodic"
    periodic.mkdir(parents=True, exist_ok=True)
    files = {"pdf": periodic / ACME_PDF, "html": periodic / ACME_HTML, "json": daily[0], "csv": daily[1]}
    files["pdf"].write_bytes(REPORT_PDF)
    files["html"].write_text("<!doctype html><title>ACME</title><p>Periodic compliance report</p>", encoding="utf-8")
    for age, key in enumerate(("pdf", "html", "json", "csv")):
        os.utime(files[key], (now - 600 * (age + 1), now - 600 * (age + 1)))
    (periodic / f".{ACME_PDF}.tmp").write_bytes(b"%PDF half written")
    (root / ACME / "daily").mkdir(parents=True, exist_ok=True)
    (root / ACME / "daily" / "notes.txt").write_text("not a report")
    assert config.source is not None
    (root / ACME / "daily" / "2026-07-02.csv").symlink_to(config.source)
    return files


# ---- the console ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def console(config: SiteConfig, users: Path, **options: Any) -> Iterator[tuple[str, Any]]:
    """The console app served by uvicorn on a free loopback port, in a thread: yields (base URL, app)."""
    options.setdefault("limiter", LoginLimiter())
    app = create_app(config=config, users_path=users, **options)
    server = ConsoleServer(app, host="127.0.0.1", port=free_port())
    server.start_in_thread()
    try:
        yield f"http://127.0.0.1:{server.config.port}", app
    finally:
        server.stop_thread()


def browser_login(browser: Any, base: str, user: str, viewport: dict[str, int]) -> Any:
    """A Chromium page logged in as ``user`` through the login form (the page the login lands on)."""
    page = browser.new_page(viewport=viewport)
    page.goto(base + "/")
    page.fill("#username", user)
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return page


def login(base: str, name: str, password: str = PASSWORD) -> httpx.Client:
    """An httpx client logged in through the real login form (CSRF cookie and field, session cookie)."""
    client = httpx.Client(base_url=base, timeout=10.0)
    r = client.post("/login", data={"username": name, "password": password, "csrf": login_token(client),
                                    "next": "/"})
    assert r.status_code == 303, (r.status_code, r.text[:300])
    return client


def login_token(client: httpx.Client) -> str:
    page = client.get("/login")
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m is not None, page.text[:300]
    return m.group(1)


def csrf(client: httpx.Client) -> str:
    return str(client.get("/api/me").json()["csrf"])


def load(path: Path) -> SiteConfig:
    return load_config(path)
