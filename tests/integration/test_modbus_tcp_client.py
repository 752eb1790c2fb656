"""Our Modbus TCP client (`drivers.modbus.tcp_client`) and `ModbusLink` on it, over real loopback sockets.

Two kinds of server, nothing mocked: the project's pymodbus simulator (what a well-behaved device answers),
and a raw asyncio server of a few lines (`RawDevice`) for what pymodbus cannot be made to send: frames split
across segments, two replies in one segment, late replies with an old transaction id, a protocol id other than
0, absurd MBAP lengths, a wrong function code, unit id or byte count, silence, and a close mid-request.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from config.schema import DataType, DriverKind, Instrument, RegisterMap, RegisterPoint, Table
from drivers.modbus import CommFailure, DecodeFailure, DeviceException, ModbusLink
from drivers.modbus.link import reconnect_wait
from drivers.modbus.tcp_client import (
    BrokenStream,
    ConnectionLost,
    ExceptionReply,
    MalformedReply,
    ModbusTcpClient,
)
from simulators.modbus_server import ModbusSimServer, SimFault
from tests.support import PATIENCE, eventually, free_port

REQUEST = struct.Struct(">HHHBBHH")  # a read request: MBAP (length 6), function code, address, count


@dataclass(frozen=True)
class Request:
    tid: int
    unit: int
    function: int
    address: int
    count: int


def frame(tid: int, unit: int, pdu: bytes, *, protocol: int = 0, length: int | None = None) -> bytes:
    """One Modbus TCP frame (``length`` overrides the MBAP length, to lie about it)."""
    return struct.pack(">HHHB", tid, protocol, len(pdu) + 1 if length is None else length, unit) + pdu


def registers(function: int, values: list[int]) -> bytes:
    return bytes([function, 2 * len(values)]) + struct.pack(f">{len(values)}H", *values)


def answer(req: Request, values: list[int]) -> bytes:
    return frame(req.tid, req.unit, registers(req.function, values))


Script = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


class RawDevice:
    """A Modbus TCP server that hands each request to ``script``, which writes whatever bytes it likes."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.port = free_port()
        self.requests: list[Request] = []
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> RawDevice:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            while True:
                tid, _pid, _len, unit, function, address, count = REQUEST.unpack(await reader.readexactly(12))
                req = Request(tid, unit, function, address, count)
                self.requests.append(req)
                await self.script(req, writer)
                if writer.is_closing():
                    return
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)


async def echo_address(req: Request, writer: asyncio.StreamWriter) -> None:
    """A healthy device: register i holds address + i."""
    writer.write(answer(req, [req.address + i for i in range(req.count)]))


@contextlib.asynccontextmanager
async def client_of(device: RawDevice) -> AsyncIterator[ModbusTcpClient]:
    client = await ModbusTcpClient.connect("127.0.0.1", device.port, connect_timeout=PATIENCE)
    try:
        yield client
    finally:
        client.close()
        await eventually(lambda: not client.connected)


# -- against the pymodbus simulator ------------------------------------------------------------------------------


def sim_map() -> RegisterMap:
    points = [RegisterPoint(name="level", table=Table.HOLDING, address=0, dtype=DataType.FLOAT32),
              RegisterPoint(name="count", table=Table.HOLDING, address=2, dtype=DataType.UINT16),
              RegisterPoint(name="temp", table=Table.INPUT, address=4, dtype=DataType.INT16),
              RegisterPoint(name="pump", table=Table.COIL, address=1, dtype=DataType.BOOL),
              RegisterPoint(name="door", table=Table.DISCRETE, address=9, dtype=DataType.BOOL)]
    return RegisterMap(name="sim", points={p.name: p for p in points})


async def test_reads_every_table_from_the_simulator() -> None:
    inst = Instrument(id="dev", site="s", driver=DriverKind.MODBUS_TCP, poll_interval=1.0, timeout=PATIENCE,
                      unit_id=3, host="127.0.0.1", port=free_port(), register_map=sim_map())
    [server] = ModbusSimServer.for_instruments([inst])
    await server.start()
    try:
        dev = server.device("dev")
        for name, value in (("level", 2.5), ("count", 65535), ("temp", -2), ("pump", True), ("door", True)):
            dev.set(name, value)
        async with contextlib.AsyncExitStack() as stack:
            client = await ModbusTcpClient.connect("127.0.0.1", inst.port, connect_timeout=PATIENCE)
            stack.callback(client.close)
            holding = await client.read(3, 3, 0, 3, PATIENCE)
            assert tuple(holding) == (*struct.unpack(">HH", struct.pack(">f", 2.5)), 65535)
            assert tuple(await client.read(3, 4, 4, 1, PATIENCE)) == (65534,)  # -2 as a register
            coils = await client.read(3, 1, 0, 3, PATIENCE)
            assert list(coils) == [False, True, False, False, False, False, False, False]  # padded to a byte
            assert list(await client.read(3, 2, 9, 1, PATIENCE)) == [True] + [False] * 7
            dev.fault, dev.exception_code = SimFault.EXCEPTION, 2
            with pytest.raises(ExceptionReply) as caught:
                await client.read(3, 3, 0, 3, PATIENCE)
            assert caught.value.code == 2
            dev.fault = SimFault.NONE
            assert tuple(await client.read(3, 3, 2, 1, PATIENCE)) == (65535,)  # the connection is still good
            assert client.stray_replies == 0
    finally:
        await server.stop()


# -- framing ------------------------------------------------------------------------------------------------------


async def test_a_reply_split_across_segments_is_put_back_together() -> None:
    async def split(req: Request, writer: asyncio.StreamWriter) -> None:
        whole = answer(req, [0x1234, 0xABCD, 7])
        for part in (whole[:3], whole[3:9], whole[9:]):  # inside the header, then inside the values
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.02)  # separate segments (the client must cope with one as well)

    async with RawDevice(split) as device, client_of(device) as client:
        for _ in range(2):  # and the next request starts from a clean buffer
            assert tuple(await client.read(1, 3, 0, 3, PATIENCE)) == (0x1234, 0xABCD, 7)


async def test_a_stray_reply_in_the_same_segment_is_dropped_and_counted() -> None:
    strays: list[tuple[int, int]] = []

    async def old_then_right(req: Request, writer: asyncio.StreamWriter) -> None:
        old = Request((req.tid - 1) & 0xFFFF, req.unit, req.function, req.address, req.count)
        writer.write(answer(old, [666] * req.count) + answer(req, [req.address] * req.count))

    async with RawDevice(old_then_right) as device:
        client = await ModbusTcpClient.connect("127.0.0.1", device.port, connect_timeout=PATIENCE,
                                               on_stray=lambda tid, unit: strays.append((tid, unit)))
        try:
            assert tuple(await client.read(4, 3, 10, 2, PATIENCE)) == (10, 10)
            assert tuple(await client.read(4, 3, 20, 2, PATIENCE)) == (20, 20)
        finally:
            client.close()
        assert client.stray_replies == 2 and strays == [(0, 4), (1, 4)]
        assert [r.tid for r in device.requests] == [1, 2]


async def test_a_late_reply_is_never_the_answer_to_the_next_request() -> None:
    held: list[Request] = []

    async def late(req: Request, writer: asyncio.StreamWriter) -> None:
        if not held:  # the first request: no reply until the next one comes
            held.append(req)
            return
        writer.write(answer(held[0], [111]))  # the first request's answer, after it timed out
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(answer(req, [222]))

    async with RawDevice(late) as device, client_of(device) as client:
        with pytest.raises(TimeoutError):
            await client.read(1, 3, 0, 1, 0.2)
        assert tuple(await client.read(1, 3, 0, 1, PATIENCE)) == (222,)  # same table, address and length
        assert client.stray_replies == 1


@pytest.mark.parametrize(("header", "detail"), [
    ({"protocol": 1}, "not a Modbus TCP reply (protocol id 1)"),
    ({"length": 1}, "not a Modbus TCP reply (MBAP length 1)"),
    ({"length": 255}, "not a Modbus TCP reply (MBAP length 255)"),
    ({"length": 0xFFFF}, "not a Modbus TCP reply (MBAP length 65535)"),
])
async def test_a_broken_stream_fails_the_request_and_closes_the_connection(
        header: dict[str, int], detail: str) -> None:
    async def broken(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(frame(req.tid, req.unit, registers(req.function, [1]), **header))

    async with RawDevice(broken) as device, client_of(device) as client:
        with pytest.raises(BrokenStream) as caught:
            await client.read(1, 3, 0, 1, PATIENCE)
        assert caught.value.detail == detail
        assert await eventually(lambda: not client.connected), "the client closes a stream it cannot frame"
        with pytest.raises(ConnectionLost, match="not a Modbus TCP reply"):
            client.read(1, 3, 0, 1, PATIENCE)


# -- replies of the wrong shape ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pdu", "unit", "error", "detail"), [
    (bytes([0x83, 2]), 1, ExceptionReply, "exception code 2"),
    (registers(4, [1]), 1, MalformedReply, "reply has function code 4, asked 3"),
    (bytes([0x84, 2]), 1, MalformedReply, "reply has function code 132, asked 3"),
    (bytes([3, 4, 0, 1]), 1, MalformedReply, "reply declares 4 bytes of values, carries 2"),
    (bytes([3]), 1, MalformedReply, "reply declares no bytes of values, carries 0"),
    (bytes([3, 3, 0, 1, 2]), 1, MalformedReply, "reply carries an odd number of bytes of registers (3)"),
    (registers(3, [1]), 5, MalformedReply, "reply from unit 5, asked unit 1"),
])
async def test_replies_of_the_wrong_shape_fail_the_request_and_keep_the_connection(
        pdu: bytes, unit: int, error: type[Exception], detail: str) -> None:
    async def wrong(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(frame(req.tid, unit, pdu) if req.address == 0 else answer(req, [9]))

    async with RawDevice(wrong) as device, client_of(device) as client:
        with pytest.raises(error) as caught:
            await client.read(1, 3, 0, 1, PATIENCE)
        assert str(caught.value) == detail
        assert tuple(await client.read(1, 3, 1, 1, PATIENCE)) == (9,)
        assert device.connections == 1


async def test_unit_zero_accepts_a_reply_from_any_unit() -> None:
    async def as_unit_7(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(frame(req.tid, 7, registers(req.function, [5])))

    async with RawDevice(as_unit_7) as device, client_of(device) as client:
        assert tuple(await client.read(0, 3, 0, 1, PATIENCE)) == (5,)


# -- silence, closes, refusals --------------------------------------------------------------------------------------


async def silent(req: Request, writer: asyncio.StreamWriter) -> None:
    """A device that accepts the connection and never answers."""


async def test_a_silent_device_times_out_after_each_requests_own_timeout() -> None:
    async def answers_address_0_only(req: Request, writer: asyncio.StreamWriter) -> None:
        if req.address == 0:
            await echo_address(req, writer)

    async with RawDevice(answers_address_0_only) as device, client_of(device) as client:
        # a long timeout first, answered: its timer is still armed when the short one is asked
        assert tuple(await client.read(1, 3, 0, 1, PATIENCE)) == (0,)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await client.read(1, 3, 1, 1, 0.2)
        took = time.monotonic() - started
        assert 0.2 <= took < PATIENCE / 2
        assert tuple(await client.read(1, 3, 0, 1, PATIENCE)) == (0,)  # still connected, still in step


async def test_a_close_mid_request_fails_it_at_once_not_after_its_timeout() -> None:
    async def hang_up(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with RawDevice(hang_up) as device, client_of(device) as client:
        with pytest.raises(ConnectionLost, match="closed by the device"):
            await client.read(1, 3, 0, 1, PATIENCE)  # a TimeoutError would mean it waited PATIENCE
        assert not client.connected


async def test_a_refused_connection_raises_at_once() -> None:
    with pytest.raises(ConnectionRefusedError):
        await ModbusTcpClient.connect("127.0.0.1", free_port(), connect_timeout=PATIENCE)


async def test_one_request_at_a_time() -> None:
    async with RawDevice(silent) as device, client_of(device) as client:
        pending = client.read(1, 3, 0, 1, PATIENCE)
        with pytest.raises(RuntimeError, match="already pending"):
            client.read(1, 3, 0, 1, PATIENCE)
        pending.cancel()


# -- ModbusLink on our client -----------------------------------------------------------------------------------


def tcp_link(device: RawDevice, *, backoff: float = 0.01) -> ModbusLink:
    return ModbusLink(key=f"modbus_tcp:127.0.0.1:{device.port}", kind=DriverKind.MODBUS_TCP, host="127.0.0.1",
                      port=device.port, backoff_initial=backoff, backoff_max=backoff)


async def read(link: ModbusLink, *, unit: int = 1, address: int = 0, wait: float = PATIENCE) -> list[int]:
    return list(await link.read(unit=unit, table=Table.HOLDING, address=address, count=1, reply_timeout=wait))


async def read_once_reconnected(link: ModbusLink, *, address: int) -> list[int]:
    """Read until the link's reconnect backoff has passed (PATIENCE at most)."""
    for _ in range(int(PATIENCE / 0.02)):
        try:
            return await read(link, address=address)
        except CommFailure:
            await asyncio.sleep(0.02)
    return await read(link, address=address)


async def test_link_counts_stray_replies_and_keeps_the_right_answer() -> None:
    held: list[Request] = []

    async def late(req: Request, writer: asyncio.StreamWriter) -> None:
        if req.address == 0:
            held.append(req)
            return
        for old in held:
            writer.write(answer(old, [111]))
        held.clear()
        writer.write(answer(req, [222]))

    async with RawDevice(late) as device:
        link = tcp_link(device)
        link.attach(1)
        try:
            with pytest.raises(CommFailure, match=r"^no reply within 0\.2 s$"):
                await read(link, wait=0.2)
            assert await read(link, address=1) == [222]
        finally:
            await link.close()
    c = link.counters
    assert (c.stray_replies, c.comm_failures, c.replies, c.outages, c.connects) == (1, 1, 1, 0, 1)


async def test_link_broken_stream_is_a_decode_error_and_an_outage_then_reconnects() -> None:
    async def broken_once(req: Request, writer: asyncio.StreamWriter) -> None:
        if device.connections == 1:
            writer.write(frame(req.tid, req.unit, registers(3, [1]), protocol=7))
        else:
            await echo_address(req, writer)

    async with RawDevice(broken_once) as device:
        link = tcp_link(device)
        try:
            with pytest.raises(DecodeFailure, match=r"not a Modbus TCP reply \(protocol id 7\)"):
                await read(link)
            assert not link.up
            assert await read_once_reconnected(link, address=5) == [5] and link.up
        finally:
            await link.close()
    c = link.counters
    assert (c.decode_errors, c.outages, c.reconnects, device.connections) == (1, 1, 1, 2)


async def test_link_connection_closed_mid_request_is_comm_failure_at_once() -> None:
    async def hang_up(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with RawDevice(hang_up) as device:
        link = tcp_link(device, backoff=PATIENCE)
        try:
            with pytest.raises(CommFailure, match=r"^connection lost: closed by the device$"):
                await read(link)  # within its timeout (PATIENCE): no "no reply within"
            with pytest.raises(CommFailure, match=r"next reconnect attempt in \d+\.\d s$"):
                await read(link)
        finally:
            await link.close()
    assert link.counters.outages == 1 and not link.up


def test_a_backoff_about_to_end_reads_at_the_next_poll_not_in_zero_seconds() -> None:
    assert (reconnect_wait(2.46), reconnect_wait(0.05), reconnect_wait(0.049), reconnect_wait(0.0)) == \
        ("in 2.5 s", "in 0.1 s", "at the next poll", "at the next poll")


async def test_link_refused_says_so() -> None:
    port = free_port()
    link = ModbusLink(key=f"modbus_tcp:127.0.0.1:{port}", kind=DriverKind.MODBUS_TCP, host="127.0.0.1",
                      port=port)
    try:
        with pytest.raises(CommFailure, match=rf"^cannot connect to 127\.0\.0\.1:{port} \(connection refused\)$"):
            await read(link)
    finally:
        await link.close()
    assert link.counters.connect_failures == 1 and link.counters.outages == 1


async def test_link_device_exception_and_wrong_unit_keep_the_link() -> None:
    async def by_address(req: Request, writer: asyncio.StreamWriter) -> None:
        if req.address == 0:
            writer.write(frame(req.tid, req.unit, bytes([req.function | 0x80, 6])))
        else:
            writer.write(frame(req.tid, 9, registers(req.function, [1])))

    async with RawDevice(by_address) as device:
        link = tcp_link(device)
        try:
            with pytest.raises(DeviceException, match=r"^exception code 6 \(server device busy\)$"):
                await read(link)
            with pytest.raises(DecodeFailure, match=r"^reply from unit 9, asked unit 1$"):
                await read(link, address=1)
        finally:
            await link.close()
    c = link.counters
    assert (c.device_exceptions, c.decode_errors, c.replies, c.outages, c.connects) == (1, 1, 2, 0, 1)


async def test_link_a_silent_unit_behind_a_tcp_gateway_keeps_the_connection() -> None:
    async def unit_2_silent(req: Request, writer: asyncio.StreamWriter) -> None:
        if req.unit != 2:
            await echo_address(req, writer)

    async with RawDevice(unit_2_silent) as device:
        link = tcp_link(device)
        link.attach(1)
        link.attach(2)
        try:
            for _ in range(5):
                with pytest.raises(CommFailure, match="no reply within"):
                    await read(link, unit=2, wait=0.05)
            assert await read(link, unit=1, address=3) == [3]
            for _ in range(5):  # interleaved: unit 1's replies keep the link up
                with pytest.raises(CommFailure, match="no reply within"):
                    await read(link, unit=2, wait=0.05)
                assert await read(link, unit=1, address=4) == [4]
        finally:
            await link.close()
    assert link.counters.outages == 0 and device.connections == 1


async def test_link_every_unit_silent_drops_and_reconnects() -> None:
    async with RawDevice(silent) as device:
        link = tcp_link(device)
        link.attach(1)
        try:
            for _ in range(3):
                with pytest.raises(CommFailure, match="no reply within"):
                    await read(link, wait=0.05)
            assert not link.up and link.counters.outages == 1
        finally:
            await link.close()
