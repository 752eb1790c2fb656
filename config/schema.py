"""The validated, immutable shape of a site configuration.

`config.loader` builds these from TOML once, at start-up, and every other part of the daemon reads only these
objects: nothing downstream parses options. All durations are seconds (float); all addresses are Modbus
*protocol* addresses (0-based, as on the wire), not the 40001-style register numbers of vendor manuals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config.limits / config.rules import this module at run time
    from config.alarms import AlarmConfig
    from config.calibration import CalibrationPolicy
    from config.gateway import GatewaySettings
    from config.influx import InfluxSettings
    from config.limits import Permit
    from config.rule_model import Skipped
    from config.rules import RuleBinding
    from config.uplink import UplinkSettings


class DriverKind(StrEnum):
    MODBUS_TCP = "modbus_tcp"
    MODBUS_RTU = "modbus_rtu"  # RS-485 serial line (or a pty in tests)
    MODBUS_RTU_OVER_TCP = "modbus_rtu_over_tcp"  # RTU frames through a serial-to-Ethernet gateway
    MQTT = "mqtt"

    @property
    def is_modbus(self) -> bool:
        return self is not DriverKind.MQTT


class Table(StrEnum):
    """The four Modbus data tables."""

    HOLDING = "holding"  # function code 3
    INPUT = "input"  # function code 4
    COIL = "coil"  # function code 1
    DISCRETE = "discrete"  # function code 2

    @property
    def is_bits(self) -> bool:
        return self in (Table.COIL, Table.DISCRETE)


class DataType(StrEnum):
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOL = "bool"  # a coil or discrete input

    @property
    def registers(self) -> int:
        """How many 16-bit registers (or bits, for BOOL) one value occupies."""
        return {"int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2, "float64": 4, "bool": 1}[
            self.value
        ]


class ByteOrder(StrEnum):
    BIG = "big"
    LITTLE = "little"


class ChannelKind(StrEnum):
    """What a channel measures. Checks (pH, temperature, LEL, slug, sampler) select channels by kind."""

    FLOW = "flow"  # rate of flow
    FLOW_TOTAL = "flow_total"  # totaliser (cumulative volume)
    PH = "ph"
    TEMPERATURE = "temperature"
    LEL = "lel"  # % of the lower explosive limit
    SAMPLER_TEMPERATURE = "sampler_temperature"  # refrigerated composite sampler's fridge
    SAMPLER_COUNT = "sampler_count"  # samples taken (increments once per paced sample)
    SAMPLER_BOTTLE_FULL = "sampler_bottle_full"  # bit
    SAMPLER_FAULT = "sampler_fault"  # bit
    CONCENTRATION = "concentration"
    LEVEL = "level"
    CONDUCTIVITY = "conductivity"
    OTHER = "other"


class MeasuringPoint(StrEnum):
    """Where a temperature channel measures: the limit depends on the point (the plant's influent sensor, the
    industry's discharge at the control manhole, or wastewater entering a grease interceptor)."""

    INFLUENT = "influent"
    DISCHARGE = "discharge"
    GREASE_INTERCEPTOR = "grease_interceptor"


class PayloadFormat(StrEnum):
    JSON = "json"  # an object; the channel names the field holding its value
    NUMBER = "number"  # the whole payload is one number in ASCII


@dataclass(frozen=True, slots=True)
class RegisterPoint:
    """One value in an instrument's register map."""

    name: str
    table: Table
    address: int
    dtype: DataType
    byte_order: ByteOrder = ByteOrder.BIG  # order of the two bytes inside each register
    word_order: ByteOrder = ByteOrder.BIG  # order of the registers of a 32/64-bit value
    description: str = ""
    register: str = ""  # the number the vendor's manual prints for it ("40002"), when the map gives one
    unit_point: str = ""  # the point whose code says this value's unit (checked against the channel's unit)
    units: dict[int, str] = field(default_factory=dict)  # a units register: code -> unit, as the manual lists
    faults: dict[int, str] = field(default_factory=dict)  # a status register: bit -> the vendor's fault text
    maintenance: dict[int, str] = field(default_factory=dict)  # bit -> the vendor's service/calibration text
    unit: str = ""  # the unit the register itself fixes (the manual's "Flow Rate, GPM"), when it has no units register
    setting: bool = False  # a setting or state register (a code, not a measurement): read for the record

    @property
    def is_status(self) -> bool:
        """A status register: its bits say whether the device's readings can be trusted (read every poll)."""
        return bool(self.faults or self.maintenance)

    @property
    def count(self) -> int:
        return self.dtype.registers

    @property
    def end(self) -> int:
        """One past the last address this point occupies."""
        return self.address + self.count


@dataclass(frozen=True, slots=True)
class RegisterMap:
    """A reusable description of an instrument model's registers (a data file under config/maps/)."""

    name: str
    points: dict[str, RegisterPoint]
    source: Path | None = None
    description: str = ""
    manual: Manual | None = None  # where the map was transcribed from (catalogue maps)

    @property
    def status_points(self) -> tuple[RegisterPoint, ...]:
        return tuple(p for p in self.points.values() if p.is_status)


@dataclass(frozen=True, slots=True)
class Manual:
    """The vendor document a catalogue map was transcribed from, so every address can be checked against it.

    ``register_offset`` is the one conversion from the manual's printed register numbers to protocol
    addresses: address = register - register_offset (40001 for 40001-style numbers, 0 where the manual
    prints protocol addresses). ``word_order`` says what the manual states about 32/64-bit values, in its words,
    or that it states nothing (then the map's order is an assumption to confirm on site, and a site sets the
    instrument's ``word_order``). ``units_register`` says which units register is checked, or why none can be
    (the manual has none, or does not list its codes: the unit is then taken from the configuration).
    ``vendor_copy`` is the manual on the vendor's own site, or says it was not found (``url`` is then a
    third-party host's copy).
    """

    vendor: str
    model: str
    title: str
    revision: str
    pages: str
    url: str
    function_codes: str
    addressing: str
    register_offset: int
    word_order: str
    notes: tuple[str, ...] = ()
    units_register: str = ""  # what the manual says of units registers: the one checked, or why none is
    vendor_copy: str = ""  # the vendor-hosted copy of the manual, or that none was found (the url is a third party's)


@dataclass(frozen=True, slots=True)
class SerialSettings:
    port: str
    baudrate: int = 9600
    bytesize: int = 8
    parity: str = "N"  # "N", "E" or "O"
    stopbits: int = 1
    inter_frame_delay: float = 0.0  # extra idle time (s) after each transaction on the bus, for slow slaves


@dataclass(frozen=True, slots=True)
class MqttBroker:
    host: str
    port: int = 1883
    client_id: str = ""  # stable per instrument so the broker keeps the persistent session
    qos: int = 1
    username: str = ""
    password_file: str = ""  # read at start, never logged
    keepalive: int = 30


@dataclass(frozen=True, slots=True)
class Instrument:
    """A physical device (or a gateway's unit id) at a site.

    ``poll_interval`` is how often a Modbus instrument is read; for MQTT it is how often the instrument is
    expected to publish, which sets its channels' staleness window.
    """

    id: str
    site: str
    driver: DriverKind
    poll_interval: float
    timeout: float = 1.0
    unit_id: int = 1
    host: str = ""  # modbus_tcp / modbus_rtu_over_tcp
    port: int = 502
    serial: SerialSettings | None = None  # modbus_rtu
    register_map: RegisterMap | None = None  # modbus
    mqtt: MqttBroker | None = None  # mqtt
    time_field: str = ""  # mqtt JSON payloads: the field with the device's timestamp, if any
    units_check_interval: float = 30.0  # modbus: s between reads of the map's units registers while connected

    @property
    def link_key(self) -> str:
        """Instruments sharing a link share one connection (and, on a serial bus, one lock)."""
        if self.driver is DriverKind.MODBUS_RTU and self.serial is not None:
            return f"rtu:{self.serial.port}"
        if self.driver is DriverKind.MQTT and self.mqtt is not None:
            return f"mqtt:{self.mqtt.host}:{self.mqtt.port}:{self.mqtt.client_id}"
        return f"{self.driver.value}:{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Channel:
    """A measured quantity at a site, read from one point of one instrument.

    Engineering value = raw × ``scale`` + ``offset``. ``valid_min``/``valid_max`` are the instrument's
    physical span (inclusive); a reading outside it is an OUT_OF_RANGE sample, never a number, except a reading
    above ``valid_max`` of a channel that judges over-range readings (`judges_over_range`): up to
    `over_range_limit` it is an OVER_RANGE sample, judged as ``valid_max`` (see `monitor.sample.judge_value`).
    ``stale_after`` (s) is how long the channel may go without a good reading before a STALE sample is
    recorded. ``resolution``: the smallest step a reading can take, in the channel's unit (configured, or
    the ``scale`` of a scaled point, or 1 for an unscaled integer register); None when unknown (a float
    register or an MQTT value). Log lines round readings to it (`decimals`); the record never is rounded.
    ``max_gap`` (s) is the longest interval between two consecutive good readings that still counts
    as measured (`monitor.checks.coverage`); the loader always resolves it (default 3 × the instrument's poll
    interval, at least 5 s); 0, in a channel built in code, means no gap is ever detected.
    """

    id: str
    site: str
    instrument: str
    kind: ChannelKind
    unit: str
    scale: float = 1.0
    offset: float = 0.0
    valid_min: float | None = None
    valid_max: float | None = None
    point: str = ""  # modbus: the register map point
    topic: str = ""  # mqtt: the topic carrying this channel
    field: str = ""  # mqtt JSON payloads: the field carrying the value (dots descend into objects)
    payload: PayloadFormat = PayloadFormat.JSON
    stale_after: float = 0.0
    location: MeasuringPoint | None = None  # temperature channels: which limit applies (temperature_high)
    resolution: float | None = None  # smallest step of a reading (unit); None: unknown
    max_gap: float = 0.0
    judge_over_range: bool = False  # opt-in for kinds other than lel (always on for lel)

    @property
    def decimals(self) -> int | None:
        """Decimal places that show a reading at its resolution (0.01 → 2, 0.5 → 1, 1 → 0; an offset
        with more places adds them); None when the resolution is unknown."""
        if self.resolution is None:
            return None
        return max(_places(self.resolution), _places(self.offset))

    @property
    def judges_over_range(self) -> bool:
        """A reading above the span is the worst case, not silence: LEL meters always, others by opt-in."""
        return (self.kind is ChannelKind.LEL or self.judge_over_range) and self.valid_max is not None

    @property
    def over_range_limit(self) -> float | None:
        """Above this a reading is a fault (out_of_range), not a saturated reading: see `over_limit`."""
        if not self.judges_over_range or self.valid_max is None:
            return None
        return over_limit(self.valid_min, self.valid_max)


def over_limit(valid_min: float | None, valid_max: float) -> float:
    """The highest reading still taken as an instrument saturating above its span: ``valid_max`` plus one span
    (2 × the span above ``valid_min``; span from 0 when ``valid_min`` is not set). Beyond it the number is a
    fault code or wire break, not a measurement.

    Why one span: a detector saturating high reads a little above its span (NAMUR NE 43: 20.5 mA on a 4-20 mA
    loop is 103 %; vendors' Modbus over-range values run to ~110-125 %), while fault and wire-break values are
    register extremes (0xFFFF = 655.35 at scale 0.01) or the loop's fault current, far beyond. One span keeps
    every plausible saturation reading (120 % LEL) and still refuses the register-maximum codes."""
    low = valid_min if valid_min is not None else 0.0
    return valid_max + max(valid_max - low, 0.0)


@dataclass(frozen=True, slots=True)
class Site:
    """An industry's control manhole (``kind = "industry"``), or a plant's influent monitoring point
    (``kind = "plant"``: only there do "influent to the POTW" limits apply)."""

    id: str
    name: str
    timezone: str
    kind: str = "industry"
    jurisdiction: str = ""
    company: str = ""  # the industry owning the site: an "industry" console user sees only its company's sites
    address: str = ""  # the industry's address, as reports and notices of violation print it
    instruments: tuple[Instrument, ...] = ()
    channels: tuple[Channel, ...] = ()
    permit: Permit | None = None  # the site's discharge permit: its own cited limits (config.limits)
    checks: tuple[RuleBinding, ...] = ()  # compliance rules selected and compiled at load (config.rules)
    calibration: CalibrationPolicy | None = None  # calibration intervals in force per channel (config.calibration)
    skipped: tuple[Skipped, ...] = ()  # rules that do not run on a channel, and why (`pretreat rules`, check-config)

    def channel(self, channel_id: str) -> Channel:
        for ch in self.channels:
            if ch.id == channel_id:
                return ch
        raise KeyError(channel_id)


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    historian: Path  # SQLite file; relative paths are resolved against the site file's folder
    commit_interval: float = 0.5  # s between historian commits (batching)
    tick_interval: float = 1.0  # s between clock ticks (staleness, delays)
    stale_after_polls: float = 3.0  # default staleness window, in poll intervals
    retention_days: int | None = None  # raw readings older than this are purged; None: keep everything (default)


MIN_RETENTION_DAYS = 1096  # monitoring records are kept at least 3 years (40 CFR 403.12(o)), a leap day included


@dataclass(frozen=True, slots=True)
class SiteConfig:
    daemon: DaemonSettings
    sites: tuple[Site, ...]
    source: Path | None = None
    instruments_by_id: dict[tuple[str, str], Instrument] = field(default_factory=dict)
    influx: InfluxSettings | None = None  # the optional InfluxDB telemetry sink ([influx] table)
    gateway: GatewaySettings | None = None  # the optional Modbus TCP gateway for plant SCADA ([gateway])
    alarms: AlarmConfig | None = None  # alarm settings per rule, notifiers and routes ([notify], [[site.route]])
    uplink: UplinkSettings | None = None  # the optional Sparkplug B uplink to a central broker ([uplink])

    def site(self, site_id: str) -> Site:
        for s in self.sites:
            if s.id == site_id:
                return s
        raise KeyError(site_id)

    @property
    def instruments(self) -> tuple[Instrument, ...]:
        return tuple(i for s in self.sites for i in s.instruments)

    @property
    def channels(self) -> tuple[Channel, ...]:
        return tuple(c for s in self.sites for c in s.channels)


def _places(x: float) -> int:
    """Decimal places of ``x`` as written (0.01 → 2, 0.05 → 2, 10 → 0), from its shortest repr."""
    exponent = Decimal(repr(float(x))).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0
