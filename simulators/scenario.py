"""Scenarios are data: a TOML timeline of what happens to a site's instruments, loaded and validated once.

A scenario file (shipped ones live in ``simulators/scenarios/``; a user's can live anywhere)::

    name = "ph_excursion"          # optional, defaults to the file name
    description = "pH drops below 5 for ten minutes, then recovers"
    seed = 1                       # model noise seed (default 1)
    start_hour = 10.0              # local time of day at the start, for the daily flow pattern (default: now)
    duration = 1800                # simulated seconds the story takes (informational: printed, used in tests)

    [[model]]                      # change a channel's model parameters (see simulators.process.DEFAULTS)
    kind = "sampler_count"
    pace = "both"

    [[step]]
    at = 300                       # simulated seconds after the start
    kind = "ph"                    # target: `channel = "<id>"` or `kind = "<kind>"`; optionally `site`
    to = 4.2                       # a ramp from the value being served (or `from`) ...
    over = 120                     # ... reaching `to` after `over` seconds, then held
    [[step]]
    at = 900
    kind = "ph"
    clear = true                   # back to the model
    [[step]]
    at = 60
    kind = "flow"                  # fault steps target the instrument carrying the channel (or `instrument`)
    fault = "silent"               # silent | exception | garbage | restart | none
    [[step]]
    at = 120
    instrument = "gas-monitor"     # register steps target an instrument (or the instrument of a channel/kind)
    register = "general_status"    # a point of its register map: a status or units register, say
    raw = 2                        # the raw value served from now on (bit 1: the vendor's calibration bit)

Each step has exactly one action: ``value`` (hold a constant; TOML's ``nan``/``inf`` are allowed, to test
that bad values never become numbers), ``to``/``over`` (ramp), ``clear``, ``fault`` (with ``down``, the
simulated seconds a ``restart`` keeps the device off the wire, default 5) or ``register`` with ``raw`` (what the
instrument itself says: a catalogue map's fault or calibration bits, a units code; Modbus instruments only).
Values are engineering units, as the channel would report them. All times are simulated seconds:
``pretreat sim --speed 60`` plays a 30-minute scenario in 30 s of wall time.

Targets are resolved against a site configuration by `simulators.playback.resolve`, which reports a step
that matches nothing, and a value the target's register cannot encode, as errors.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from config.errors import MISSING, ConfigError, ConfigErrors
from config.reader import Reader
from config.schema import ChannelKind

SCENARIOS_DIR = Path(__file__).parent / "scenarios"

_TOP_KEYS = {"name", "description", "seed", "start_hour", "duration", "model", "step"}
_TARGET_KEYS = {"site", "channel", "kind", "instrument"}
_STEP_KEYS = _TARGET_KEYS | {"at", "value", "to", "over", "from", "clear", "fault", "down", "note", "register",
                             "raw"}
_ACTIONS = ("value", "to", "clear", "fault", "register")
_INSTRUMENT_ACTIONS = ("fault", "register")  # actions whose target may be an instrument


class FaultKind(StrEnum):
    NONE = "none"  # clear a fault
    SILENT = "silent"  # no reply / no publish
    EXCEPTION = "exception"  # Modbus exception replies
    GARBAGE = "garbage"  # wrong-length or NaN replies; malformed MQTT payloads
    RESTART = "restart"  # off the wire for `down` seconds, then back


@dataclass(frozen=True, slots=True)
class Target:
    """Which channels (or instruments) a step or model setting applies to. Exactly one of channel/kind/
    instrument is set; ``site`` narrows it to one site of a multi-site configuration."""

    site: str | None = None
    channel: str | None = None
    kind: ChannelKind | None = None
    instrument: str | None = None

    def __str__(self) -> str:
        what = (f"channel '{self.channel}'" if self.channel else f"kind '{self.kind.value}'" if self.kind
                else f"instrument '{self.instrument}'")
        return f"{what} of site '{self.site}'" if self.site else what


@dataclass(frozen=True, slots=True)
class Step:
    """One timeline entry. ``path`` is its key path in the file (``step[3]``), for error messages."""

    at: float
    target: Target
    path: str
    value: float | None = None  # hold this value
    to: float | None = None  # ramp to this value ...
    over: float = 0.0  # ... over this many seconds
    start: float | None = None  # ramp start (`from`); None = the value being served when the step fires
    clear: bool = False
    fault: FaultKind | None = None
    down: float = 5.0  # restart: simulated seconds off the wire
    register: str | None = None  # serve ``raw`` at this point of the instrument's register map
    raw: float | None = None

    @property
    def is_fault(self) -> bool:
        return self.fault is not None


@dataclass(frozen=True, slots=True)
class ModelSetting:
    target: Target
    params: dict[str, float | str]
    path: str


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str = ""
    seed: int = 1
    start_hour: float | None = None
    duration: float | None = None
    steps: tuple[Step, ...] = ()
    models: tuple[ModelSetting, ...] = ()
    source: Path | None = None

    @property
    def file(self) -> str:
        return str(self.source) if self.source else f"(scenario {self.name})"


NORMAL = Scenario(name="normal", description="every instrument healthy, models only")


def shipped_scenarios() -> list[str]:
    """Names of the scenarios shipped in ``simulators/scenarios/``."""
    return sorted(p.stem for p in SCENARIOS_DIR.glob("*.toml"))


def scenario_path(name_or_path: str | Path) -> Path:
    """A bare name is a shipped scenario; anything with a slash or a .toml suffix is a file path."""
    ref = str(name_or_path)
    if "/" in ref or ref.endswith(".toml"):
        return Path(ref)
    return SCENARIOS_DIR / f"{ref}.toml"


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load and validate a scenario; raises `ConfigErrors` listing every mistake with its key path."""
    path = scenario_path(name_or_path)
    reader = Reader(str(path))
    data = _read(path, reader, str(name_or_path))
    if data is None:
        raise ConfigErrors(reader.errors)
    scenario = _scenario(data, path, reader)
    if reader.errors:
        raise ConfigErrors(reader.errors)
    return scenario


def _read(path: Path, reader: Reader, ref: str) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        reader.error("(file)", ref, f"a scenario file or one of the shipped scenarios {shipped_scenarios()}")
    except OSError as exc:
        reader.error("(file)", str(path), f"a readable file ({exc.strerror})")
    except tomllib.TOMLDecodeError as exc:
        reader.error("(syntax)", str(exc), "valid TOML")
    return None


def _scenario(data: dict[str, Any], path: Path, reader: Reader) -> Scenario:
    reader.unknown_keys(data, "", _TOP_KEYS)
    start_hour = reader.number(data, "start_hour", "", default=None, minimum=0, maximum=24)
    duration = reader.number(data, "duration", "", default=None, minimum=0, exclusive_min=True)
    models = tuple(_model(raw, f"model[{i}]", reader)
                   for i, raw in enumerate(reader.tables(data, "model", "")))
    steps = [_step(raw, f"step[{i}]", reader) for i, raw in enumerate(reader.tables(data, "step", ""))]
    steps.sort(key=lambda s: s.at)  # stable: steps at the same time keep file order
    return Scenario(
        name=reader.text(data, "name", "", default=path.stem),
        description=reader.text(data, "description", "", default=""),
        seed=reader.integer(data, "seed", "", default=1, minimum=0),
        start_hour=start_hour, duration=duration, steps=tuple(steps), models=models, source=path,
    )


def _target(raw: dict[str, Any], p: str, reader: Reader, *, instrument_ok: bool) -> Target:
    given = [k for k in ("channel", "kind", "instrument") if k in raw]
    allowed = "'channel', 'kind' or 'instrument'" if instrument_ok else "'channel' or 'kind'"
    if len(given) != 1 or (given[0] == "instrument" and not instrument_ok):
        reader.error(f"{p}.{given[1] if len(given) > 1 else given[0] if given else 'channel'}",
                     {k: raw[k] for k in given} if given else MISSING, f"exactly one target: {allowed}")
    kind = reader.enum(raw, "kind", p, ChannelKind) if "kind" in raw else None
    return Target(
        site=reader.text(raw, "site", p) if "site" in raw else None,
        channel=reader.text(raw, "channel", p) if "channel" in raw else None,
        kind=kind,
        instrument=reader.text(raw, "instrument", p) if "instrument" in raw else None,
    )


def _value(raw: dict[str, Any], key: str, p: str, reader: Reader) -> float | None:
    """A number where NaN and infinity are legal (a scenario may serve them on purpose)."""
    if key not in raw:
        return None
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        reader.error(f"{p}.{key}", v, "a number (nan and inf are allowed)")
        return 0.0
    return float(v)


def _step(raw: dict[str, Any], p: str, reader: Reader) -> Step:
    reader.unknown_keys(raw, p, _STEP_KEYS)
    actions = [a for a in _ACTIONS if a in raw]
    if len(actions) != 1:
        reader.error(f"{p}.{actions[1] if len(actions) > 1 else 'value'}",
                     {a: raw[a] for a in actions} if actions else MISSING,
                     "exactly one action: 'value', 'to' (with 'over'), 'clear', 'fault' or 'register' "
                     "(with 'raw')")
    action = actions[0] if actions else ""
    at = reader.number(raw, "at", p, minimum=0)
    target = _target(raw, p, reader, instrument_ok=action in _INSTRUMENT_ACTIONS)
    register = reader.text(raw, "register", p) if action == "register" else None
    served = _value(raw, "raw", p, reader)
    if action == "register" and (served is None or not math.isfinite(served)):
        reader.error(f"{p}.raw", raw.get("raw", MISSING), "the finite raw value the register serves")
    elif action != "register" and "raw" in raw:
        reader.error(f"{p}.raw", raw["raw"], "no such key unless the step sets a 'register'")
    fault = reader.enum(raw, "fault", p, FaultKind) if action == "fault" else None
    for key in ("over", "from"):
        if key in raw and action != "to":
            reader.error(f"{p}.{key}", raw[key], "no such key unless the step ramps ('to')")
    if "down" in raw and fault is not FaultKind.RESTART:
        reader.error(f"{p}.down", raw["down"], "no such key unless fault = 'restart'")
    if "clear" in raw and raw["clear"] is not True:
        reader.error(f"{p}.clear", raw["clear"], "true")
    to = _value(raw, "to", p, reader)
    start = _value(raw, "from", p, reader)
    for key, v in (("to", to), ("from", start)):
        if v is not None and not math.isfinite(v):
            reader.error(f"{p}.{key}", v, "a finite number (a ramp between non-finite values means nothing)")
    return Step(
        at=at, target=target, path=p, value=_value(raw, "value", p, reader), to=to,
        over=reader.number(raw, "over", p, minimum=0, exclusive_min=True) if action == "to" else 0.0,
        start=start, clear=action == "clear", fault=fault,
        down=reader.number(raw, "down", p, default=5.0, minimum=0) if fault is FaultKind.RESTART else 5.0,
        register=register, raw=served if action == "register" else None,
    )


def _model(raw: dict[str, Any], p: str, reader: Reader) -> ModelSetting:
    target = _target(raw, p, reader, instrument_ok=False)
    params: dict[str, float | str] = {}
    for key, v in raw.items():
        if key in _TARGET_KEYS:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            reader.error(f"{p}.{key}", v, "a number or a string")
            continue
        if isinstance(v, float) and not math.isfinite(v):
            reader.error(f"{p}.{key}", v, "a finite number")
            continue
        params[key] = float(v) if isinstance(v, int) else v
    return ModelSetting(target=target, params=params, path=p)


@dataclass(slots=True)
class ScenarioErrors:
    """Collects resolution errors for one scenario file (the same shape as the loader's)."""

    file: str
    errors: list[ConfigError] = field(default_factory=list)

    def error(self, path: str, found: Any, expected: str) -> None:
        self.errors.append(ConfigError(self.file, path, found, expected))

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigErrors(self.errors)
