"""Register maps: load and validate the data files under ``config/maps/`` (and maps a site names by path), and the
TOML reading every part of the loader shares.

A map lists points (`config.schema.RegisterPoint`). Catalogue maps, transcribed from a vendor's published Modbus
table, also carry a ``[manual]`` table (title, revision, pages, function codes, the manual's addressing, what
it says about word order and units registers, and where the vendor hosts it) and may give each point as the
manual prints it: ``register = 40002`` is converted once, here, to the protocol address
``register - manual.register_offset``; ``address`` is always the protocol (0-based, on the wire) address. An
instrument's ``word_order`` overrides the map's (`with_word_order`). Points may also be:

- a units register: ``[point.units]`` maps the codes the manual lists to our unit words (``"1" = "gal"``); a
  value point names it with ``unit_point``, and the driver checks it against the channel's ``unit`` at connect
  and every ``units_check_interval`` (`drivers.modbus.device_state`);
- a value whose unit the register itself fixes (no units register: the manual's "Flow Rate, GPM"): ``unit``
  states it, and a channel configured in another unit is refused when the site file is loaded;
- a setting or state register (``setting = true``: a code such as a units setting whose codes the manual does
  not list, or a program state): read for the record, never a measurement with a unit;
- a status register: ``[point.faults]`` / ``[point.maintenance]`` map bit numbers (0 = least significant) to the
  manual's own text; set bits make the instrument's readings ``device_fault`` or ``maintenance``.

Every mistake is collected with its key path (`config.reader.Reader`), as for site files; a map is loaded once
per site file however many instruments name it (`config.instruments`), its mistakes listed with its own path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.errors import ConfigErrors
from config.reader import ID, ID_EXPECTED, Reader, did_you_mean
from config.rules import DATA_QUALITY_CITATION, RuleBinding
from config.schema import ByteOrder, Channel, DataType, Instrument, Manual, RegisterMap, RegisterPoint, Table

if TYPE_CHECKING:
    import tomllib as toml
else:
    # tomli is the standard library's tomllib (its source, the same errors word for word) built with mypyc where
    # a wheel exists (x86_64 and aarch64 Linux among them): a site file of 100 control manholes (214 KB) parses in
    # 15 ms instead of 45, one of 1,000 in 0.15 s instead of 0.45, at every start of every command that reads it
    try:
        import tomli as toml
    except ImportError:  # a platform without a compiled wheel: the same parser from the standard library
        import tomllib as toml

MAPS_DIR = Path(__file__).parent / "maps"

_INTEGER = (DataType.UINT16, DataType.INT16, DataType.UINT32, DataType.INT32)
_MAP_KEYS = {"name", "description", "point", "manual"}
_POINT_KEYS = {"name", "table", "address", "register", "type", "byte_order", "word_order", "description",
               "unit_point", "units", "faults", "maintenance", "unit", "setting"}
_MANUAL_KEYS = {"vendor", "model", "title", "revision", "pages", "url", "function_codes", "addressing",
                "register_offset", "word_order", "notes", "units_register", "vendor_copy"}


def read_toml(path: Path, reader: Reader) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return toml.load(fh)
    except FileNotFoundError:
        reader.error("(file)", str(path), "an existing TOML file")
    except OSError as exc:
        reader.error("(file)", str(path), f"a readable file ({exc.strerror})")
    except toml.TOMLDecodeError as exc:
        reader.error("(syntax)", str(exc), "valid TOML")
    return None


def load_register_map(path: Path) -> RegisterMap:
    """Load one register map file; raises `ConfigErrors` listing every mistake in it."""
    reader = Reader(str(path))
    rmap = parse_register_map(path, reader)
    if reader.errors or rmap is None:
        raise ConfigErrors(reader.errors)
    return rmap


def parse_register_map(path: Path, reader: Reader) -> RegisterMap | None:
    """The map in ``path``, its mistakes recorded in ``reader`` (None when the file cannot be read)."""
    data = read_toml(path, reader)
    if data is None:
        return None
    reader.unknown_keys(data, "", _MAP_KEYS)
    manual = _manual(reader.table(data, "manual", ""), reader) if "manual" in data else None
    offset = manual.register_offset if manual is not None else None
    points: dict[str, RegisterPoint] = {}
    for i, raw in enumerate(reader.tables(data, "point", "")):
        point = _point(raw, f"point[{i}]", reader, offset)
        if point.name in points:
            reader.error(f"point[{i}].name", point.name, "a name not already used in this map")
        points[point.name] = point
    if not points:
        reader.error("point", [], "at least one [[point]]")
    _check_links(points, reader)
    return RegisterMap(name=str(data.get("name", path.stem)), points=points, source=path,
                       description=reader.text(data, "description", "", default=""), manual=manual)


def _manual(raw: dict[str, Any], reader: Reader) -> Manual:
    p = "manual"
    reader.unknown_keys(raw, p, _MANUAL_KEYS)
    text = {k: reader.text(raw, k, p) for k in ("vendor", "model", "title", "revision", "pages", "url",
                                               "function_codes", "addressing", "word_order", "units_register",
                                               "vendor_copy")}
    notes = raw.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        reader.error(f"{p}.notes", notes, "a list of strings")
        notes = []
    return Manual(**text, register_offset=reader.integer(raw, "register_offset", p, minimum=0, maximum=65536),
                  notes=tuple(notes))


def _point(raw: dict[str, Any], p: str, reader: Reader, offset: int | None) -> RegisterPoint:
    reader.unknown_keys(raw, p, _POINT_KEYS)
    name = reader.text(raw, "name", p, check=ID.match, expected=ID_EXPECTED)  # type: ignore[arg-type]
    table = reader.enum(raw, "table", p, Table)
    dtype = reader.enum(raw, "type", p, DataType, default="bool" if table.is_bits else "uint16")
    address, register = _address(raw, p, reader, offset)
    if table.is_bits != (dtype is DataType.BOOL):
        reader.error(f"{p}.type", dtype.value,
                     "'bool' for coil/discrete tables" if table.is_bits else "a numeric type for registers")
    if address + dtype.registers > 65536:
        reader.error(f"{p}.address", address, f"room for {dtype.registers} registers below 65536")
    units = _codes(raw, "units", p, reader, 0, 65535)
    faults = _codes(raw, "faults", p, reader, 0, 15)
    maintenance = _codes(raw, "maintenance", p, reader, 0, 15)
    if units and dtype not in _INTEGER:
        reader.error(f"{p}.type", dtype.value, "an integer type for a units register")
    if (faults or maintenance) and dtype not in (DataType.UINT16, DataType.INT16):
        reader.error(f"{p}.type", dtype.value, "uint16 for a status register (bits 0..15)")
    unit = reader.text(raw, "unit", p, default="")
    setting = raw.get("setting", False)
    if not isinstance(setting, bool):
        reader.error(f"{p}.setting", setting, "true or false")
        setting = False
    if unit and (units or faults or maintenance or setting or raw.get("unit_point")):
        reader.error(f"{p}.unit", unit, "no fixed unit on a units, status or setting register, nor beside a "
                                        "unit_point (the units register says the unit)")
    return RegisterPoint(
        name=name, table=table, address=address, dtype=dtype,
        byte_order=reader.enum(raw, "byte_order", p, ByteOrder, default="big"),
        word_order=reader.enum(raw, "word_order", p, ByteOrder, default="big"),
        description=reader.text(raw, "description", p, default=""), register=register,
        unit_point=reader.text(raw, "unit_point", p, default=""), units=units, faults=faults,
        maintenance=maintenance, unit=unit, setting=setting,
    )


def _address(raw: dict[str, Any], p: str, reader: Reader, offset: int | None) -> tuple[int, str]:
    """The protocol address, from ``address`` or from the manual's ``register`` number (converted once)."""
    if "register" not in raw:
        return reader.integer(raw, "address", p, minimum=0, maximum=65535), ""
    if "address" in raw:
        reader.error(f"{p}.address", raw["address"], "either address or register, not both")
    if offset is None:
        reader.error(f"{p}.register", raw["register"], "a [manual] with register_offset to convert it")
        return 0, ""
    register = reader.integer(raw, "register", p, minimum=offset, maximum=offset + 65535)
    return register - offset, str(register)


def _codes(raw: dict[str, Any], key: str, p: str, reader: Reader, lo: int, hi: int) -> dict[int, str]:
    table = reader.table(raw, key, p)
    out: dict[int, str] = {}
    for k, text in table.items():
        if not k.isdigit() or not lo <= int(k) <= hi or not isinstance(text, str) or not text:
            reader.error(f"{p}.{key}.{k}", text, f"a number {lo}..{hi} = the manual's text")
            continue
        out[int(k)] = text
    return out


def _check_links(points: dict[str, RegisterPoint], reader: Reader) -> None:
    for i, point in enumerate(points.values()):
        if point.unit_point and not points.get(point.unit_point, RegisterPoint("", Table.HOLDING, 0,
                                                                               DataType.UINT16)).units:
            reader.error(f"point[{i}].unit_point", point.unit_point,
                         f"a point of this map with [point.units] {did_you_mean(point.unit_point, list(points))}")


def with_word_order(rmap: RegisterMap, order: ByteOrder) -> RegisterMap:
    """``rmap`` with every point's word order set to ``order``: an instrument's ``word_order`` key, for a device
    whose 32/64-bit order is a setting of the device (Hach sc 'Data Order', TFX-5000 'word order (endian)') or
    which the manual does not state. 16-bit points are unaffected (word order has no meaning for them)."""
    points = {n: replace(pt, word_order=order) for n, pt in rmap.points.items()}
    return replace(rmap, points=points)


def same_unit(a: str, b: str) -> bool:
    """Unit words compare without case or spaces ("degC" = "DEGC", "% LEL" = "%LEL")."""
    return a.replace(" ", "").casefold() == b.replace(" ", "").casefold()


def unit_code(point: RegisterPoint, unit: str) -> int | None:
    """The code a units register holds for ``unit`` (the lowest, if the manual lists several); None if none."""
    return next((code for code, u in sorted(point.units.items()) if same_unit(u, unit)), None)


def unit_register_expects(rmap: RegisterMap, point: str, unit: str) -> str:
    """What a channel's ``unit`` must be when its point has a units register that cannot report it (the check at
    connect would refuse every reading): the units the manual lists; "" when the unit can match."""
    p = rmap.points.get(point)
    if p is None or not p.unit_point or p.unit_point not in rmap.points:
        return ""
    units = rmap.points[p.unit_point]
    if unit_code(units, unit) is not None:
        return ""
    return (f"a unit that units register {units.name!r} of map '{rmap.name}' can report for point {point!r}: "
            f"one of {sorted(set(units.units.values()))}")


def fixed_unit_expects(rmap: RegisterMap, point: str, unit: str, *, instrument: str, channel: str) -> str:
    """What a channel's ``unit`` must be when its point's register fixes its unit (the map's ``unit``, from the
    manual) and the channel states another: naming the instrument, channel, point and both units; "" if fine."""
    p = rmap.points.get(point)
    if p is None or not p.unit or same_unit(p.unit, unit):
        return ""
    return (f"{p.unit!r}: channel {channel!r} of instrument {instrument!r} reads point {point!r} of map "
            f"'{rmap.name}', whose register is in {p.unit!r} (fixed by the manual, no units register), not "
            f"{unit!r}")


def maintenance_bindings(site: str, channels: Iterable[Channel],
                         instruments: Mapping[str, Instrument]) -> tuple[RuleBinding, ...]:
    """The ``maintenance`` data-quality rule on each channel whose instrument's map has a service/calibration
    bit (`monitor.checks.quality`): the periods the instrument said it was being serviced, as episodes."""
    out = []
    for ch in channels:
        inst = instruments.get(ch.instrument)
        rmap = inst.register_map if inst is not None else None
        if rmap is not None and any(p.maintenance for p in rmap.status_points):
            out.append(RuleBinding(rule="maintenance", site=site, channel=ch.id, inputs=(ch.id,),
                                   citation=f"{DATA_QUALITY_CITATION}: the instrument's service or calibration mode"))
    return tuple(out)


def shipped_maps() -> list[str]:
    """The names of the register maps shipped in ``config/maps/``."""
    return sorted(p.stem for p in MAPS_DIR.glob("*.toml"))


def map_expected(ref: str, path: Path) -> str:
    """What a register_map that names no file should have been: the shipped maps, and the nearest one."""
    shipped = shipped_maps()
    if "/" not in ref and not ref.endswith(".toml"):
        return f"one of the shipped register maps {shipped}{did_you_mean(ref, shipped)}, or a map file's path"
    return f"an existing register map file ({path} not found), or one of the shipped maps {shipped}"


def resolve_map_path(ref: str, base: Path) -> Path:
    """A bare name is a shipped map; anything with a slash or a .toml suffix is a path from the site file."""
    if "/" in ref or ref.endswith(".toml"):
        p = Path(ref)
        return p if p.is_absolute() else base / p
    return MAPS_DIR / f"{ref}.toml"
