"""The two small interfaces every driver implements (the daemon builds the drivers of each kind itself:
`drivers.modbus.driver.build_modbus_drivers`, `drivers.mqtt.driver.build_mqtt_drivers`).

Drivers are the only code that imports pymodbus or paho-mqtt. Whatever goes wrong on the wire, a driver
returns or emits `monitor.sample.Sample`s, bad-quality ones carrying the reason; a driver never raises out
of `poll()` for a device problem, so one dead device cannot cost the others their cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from config.schema import Instrument
from monitor.sample import Sample

SampleSink = Callable[[Sequence[Sample]], None]
"""Where a streaming driver delivers samples. Must not block (the daemon's sink only enqueues)."""

Committed = Callable[[], Awaitable[None]]
"""Returns once every sample the sink has taken so far is durably recorded (the daemon's `Historian.flush`): a
streaming driver given one acknowledges its source (an MQTT PUBACK) only after that."""


class PolledDriver(Protocol):
    """An instrument read on a schedule (Modbus). One instance per configured instrument."""

    instrument: Instrument
    instrument_id: str

    async def poll(self) -> list[Sample]:
        """Read every channel of the instrument once; one sample per channel, good or bad, never raises."""
        ...

    async def close(self) -> None: ...


class StreamingDriver(Protocol):
    """An instrument that pushes readings (MQTT). Runs until cancelled, reconnecting by itself."""

    instrument: Instrument
    instrument_id: str

    async def run(self, sink: SampleSink, *, committed: Committed | None = None) -> None: ...

    def seed_recent(self, samples: Sequence[Sample]) -> None:
        """Learn the record's last readings of the instrument's channels (oldest first) before `run`, so a message
        the source delivers again after a restart is recognised as already recorded."""
        ...

    async def close(self) -> None: ...
