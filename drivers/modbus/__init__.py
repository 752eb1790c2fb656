"""Modbus TCP, RTU and RTU-over-TCP polling: codec (registers <-> numbers), planner (block reads), link
(one supervised connection per bus or gateway), tcp_client (our own Modbus TCP client, used by the link for
plain Modbus TCP; pymodbus for the rest) and driver (one instrument's poll -> samples)."""

from drivers.modbus.driver import DriverCounters, ModbusDriver, build_modbus_drivers
from drivers.modbus.link import (
    CommFailure,
    DecodeFailure,
    DeviceException,
    LinkCounters,
    ModbusLink,
    ReadFailure,
)

__all__ = [
    "CommFailure",
    "DecodeFailure",
    "DeviceException",
    "DriverCounters",
    "LinkCounters",
    "ModbusDriver",
    "ModbusLink",
    "ReadFailure",
    "build_modbus_drivers",
]
