"""Concentration limits for composite-sample lab results, with citations, and the parameter vocabulary.

These are the numbers the seed ordinances print for pollutants measured in the lab (not by the continuous
instruments, whose limits live in config/jurisdictions/): Town of Southeast § 112-5D (eleven pollutants),
Town of Vestal Division 3 (Endicott STP area) BOD and suspended solids, Town of Wilson § 105-5C cyanides.
Each carries its seed line and a verbatim quote, which tests/unit/test_report_labs.py checks against the seed.
Numbers are transcribed as printed, in the printed unit: Vestal prints parts per million, which for
wastewater (density ≈ 1 kg/L) is the same number as mg/L, so lab results in mg/L compare directly (the same
equivalence `config.rules` uses for Vestal's "normal sewage").

A site's permit may set its own concentration limits; the site file has no place for them yet (see the
report's "not yet" list), so the screen uses the jurisdiction's.

TRC (40 CFR 403.8(f)(2)(viii)(B)): 1.4 for BOD, TSS, fats, oil and grease; 1.2 for all other pollutants
except pH (pH has no TRC).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from config.schema import Site


@dataclass(frozen=True, slots=True)
class Parameter:
    key: str
    label: str
    trc: Fraction | None  # None: no TRC (pH)
    aliases: tuple[str, ...]
    unit_kind: str = "concentration"  # or "ph"


_CONVENTIONAL = Fraction(14, 10)
_OTHER = Fraction(12, 10)
PARAMETERS: dict[str, Parameter] = {p.key: p for p in (
    Parameter("bod", "BOD", _CONVENTIONAL, ("bod", "bod5", "biochemical oxygen demand")),
    Parameter("tss", "Total suspended solids", _CONVENTIONAL, ("tss", "ss", "suspended solids",
                                                                "total suspended solids")),
    Parameter("fog", "Fats, oil and grease", _CONVENTIONAL, ("fog", "o&g", "oil and grease",
                                                              "fats, oil and grease")),
    Parameter("arsenic", "Arsenic", _OTHER, ("arsenic", "as")),
    Parameter("cadmium", "Cadmium", _OTHER, ("cadmium", "cd")),
    Parameter("copper", "Copper", _OTHER, ("copper", "cu")),
    Parameter("cyanide", "Cyanide (total)", _OTHER, ("cyanide", "cyanides", "cyanide, total", "total cyanide")),
    Parameter("cyanide_amenable", "Cyanide (amenable)", _OTHER, ("cyanide (amenable)", "cyanide, amenable",
                                                                 "amenable cyanide", "cyanide (amendable)")),
    Parameter("lead", "Lead", _OTHER, ("lead", "pb")),
    Parameter("mercury", "Mercury", _OTHER, ("mercury", "hg")),
    Parameter("nickel", "Nickel", _OTHER, ("nickel", "ni")),
    Parameter("silver", "Silver", _OTHER, ("silver", "ag")),
    Parameter("chromium_total", "Chromium (total)", _OTHER, ("total chromium", "chromium", "chromium, total",
                                                             "cr")),
    Parameter("zinc", "Zinc", _OTHER, ("zinc", "zn")),
    Parameter("ph", "pH", None, ("ph",), unit_kind="ph"),
)}
_ALIASES = {alias: p.key for p in PARAMETERS.values() for alias in (p.key, *p.aliases)}

# unit as a lab writes it (lower case) -> factor to mg/L
CONCENTRATION_UNITS: dict[str, float] = {"mg/l": 1.0, "ppm": 1.0, "ug/l": 0.001, "µg/l": 0.001, "ppb": 0.001}
PH_UNITS = ("su", "s.u.", "ph", "std units")


def canonical_parameter(name: str) -> str | None:
    return _ALIASES.get(" ".join(name.strip().lower().split()))


def to_mg_per_litre(value: float, unit: str, parameter: Parameter) -> float | None:
    """The value in the limit's unit (mg/L, or pH units), or None if ``unit`` does not fit the parameter."""
    u = unit.strip().lower()
    if parameter.unit_kind == "ph":
        return value if u in PH_UNITS else None
    factor = CONCENTRATION_UNITS.get(u)
    return None if factor is None else value * factor


@dataclass(frozen=True, slots=True)
class PollutantLimit:
    """A maximum concentration: a result violates if ``value > max`` ("in excess of", "more than", "greater
    than" in every seed). ``max`` in mg/L (ppm as printed for Vestal)."""

    parameter: str
    max: Fraction  # exact decimal as printed: limit × TRC must compare exactly ("equal or exceed")
    unit: str  # as printed
    citation: str
    seed: str
    line: int
    quote: str

    @property
    def label(self) -> str:
        return PARAMETERS[self.parameter].label


def _lim(parameter: str, max_: str, unit: str, citation: str, seed: str, line: int, quote: str) -> PollutantLimit:
    return PollutantLimit(parameter, Fraction(max_), unit, citation, seed, line, quote)


_SE = "000_99a6498081c28e99.txt"
_VE = "001_0d51533cd8501739.txt"
_WI = "004_4c240d5f28466ffb.txt"
JURISDICTION_LIMITS: dict[str, tuple[PollutantLimit, ...]] = {
    "southeast": tuple(_lim(p, m, "mg/l", f"Town of Southeast § 112-5D({i})", _SE, line, q) for i, (p, m, line, q)
                       in enumerate((
                           ("bod", "300", 441, "Three hundred mg/l BOD."),
                           ("tss", "350", 443, "Three hundred fifty mg/l SS."),
                           ("arsenic", "0.05", 445, "Five-hundredths mg/l arsenic."),
                           ("cadmium", "0.1", 447, "One-tenth mg/l cadmium."),
                           ("copper", "1.0", 449, "One and zero-tenths mg/l copper."),
                           ("cyanide_amenable", "0.1", 451, "One-tenth mg/l cyanide (amendable)."),
                           ("lead", "0.1", 453, "One-tenth mg/l lead."),
                           ("mercury", "0.01", 455, "One-hundredth mg/l mercury."),
                           ("nickel", "1.0", 457, "One and zero-tenths mg/l nickel."),
                           ("silver", "0.1", 459, "One-tenth mg/l silver."),
                           ("chromium_total", "1.0", 461, "One and zero-tenths mg/l total chromium."),
                       ), start=1)),
    "vestal_endicott": (
        _lim("bod", "240", "ppm", f"Town of Vestal Code 1966 § 28-8(C), subsection (d)(1) (seed {_VE} line 1696)",
             _VE, 1696, "A BOD of more than two hundred forty (240) parts per million."),
        _lim("tss", "400", "ppm", f"Town of Vestal Code 1966 § 28-8(C), subsection (d)(2) (seed {_VE} line 1700)",
             _VE, 1700, "A suspended solids content greater than four hundred (400) parts per million."),
    ),
    "wilson": (
        _lim("cyanide", "2", "mg/l", f"Town of Wilson § 105-5C(2) [item number not printed] (seed {_WI} line 129)",
             _WI, 129, "cyanides in excess of two milligrams per liter of cyanide in the wastes as discharged"),
    ),
}


def limits_for(site: Site) -> dict[str, PollutantLimit]:
    """The concentration limits in force at ``site``, by parameter key."""
    return {lim.parameter: lim for lim in JURISDICTION_LIMITS.get(site.jurisdiction, ())}
