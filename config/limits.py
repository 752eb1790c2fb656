"""Cited limits: jurisdiction profiles, discharge permits, and the units their numbers are printed in.

A *limit* is a number the law states, with the citation an enforcement notice quotes. A site names its
jurisdiction (a profile in ``config/jurisdictions/<key>.toml``, built from the seed ordinance, each limit with
its seed line and a verbatim quote) and may carry a discharge permit whose limits override or add to the
profile's, each with the permit's own citation; a permit may also adopt federal limits by name
(``federal.toml``: 40 CFR 401.17). Where an ordinance is silent the profile says so (``stated = false``), and
``required = true`` marks an alarm the ordinance demands without printing its number (Pawling's pH alarm).
`config.rules` decides from these which rules run.

A permit may also state concentration limits for lab-measured pollutants (``[site.permit.pollutants.<name>]``:
``max``, ``unit``, ``cite``), which replace the jurisdiction's for that parameter in the reports and the SNC
screen (`config.pollutants`, which owns the parameter vocabulary). Unlike a continuous-rule permit
limit, whose citation defaults to "Permit <id>", each must cite the permit's part or condition explicitly.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.errors import ConfigError
from config.pollutants import PollutantLimit, canonical_parameter, concentration_parameters, parse_pollutant_limits
from config.reader import Reader

JURISDICTIONS_DIR = Path(__file__).parent / "jurisdictions"
FEDERAL = "federal"
OPERATORS = ("<", "<=", ">", ">=")

# Numeric fields of each limit key: name -> (required, exclusive lower bound). A temperature limit needs at
# least one of max_c / max_f; a sampler temperature at least one unit pair.
_FIELDS: dict[str, dict[str, bool]] = {
    "ph_min": {"value": True},
    "ph_max": {"value": True},
    "ph_excursion_single": {"minutes": True},
    "ph_excursion_monthly": {"minutes": True},
    "temperature_influent": {"max_c": False, "max_f": False},
    "temperature_discharge": {"max_c": False, "max_f": False},
    "temperature_grease_interceptor": {"max_c": False, "max_f": False},
    "lel_successive": {"percent": True, "readings": True},
    "lel_single": {"percent": True},
    "slug": {"multiplier": True, "minutes": True, "baseline_hours": False},
    "sampler_temperature": {
        "setpoint_c": False,
        "tolerance_c": False,
        "setpoint_f": False,
        "tolerance_f": False,
    },
    "sampler_interval": {"minutes": True},
}
_TEXT_KEYS = {
    "stated",
    "required",
    "cite",
    "line",
    "line_end",
    "quote",
    "clause",
    "wording",
    "note",
    "operator",
    "duration_operator",
    "baseline",
    "normal_sewage",
    "normal_sewage_unit",
    "reading",
    "literal",
    "measured_by",
    "at_all_times",
}


# Keys only a jurisdiction profile sets (its seed lines, the ordinance's literal words, a limit the law is silent
# on): a permit states its own number with its own citation, so these are not offered to it.
_PROFILE_ONLY_KEYS = {"line", "line_end", "literal", "stated", "required"}


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit as stated (numbers in the units printed), or a record that the law is silent on it.

    ``operator`` is the violation condition, ``reading OPERATOR value``: "less than 5.0" is ``<`` (5.0
    complies), Vestal's "between 6 and 9" is ``<`` 6 and ``>`` 9 (6 and 9 comply).
    """

    key: str
    citation: str
    stated: bool = True
    required: bool = (
        False  # the law requires this alarm but prints no number: refuse unless a permit states it
    )
    numbers: Mapping[str, float] = field(default_factory=dict)
    operator: str = ">"
    duration_operator: str = (
        ">"  # slug: "longer than 15 minutes" is ">", "for a duration of 15 minutes" is ">="
    )
    baseline: str = (
        "trailing"  # slug: "trailing" (24 h of normal operation) or "normal_sewage" (fixed strength)
    )
    normal_sewage: Mapping[str, float] = field(default_factory=dict)
    wording: str = ""
    note: str = ""
    reading: str = ""  # the reading of ambiguous words the rule runs on, printed wherever the rule is shown
    literal: str = ""  # the words as printed, where the reading differs from a literal one
    measured_by: str = ""  # slug: "lab" where the law measures it by laboratory tests (Vestal-Endicott)
    at_all_times: bool = False  # pH range required "at all times": conflicts with 40 CFR 401.17's allowances
    line: int = 0  # seed line (profiles), for the record and the seed-text tests
    line_end: int = 0
    quote: str = ""
    # the whole sentence (or list item) the quote stands in, omissions marked "…": what a notice quotes as the
    # words violated, so that no fragment is presented as the ordinance's text
    clause: str = ""


@dataclass(frozen=True, slots=True)
class Clause:
    """A clause of the ordinance that is no streaming rule, listed so that nothing the law states is silently
    ignored: ``treatment`` says what the daemon does with it (``lab``: a limit on composite-sample lab results,
    screened by `pretreat snc`; ``note``: a right reserved or a narrative requirement, shown, never judged)."""

    key: str
    citation: str
    treatment: str
    note: str
    quote: str = ""
    line: int = 0
    line_end: int = 0


@dataclass(frozen=True, slots=True)
class Profile:
    key: str
    name: str
    seed: str
    limits: Mapping[str, Limit]
    clauses: Mapping[str, Clause] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Permit:
    """A site's discharge permit: its id, its own cited limits, the federal limits it adopts, and its own
    concentration limits for lab-measured pollutants by canonical parameter key (``copper``, ``bod``...)."""

    id: str
    limits: Mapping[str, Limit]
    adopt: tuple[str, ...] = ()
    pollutants: Mapping[str, PollutantLimit] = field(default_factory=dict)
    slug_reading: str = ""  # "multiple_alone": the literal reading of Southeast § 112-5A(1)(j), chosen by the permit
    slug_surrogates: tuple[str, ...] = ()  # channels the permit names as online surrogates of lab-measured slugs
    slug_cite: str = ""  # the permit's part that makes either choice
    confirm_conflict: bool = False  # the control authority confirms adopting 401.17 over "at all times" wording
    issued: str = ""  # the permit's dates (ISO 8601 days), as reports and notices print them
    expires: str = ""
    categorical: str = ""  # the federal categorical standard the user is subject to, e.g. "40 CFR 433"


def known_jurisdictions() -> list[str]:
    return sorted(p.stem for p in JURISDICTIONS_DIR.glob("*.toml") if p.stem != FEDERAL)


_PROFILES: dict[str, tuple[Profile | None, list[ConfigError]]] = {}


def load_profile(key: str) -> tuple[Profile | None, list[ConfigError]]:
    """A jurisdiction profile (with its parent's limits merged under its own), and the errors found in it."""
    if key not in _PROFILES:
        _PROFILES[key] = _load_profile(key, ())
    return _PROFILES[key]


def _load_profile(key: str, seen: tuple[str, ...]) -> tuple[Profile | None, list[ConfigError]]:
    path = JURISDICTIONS_DIR / f"{key}.toml"
    reader = Reader(str(path))
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        reader.error("(file)", str(path), f"a readable TOML profile ({exc})")
        return None, reader.errors
    reader.unknown_keys(data, "", {"key", "name", "seed", "parent", "limits", "clauses", "obligations"})
    limits: dict[str, Limit] = {}
    clauses: dict[str, Clause] = {}
    parent = reader.text(data, "parent", "", default="")
    if parent:
        if parent in seen or parent == key:
            reader.error("parent", parent, "a profile that does not include this one")
        else:
            base, errors = _load_profile(parent, (*seen, key))
            reader.errors.extend(errors)
            limits.update(base.limits if base else {})
            clauses.update(base.clauses if base else {})
    for name, raw in reader.table(data, "limits", "").items():
        limit = parse_limit(raw, name, f"limits.{name}", reader, default_cite="")
        if limit is not None:
            limits[name] = limit
    for name, raw in reader.table(data, "clauses", "").items():
        clauses[name] = _clause(raw, name, f"clauses.{name}", reader)
    profile = Profile(
        key=reader.text(data, "key", ""),
        name=reader.text(data, "name", ""),
        seed=reader.text(data, "seed", "", default=""),
        limits=limits,
        clauses=clauses,
    )
    if profile.key != key:
        reader.error("key", profile.key, f"the file's own name {key!r}")
    return (None if reader.errors else profile), reader.errors


def _clause(raw: Any, key: str, p: str, reader: Reader) -> Clause:
    table = raw if isinstance(raw, dict) else {}
    if not isinstance(raw, dict):
        reader.error(p, raw, "a table")
    reader.unknown_keys(table, p, {"cite", "treatment", "note", "quote", "line", "line_end"})
    return Clause(
        key=key, citation=reader.text(table, "cite", p), note=reader.text(table, "note", p),
        treatment=reader.text(table, "treatment", p, check=("lab", "note").__contains__, expected="'lab' or 'note'"),
        quote=reader.text(table, "quote", p, default=""),
        line=reader.integer(table, "line", p, default=0, minimum=0),
        line_end=reader.integer(table, "line_end", p, default=0, minimum=0),
    )


def parse_limit(raw: Any, key: str, p: str, reader: Reader, *, default_cite: str) -> Limit | None:
    """Validate one limit table (profile or permit); every number must be finite and positive.

    ``default_cite`` is the permit's own citation ("Permit <id>"); profile limits must cite their source,
    except an unstated limit that is not required (there is nothing to cite).
    """
    if key not in _FIELDS:
        reader.error(p, key, f"a limit key, one of {sorted(_FIELDS)}")
        return None
    if not isinstance(raw, dict):
        reader.error(p, raw, "a table")
        return None
    allowed = _TEXT_KEYS | set(_FIELDS[key])
    if default_cite:  # a permit's limit
        allowed -= _PROFILE_ONLY_KEYS
        for k in sorted(_PROFILE_ONLY_KEYS & set(raw)):
            reader.error(f"{p}.{k}", raw[k], f"no {k}: a key of the ordinance's profile, not of a permit; the keys "
                                             f"a permit may set are {sorted(allowed)}")
        raw = {k: v for k, v in raw.items() if k not in _PROFILE_ONLY_KEYS}
    reader.unknown_keys(raw, p, allowed)
    common = _record(raw, key, p, reader, default_cite)
    if not common["stated"]:
        return Limit(**common)
    if common["required"]:
        reader.error(f"{p}.required", True, "required only on an unstated limit (stated = false)")
    numbers = {
        name: reader.number(raw, name, p, minimum=0, exclusive_min=True)
        for name, needed in _FIELDS[key].items()
        if needed or name in raw
    }
    _check_number_sets(key, numbers, p, reader)
    baselines = ("trailing", "normal_sewage")
    baseline = reader.text(raw, "baseline", p, default="trailing", check=baselines.__contains__,
                          expected="'trailing' or 'normal_sewage'")
    sewage_raw = reader.table(raw, "normal_sewage", p)
    sewage = {
        str(k): reader.number(sewage_raw, k, f"{p}.normal_sewage", minimum=0, exclusive_min=True)
        for k in sewage_raw
    }
    for k in [k for k in sewage if not _constituent(k)]:
        reader.error(f"{p}.normal_sewage.{k}", sewage.pop(k),
                     f"a constituent of normal sewage, one of {sorted(concentration_parameters())} (or an alias "
                     f"of one, e.g. 'suspended_solids')")
    if key == "slug" and baseline == "normal_sewage" and not sewage:
        reader.error(f"{p}.normal_sewage", {}, "each constituent's normal-sewage strength: { bod = 240 }")
    operator = reader.text(raw, "operator", p, default="<" if key == "ph_min" else ">",
                          check=OPERATORS.__contains__, expected=f"one of {list(OPERATORS)}")
    duration_operator = reader.text(raw, "duration_operator", p, default=">", check=(">", ">=").__contains__,
                                   expected="'>' or '>='")
    return Limit(**common, numbers=numbers, baseline=baseline, normal_sewage=sewage, operator=operator,
                 duration_operator=duration_operator)


def _constituent(name: str) -> bool:
    """A normal-sewage strength names a concentration parameter ("suspended_solids" = "suspended solids")."""
    return canonical_parameter(name.replace("_", " ")) in concentration_parameters()


def _record(raw: dict[str, Any], key: str, p: str, reader: Reader, default_cite: str) -> dict[str, Any]:
    """The fields every limit has, stated or not: stated or required, its citation, its seed text."""
    stated = _bool(raw, "stated", p, reader, default=True)
    required = _bool(raw, "required", p, reader, default=False)
    expected = "the citation (section as printed, or seed file and line)"
    if not default_cite and (stated or required):
        cite = reader.text(raw, "cite", p, expected=expected)
    else:
        cite = reader.text(raw, "cite", p, default=default_cite, expected=expected)
    return dict(
        key=key, citation=cite, stated=stated, required=required,
        wording=reader.text(raw, "wording", p, default=""), note=reader.text(raw, "note", p, default=""),
        reading=reader.text(raw, "reading", p, default=""), literal=reader.text(raw, "literal", p, default=""),
        measured_by=reader.text(raw, "measured_by", p, default="", check=("", "lab").__contains__,
                               expected="'lab' (measured by laboratory tests of composite samples)"),
        line=reader.integer(raw, "line", p, default=0, minimum=0),
        line_end=reader.integer(raw, "line_end", p, default=0, minimum=0),
        quote=reader.text(raw, "quote", p, default=""),
        clause=reader.text(raw, "clause", p, default=""),
        at_all_times=_bool(raw, "at_all_times", p, reader, default=False),
    )


def _check_number_sets(key: str, numbers: dict[str, float], p: str, reader: Reader) -> None:
    if key.startswith("temperature_") and not numbers:
        reader.error(p, {}, "max_c and/or max_f (each as printed)")
    if key == "sampler_temperature":
        pairs = [("setpoint_c", "tolerance_c"), ("setpoint_f", "tolerance_f")]
        if not any(a in numbers and b in numbers for a, b in pairs) or any(
            (a in numbers) != (b in numbers) for a, b in pairs
        ):
            reader.error(p, sorted(numbers), "setpoint_c with tolerance_c and/or setpoint_f with tolerance_f")
    if key == "slug" and numbers.get("baseline_hours", 24.0) != 24.0:
        reader.error(f"{p}.baseline_hours", numbers["baseline_hours"],
                     "24 (or leave it out): the baseline is the 24-hour average of whole local days of normal "
                     "operation; their number is [site.rules.slug] baseline_days")
    readings = numbers.get("readings", 2.0)
    if key == "lel_successive" and (readings != int(readings) or readings < 2):
        reader.error(f"{p}.readings", readings, "a whole number of successive readings (>= 2)")


def parse_permit(raw: dict[str, Any], p: str, reader: Reader) -> Permit | None:
    """``[site.permit]``: ``id``, ``adopt`` (federal limit keys), ``[site.permit.limits.<key>]``,
    ``[site.permit.pollutants.<parameter>]``."""
    if not raw:
        return None
    reader.unknown_keys(raw, p, {"id", "adopt", "limits", "pollutants", "description", "slug", "confirm_conflict",
                                 "issued", "expires", "categorical", "calibration"})  # calibration: config.calibration
    permit_id = reader.text(raw, "id", p, expected="the permit number, e.g. 'IU-2024-017'")
    adopt = raw.get("adopt", [])
    federal, _ = load_profile(FEDERAL)
    known = sorted(federal.limits) if federal else []
    if not isinstance(adopt, list) or any(a not in known for a in adopt):
        reader.error(f"{p}.adopt", adopt, f"a list of federal limits, from {known}")
        adopt = []
    limits: dict[str, Limit] = {}
    for key, table in reader.table(raw, "limits", p).items():
        limit = parse_limit(table, key, f"{p}.limits.{key}", reader, default_cite=f"Permit {permit_id}")
        if limit is not None:  # "stated" is no key of a permit's (parse_limit): a permit states its number
            limits[key] = limit
    pollutants = parse_pollutant_limits(reader.table(raw, "pollutants", p), f"{p}.pollutants", reader, permit_id)
    slug = reader.table(raw, "slug", p)
    reader.unknown_keys(slug, f"{p}.slug", {"reading", "surrogates", "cite"})
    reading = reader.text(slug, "reading", f"{p}.slug", default="", check=("", "multiple_alone").__contains__,
                         expected="'multiple_alone' (the literal reading: more than the multiple at any reading)")
    surrogates = slug.get("surrogates", [])
    if not isinstance(surrogates, list) or not all(isinstance(x, str) for x in surrogates):
        reader.error(f"{p}.slug.surrogates", surrogates, "a list of channel ids the permit names as surrogates")
        surrogates = []
    cite = "" if not slug else reader.text(slug, "cite", f"{p}.slug",
                      check=lambda c: permit_id in c, expected=f"the permit's citation for this choice, naming "
                                                             f"the permit ('Permit {permit_id or '<id>'}, Part ...')")
    return Permit(id=permit_id, limits=limits, adopt=tuple(adopt), pollutants=pollutants, slug_reading=reading,
                  slug_surrogates=tuple(surrogates), slug_cite=cite,
                  confirm_conflict=_bool(raw, "confirm_conflict", p, reader, default=False),
                  issued=reader.day(raw, "issued", p), expires=reader.day(raw, "expires", p),
                  categorical=reader.text(raw, "categorical", p, default=""))



def _bool(raw: dict[str, Any], key: str, p: str, reader: Reader, *, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        reader.error(f"{p}.{key}", value, "true or false")
        return default
    return value


def fahrenheit_to_celsius(f: float) -> float:
    return (f - 32.0) * 5.0 / 9.0


def celsius_to_fahrenheit(c: float) -> float:
    return c * 9.0 / 5.0 + 32.0


_CELSIUS = {"degc", "°c", "c", "celsius", "deg c"}
_FAHRENHEIT = {"degf", "°f", "f", "fahrenheit", "deg f"}


def temperature_unit(unit: str) -> str:
    """'c', 'f', or '' for a unit no temperature limit can be expressed in."""
    u = unit.strip().lower()
    return "c" if u in _CELSIUS else "f" if u in _FAHRENHEIT else ""


def in_unit(limit: Limit, prefix: str, unit: str) -> tuple[float, str] | None:
    """A temperature figure of ``limit`` (``max``, ``setpoint``, ``tolerance``) in the channel's unit.

    Where the law prints both figures of a maximum and they differ (Wilson § 105-5C(13) and Mineola § 46.54A(1):
    "150° F. (65° C.)", and 150 °F is 65.56 °C), the limit is the one most favourable to the discharger, each
    converted exactly to the channel's unit: a penal text read against its drafter, and no verdict depends on
    whether the transmitter reads °C or °F (65.3 °C and 149.5 °F both comply); `printed_pair_note` words that
    reading for `pretreat rules` and the report. When only
    the other unit is printed, it is converted and the citation says so.
    """
    want = temperature_unit(unit)
    if not want:
        return None
    other = "f" if want == "c" else "c"
    printed = limit.numbers.get(f"{prefix}_{want}")
    value = limit.numbers.get(f"{prefix}_{other}")
    if value is None:
        return (printed, "") if printed is not None else None
    if prefix == "tolerance":  # a temperature difference: scale only
        converted = value * 5.0 / 9.0 if want == "c" else value * 9.0 / 5.0
    else:
        converted = fahrenheit_to_celsius(value) if want == "c" else celsius_to_fahrenheit(value)
    if printed is None:
        return converted, f" (converted from {value:g} °{other.upper()} as printed)"
    if prefix == "max" and converted > printed + 1e-9:
        return converted, ""  # the reading is stated by printed_pair_note, not in the citation
    return printed, ""


def printed_pair_note(limit: Limit) -> str:
    """The reading of a maximum printed in both units that do not convert exactly ("" when they agree)."""
    c, f = limit.numbers.get("max_c"), limit.numbers.get("max_f")
    if c is None or f is None or abs(fahrenheit_to_celsius(f) - c) < 1e-9:
        return ""
    hi_c = max(c, fahrenheit_to_celsius(f))
    return (f"printed as {f:g} °F ({c:g} °C), which differ ({f:g} °F = {fahrenheit_to_celsius(f):.2f} °C): the "
            f"figure most favourable to the discharger is in force, {hi_c:.2f} °C = {celsius_to_fahrenheit(hi_c):.1f} "
            f"°F, whatever unit the transmitter reads")
