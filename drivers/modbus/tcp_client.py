"""A lean Modbus TCP client (MBAP framing) for the daemon's plain Modbus TCP links: reads only, one at a time.

Why the daemon has its own client: polling 100 Modbus TCP devices flat out, pymodbus 3.16's async client
(``TransactionManager.execute``, the framer, PDU objects, trace and logging hooks, ``asyncio.wait_for``) took
about 40 % of the event loop, ~75 µs of CPU per read of 10 holding registers, and kept the daemon at 0.45-0.6×
the reads/s of a bare pymodbus loop (issue 21). This client is one `asyncio.BufferedProtocol`: a request is
one ``struct`` pack, one ``transport.write`` and one Future; a reply is received into a buffer of our own
(asyncio's plain ``Protocol`` allocates a 256 KiB bytes object for every ``recv``) and decoded with one
``struct`` unpack; the timeout is one timer per connection re-armed only when it fires, not a ``wait_for``
or a ``call_later`` per request (on top of a bare Future's round trip, ``wait_for`` costs ~7.7 µs a request,
``call_later`` and its cancel ~2.7 µs, the re-armed timer ~0.2 µs).

Measured (bench/RESULTS.md, "Our Modbus TCP client"): a `ModbusDriver` poll of 10 registers costs 45-48 µs
of CPU instead of 76 (`bench/bench_modbus_driver.py`, 10 devices), and the daemon flat out on 100 devices
~97 µs a poll instead of ~125 (medians of 6 interleaved runs; 0.75× the reads/s of a bare pymodbus loop
instead of 0.53); half of what the client still costs is the kernel's ``send`` and ``recv``.

pymodbus is still what the daemon uses for Modbus RTU on a serial bus and RTU over TCP (gateways), and what
the simulators (`simulators.modbus_server`) serve with; this module imports none of it.

What the client does, and does not:

- **Function codes 1, 2, 3, 4** (coils, discrete inputs, holding and input registers), a request being
  ``(address, count)``. No writes, no other function codes.
- **One transaction at a time, no pipelining.** The caller (`drivers.modbus.link.ModbusLink`) serializes
  requests under its lock; a second request while one is pending is a programming error (`RuntimeError`).
- **Transaction ids** increment per request (modulo 65536). A reply whose transaction id is not the one
  awaited, typically a late reply to a request that already timed out, is dropped and counted
  (``on_stray``), never taken as the answer to the current request. Modbus RTU cannot do this (its frames
  carry no transaction id, see the link's "known limit").
- **Per-request timeout** given by the caller (the instrument's), **no retries**, no reconnection: a lost
  connection fails the pending request at once (`ConnectionLost`), and the owner connects a new client.
- **Framing**: partial frames are buffered, several frames in one segment are all handled. A protocol id
  other than 0 or an MBAP length outside 2..254 means the byte stream is not Modbus TCP (or has lost its
  frame boundaries): the connection is closed and the pending request fails with `BrokenStream`.
- **Replies** come back as registers (a tuple of ints 0..65535) or bits (bools, least significant bit of each
  byte first, padded to a multiple of eight as on the wire). An exception reply (function code | 0x80) raises
  `ExceptionReply`; a reply of the wrong shape (function code, unit id, byte count) raises `MalformedReply`.
  The caller checks the number of values against what it asked.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Sequence

_HEADER = struct.Struct(">HHHB")  # MBAP: transaction id, protocol id (0), length (unit id + PDU), unit id
_REQUEST = struct.Struct(">HHHBBHH")  # MBAP (length 6) + function code, start address, quantity
_MBAP = 7  # bytes of the MBAP header, unit id included
_MIN_LENGTH, _MAX_LENGTH = 2, 254  # MBAP length: unit id + function code at least; unit id + 253-byte PDU at most
_READ_FUNCTIONS = frozenset((1, 2, 3, 4))
_BIT_FUNCTIONS = frozenset((1, 2))
_WORDS = tuple(struct.Struct(f">{n}H") for n in range(126))  # a reply carries 125 registers at most
_BUFFER = 4096  # bytes received in one go; a frame is 260 at most, and what is left of one is kept
_BITS = tuple(tuple(bool(byte >> i & 1) for i in range(8)) for byte in range(256))  # LSB first


class ModbusTcpError(Exception):
    """A request that got no values; ``detail`` says why, in words an operator reads in a sample's reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ConnectionLost(ModbusTcpError, ConnectionError):
    """The connection closed (or was never open) before the reply came."""


class ExceptionReply(ModbusTcpError):
    """The device answered with a Modbus exception response; ``code`` is the exception code."""

    def __init__(self, code: int) -> None:
        super().__init__(f"exception code {code}")
        self.code = code


class MalformedReply(ModbusTcpError):
    """A well-framed reply to this request, but not of the shape asked for (function code, unit, byte count)."""


class BrokenStream(MalformedReply):
    """The byte stream is not Modbus TCP (protocol id, absurd length): the connection has been closed."""


class ModbusTcpClient(asyncio.BufferedProtocol):
    """One Modbus TCP connection; `connect` opens it, `read` asks, `close` closes.

    ``on_stray(transaction_id, unit)`` is called for each reply dropped because it answers no pending request.
    """

    def __init__(self, *, on_stray: Callable[[int, int], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._on_stray = on_stray
        self._buffer = bytearray(_BUFFER)  # received bytes: [0, _filled) hold the start of a frame not yet complete
        self._view = memoryview(self._buffer)
        self._filled = 0
        self._tid = 0  # transaction id of the last request
        self._unit = 0  # unit id, function code and future of the pending request
        self._function = 0
        self._waiting: asyncio.Future[Sequence[int]] | None = None
        self._deadline = 0.0  # loop time by which the pending request must have its reply
        self._timer: asyncio.TimerHandle | None = None  # fires at or before the deadline (see `_check_deadline`)
        self.closed_because = ""  # why the connection ended, once it has
        self.stray_replies = 0

    @classmethod
    async def connect(cls, host: str, port: int, *, connect_timeout: float,
                      on_stray: Callable[[int, int], None] | None = None) -> ModbusTcpClient:
        """A connected client; raises `OSError` (refused, unreachable) or `TimeoutError` after
        ``connect_timeout`` s."""
        client = cls(on_stray=on_stray)
        async with asyncio.timeout(connect_timeout):
            await client._loop.create_connection(lambda: client, host, port)
        return client

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def read(self, unit: int, function: int, address: int, count: int,
             timeout: float) -> asyncio.Future[Sequence[int]]:
        """Send one read request and return the future of its values (await it).

        The future fails with `TimeoutError` after ``timeout`` s, `ConnectionLost`, `ExceptionReply`,
        `MalformedReply` or `BrokenStream`. A request with unit id 0 accepts a reply from any unit.
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ConnectionLost(self.closed_because or "not connected")
        if function not in _READ_FUNCTIONS:
            raise ValueError(f"function code {function} is not a read of coils, inputs or registers")
        waiting = self._waiting
        if waiting is not None and not waiting.done():
            raise RuntimeError("a Modbus TCP request is already pending on this connection")
        loop = self._loop
        self._tid = tid = (self._tid + 1) & 0xFFFF
        self._unit = unit
        self._function = function
        self._waiting = future = loop.create_future()
        transport.write(_REQUEST.pack(tid, 0, 6, unit, function, address, count))
        self._deadline = deadline = loop.time() + timeout
        timer = self._timer
        if timer is None or timer.when() > deadline:  # else the timer fires first and re-arms itself
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(deadline, self._check_deadline)
        return future

    def close(self) -> None:
        """Close the connection; a pending request fails with `ConnectionLost` (once the transport says so)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self.closed_because = self.closed_because or "closed by us"
            self._transport.close()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self.closed_because:
            self.closed_because = (str(exc) or type(exc).__name__) if exc is not None else "closed by the device"
        self._fail(ConnectionLost(self.closed_because))

    def get_buffer(self, sizehint: int) -> memoryview:
        # receiving into our own buffer spares asyncio's 256 KiB bytes object per recv (a tenth of a read's CPU)
        return self._view[self._filled:] if self._filled else self._view

    def buffer_updated(self, nbytes: int) -> None:
        data = self._buffer
        pos, end = 0, self._filled + nbytes
        while end - pos >= _MBAP:
            tid, protocol, length, unit = _HEADER.unpack_from(data, pos)
            if protocol != 0 or not _MIN_LENGTH <= length <= _MAX_LENGTH:
                what = f"protocol id {protocol}" if protocol != 0 else f"MBAP length {length}"
                self._break(f"not a Modbus TCP reply ({what})")
                return
            stop = pos + 6 + length
            if stop > end:
                break
            self._frame(tid, unit, data, pos + _MBAP, stop)
            pos = stop
        if pos < end and pos:
            data[:end - pos] = data[pos:end]  # the same length: the buffer keeps its size
        self._filled = end - pos

    # internals

    def _frame(self, tid: int, unit: int, data: bytearray, start: int, stop: int) -> None:
        """One complete frame: the PDU is ``data[start:stop]``."""
        future = self._waiting
        if tid != self._tid or future is None or future.done():
            self.stray_replies += 1
            if self._on_stray is not None:
                self._on_stray(tid, unit)
            return
        self._waiting = None  # the timer stays: it fires later and finds nothing pending, or a newer deadline
        asked = self._function
        if unit != self._unit and self._unit != 0:
            future.set_exception(MalformedReply(f"reply from unit {unit}, asked unit {self._unit}"))
            return
        function = data[start]
        if function != asked:
            if function == asked | 0x80 and stop - start == 2:
                future.set_exception(ExceptionReply(data[start + 1]))
            else:
                future.set_exception(MalformedReply(f"reply has function code {function}, asked {asked}"))
            return
        size = stop - start - 2  # bytes of values after function code and byte count
        if size < 0 or data[start + 1] != size:
            declared = data[start + 1] if size >= 0 else "no"
            future.set_exception(MalformedReply(f"reply declares {declared} bytes of values, carries {max(size, 0)}"))
        elif asked in _BIT_FUNCTIONS:
            future.set_result([bit for byte in data[start + 2:stop] for bit in _BITS[byte]])
        elif size & 1:
            future.set_exception(MalformedReply(f"reply carries an odd number of bytes of registers ({size})"))
        else:
            future.set_result(_WORDS[size >> 1].unpack_from(data, start + 2))

    def _check_deadline(self) -> None:
        """The timer: fail the pending request if its deadline has passed, else wait for that deadline.

        One timer per connection, re-armed only when it fires, rather than one ``call_later`` per request
        cancelled by its reply: a reply costs no timer work at all.
        """
        self._timer = None
        future = self._waiting
        if future is None or future.done():
            return
        if self._loop.time() >= self._deadline:
            self._waiting = None
            future.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(self._deadline, self._check_deadline)

    def _break(self, detail: str) -> None:
        """The stream cannot be trusted any more: fail the pending request and drop the connection."""
        self._filled = 0
        self.closed_because = detail
        self._fail(BrokenStream(detail))
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, exc: ModbusTcpError) -> None:
        future, self._waiting = self._waiting, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if future is not None and not future.done():
            future.set_exception(exc)
