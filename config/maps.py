"""Register maps: the ``config/maps/*.toml`` files (or a site's own) that name an instrument's points, and the
TOML reading every part of the loader shares.

A map is loaded once per site file however many instruments name it (`config.instruments`), and every mistake
in it is listed with the map file's own path.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from config.errors import ConfigErrors
from config.reader import ID, ID_EXPECTED, Reader, did_you_mean
from config.schema import ByteOrder, DataType, RegisterMap, RegisterPoint, Table

MAPS_DIR = Path(__file__).parent / "maps"
_POINT_KEYS = {"name", "table", "address", "type", "byte_order", "word_order", "description"}


def read_toml(path: Path, reader: Reader) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        reader.error("(file)", str(path), "an existing TOML file")
    except OSError as exc:
        reader.error("(file)", str(path), f"a readable file ({exc.strerror})")
    except tomllib.TOMLDecodeError as exc:
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
    data = read_toml(path, reader)
    if data is None:
        return None
    reader.unknown_keys(data, "", {"name", "description", "point"})
    points: dict[str, RegisterPoint] = {}
    for i, raw in enumerate(reader.tables(data, "point", "")):
        p = f"point[{i}]"
        reader.unknown_keys(raw, p, _POINT_KEYS)
        name = reader.text(raw, "name", p, check=ID.match, expected=ID_EXPECTED)  # type: ignore[arg-type]
        table = reader.enum(raw, "table", p, Table)
        dtype = reader.enum(raw, "type", p, DataType, default="bool" if table.is_bits else "uint16")
        address = reader.integer(raw, "address", p, minimum=0, maximum=65535)
        if table.is_bits != (dtype is DataType.BOOL):
            reader.error(f"{p}.type", dtype.value,
                         "'bool' for coil/discrete tables" if table.is_bits else "a numeric type for registers")
        if address + dtype.registers > 65536:
            reader.error(f"{p}.address", address, f"room for {dtype.registers} registers below 65536")
        point = RegisterPoint(
            name=name, table=table, address=address, dtype=dtype,
            byte_order=reader.enum(raw, "byte_order", p, ByteOrder, default="big"),
            word_order=reader.enum(raw, "word_order", p, ByteOrder, default="big"),
            description=reader.text(raw, "description", p, default=""),
        )
        if name in points:
            reader.error(f"{p}.name", name, "a name not already used in this map")
        points[name] = point
    if not points:
        reader.error("point", [], "at least one [[point]]")
    name = data.get("name", path.stem)
    return RegisterMap(name=str(name), points=points, source=path)


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
