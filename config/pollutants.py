"""Concentration limits for composite-sample lab results, with citations, and the parameter vocabulary.

These are the numbers the seed ordinances print for pollutants measured in the lab (not by the continuous
instruments, whose limits live in config/jurisdictions/): Town of Southeast § 112-5D (eleven pollutants),
Town of Vestal Division 3 (Endicott STP area) BOD and suspended solids, Town of Wilson § 105-5C cyanides.
Each carries its seed line and a verbatim quote, which tests/unit/test_report_labs.py checks against the seed.
Numbers are transcribed as printed, in the printed unit: Vestal prints parts per million, which for
wastewater (density ≈ 1 kg/L) is the same number as mg/L, so lab results in mg/L compare directly (the same
equivalence `config.rules` uses for Vestal's "normal sewage").

A site's discharge permit may state its own concentration limits (``[site.permit.pollutants.<parameter>]``,
parsed and validated at load by `parse_pollutant_limits`, each with the permit's citation). Where both the permit and
the jurisdiction limit a parameter, the stricter is in force (`limits_for` says why); a parameter only one
of them limits has that limit; a parameter neither limits is not screened (no number is ever borrowed from
another town).

TRC (40 CFR 403.8(f)(2)(viii)(B)): 1.4 for BOD, TSS, fats, oil and grease; 1.2 for all other pollutants
except pH (pH has no TRC).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from config.reader import Reader
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
    Parameter("fog_emulsified", "Emulsified oil and grease", _CONVENTIONAL,
              ("emulsified oil and grease", "oil and grease, emulsified", "emulsified fog")),
    Parameter("hydrogen_sulfide", "Hydrogen sulfide (sulfide)", _OTHER,
              ("hydrogen sulfide", "h2s", "sulfide", "sulfide, total", "total sulfide")),
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


_EXACT_FACTORS = {u: Fraction(repr(f)) for u, f in CONCENTRATION_UNITS.items()}  # 0.001 as exactly 1/1000


def concentration_parameters() -> list[str]:
    """The keys of the parameters measured as a concentration (every one but pH)."""
    return [k for k, v in PARAMETERS.items() if v.unit_kind == "concentration"]


def canonical_parameter(name: str) -> str | None:
    return _ALIASES.get(" ".join(name.strip().lower().split()))


def to_mg_per_litre(value: float, unit: str, parameter: Parameter) -> float | None:
    """The value in the limit's unit (mg/L, or pH units), or None if ``unit`` does not fit the parameter."""
    u = unit.strip().lower()
    if parameter.unit_kind == "ph":
        return value if u in PH_UNITS else None
    factor = CONCENTRATION_UNITS.get(u)
    return None if factor is None else value * factor


def accepts_unit(parameter: Parameter, unit: str) -> bool:
    """Whether a limit or result for ``parameter`` may be stated in ``unit`` (case does not matter)."""
    return to_mg_per_litre(1.0, unit, parameter) is not None


@dataclass(frozen=True, slots=True)
class PollutantLimit:
    """A maximum concentration: a result violates if ``value > max``, strictly ("in excess of", "more than",
    "greater than" in every seed; a permit's maximum is read the same way). ``max`` is the number as printed,
    in ``unit`` as printed (mg/L, ppm, or µg/L for a permit); `max_std` is the same limit in mg/L, the unit
    lab results are compared in. ``permit`` is the permit's id when the permit states the limit, else empty
    (the jurisdiction's, with its seed file, line and verbatim quote)."""

    parameter: str
    max: Fraction  # exact decimal as printed: limit × TRC must compare exactly ("equal or exceed")
    unit: str  # as printed
    citation: str
    seed: str
    line: int
    quote: str
    permit: str = ""

    @property
    def label(self) -> str:
        return PARAMETERS[self.parameter].label

    @property
    def max_std(self) -> Fraction:
        """The limit in mg/L (ppm counts as mg/L), exactly: 2 µg/L is 1/500 mg/L."""
        return self.max * _EXACT_FACTORS.get(self.unit.strip().lower(), Fraction(1))

    @property
    def printed(self) -> str:
        """The limit as a decimal with its unit, e.g. ``0.05 mg/l`` (never the fraction ``1/20``)."""
        text = format(Decimal(self.max.numerator) / Decimal(self.max.denominator), "f")
        return f"{text.rstrip('0').rstrip('.') if '.' in text else text} {self.unit}"


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
        _lim("bod", "240", "ppm", "Town of Vestal § 18-76(d)(1) [section number inferred]",
             _VE, 1696, "A BOD of more than two hundred forty (240) parts per million."),
        _lim("tss", "400", "ppm", "Town of Vestal § 18-76(d)(2) [section number inferred]",
             _VE, 1700, "A suspended solids content greater than four hundred (400) parts per million."),
        # "exceeding on analysis an average of": each analysed result is judged (strictly) against the average
        # the ordinance names; emulsified oil and grease only, so a total oil-and-grease result is not judged by it
        _lim("fog_emulsified", "50", "ppm", "Town of Vestal § 18-76(a)(2) [section number inferred]", _VE, 1610,
             "Any water or wastes containing emulsified oil and grease exceeding on analysis an average of fifty "
             "(50) parts per million"),
        _lim("hydrogen_sulfide", "2", "ppm", "Town of Vestal § 18-76(a)(4) [section number inferred]", _VE, 1618,
             "Any water or wastes that contain more than two (2) parts per million, by weight, of the following "
             "gases: hydrogen sulfide, sulfide, sulfur dioxide or oxides of nitrogen"),
    ),
    "wilson": (
        _lim("cyanide", "2", "mg/l", "Town of Wilson § 105-5C(2) [item number not printed]",
             _WI, 129, "cyanides in excess of two milligrams per liter of cyanide in the wastes as discharged"),
        _lim("fog", "100", "mg/l", "Town of Wilson § 105-5C(4) [item number not printed]", _WI, 133,
             "Any water or waste containing fats, wax, grease or oils, whether emulsified or not, in excess of 100 "
             "milligrams per liter"),
    ),
}


def limits_for(site: Site) -> dict[str, PollutantLimit]:
    """The concentration limits in force at ``site``, by parameter key: for a parameter both the permit and the
    jurisdiction limit, the stricter (lower, compared in mg/L); otherwise whichever states one.

    Why the stricter and not simply the permit's: the ordinance's limits bind every user of the sewer (they
    are pretreatment standards, 40 CFR 403.5(d)), so a permit cannot allow more than the ordinance does; a
    permit may be stricter for its discharge. A looser permit number is not dropped silently: `set_aside`
    names it and the report prints it beside the limit in force."""
    limits = {lim.parameter: lim for lim in JURISDICTION_LIMITS.get(site.jurisdiction, ())}
    if site.permit is not None:
        for key, own in site.permit.pollutants.items():
            town = limits.get(key)
            if town is None or own.max_std <= town.max_std:
                limits[key] = own
    return limits


def set_aside(site: Site) -> dict[str, PollutantLimit]:
    """For each parameter both the permit and the jurisdiction limit, the one *not* in force (the looser), by
    parameter key: the report says what the limit in force stands in place of."""
    if site.permit is None:
        return {}
    in_force = limits_for(site)
    town = {lim.parameter: lim for lim in JURISDICTION_LIMITS.get(site.jurisdiction, ())}
    out = {}
    for key, own in site.permit.pollutants.items():
        if key in town:
            out[key] = town[key] if in_force[key] is own else own
    return out


_POLLUTANT_KEYS = {"max", "unit", "cite", "quote"}
_CONCENTRATION_UNITS = "mg/L, ppm, ug/L, µg/L or ppb"


def parse_pollutant_limits(raw: dict[str, Any], p: str, reader: Reader, permit_id: str) -> dict[str, PollutantLimit]:
    """``[site.permit.pollutants.<parameter>]`` tables: ``max`` (a positive finite number; a result strictly
    greater violates), ``unit`` (one the parameter is measured in), ``cite`` (required: the permit's part or
    condition, naming the permit) and optional ``quote`` (the permit's words). The key is a parameter name or
    alias (``copper``, ``cu``, ``"total chromium"``); pH is no concentration (a permit's pH range goes in
    ``[site.permit.limits.ph_min]`` and ``ph_max``). Returns the limits by canonical parameter key."""
    out: dict[str, PollutantLimit] = {}
    keys: dict[str, str] = {}
    for name, table in raw.items():
        where = f"{p}.{name}"
        param = canonical_parameter(name)
        if param is None:
            known = sorted(concentration_parameters())
            reader.error(where, name, f"a pollutant parameter or an alias of one, one of {known}")
            continue
        if PARAMETERS[param].unit_kind != "concentration":
            reader.error(where, name, "a concentration parameter: a permit's pH range goes in "
                                      "[site.permit.limits.ph_min] and [site.permit.limits.ph_max]")
            continue
        if not isinstance(table, dict):
            reader.error(where, table, "a table with max, unit and cite")
            continue
        if param in keys:
            reader.error(where, name, f"one limit per parameter ({keys[param]!r} already limits {param})")
            continue
        keys[param] = name
        reader.unknown_keys(table, where, _POLLUTANT_KEYS)
        parameter = PARAMETERS[param]
        maximum = reader.number(table, "max", where, minimum=0, exclusive_min=True)
        unit = reader.text(table, "unit", where, check=functools.partial(accepts_unit, parameter),
                          expected=f"a unit {parameter.label} is measured in: {_CONCENTRATION_UNITS}")
        cite = reader.text(table, "cite", where, check=lambda c: bool(c.strip()) and permit_id in c,
                          expected=f"the permit's citation for this limit, naming the permit, e.g. "
                                   f"'Permit {permit_id or '<id>'}, Part I.A'")
        out[param] = PollutantLimit(param, Fraction(repr(maximum)), unit, cite, seed="", line=0,
                                    quote=reader.text(table, "quote", where, default=""), permit=permit_id)
    return out
