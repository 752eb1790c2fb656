"""Simulated Modbus instruments: one pymodbus server per link, serving every unit id configured on it.

A link is what `Instrument.link_key` names: a Modbus TCP host:port (``ModbusTcpServer``), an RTU-over-TCP
gateway (``ModbusTcpServer`` with the RTU framer), or a serial bus (``ModbusSerialServer``, RTU framer, on a
pseudo-terminal pair made by ``socat``). Register contents follow each instrument's register map, so the
daemon's driver reads the simulator exactly as it would read the real device.

**Serial ends.** For a ``modbus_rtu`` link the simulator creates the pty pair itself:
``Instrument.serial.port`` is the *daemon's* end (what the site file names and the driver opens) and
``<that path>.sim`` is the simulator's end. Both are symlinks made by socat and removed when it stops.

**How values and faults reach the wire.** Each device is a ``pymodbus.simulator.SimDevice`` with four
separate tables (coils, discrete inputs, holding, input registers; bits addressed one by one) spanning the
register map's points, read-only, gaps served as zeros so that the driver's gap-bridging block reads work.
`SimInstrument` keeps its own register image, the source of truth, which survives a server restart; the
device's async ``action`` hook (the documented way to feed dynamic values) copies that image into the response
and applies the fault:

- ``SILENT``: the hook raises ``NoSuchIdException`` and the server runs with ``ignore_missing_devices=True``,
  so pymodbus sends nothing (without that flag it would answer exception 4); neighbours on the bus are not
  affected.
- ``EXCEPTION``: the hook returns the exception code (``SimInstrument.exception_code``, default 4).
- ``GARBAGE``: a server ``trace_pdu`` hook drops the last register (or the last byte of bits) of every reply
  of that unit: a well-framed but short answer, which a correct master must reject. Non-numbers are
  values, not faults: ``set(point, math.nan)`` on a float point, or a value outside the channel's range.

An unknown unit id stays silent on RTU links (like a real RS-485 bus) and gets exception 11 (gateway target
failed to respond) on Modbus TCP, through a catch-all device 0 (unless an instrument uses unit id 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from pymodbus.constants import ExcCodes
from pymodbus.exceptions import NoSuchIdException
from pymodbus.framer import FramerType
from pymodbus.pdu import ModbusPDU
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from config.schema import DriverKind, Instrument, RegisterPoint, Table
from drivers.modbus.codec import decoder_for, encode

_FC_OF_TABLE = {Table.COIL: 1, Table.DISCRETE: 2, Table.HOLDING: 3, Table.INPUT: 4}
_SIMDEVICE_ORDER = (Table.COIL, Table.DISCRETE, Table.HOLDING, Table.INPUT)  # SimDevice's tuple order


class SimFault(StrEnum):
    """What a simulated instrument does instead of answering normally."""

    NONE = "none"
    SILENT = "silent"  # no reply at all: the master's request times out
    EXCEPTION = "exception"  # a Modbus exception response (SimInstrument.exception_code)
    GARBAGE = "garbage"  # a well-framed reply with the wrong length


class _Image:
    """One table of one device: registers, or bits packed 16 per register (bit 0 = least significant)."""

    def __init__(self, table: Table, points: list[RegisterPoint]) -> None:
        self.table = table
        first = min(p.address for p in points)
        end = max(p.end for p in points)
        self.base = first - first % 16 if table.is_bits else first
        size = -(-(end - self.base) // 16) if table.is_bits else end - self.base
        self.regs = [0] * size

    def simdata(self) -> SimData:
        if self.table.is_bits:
            return SimData(address=self.base, values=[False] * (16 * len(self.regs)), datatype=DataType.BITS,
                           readonly=True)
        return SimData(address=self.base, count=len(self.regs), values=0, datatype=DataType.REGISTERS,
                       readonly=True)

    def set_bit(self, address: int, on: bool) -> None:
        reg, bit = divmod(address - self.base, 16)
        self.regs[reg] = self.regs[reg] | (1 << bit) if on else self.regs[reg] & ~(1 << bit)

    def bit(self, address: int) -> bool:
        reg, bit = divmod(address - self.base, 16)
        return bool(self.regs[reg] >> bit & 1)


def _placeholder(table: Table) -> SimData:
    """SimDevice needs a non-empty list per table; the action answers illegal address for tables unused."""
    if table.is_bits:
        return SimData(address=0, values=[False] * 16, datatype=DataType.BITS, readonly=True)
    return SimData(address=0, count=1, datatype=DataType.INVALID)


class SimInstrument:
    """One simulated device. `set` and `fault` take effect for the next request it receives."""

    def __init__(self, *, instrument: Instrument) -> None:
        if instrument.register_map is None:
            raise ValueError(f"instrument {instrument.id!r} has no register map to simulate")
        self.instrument = instrument
        self.unit_id = instrument.unit_id
        self.fault = SimFault.NONE
        self._exception_code = ExcCodes.DEVICE_FAILURE
        self.requests = 0  # requests that reached this device's registers (answered or not)
        self._points = instrument.register_map.points
        by_table: dict[Table, list[RegisterPoint]] = {}
        for p in self._points.values():
            by_table.setdefault(p.table, []).append(p)
        self._images = {_FC_OF_TABLE[t]: _Image(t, pts) for t, pts in by_table.items()}

    def __repr__(self) -> str:
        inst = self.instrument
        return f"SimInstrument({inst.site}/{inst.id}, unit {self.unit_id}, {self.fault.value})"

    @property
    def exception_code(self) -> int:
        """The exception code answered under `SimFault.EXCEPTION` (default 4, server device failure)."""
        return int(self._exception_code)

    @exception_code.setter
    def exception_code(self, code: int) -> None:
        self._exception_code = ExcCodes(code)  # ValueError for a code Modbus does not define

    def _point(self, name: str) -> RegisterPoint:
        try:
            return self._points[name]
        except KeyError:
            raise KeyError(f"{self.instrument.id}: no point {name!r} in its register map "
                           f"(has {sorted(self._points)})") from None

    def set(self, point: str, raw: float | int | bool) -> None:
        """Serve ``raw`` (device units, before the channel's scale and offset) for ``point`` from now on.

        Encoded per the register map (type, byte and word order); integer types round floats to the nearest
        integer; a value the type cannot hold raises `ValueError` (see `drivers.modbus.codec.encode`).
        """
        p = self._point(point)
        image = self._images[_FC_OF_TABLE[p.table]]
        words = encode(p, raw)
        if p.table.is_bits:
            image.set_bit(p.address, bool(words[0]))
        else:
            start = p.address - image.base
            image.regs[start : start + len(words)] = words

    def get(self, point: str) -> float:
        """The value currently served for ``point``, decoded as the driver would (NaN stays NaN)."""
        p = self._point(point)
        image = self._images[_FC_OF_TABLE[p.table]]
        if p.table.is_bits:
            return 1.0 if image.bit(p.address) else 0.0
        return float(decoder_for(p)(image.regs, p.address - image.base))

    def sim_device(self) -> SimDevice:
        """A fresh pymodbus device over this instrument's image (a new one per server start)."""
        tables: list[list[SimData]] = []
        for table in _SIMDEVICE_ORDER:
            image = self._images.get(_FC_OF_TABLE[table])
            tables.append([image.simdata() if image else _placeholder(table)])
        return SimDevice(id=self.unit_id, simdata=(tables[0], tables[1], tables[2], tables[3]),
                         action=self._action)

    async def _action(self, function_code: int, _start: int, _address: int, _count: int,
                      registers: list[int], _set_values: list[int] | list[bool] | None) -> ExcCodes | None:
        """pymodbus calls this for every request that passed its address checks, before answering."""
        self.requests += 1
        fault = self.fault
        if fault is SimFault.SILENT:
            raise NoSuchIdException(f"unit {self.unit_id} is simulating a silent device")
        if fault is SimFault.EXCEPTION:
            return self._exception_code
        image = self._images.get(function_code)
        if image is None:
            return ExcCodes.ILLEGAL_ADDRESS
        registers[: len(image.regs)] = image.regs
        return None


class _PtyPair:
    """Two linked pseudo-terminals made by socat: the daemon opens ``daemon_end``, the server ``sim_end``."""

    def __init__(self, daemon_end: str) -> None:
        self.daemon_end = Path(daemon_end)
        self.sim_end = Path(f"{daemon_end}.sim")
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        socat = shutil.which("socat")
        if socat is None:
            raise RuntimeError("simulating a serial bus needs socat (apt-get install -y socat)")
        for end in (self.daemon_end, self.sim_end):
            end.parent.mkdir(parents=True, exist_ok=True)
            if end.is_symlink():  # left behind by a killed simulator
                end.unlink()
        self._proc = await asyncio.create_subprocess_exec(
            socat, f"pty,raw,echo=0,link={self.sim_end}", f"pty,raw,echo=0,link={self.daemon_end}",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
        for _ in range(500):  # socat makes both links within milliseconds
            if self.sim_end.exists() and self.daemon_end.exists():
                return
            if self._proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        _, err = await self._stop_process()
        raise RuntimeError(f"socat could not make the pty pair {self.daemon_end}: {err.decode().strip()}")

    async def _stop_process(self) -> tuple[bytes, bytes]:
        proc, self._proc = self._proc, None
        if proc is None:
            return b"", b""
        if proc.returncode is None:
            proc.terminate()
        try:
            return await asyncio.wait_for(proc.communicate(), 5)
        except TimeoutError:
            proc.kill()
            return await proc.communicate()

    async def stop(self) -> None:
        await self._stop_process()
        for end in (self.daemon_end, self.sim_end):
            if end.is_symlink():
                end.unlink()


class ModbusSimServer:
    """The simulated devices of one link. Build with `for_instruments`; `start`, `stop`, `restart`."""

    def __init__(self, *, instruments: Sequence[Instrument]) -> None:
        if not instruments:
            raise ValueError("a simulated link needs at least one instrument")
        first = instruments[0]
        if not first.driver.is_modbus or any(i.link_key != first.link_key for i in instruments):
            raise ValueError("instruments of one ModbusSimServer must be Modbus instruments on one link")
        self.link_key = first.link_key
        self.kind = first.driver
        self.host = first.host or "127.0.0.1"
        self._port = first.port
        self._serial = first.serial
        self.devices = tuple(SimInstrument(instrument=i) for i in instruments)
        self._by_unit = {d.unit_id: d for d in self.devices}
        self._server: ModbusTcpServer | ModbusSerialServer | None = None
        self._pty = _PtyPair(first.serial.port) if first.serial is not None else None

    @classmethod
    def for_instruments(cls, instruments: Sequence[Instrument]) -> list[ModbusSimServer]:
        """One server per `Instrument.link_key` among the Modbus instruments given (others are ignored)."""
        links: dict[str, list[Instrument]] = {}
        for inst in instruments:
            if inst.driver.is_modbus:
                links.setdefault(inst.link_key, []).append(inst)
        return [cls(instruments=group) for group in links.values()]

    def __repr__(self) -> str:
        return f"ModbusSimServer({self.link_key!r}, units {sorted(self._by_unit)})"

    @property
    def port(self) -> int:
        """The TCP port served (the real bound one once started if the configured one was 0); 0 for RTU."""
        return 0 if self._pty is not None else self._port

    @property
    def where(self) -> str:
        """Where the daemon reaches this link: ``host:port`` or the daemon's end of the pty pair."""
        return str(self._pty.daemon_end) if self._pty is not None else f"{self.host}:{self._port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def device(self, instrument_id: str) -> SimInstrument:
        """The simulated device of an instrument, by id (or ``site/id`` when two sites share the link)."""
        found = [d for d in self.devices
                 if instrument_id in (d.instrument.id, f"{d.instrument.site}/{d.instrument.id}")]
        if len(found) != 1:
            names = [f"{d.instrument.site}/{d.instrument.id}" for d in self.devices]
            raise KeyError(f"{instrument_id!r} names {len(found)} instruments on {self.link_key} "
                           f"(has {names})")
        return found[0]

    async def start(self) -> None:
        """Serve (and, for RTU, make the pty pair first). Restarting binds the same TCP port as before."""
        if self._pty is not None:
            await self._pty.start()
        try:
            await self._start_server()
        except BaseException:
            if self._pty is not None:
                await self._pty.stop()
            raise

    async def stop(self) -> None:
        """Stop serving, drop every connection, and remove the pty pair."""
        await self._stop_server()
        if self._pty is not None:
            await self._pty.stop()

    async def restart(self, downtime: float = 0.0) -> None:
        """A power cycle: connections drop, nothing answers for ``downtime`` s, then the same devices serve
        again (same port, same register contents). On a serial bus the pty pair stays, as the cable would."""
        await self._stop_server()
        await asyncio.sleep(downtime)
        await self._start_server()

    async def _start_server(self) -> None:
        if self._server is not None:
            return
        devices = [d.sim_device() for d in self.devices]
        if 0 not in self._by_unit:
            everything = SimData(address=0, count=65536, datatype=DataType.REGISTERS)
            devices.append(SimDevice(id=0, simdata=[everything], action=self._unknown_unit))
        server: ModbusTcpServer | ModbusSerialServer
        if self._pty is not None and self._serial is not None:
            s = self._serial
            server = ModbusSerialServer(devices, framer=FramerType.RTU, port=str(self._pty.sim_end),
                                        baudrate=s.baudrate, bytesize=s.bytesize, parity=s.parity,
                                        stopbits=s.stopbits, ignore_missing_devices=True,
                                        trace_pdu=self._trace_pdu)
        else:
            framer = FramerType.RTU if self.kind is DriverKind.MODBUS_RTU_OVER_TCP else FramerType.SOCKET
            server = ModbusTcpServer(devices, framer=framer, address=(self.host, self._port),
                                     ignore_missing_devices=True, trace_pdu=self._trace_pdu)
        try:
            await server.serve_forever(background=True)
        except RuntimeError as exc:
            raise RuntimeError(f"cannot serve {self.link_key} at {self.where}: {exc}") from exc
        if self._pty is None:
            self._port = int(server.transport.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        self._server = server

    async def _stop_server(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown()
            await asyncio.sleep(0)  # let the closed connections' callbacks run before a restart

    async def _unknown_unit(self, *_args: object) -> ExcCodes | None:
        if self.kind is DriverKind.MODBUS_TCP:
            return ExcCodes.GATEWAY_NO_RESPONSE
        raise NoSuchIdException("no such unit on this bus")

    def _trace_pdu(self, sending: bool, pdu: ModbusPDU) -> ModbusPDU:
        """Server-side hook on every PDU: shortens the replies of devices under `SimFault.GARBAGE`."""
        if sending:
            dev = self._by_unit.get(pdu.dev_id)
            if dev is not None and dev.fault is SimFault.GARBAGE and not pdu.isError():
                if pdu.registers:
                    pdu.registers = list(pdu.registers)[:-1]
                elif pdu.bits:
                    pdu.bits = list(pdu.bits)[:-8]
        return pdu


async def _serve(path: str) -> int:
    """Serve every Modbus instrument of a site file with all registers zero until SIGINT/SIGTERM.

    A bare, static server for benchmarks and for poking with mbpoll; `pretreat sim` is the full simulator
    (process models, scenarios, MQTT instruments).
    """
    from config.loader import load_config

    servers = ModbusSimServer.for_instruments(load_config(path).instruments)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        for s in servers:
            await s.start()
            print(f"serving {s.link_key} at {s.where}: units {sorted(s._by_unit)}", flush=True)
        print("READY", flush=True)
        await stop.wait()
    finally:
        for s in servers:
            await s.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulators.modbus_server", description=_serve.__doc__)
    parser.add_argument("config", help="site file whose Modbus instruments to serve")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(_serve(args.config))
    return 130


if __name__ == "__main__":
    sys.exit(main())
