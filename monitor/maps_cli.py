"""`pretreat maps list|show NAME`: the shipped register maps, each catalogue map with the manual it was
transcribed from, so whoever wires a control manhole can check every address against the vendor's own page.

``list`` prints one line per map (name, description, the manual and its revision, or "generic" for the maps
that describe no vendor's device); ``show NAME`` prints one map: the manual, its addressing and what it says
about word order, then the points in sections (values, each with where its unit comes from: a units register,
the register itself, or the configuration; units registers; status registers; settings and states read for
the record), each with its manual register number, protocol address, type, orders and the units codes or
status bits it carries. Exit 2 for an unknown name (the shipped names are listed) or a map file
with mistakes (each is listed).
"""

from __future__ import annotations

import argparse
import sys

from config.errors import ConfigErrors
from config.maps import MAPS_DIR, load_register_map, shipped_maps
from config.schema import RegisterMap, RegisterPoint

NOT_FOUND = (
    "Not in the catalogue, because their vendor's Modbus table was not found in the public material searched: "
    "Teledyne ISCO Signature flow meter (its manual, 69-4333-004 Rev N, was found without its Modbus section); "
    "Isco 2100-series flow modules (their table is Modbus ASCII only, which the daemon does not speak); "
    "Draeger Polytron, Honeywell Sensepoint XCD and Det-Tronics gas transmitters; Isco and Hach composite "
    "samplers (Modbus or SDI-12 gateways)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="maps_command", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="every shipped register map, with the manual each was transcribed from")
    ls.set_defaults(func=run_list)
    show = sub.add_parser("show", help="one map: its manual, addressing, word order and every point")
    show.add_argument("name", metavar="NAME", help="a shipped map's name (see `pretreat maps list`)")
    show.set_defaults(func=run_show)


def _load(name: str) -> RegisterMap:
    return load_register_map(MAPS_DIR / f"{name}.toml")


def run_list(_args: argparse.Namespace) -> int:
    bad = 0
    for name in shipped_maps():
        try:
            rmap = _load(name)
        except ConfigErrors as exc:
            print(f"{name:<26} INVALID: {len(exc.errors)} error(s), see `pretreat maps show {name}`")
            bad += 1
            continue
        m = rmap.manual
        cited = f"{m.vendor}, {m.title}, {m.revision}" if m is not None else "generic (no vendor's manual)"
        print(f"{name:<26} {rmap.description}")
        print(f"{'':<26}   manual: {cited}")
    print()
    print(NOT_FOUND)
    return 2 if bad else 0


def run_show(args: argparse.Namespace) -> int:
    shipped = shipped_maps()
    if args.name not in shipped:
        print(f"pretreat maps show: no shipped map {args.name!r}; shipped: {', '.join(shipped)}", file=sys.stderr)
        return 2
    try:
        rmap = _load(args.name)
    except ConfigErrors as exc:
        for e in exc.errors:
            print(e, file=sys.stderr)
        return 2
    print(render(rmap))
    return 0


def render(rmap: RegisterMap) -> str:
    lines = [f"{rmap.name}: {rmap.description}"]
    m = rmap.manual
    if m is None:
        lines.append("manual: none (a generic map, not transcribed from a vendor's table)")
    else:
        lines += [
            f"vendor:          {m.vendor}",
            f"model:           {m.model}",
            f"manual:          {m.title}",
            f"revision:        {m.revision}",
            f"pages:           {m.pages}",
            f"found at:        {m.url}",
            f"vendor copy:     {m.vendor_copy}",
            f"function codes:  {m.function_codes}",
            f"addressing:      {m.addressing}",
            f"word order:      {m.word_order}",
            f"units register:  {m.units_register}",
        ]
        lines += [f"note:            {n}" for n in m.notes]
    lines.append("points (address = protocol address, 0-based, as on the wire; an instrument's word_order"
                 " overrides the word order shown)")
    for title, points in _sections(rmap):
        if points:
            lines.append(f"{title}:")
            for p in points:
                lines += _point_lines(p)
    return "\n".join(lines)


def _sections(rmap: RegisterMap) -> list[tuple[str, list[RegisterPoint]]]:
    """The points by what they are: values (each with where its unit comes from), units registers, status
    registers, and settings or states read for the record."""
    pts = list(rmap.points.values())
    return [("values", [p for p in pts if not p.units and not p.is_status and not p.setting]),
            ("units registers", [p for p in pts if p.units]),
            ("status registers (read every poll)", [p for p in pts if p.is_status]),
            ("settings and states (read for the record, not measurements)", [p for p in pts if p.setting])]


def _point_lines(p: RegisterPoint) -> list[str]:
    register = f"manual {p.register:>5} -> " if p.register else ""
    orders = f", bytes {p.byte_order.value}, words {p.word_order.value}" if p.dtype.registers > 1 else ""
    out = [f"  {p.name:<22} {register}{p.table.value} {p.address} ({p.dtype.value}{orders})"]
    if p.description:
        out.append(f"  {'':<22} {p.description}")
    if p.unit_point:
        out.append(f"  {'':<22} unit: checked at connect and every units_check_interval against units register "
                   f"{p.unit_point!r}")
    elif p.unit:
        out.append(f"  {'':<22} unit: {p.unit}, fixed by the register (no units register); a channel in another "
                   "unit is refused")
    elif not p.units and not p.is_status and not p.setting:
        out.append(f"  {'':<22} no units register: unit taken from the configuration")
    if p.units:
        out.append(f"  {'':<22} units: " + ", ".join(f"{k} = {v}" for k, v in sorted(p.units.items())))
    out += [f"  {'':<22} bit {b}: fault '{t}'" for b, t in sorted(p.faults.items())]
    out += [f"  {'':<22} bit {b}: maintenance '{t}'" for b, t in sorted(p.maintenance.items())]
    return out
