"""`SiteSimulator`: every instrument of a site configuration, served on its configured link and kept moving.

Modbus instruments are served by `simulators.modbus_server.ModbusSimServer` (one server per link, i.e. per
``Instrument.link_key``); MQTT instruments publish through `simulators.mqtt_publisher.MqttSimInstrument`.
Every ``tick`` seconds of wall time the simulator advances simulated time by ``tick × speed``, fires the
scenario steps that are due, evaluates each site's process models (`simulators.process.SiteProcess`), and
pushes the values: Modbus registers are updated every tick (a poll always reads the latest), MQTT
instruments publish every ``Instrument.poll_interval`` seconds of *wall* time, the interval the daemon
expects, so its staleness windows hold at any speed.

Ground truth: `served` keeps, per (site, channel), the last value put on the wire in engineering units,
exactly as a correct reader must decode it (integer rounding and float32 precision included), with the
simulated and wall times and the instrument's fault at that moment. Tests compare the daemon against it.

MQTT timestamps are *wall-clock* time (``clocks.wall()``), not simulated time: the daemon stamps Modbus
readings on arrival, and both kinds must agree. At ``speed`` > 1 a scenario's 15-minute slug therefore
lasts 15 min / speed of daemon time; checks with durations must be configured (or clocked) accordingly.
Under the demonstration clock (`monitor.clock`, what ``make demo`` uses) simulator and daemon share one
simulated time: the scenario's seconds are that clock's seconds, ``speed`` is ignored, and MQTT instruments
publish every ``poll_interval`` of simulated time, so a 15-minute slug is 15 minutes in the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any, TextIO

from config.maps import unit_code
from config.schema import Channel, DriverKind, Instrument, RegisterPoint, SiteConfig
from monitor import clock as clocks
from simulators.encoding import Raw, served_value, to_raw
from simulators.mqtt_publisher import MqttSimInstrument
from simulators.playback import Playback, ResolvedStep, day_offset, point_of, resolve, short_steps
from simulators.process import SiteProcess
from simulators.scenario import NORMAL, FaultKind, Scenario, load_scenario

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Served:
    """One value put on the wire, in engineering units as a correct reader decodes it (NaN if NaN was
    served: a reader must turn that into a bad sample, never a number)."""

    value: float
    sim_time: float  # simulated seconds since the start
    wall_time: float  # time.time() when it was pushed
    fault: str  # the instrument's fault in force ("none", "silent", "exception", "garbage")


@dataclass(frozen=True, slots=True)
class _Route:
    """Where one channel's value goes, compiled once."""

    channel: Channel
    instrument: Instrument
    point: RegisterPoint | None  # None for MQTT
    device: Any = None  # the Modbus SimInstrument serving it


class SiteSimulator:
    """Serve and animate a whole `SiteConfig`. Use as ``async with SiteSimulator(...) as sim:``."""

    def __init__(self, *, config: SiteConfig, scenario: Scenario | None = None, speed: float = 1.0,
                 tick: float = 0.1, history: int = 0, clock: bool = True, mqtt_time_format: str = "iso",
                 now: float | None = None) -> None:
        """``speed``: simulated seconds per wall second. ``history``: how many served values to keep per
        channel (0 = only the last). ``clock=False`` leaves time to the caller (`advance`), for tests."""
        if speed <= 0 or tick <= 0:
            raise ValueError("speed and tick must be positive")
        self.config = config
        self.resolved = resolve(scenario or NORMAL, config)  # raises ConfigErrors
        self.scenario = self.resolved.scenario
        self.speed = speed
        self.tick = tick
        self.clock = clock
        now = clocks.wall() if now is None else now
        self.processes = {
            s.id: SiteProcess(site=s, seed=self.scenario.seed, params=self.resolved.params.get(s.id),
                              day_offset=day_offset(s, self.scenario.start_hour, now))
            for s in config.sites
        }
        self.playback = Playback(self.resolved)
        self.servers, self._server_of = _modbus_servers(config)
        self.publishers = {
            (i.site, i.id): MqttSimInstrument(instrument=i, channels=config.site(i.site).channels,
                                              time_format=mqtt_time_format)
            for i in config.instruments if i.driver is DriverKind.MQTT
        }
        self._routes = [
            _Route(channel=c, instrument=config.instruments_by_id[(c.site, c.instrument)],
                   point=point_of(config, c), device=self.device(c.site, c.instrument))
            for c in config.channels
        ]
        self._serve_units()
        self.served: dict[tuple[str, str], Served] = {}
        self.history: dict[tuple[str, str], deque[Served]] = {
            (c.site, c.id): deque(maxlen=history) for c in config.channels} if history else {}
        self.sim_time = 0.0
        self._next_publish: dict[tuple[str, str], float] = {}
        self._clamped: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._channels = {(c.site, c.id): c for c in config.channels}

    async def __aenter__(self) -> SiteSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start every server and publisher, serve t = 0, then (with ``clock``) keep time."""
        for warning in short_steps(self.resolved, self.config, self.speed):
            log.warning("%s", warning)
        try:
            for server in self.servers:
                await server.start()
            for pub in self.publishers.values():
                await pub.start()
        except BaseException:
            await self.stop()
            raise
        self.advance(0.0)
        if self.clock:
            self._ticker = asyncio.create_task(self._keep_time(), name="sim-clock")

    async def stop(self) -> None:
        """Stop the clock, pending restarts, publishers and servers (reverse order of start)."""
        tasks = [t for t in (self._ticker, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._ticker = None
        self._tasks.clear()
        for pub in self.publishers.values():
            await pub.stop()
        for server in self.servers:
            await server.stop()

    async def _keep_time(self) -> None:
        """Simulated time is derived from the wall clock, so a slow tick delays values but never drifts."""
        if clocks.demo() is not None:
            await self._keep_demo_time()
            return
        loop = asyncio.get_running_loop()
        t0 = loop.time() - self.sim_time / self.speed  # the wall moment of simulated t = 0
        while True:
            await asyncio.sleep(max(0.0, t0 + self.sim_time / self.speed + self.tick - loop.time()))
            try:
                self.advance((loop.time() - t0) * self.speed)
            except Exception:  # a bug must not freeze every instrument: say so loudly, keep time
                log.exception("simulator tick at t = %.1f s failed", self.sim_time)

    async def _keep_demo_time(self) -> None:
        """Scenario time follows the demonstration clock the daemon stamps its readings with."""
        t0 = clocks.wall() - self.sim_time
        while True:
            await asyncio.sleep(self.tick)
            try:
                self.advance(clocks.wall() - t0)
            except Exception:
                log.exception("simulator tick at t = %.1f s failed", self.sim_time)

    def advance(self, t: float) -> None:
        """Bring the simulation to simulated time ``t`` (seconds since start) and push every value."""
        t = max(t, self.sim_time)
        self.sim_time = t
        for rs in self.playback.due(t, self._current):
            log.info("scenario %s: %s at %gs: %s", self.scenario.name, rs.step.path, rs.step.at,
                     _describe(rs))
            if rs.step.fault is not None:
                self._apply_fault(rs)
            elif rs.step.register is not None:
                for inst in rs.instruments:
                    self.device(inst.site, inst.id).set(rs.step.register, rs.step.raw)
        values: dict[tuple[str, str], float] = {}
        for site_id, process in self.processes.items():
            for cid, v in process.step(t, self.playback.overrides.get(site_id)).items():
                values[(site_id, cid)] = v
        self._push(t, values)

    def _current(self, ch: Channel, at: float) -> float:
        return self.processes[ch.site].base_value(ch.id, at)

    def _push(self, t: float, values: dict[tuple[str, str], float]) -> None:
        wall = clocks.wall()
        outgoing: dict[tuple[str, str], dict[str, float]] = {}
        for r in self._routes:
            key = (r.channel.site, r.channel.id)
            raw, clamped = to_raw(r.channel, r.point, values[key])
            if clamped and key not in self._clamped:
                self._clamped.add(key)
                log.warning("channel %s/%s: %r does not fit register '%s'; serving %r",
                            *key, values[key], r.channel.point, raw)
            ikey = (r.instrument.site, r.instrument.id)
            if r.point is None:
                outgoing.setdefault(ikey, {})[r.channel.id] = float(raw)
                continue
            r.device.set(r.point.name, raw)
            self._record(key, raw, r.channel, t, wall, ikey)
        for ikey, vals in outgoing.items():
            if wall < self._next_publish.get(ikey, 0.0):
                continue
            pub = self.publishers[ikey]
            self._next_publish[ikey] = max(self._next_publish.get(ikey, wall) + pub.instrument.poll_interval,
                                           wall)
            if pub.connected:
                pub.publish(vals, wall)
                for cid, raw in vals.items():
                    self._record((ikey[0], cid), raw, self._channels[(ikey[0], cid)], t, wall, ikey)

    def _record(self, key: tuple[str, str], raw: Raw, ch: Channel, t: float, wall: float,
                ikey: tuple[str, str]) -> None:
        fault = self.playback.faults.get(ikey, FaultKind.NONE).value
        s = Served(value=served_value(ch, raw), sim_time=t, wall_time=wall, fault=fault)
        self.served[key] = s
        if self.history:
            self.history[key].append(s)

    def _apply_fault(self, rs: ResolvedStep) -> None:
        kind = rs.step.fault
        assert kind is not None
        for inst in rs.instruments:
            ikey = (inst.site, inst.id)
            if kind is FaultKind.RESTART:
                task = asyncio.create_task(self._restart(inst, rs.step.down / self.speed),
                                           name=f"sim-restart-{inst.site}-{inst.id}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif ikey in self.publishers:
                self.publishers[ikey].fault = _fault_value(type(self.publishers[ikey].fault), kind)
            else:
                device = self.device(*ikey)
                device.fault = _fault_value(type(device.fault), kind)

    def _serve_units(self) -> None:
        """A catalogue map's units registers hold the code of each channel's unit, as on a device set up for
        the site (`drivers.modbus.device_state` checks them); a test sets another code to see a mismatch."""
        for r in self._routes:
            rmap = r.instrument.register_map
            if r.device is None or r.point is None or rmap is None or not r.point.unit_point:
                continue
            code = unit_code(rmap.points[r.point.unit_point], r.channel.unit)
            if code is not None:
                r.device.set(r.point.unit_point, code)

    def device(self, site: str, instrument: str) -> Any:
        """The simulated Modbus device of an instrument (None for MQTT instruments): tests set its faults."""
        server = self._server_of.get((site, instrument))
        return None if server is None else server.device(f"{site}/{instrument}")

    async def _restart(self, inst: Instrument, down: float) -> None:
        """Take the instrument off the wire for ``down`` s: its Modbus server (every unit on that link: a
        gateway or bus power cycle; the pty pair stays, as a cable would) or its MQTT connection."""
        ikey = (inst.site, inst.id)
        log.info("restarting %s/%s (%s s off the wire)", inst.site, inst.id, f"{down:.3g}")
        try:
            if ikey in self.publishers:
                await self.publishers[ikey].stop()
                await asyncio.sleep(down)
                await self.publishers[ikey].start()
            else:
                await self._server_of[ikey].restart(down)
        except (OSError, ConnectionError, RuntimeError) as exc:  # e.g. the port was taken meanwhile
            log.error("restart of %s/%s failed: %s", inst.site, inst.id, exc)

    def value(self, channel: str, site: str | None = None) -> float:
        """The last value served on ``channel`` (engineering units); KeyError if none was served yet."""
        site = site or self.config.sites[0].id
        return self.served[(site, channel)].value

    def endpoints(self) -> list[str]:
        """One line per instrument saying where it is served, for the CLI and for newcomers."""
        lines = []
        for inst in self.config.instruments:
            name = f"{inst.site}/{inst.id}"
            if inst.driver is DriverKind.MQTT:
                pub = self.publishers[(inst.site, inst.id)]
                topics = ", ".join(t.topic for t in pub.topics)
                lines.append(f"{name}: publishing to {pub.where}: {topics}")
            elif inst.driver is DriverKind.MODBUS_RTU and inst.serial is not None:
                tty = os.path.normpath(inst.serial.port)
                lines.append(f"{name}: modbus_rtu unit {inst.unit_id} on {tty} (daemon's end of a pty pair)")
            else:
                where = self._server_of[(inst.site, inst.id)].where
                lines.append(f"{name}: {inst.driver.value} unit {inst.unit_id} on {where}")
        return lines


def _fault_value(enum_type: Any, kind: FaultKind) -> Any:
    """The device's own fault enum member for ``kind`` (looked up by name, e.g. SILENT)."""
    return enum_type[kind.name]


def _describe(rs: ResolvedStep) -> str:
    s = rs.step
    what = (f"fault {s.fault.value}" if s.fault is not None else f"register {s.register} = {s.raw:g}"
            if s.register is not None else "clear" if s.clear
            else f"value {s.value:g}" if s.value is not None else f"ramp to {s.to:g} over {s.over:g}s")
    targets = [f"{c.site}/{c.id}" for c in rs.channels] + [f"{i.site}/{i.id}" for i in rs.instruments]
    return f"{what} on {', '.join(targets)}"


def _modbus_servers(config: SiteConfig) -> tuple[list[Any], dict[tuple[str, str], Any]]:
    """One server per link; and (site, instrument) -> its server."""
    links: dict[str, list[Instrument]] = {}
    for inst in config.instruments:
        if inst.driver.is_modbus:
            links.setdefault(inst.link_key, []).append(inst)
    servers: list[Any] = []
    server_of: dict[tuple[str, str], Any] = {}
    if not links:
        return servers, server_of
    from simulators.modbus_server import ModbusSimServer  # pymodbus only when Modbus is served

    for instruments in links.values():
        made = ModbusSimServer.for_instruments(instruments)
        if len(made) != 1:
            raise RuntimeError(f"expected one simulator server for link {instruments[0].link_key}, "
                               f"got {len(made)}")
        servers.append(made[0])
        for inst in instruments:
            server_of[(inst.site, inst.id)] = made[0]
    return servers, server_of


async def run_sim(config: SiteConfig, *, scenario: str | None, speed: float, duration: float | None,
                  stop: asyncio.Event | None = None, tick: float = 0.1, out: TextIO | None = None) -> None:
    """Serve ``config`` playing ``scenario`` (a shipped name or a path; None = normal) until ``duration``
    simulated seconds have passed (None = forever) or ``stop`` is set. Raises `ConfigErrors` for a bad
    scenario, `OSError`/`ConnectionError` when a port cannot be bound or a broker is unreachable."""
    loaded = load_scenario(scenario) if scenario else None
    out = out or sys.stdout
    sim = SiteSimulator(config=config, scenario=loaded, speed=speed, tick=tick)
    async with sim:
        desc = f" ({sim.scenario.description})" if sim.scenario.description else ""
        demo = clocks.demo()
        pace = clocks.describe(demo) if demo is not None else f"at speed {speed:g}"
        print(f"pretreat sim: scenario '{sim.scenario.name}'{desc}, {pace}", file=out)
        for line in sim.endpoints():
            print(f"  {line}", file=out)
        out.flush()
        waiters: list[asyncio.Task[Any]] = [
            asyncio.create_task((stop or asyncio.Event()).wait(), name="sim-stop")]
        if duration is not None:
            waiters.append(asyncio.create_task(asyncio.sleep(duration / speed), name="sim-duration"))
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        if duration is not None and waiters[-1] in done:
            sim.advance(duration)  # end exactly at the requested simulated time, whatever the tick
        print(f"pretreat sim: stopping at simulated t = {sim.sim_time:.1f} s", file=out)
