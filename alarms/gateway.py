"""The Modbus TCP gateway: the daemon serves current values and alarms to the plant's SCADA or annunciator PLC.

The ordinance wants the pH signal "transmitted … to the control building of the sewage treatment plant";
a plant PLC polls this server like any other Modbus device. Everything is read-only: a write is answered
with exception 2 (illegal data address). Acknowledging goes through the MQTT command topic or the CLI, with
a user name for the journal, never through an anonymous register write.

**Register map, layout version 1.** One Modbus unit id per site: the ``[gateway]`` table's ``first_unit``
(default 1) for the first site of the site file, +1 for each next one, unless ``[gateway.units]`` names a
unit id per site. Addresses are protocol addresses (0-based). Channels are numbered k = 0, 1, … in the site
file's order; alarms j = 0, 1, … in the order the site's rules are compiled (rule order, then channel order:
the order of ``Site.checks``). `pretreat gateway map --config FILE` prints the exact table for a site file.

Input registers (function 4), mirrored read-only in holding registers (function 3) for masters that only
read those:

====================  =====================================================================================
address               content
====================  =====================================================================================
0                     layout version (1)
1                     heartbeat: seconds since the gateway started, modulo 65536 (frozen = daemon stuck)
2, 3                  number of channels, number of alarms of this site
4                     active alarms (active or latched, acknowledged or not, in service)
5                     unacknowledged alarms (active, returned-to-normal or latched, not acknowledged)
6                     critical alarms active
7, 8                  alarms shelved, alarms out of service
9                     highest priority among active alarms: 0 none, 1 diagnostic, 2 low, 3 medium,
                      4 high, 5 critical
10–99                 reserved (0)
100 + 4k, 101 + 4k    channel k: current value, IEEE 754 float32 in the channel's engineering unit; high
                      word first (``word_order = "big"``, default) or low word first (``"little"``). NaN
                      whenever the quality is not good: a failed read is never a number here either.
102 + 4k              channel k: quality code: 0 good, 1 comm_failure, 2 device_exception, 3 decode_error,
                      4 bad_value, 5 out_of_range, 6 stale, 7 device_fault, 8 over_range (an LEL meter
                      above its span: the value register stays NaN), 9 maintenance, 10 unit_mismatch,
                      11 clock_skew (the historian's codes);
                      65535 = no reading since the daemon started
103 + 4k              channel k: age of that reading in whole seconds (65535 = none, or 65535 s or more)
2000 + j              alarm j: state code: 0 normal, 1 active-unacknowledged, 2 active-acknowledged,
                      3 returned-to-normal-unacknowledged, 4 latched-unacknowledged, 5 latched-acknowledged,
                      6 shelved, 7 out-of-service
====================  =====================================================================================

Discrete inputs (function 2), mirrored read-only in coils (function 1): bit 2j = alarm j active (as in
register 4), bit 2j + 1 = alarm j unacknowledged (as in register 5). Reading past the last used address of a
table is exception 2; an unknown unit id is exception 11 (gateway target device failed to respond).

A float32 carries about 7 significant digits: a totaliser above 16,777,216 loses its units digit here (the
historian keeps the full double). Values beyond float32 range become ±infinity. Ages are computed when a
request arrives, from the reading's own timestamp; the heartbeat likewise.

What the daemon calls: `ModbusGateway.update_sample` for every sample it records (good or bad),
`ModbusGateway.update_alarm` with each alarm's state (all of `AlarmEngine.states()` at start, then the
state of every alarm a transition touched); both are O(1) / O(alarms of one site) and never block.
"""

from __future__ import annotations

import functools
import logging
import math
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from alarms.model import AlarmKey, AlarmState, Priority, State, Transition
from config.gateway import GatewaySettings, check_layout
from config.schema import SiteConfig
from monitor.sample import QUALITY_CODES, Sample

log = logging.getLogger(__name__)

LAYOUT_VERSION = 1
CHANNEL_BASE, CHANNEL_STRIDE, ALARM_BASE = 100, 4, 2000
MAX_CHANNELS = (ALARM_BASE - CHANNEL_BASE) // CHANNEL_STRIDE  # 475 per site
MAX_ALARMS = 30_000
NO_READING = 65535
STATE_CODES = {State.NORMAL: 0, State.ACTIVE_UNACKED: 1, State.ACTIVE_ACKED: 2, State.RTN_UNACKED: 3,
               State.LATCHED_UNACKED: 4, State.LATCHED_ACKED: 5, State.SHELVED: 6, State.OUT_OF_SERVICE: 7}
PRIORITY_CODES = {Priority.DIAGNOSTIC: 1, Priority.LOW: 2, Priority.MEDIUM: 3, Priority.HIGH: 4,
                  Priority.CRITICAL: 5}
ACTIVE = frozenset({State.ACTIVE_UNACKED, State.ACTIVE_ACKED, State.LATCHED_UNACKED, State.LATCHED_ACKED})


# ---- the address plan ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SiteLayout:
    site: str
    unit: int
    channels: tuple[str, ...]  # channel k -> id
    alarms: tuple[str, ...]  # alarm j -> "site/channel/rule"


def plan(config: SiteConfig, settings: GatewaySettings) -> list[SiteLayout]:
    """The deterministic address plan: ValueError if a site exceeds the map or unit ids clash."""
    problems = check_layout(sites=[s.id for s in config.sites], settings=settings)
    if problems:
        raise ValueError("; ".join(f"{w}: {v!r} (expected {e})" for w, (v, e) in problems))
    out = []
    for i, s in enumerate(config.sites):
        alarms = tuple(dict.fromkeys(AlarmKey(b.site, b.channel, b.rule).id for b in s.checks))
        if len(s.channels) > MAX_CHANNELS or len(alarms) > MAX_ALARMS:
            raise ValueError(f"site {s.id}: {len(s.channels)} channels / {len(alarms)} alarms exceed the "
                             f"gateway map ({MAX_CHANNELS} / {MAX_ALARMS})")
        out.append(SiteLayout(site=s.id, unit=settings.units.get(s.id, settings.first_unit + i),
                              channels=tuple(c.id for c in s.channels), alarms=alarms))
    return out


def register_table(config: SiteConfig, settings: GatewaySettings, *, fmt: str = "table") -> str:
    """What `pretreat gateway map` prints: every address with its content, per unit id."""
    units = {s.id: {c.id: c.unit for c in s.channels} for s in config.sites}
    rows: list[tuple[str, int, str, int, str, str]] = []
    for lay in plan(config, settings):
        summary = ["layout version", "heartbeat (s, mod 65536)", "channels", "alarms", "alarms active",
                   "alarms unacknowledged", "critical alarms active", "alarms shelved", "alarms out of service",
                   "highest active priority (0-5)"]
        rows += [(lay.site, lay.unit, "input+holding", a, "uint16", what) for a, what in enumerate(summary)]
        for k, ch in enumerate(lay.channels):
            a = CHANNEL_BASE + CHANNEL_STRIDE * k
            rows += [(lay.site, lay.unit, "input+holding", a, f"float32 ({settings.word_order} word order)",
                      f"{ch} value [{units[lay.site][ch]}]"),
                     (lay.site, lay.unit, "input+holding", a + 2, "uint16", f"{ch} quality code"),
                     (lay.site, lay.unit, "input+holding", a + 3, "uint16", f"{ch} age (s)")]
        for j, alarm in enumerate(lay.alarms):
            rows += [(lay.site, lay.unit, "input+holding", ALARM_BASE + j, "uint16", f"{alarm} state code"),
                     (lay.site, lay.unit, "discrete+coil", 2 * j, "bit", f"{alarm} active"),
                     (lay.site, lay.unit, "discrete+coil", 2 * j + 1, "bit", f"{alarm} unacknowledged")]
    if fmt == "csv":
        lines = ["site,unit,table,address,type,content"]
        lines += [",".join([s, str(u), t, str(a), ty, f'"{c}"' if "," in c else c]) for s, u, t, a, ty, c in rows]
        return "\n".join(lines) + "\n"
    head = f"Modbus TCP gateway, layout version {LAYOUT_VERSION}, {settings.host}:{settings.port}\n"
    body = [f"{s:<16} {u:>4}  {t:<14} {a:>5}  {ty:<26} {c}" for s, u, t, a, ty, c in rows]
    title = f"{'SITE':<16} {'UNIT':>4}  {'TABLE':<14} {'ADDR':>5}  {'TYPE':<26} CONTENT"
    return "\n".join([head.rstrip("\n"), title, *body]) + "\n"


# ---- the server ------------------------------------------------------------------------------------------

class _Image:
    """One site's registers and bits, kept current by the update calls; requests copy from here."""

    def __init__(self, lay: SiteLayout, big_words: bool) -> None:
        self.lay = lay
        self.big_words = big_words
        self.regs = [0] * (ALARM_BASE + max(1, len(lay.alarms)))
        self.bits = [0] * max(1, -(-2 * len(lay.alarms) // 16))  # 16 bits per register, bit 0 = LSB
        self.regs[0], self.regs[2], self.regs[3] = LAYOUT_VERSION, len(lay.channels), len(lay.alarms)
        self.read_at: list[float | None] = [None] * len(lay.channels)  # the reading's own time
        self.alarms: dict[str, tuple[State, Priority]] = {a: (State.NORMAL, Priority.HIGH) for a in lay.alarms}
        self.index = {a: j for j, a in enumerate(lay.alarms)}
        for k in range(len(lay.channels)):
            self.set_value(k, None, NO_READING, None)

    def set_value(self, k: int, value: float | None, quality: int, at: float | None) -> None:
        a = CHANNEL_BASE + CHANNEL_STRIDE * k
        v = math.nan if value is None else value
        try:
            hi, lo = struct.unpack(">HH", struct.pack(">f", v))
        except OverflowError:  # beyond float32: the sign survives, the magnitude cannot
            hi, lo = struct.unpack(">HH", struct.pack(">f", math.copysign(math.inf, v)))
        self.regs[a:a + 3] = [hi, lo, quality] if self.big_words else [lo, hi, quality]
        self.read_at[k] = at

    def set_alarm(self, alarm: str, state: State, priority: Priority) -> None:
        j = self.index[alarm]
        self.alarms[alarm] = (state, priority)
        self.regs[ALARM_BASE + j] = STATE_CODES[state]
        for bit, on in ((2 * j, state in ACTIVE), (2 * j + 1, state.unacknowledged)):
            reg, b = divmod(bit, 16)
            self.bits[reg] = self.bits[reg] | (1 << b) if on else self.bits[reg] & ~(1 << b)
        active = [(s, p) for s, p in self.alarms.values() if s in ACTIVE]
        self.regs[4:10] = [
            len(active), sum(1 for s, _p in self.alarms.values() if s.unacknowledged),
            sum(1 for _s, p in active if p is Priority.CRITICAL),
            sum(1 for s, _p in self.alarms.values() if s is State.SHELVED),
            sum(1 for s, _p in self.alarms.values() if s is State.OUT_OF_SERVICE),
            max((PRIORITY_CODES[p] for _s, p in active), default=0)]

    def refresh(self, now: float, started: float) -> None:
        """The time-dependent registers, at the moment a request arrives."""
        self.regs[1] = int(now - started) % 65536
        for k, at in enumerate(self.read_at):
            age = NO_READING if at is None else min(NO_READING, max(0, int(now - at)))
            self.regs[CHANNEL_BASE + CHANNEL_STRIDE * k + 3] = age


class ModbusGateway:
    """Serves the map above on ``host:port`` (port 0: any free port, see `port` once started).

    ``clock`` gives epoch seconds for ages and the heartbeat (tests pass their own). Not thread-safe: call
    the update methods from the event loop the server runs on.
    """

    def __init__(self, *, config: SiteConfig, host: str = "127.0.0.1", port: int = 5020, first_unit: int = 1,
                 units: dict[str, int] | None = None, word_order: str = "big",
                 clock: Callable[[], float] = time.time) -> None:
        if word_order not in ("big", "little"):
            raise ValueError(f"word_order must be 'big' or 'little', got {word_order!r}")
        self.settings = GatewaySettings(host=host, port=port, first_unit=first_unit, units=dict(units or {}),
                                        word_order=word_order)
        self.layout = plan(config, self.settings)
        self._images = [_Image(lay, word_order == "big") for lay in self.layout]
        self._by_channel = {(lay.site, ch): (img, k) for lay, img in zip(self.layout, self._images, strict=True)
                            for k, ch in enumerate(lay.channels)}
        self._by_alarm = {a: img for lay, img in zip(self.layout, self._images, strict=True) for a in lay.alarms}
        self._clock = clock
        self._started = clock()
        self._server: Any = None
        self._port = port
        self.counters = {"requests": 0, "unknown_samples": 0, "unknown_alarms": 0}

    @classmethod
    def from_settings(cls, config: SiteConfig, settings: GatewaySettings, **kw: Any) -> ModbusGateway:
        return cls(config=config, host=settings.host, port=settings.port, first_unit=settings.first_unit,
                   units=settings.units, word_order=settings.word_order, **kw)

    @property
    def port(self) -> int:
        return self._port

    def update_sample(self, sample: Sample) -> None:
        """Serve this reading (good: its value; bad: NaN and its quality code) from now on."""
        found = self._by_channel.get((sample.site, sample.channel))
        if found is None:
            self.counters["unknown_samples"] += 1
            return
        img, k = found
        img.set_value(k, sample.value if sample.good else None, QUALITY_CODES[sample.quality], sample.time)

    def update_alarm(self, state: AlarmState | Transition) -> None:
        """Serve an alarm's current state: an `AlarmState`, or a committed `Transition` (its ``to_state``)."""
        if isinstance(state, Transition):
            alarm_id, shown, priority = state.alarm_id, state.to_state, state.priority
        else:
            alarm_id, shown, priority = state.id, state.state, state.settings.priority
        img = self._by_alarm.get(alarm_id)
        if img is None:
            if self.counters["unknown_alarms"] == 0:
                log.warning("gateway: alarm %s is not in the register map (not a configured rule); ignored",
                            alarm_id)
            self.counters["unknown_alarms"] += 1
            return
        img.set_alarm(alarm_id, shown, priority)

    def update_alarms(self, states: Iterable[AlarmState | Transition]) -> None:
        for st in states:
            self.update_alarm(st)

    async def start(self) -> None:
        from pymodbus.server import ModbusTcpServer
        from pymodbus.simulator import DataType, SimData, SimDevice

        def regs(n: int) -> list[SimData]:
            return [SimData(address=0, count=n, values=0, datatype=DataType.REGISTERS, readonly=True)]

        def bits(n: int) -> list[SimData]:
            return [SimData(address=0, values=[False] * (16 * n), datatype=DataType.BITS, readonly=True)]

        devices = [SimDevice(id=lay.unit, simdata=(bits(len(img.bits)), bits(len(img.bits)), regs(len(img.regs)),
                                                   regs(len(img.regs))),
                             action=functools.partial(self._answer, img))
                   for lay, img in zip(self.layout, self._images, strict=True)]
        catch_all = SimData(address=0, count=65536, datatype=DataType.REGISTERS)
        devices.append(SimDevice(id=0, simdata=[catch_all], action=self._unknown_unit))
        server = ModbusTcpServer(devices, address=(self.settings.host, self.settings.port))
        await server.serve_forever(background=True)
        self._port = int(server.transport.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        self._server = server
        log.info("Modbus gateway serving %d site(s) on %s:%d (units %s)", len(self.layout), self.settings.host,
                 self._port, ", ".join(str(lay.unit) for lay in self.layout))

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()

    async def _answer(self, img: _Image, function_code: int, start: int, address: int, count: int,
                      registers: list[int], values: list[int] | list[bool] | None) -> Any:
        """pymodbus calls this for each request that passed its address checks. ``registers`` is the whole
        table, ``start`` its first address; for bit tables ``address`` is a bit address and ``count`` the
        number of 16-bit registers spanned. ``values`` is set for a write."""
        from pymodbus.constants import ExcCodes

        self.counters["requests"] += 1
        if values is not None:
            # Surprise (pymodbus 3.16.1, measured): writes to read-only registers are refused by pymodbus
            # itself, but a write to a read-only coil is passed to this hook and then answered as done. So
            # every write is refused here, whatever the table.
            return ExcCodes.ILLEGAL_ADDRESS
        if function_code in (1, 2):
            first = address // 16 - start
            registers[first:first + count] = img.bits[first:first + count]
            return None
        img.refresh(self._clock(), self._started)
        first = address - start
        registers[first:first + count] = img.regs[first:first + count]
        return None

    async def _unknown_unit(self, *_args: object) -> Any:
        from pymodbus.constants import ExcCodes

        return ExcCodes.GATEWAY_NO_RESPONSE
