"""One Modbus connection (a TCP socket or a serial bus) shared by every instrument on it.

What this module decides, and why:

- **One connection per `Instrument.link_key`.** Instruments behind one gateway or on one RS-485 bus share it.
- **Two clients.** Plain Modbus TCP links use our own client (`drivers.modbus.tcp_client`: a fraction of
  pymodbus's CPU per request, and replies matched by transaction id); RTU on a serial bus and RTU over TCP
  (gateways) use pymodbus. Everything below holds for both; where they differ, it says so.
- **One lock per link, for every kind of link.** On a serial bus (and behind an RTU-over-TCP gateway) only one
  transaction may be on the wire, followed by an idle time (the RTU 3.5-character gap, or the instrument's
  ``inter_frame_delay`` for slow slaves). On Modbus TCP our client does no pipelining either: one
  transaction at a time per connection, under this lock, each request carrying its own instrument's timeout.
- **Per-request timeout = `Instrument.timeout`, no client-side retries.** A dead device costs one timeout per
  request, never ``(retries + 1) × timeout``; the next poll is the retry. Surprise (pymodbus): the client
  copies its parameters into ``client.ctx.comm_params``, and ``execute()`` reads ``timeout_connect`` from that
  copy for every request, so that copy is what we set. Our TCP client takes the timeout with each request,
  and also connects within it.
- **We own reconnection.** pymodbus clients are built with ``reconnect_delay=0`` (pymodbus's own reconnect
  task is off), and pymodbus's own "close after retries+3 unanswered requests" is disabled
  (``set_max_no_responses``), because on a gateway one silent unit must not cost its neighbours the
  connection; our TCP client never reconnects nor closes on its own, except on a broken byte stream. A link
  is presumed broken when the connection is refused or lost (a lost connection fails the request in flight at
  once, not after its timeout), when a Modbus TCP stream breaks (a protocol id other than 0 or an absurd
  MBAP length: the request gets `DecodeFailure`), or (TCP only) when every unit on it has gone unanswered
  since the last reply and at least ``drop_after_timeouts`` requests in a row timed out. Then the client is
  discarded and a fresh one is connected on demand, paced by a capped, jittered exponential backoff (0.1 s
  doubling to 10 s by default); while waiting, reads fail at once instead of costing a timeout each.
  Reconnecting on demand, not in a background task, means no task to supervise and no attempts for a link
  nobody polls. An outage is logged once when it starts and once when the first reply arrives again (a TCP
  connect alone is not a recovery: a silent device accepts connections).
- **All client outcomes are folded here, once,** into `CommFailure` (nothing usable came back),
  `DeviceException` (the device answered with an exception code: a device result, not a reason to drop the
  link) and `DecodeFailure` (a reply of the wrong shape: function code, unit id, byte count, number of values).
- **Late replies.** On Modbus TCP a reply carries its request's transaction id: a reply that arrives after
  its request timed out is dropped by our client and counted (``LinkCounters.stray_replies``), never taken as
  the answer to the next request.

Known limit: RTU frames carry no transaction id, so a reply that arrives *after* its request timed out is
taken by pymodbus as the reply to the next request to the same unit. A different function code or length is
caught here (`DecodeFailure`); a late reply to another block of the same table and length is not. Give slow
devices a ``timeout`` longer than their worst reply time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pymodbus.client import AsyncModbusSerialClient, AsyncModbusTcpClient
from pymodbus.exceptions import ConnectionException, ModbusException
from pymodbus.framer import FramerType

from config.schema import DriverKind, Instrument, SerialSettings, Table
from drivers.backoff import retries
from drivers.modbus.tcp_client import BrokenStream, ConnectionLost, ExceptionReply, MalformedReply, ModbusTcpClient
from monitor.number_text import duration
from monitor.sample import Quality

log = logging.getLogger(__name__)

PymodbusClient = AsyncModbusTcpClient | AsyncModbusSerialClient  # RTU on a serial bus, RTU over TCP
Client = PymodbusClient | ModbusTcpClient  # ModbusTcpClient: plain Modbus TCP

_FUNCTION_CODE = {Table.COIL: 1, Table.DISCRETE: 2, Table.HOLDING: 3, Table.INPUT: 4}
_NEVER = 2**31  # "unanswered requests before pymodbus closes the connection": i.e. never, we decide


class ReadFailure(Exception):
    """A read that produced no values. ``quality`` is what the samples of the block become."""

    quality: Quality = Quality.COMM_FAILURE

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CommFailure(ReadFailure):
    """Nothing usable came back: timeout, refused or dropped connection, link waiting to reconnect."""

    quality = Quality.COMM_FAILURE


class DeviceException(ReadFailure):
    """The device answered with a Modbus exception response (``code``: 2 illegal address, 4 failure...)."""

    quality = Quality.DEVICE_EXCEPTION

    def __init__(self, detail: str, *, code: int) -> None:
        super().__init__(detail)
        self.code = code


class DecodeFailure(ReadFailure):
    """A reply came back but not of the shape asked for (short, long, wrong function)."""

    quality = Quality.DECODE_ERROR


@dataclass(slots=True)
class LinkCounters:
    """Plain counters for health reporting; they only grow."""

    requests: int = 0
    replies: int = 0  # any answer, exception responses included
    comm_failures: int = 0
    device_exceptions: int = 0
    decode_errors: int = 0
    connects: int = 0  # successful connects, the first one included
    reconnects: int = 0  # successful connects after a lost or failed connection
    connect_failures: int = 0
    outages: int = 0  # times the link was declared down (each logged once)
    stray_replies: int = 0  # Modbus TCP replies that answered no pending request (late, after a timeout): dropped


def bus_idle_time(instrument: Instrument) -> float:
    """Seconds the bus must stay quiet after a transaction with ``instrument``.

    RTU needs 3.5 character times of silence between frames (11 bits per character; a fixed 1.75 ms above
    19,200 baud, Modbus over serial line spec 2.5.1.1); a slow slave may need more (``inter_frame_delay``).
    Gateways (RTU over TCP) do their own serial timing, so only an explicit delay applies there.
    """
    if instrument.driver is DriverKind.MODBUS_RTU and instrument.serial is not None:
        baud = instrument.serial.baudrate
        t35 = 0.00175 if baud > 19200 else 3.5 * 11 / baud
        return max(t35, instrument.serial.inter_frame_delay)
    return instrument.serial.inter_frame_delay if instrument.serial is not None else 0.0


class ModbusLink:
    """A supervised connection; `read` is the only way drivers talk to a Modbus client.

    ``backoff_initial``/``backoff_max`` (s) pace reconnect attempts; ``drop_after_timeouts`` is how many
    unanswered requests in a row (from every unit on the link) make a TCP link presumed dead.
    """

    def __init__(
        self,
        *,
        key: str,
        kind: DriverKind,
        host: str = "",
        port: int = 0,
        serial: SerialSettings | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 10.0,
        drop_after_timeouts: int = 3,
        rng: random.Random | None = None,
    ) -> None:
        if not kind.is_modbus:
            raise ValueError(f"{key}: not a Modbus link ({kind.value})")
        quiet_pymodbus_logging()
        if kind is DriverKind.MODBUS_RTU and serial is None:
            raise ValueError(f"{key}: a Modbus RTU link needs serial settings")
        self.key = key
        self.kind = kind
        self.host = host
        self.port = port
        self.serial = serial
        self.counters = LinkCounters()
        self._drop_after = drop_after_timeouts
        self._rng = rng or random.Random()
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._units: set[int] = set()
        self._unanswered: set[int] = set()  # units that timed out since the last reply on this link
        self._timeouts_in_row = 0
        self._down_since: float | None = None  # monotonic time the current outage started
        self._retries = retries(backoff_max, initial=backoff_initial, rand=self._rng.random)  # drivers.backoff
        self._next_attempt = 0.0  # monotonic time before which no reconnect is tried
        self._quiet_until = 0.0  # monotonic time before which the bus must stay idle
        self._ever_connected = False
        self._closed = False
        self._warned_unexpected = False

    @classmethod
    def for_instrument(cls, instrument: Instrument, *, backoff_initial: float = 0.1,
                       backoff_max: float = 10.0, drop_after_timeouts: int = 3) -> ModbusLink:
        """The link an instrument's `link_key` describes (shared by every instrument with that key)."""
        return cls(key=instrument.link_key, kind=instrument.driver, host=instrument.host,
                   port=instrument.port, serial=instrument.serial, backoff_initial=backoff_initial,
                   backoff_max=backoff_max, drop_after_timeouts=drop_after_timeouts)

    def __repr__(self) -> str:
        return f"ModbusLink({self.key!r}, up={self.up})"

    @property
    def up(self) -> bool:
        """Connected and not in an outage (an outage ends with the first reply)."""
        return self._client is not None and self._client.connected and self._down_since is None

    def attach(self, unit: int) -> None:
        """Declare a unit id polled over this link (drivers call this), for the link-failure rule."""
        self._units.add(unit)

    async def read(self, *, unit: int, table: Table, address: int, count: int, reply_timeout: float,
                   idle_after: float = 0.0) -> Sequence[int]:
        """Read ``count`` registers (or bits) of ``table`` from ``unit``; raises a `ReadFailure` subclass.

        Registers come back as ints 0..65535; bits as bools, possibly padded past ``count`` to a multiple
        of eight (as on the wire). ``idle_after`` (s) keeps the bus quiet after the transaction: the next
        request on this link waits for it, so the caller gets its reply (and its timestamp) at once.
        """
        async with self._lock:
            quiet = self._quiet_until - time.monotonic()
            if quiet > 0:
                await asyncio.sleep(quiet)
            sent = self.counters.requests
            try:
                return await self._transact(unit, table, address, count, reply_timeout)
            finally:
                if idle_after > 0 and self.counters.requests != sent:
                    self._quiet_until = time.monotonic() + idle_after

    async def _transact(self, unit: int, table: Table, address: int, count: int,
                        reply_timeout: float) -> Sequence[int]:
        client = self._client
        if client is None or not client.connected or self._closed:  # connected: no coroutine to await
            try:
                client = await self._reconnect(reply_timeout)
            except CommFailure:
                self.counters.comm_failures += 1
                raise
        self.counters.requests += 1
        if type(client) is not ModbusTcpClient:
            return await self._transact_pymodbus(client, unit, table, address, count, reply_timeout)
        try:  # every outcome of our own Modbus TCP client is folded here, once
            values = await client.read(unit, _FUNCTION_CODE[table], address, count, reply_timeout)
        except ExceptionReply as exc:
            self._replied()
            raise self._device_exception(exc.code) from None
        except BrokenStream as exc:  # not a reply: the client has closed the connection
            self.counters.decode_errors += 1
            self._drop(f"broken stream: {exc.detail}")
            raise DecodeFailure(exc.detail) from None
        except MalformedReply as exc:
            self._replied()
            self.counters.decode_errors += 1
            raise DecodeFailure(exc.detail) from None
        except Exception as exc:  # timeout, connection lost
            raise self._no_reply(unit, exc, reply_timeout) from None
        self._replied()
        return self._counted(values, table, count)

    async def _transact_pymodbus(self, client: Client, unit: int, table: Table, address: int, count: int,
                                 reply_timeout: float) -> Sequence[int]:
        """`_transact` on a pymodbus client (RTU on a serial bus, RTU over TCP)."""
        assert not isinstance(client, ModbusTcpClient)
        params = client.ctx.comm_params
        if params.timeout_connect != reply_timeout:
            params.timeout_connect = reply_timeout
        try:
            if table is Table.HOLDING:
                rr = await client.read_holding_registers(address, count=count, device_id=unit)
            elif table is Table.INPUT:
                rr = await client.read_input_registers(address, count=count, device_id=unit)
            elif table is Table.COIL:
                rr = await client.read_coils(address, count=count, device_id=unit)
            else:
                rr = await client.read_discrete_inputs(address, count=count, device_id=unit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every transport outcome is folded here, once
            raise self._no_reply(unit, exc, reply_timeout) from None
        self._replied()
        if rr.isError():
            raise self._device_exception(rr.exception_code)
        if rr.function_code != _FUNCTION_CODE[table]:
            self.counters.decode_errors += 1
            raise DecodeFailure(f"reply has function code {rr.function_code}, asked {_FUNCTION_CODE[table]}")
        return self._counted(rr.bits if table.is_bits else rr.registers, table, count)

    def _counted(self, values: Sequence[int], table: Table, count: int) -> Sequence[int]:
        """``values`` if there are as many as asked (bits: padded to a byte at most), else `DecodeFailure`."""
        if table.is_bits:
            if not count <= len(values) < count + 8:
                self.counters.decode_errors += 1
                raise DecodeFailure(f"reply carries {len(values)} bits, asked {count}")
        elif len(values) != count:
            self.counters.decode_errors += 1
            raise DecodeFailure(f"reply carries {len(values)} registers, asked {count}")
        return values

    def _device_exception(self, code: int) -> DeviceException:
        self.counters.device_exceptions += 1
        name = _EXCEPTION_NAMES.get(code, "unknown")
        return DeviceException(f"exception code {code} ({name})", code=code)

    def _no_reply(self, unit: int, exc: Exception, reply_timeout: float) -> CommFailure:
        """Fold an exception raised by a request into a `CommFailure`, applying the link-failure rule."""
        self.counters.comm_failures += 1
        client = self._client
        expected = isinstance(exc, ModbusException | OSError | asyncio.TimeoutError)
        if not expected and not self._warned_unexpected:
            self._warned_unexpected = True  # a client surprise: say so once, with the traceback
            log.error("Modbus link %s: unexpected %s from the Modbus client", self.key, type(exc).__name__,
                      exc_info=exc)
        if isinstance(exc, ConnectionException | ConnectionLost) or client is None or not client.connected:
            self._drop(f"connection lost ({_describe(exc)})")
            return CommFailure(f"connection lost: {_describe(exc)}")
        self._timeouts_in_row += 1
        self._unanswered.add(unit)
        if (self.kind is not DriverKind.MODBUS_RTU and self._timeouts_in_row >= self._drop_after
                and self._unanswered >= self._units):
            self._drop(f"no reply from any unit in {self._timeouts_in_row} requests")
        return CommFailure(f"no reply within {reply_timeout:g} s")

    def _replied(self) -> None:
        self.counters.replies += 1
        self._timeouts_in_row = 0
        if self._unanswered:
            self._unanswered.clear()
        if self._down_since is not None:
            outage = time.monotonic() - self._down_since
            log.info("Modbus link %s recovered after %s", self.key, duration(outage),
                     extra={"link": self.key, "outage_s": outage})
            self._down_since = None
            self._retries.reset()

    def _stray(self, tid: int, unit: int) -> None:
        """Our Modbus TCP client dropped a reply that answers no pending request (late, after a timeout)."""
        self.counters.stray_replies += 1
        log.debug("Modbus link %s: dropped a stray reply (transaction %d, unit %d)", self.key, tid, unit)

    async def _reconnect(self, connect_timeout: float) -> Client:
        """A new connection, when the link has none that is up (`_transact` checks); raises `CommFailure`."""
        if self._closed:
            raise CommFailure("link closed")
        if self._client is not None:
            lost = self._client.closed_because if isinstance(self._client, ModbusTcpClient) else ""
            self._drop(f"connection lost ({lost})" if lost else "connection lost")
        now = time.monotonic()
        if now < self._next_attempt:
            raise CommFailure(f"link down, next reconnect attempt {reconnect_wait(self._next_attempt - now)}")
        client, why = await self._connect(connect_timeout)
        if client is None:
            self.counters.connect_failures += 1
            detail = f"cannot connect to {self._where()}" + (f" ({why})" if why else "")
            self._drop(detail)
            raise CommFailure(detail)
        self._client = client
        self.counters.connects += 1
        if self._ever_connected:
            self.counters.reconnects += 1
        self._ever_connected = True
        return client

    async def _connect(self, connect_timeout: float) -> tuple[Client | None, str]:
        """A connected client, or None and why not (when known)."""
        if self.kind is DriverKind.MODBUS_TCP:
            try:
                return await ModbusTcpClient.connect(self.host, self.port, connect_timeout=connect_timeout,
                                                     on_stray=self._stray), ""
            except TimeoutError:
                return None, f"no answer within {connect_timeout:g} s"
            except OSError as exc:
                return None, os.strerror(exc.errno).lower() if exc.errno else str(exc)
        client = self._new_pymodbus_client(connect_timeout)
        if await client.connect():
            return client, ""
        client.close()
        return None, ""

    def _drop(self, reason: str) -> None:
        """Discard the client, open (or continue) an outage, and schedule the next connect attempt."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._timeouts_in_row = 0
        self._unanswered.clear()
        if self._down_since is None:
            self._down_since = time.monotonic()
            self.counters.outages += 1
            log.warning("Modbus link %s down: %s; reconnecting with backoff", self.key, reason,
                        extra={"link": self.key, "reason": reason})
        self._next_attempt = time.monotonic() + self._retries.next()

    def _new_pymodbus_client(self, timeout: float) -> PymodbusClient:
        client: PymodbusClient
        if self.kind is DriverKind.MODBUS_RTU:
            s = self.serial
            assert s is not None  # checked in __init__
            client = AsyncModbusSerialClient(
                s.port, framer=FramerType.RTU, baudrate=s.baudrate, bytesize=s.bytesize, parity=s.parity,
                stopbits=s.stopbits, name=self.key, reconnect_delay=0, timeout=timeout, retries=0)
        else:
            client = AsyncModbusTcpClient(self.host, port=self.port, framer=FramerType.RTU, name=self.key,
                                          reconnect_delay=0, timeout=timeout, retries=0)
        client.set_max_no_responses(_NEVER)
        return client

    def _where(self) -> str:
        return self.serial.port if self.serial is not None else f"{self.host}:{self.port}"

    async def close(self) -> None:
        """Close the connection (after any transaction in flight); later reads fail with `CommFailure`."""
        async with self._lock:
            self._closed = True
            if self._client is not None:
                self._client.close()
                self._client = None


_EXCEPTION_NAMES = {
    1: "illegal function", 2: "illegal data address", 3: "illegal data value", 4: "server device failure",
    5: "acknowledge", 6: "server device busy", 8: "memory parity error", 10: "gateway path unavailable",
    11: "gateway target device failed to respond",
}


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.removeprefix("Modbus Error: ")


def reconnect_wait(seconds: float) -> str:
    """When a link in its backoff tries again, for a bad sample's reason: "in 2.5 s", or "at the next poll" for a
    backoff ending within 0.05 s (which would read "in 0.0 s")."""
    return f"in {seconds:.1f} s" if seconds >= 0.05 else "at the next poll"


def quiet_pymodbus_logging() -> None:
    """Keep pymodbus from logging every timeout and refused connection as an ERROR.

    Those outcomes are samples and counters here, and outages are logged once by `ModbusLink`; pymodbus
    would log each failed request (with a hex dump of recent frames). Only applies when nobody has set the
    ``pymodbus`` logger's level explicitly, so ``logging.getLogger("pymodbus").setLevel(DEBUG)`` still works.
    """
    logger = logging.getLogger("pymodbus")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.CRITICAL + 1)
