"""Composite-sample lab results: CSV import (all or nothing) and the ``lab_results`` table.

The CSV is what a contract lab sends, one result per row, with a header naming at least ``site``,
``sample_date`` (ISO ``YYYY-MM-DD``, the day the composite was collected), ``parameter``, ``value`` and
``unit``; optional columns ``sample_id``, ``sample_type`` (composite, grab), ``lab``. A non-detect is written
``<0.005`` (below that detection limit): it is stored as non-detect with the detection limit as its value
and never counts as exceeding a limit.

Every row is checked before anything is written; if any row is wrong, the import is refused with each problem
and its line number (line 1 is the header), and nothing is stored: a half-imported report is worse than
none, because it looks complete. Importing the same file again is harmless (identical results are
recognised and skipped), but a result that contradicts one already stored (same site, date, parameter and
sample id, different value) is an error: corrections are made deliberately, not by re-import. Each import
is journaled (file name, SHA-256 of its bytes, counts).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import sqlite3
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from config.pollutants import PARAMETERS, canonical_parameter, to_mg_per_litre
from config.schema import SiteConfig
from monitor.number_text import excerpt, plain_float

REQUIRED = ("site", "sample_date", "parameter", "value", "unit")
OPTIONAL = ("sample_id", "sample_type", "lab")
PH_MAX = 14.0  # pH units: a result outside 0-14 is a typing or unit mistake, not a measurement
_SCHEMA = """CREATE TABLE IF NOT EXISTS lab_results (
    id INTEGER PRIMARY KEY,
    site TEXT NOT NULL, sample_date TEXT NOT NULL, parameter TEXT NOT NULL,
    value REAL NOT NULL,          -- as reported (the detection limit for a non-detect)
    unit TEXT NOT NULL,           -- as reported
    value_std REAL NOT NULL,      -- in the limit's unit: mg/L (ppm), or pH units
    nondetect INTEGER NOT NULL,
    sample_id TEXT NOT NULL, sample_type TEXT NOT NULL, lab TEXT NOT NULL,
    source TEXT NOT NULL, line INTEGER NOT NULL, imported REAL NOT NULL,
    UNIQUE (site, sample_date, parameter, sample_id)
) STRICT"""


@dataclass(frozen=True, slots=True)
class LabResult:
    site: str
    sample_date: date
    parameter: str  # canonical key (config.pollutants.PARAMETERS)
    value: float
    unit: str
    value_std: float
    nondetect: bool
    sample_id: str = ""
    sample_type: str = ""
    lab: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class ImportResult:
    imported: int
    skipped: int  # identical to results already stored
    sha256: str


class LabImportError(Exception):
    """The file was refused; ``problems`` lists (line, message), every one found."""

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s); nothing imported")


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(_SCHEMA)


def parse_csv(text: str, config: SiteConfig, *, today: date) -> tuple[list[LabResult], list[tuple[int, str]]]:
    """Every row as a `LabResult`, and every problem found (line numbers as a text editor shows them)."""
    problems: list[tuple[int, str]] = []
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return [], [(1, "empty file: expected a header with " + ", ".join(REQUIRED))]
    cols = [h.strip().lower() for h in header]
    missing = [c for c in REQUIRED if c not in cols]
    unknown = [c for c in cols if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(cols)) != len(cols):
        return [], [(1, f"header {header}: needs {list(REQUIRED)} (optional {list(OPTIONAL)}); "
                        f"missing {missing}, unknown {unknown}")]
    sites = {s.id for s in config.sites}
    out: list[LabResult] = []
    seen: dict[tuple[str, date, str, str], int] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        if len(row) != len(cols):
            problems.append((line, f"{len(row)} fields, the header has {len(cols)}"))
            continue
        cells = {c: (v if c == "value" else v.strip()) for c, v in zip(cols, row, strict=True)}  # a number as written
        result, errs = _row(cells, line, sites, today)
        problems.extend((line, e) for e in errs)
        if result is None:
            continue
        key = (result.site, result.sample_date, result.parameter, result.sample_id)
        if key in seen:
            problems.append((line, f"duplicate of line {seen[key]} (same site, sample_date, parameter, "
                                   "sample_id)"))
            continue
        seen[key] = line
        out.append(result)
    return out, problems


def _row(r: dict[str, str], line: int, sites: set[str], today: date) -> tuple[LabResult | None, list[str]]:
    errs: list[str] = []
    if r["site"] not in sites:
        errs.append(f"site {r['site']!r} is not in the configuration ({sorted(sites)})")
    try:
        day = date.fromisoformat(r["sample_date"])
        if day > today:
            errs.append(f"sample_date {r['sample_date']} is in the future")
    except ValueError:
        errs.append(f"sample_date {r['sample_date']!r} is not a date (YYYY-MM-DD)")
        day = today
    key = canonical_parameter(r["parameter"])
    if key is None:
        errs.append(f"unknown parameter {r['parameter']!r}; known: {sorted(PARAMETERS)}")
    text = r["value"]
    nondetect = text.startswith("<")
    try:
        value = plain_float(text[1:] if nondetect else text)  # no '1_000', 'infinity' or ' 5 ' (see there)
        if value < 0:
            raise ValueError
    except ValueError:
        errs.append(f"value {excerpt(text)} is not a non-negative plain decimal number (a non-detect is "
                    "written <DL)")
        value = math.nan
    if key is not None and PARAMETERS[key].unit_kind == "ph" and math.isfinite(value) and value > PH_MAX:
        errs.append(f"value {text!r}: pH is between 0 and {PH_MAX:g}")
        value = math.nan
    std = None
    if key is not None and math.isfinite(value):
        std = to_mg_per_litre(value, r["unit"], PARAMETERS[key])
        if std is None:
            want = "pH units (SU)" if PARAMETERS[key].unit_kind == "ph" else "mg/L, ppm, ug/L or ppb"
            errs.append(f"unit {r['unit']!r} does not fit {PARAMETERS[key].label}: expected {want}")
    if errs or key is None or std is None:
        return None, errs
    return LabResult(site=r["site"], sample_date=day, parameter=key, value=value, unit=r["unit"], value_std=std,
                     nondetect=nondetect, sample_id=r.get("sample_id", ""), sample_type=r.get("sample_type", ""),
                     lab=r.get("lab", ""), line=line), []


def import_csv(conn: sqlite3.Connection, path: Path, config: SiteConfig, *, now: float, today: date,
               journal: Any | None = None) -> ImportResult:
    """Validate ``path`` entirely, then store it in one transaction (journaled), or raise `LabImportError`.

    ``journal``: an `alarms.journal.Journal` on the same file; its record commits in the same transaction.
    """
    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabImportError([(1, f"not UTF-8 text ({exc})")]) from exc
    results, problems = parse_csv(text, config, today=today)
    ensure_schema(conn)
    fresh, skipped = [], 0
    for r in results:
        stored = conn.execute("SELECT value, nondetect, unit FROM lab_results WHERE site = ? AND sample_date = ? "
                              "AND parameter = ? AND sample_id = ?",
                              (r.site, r.sample_date.isoformat(), r.parameter, r.sample_id)).fetchone()
        if stored is None:
            fresh.append(r)
        elif (stored[0], bool(stored[1]), stored[2]) == (r.value, r.nondetect, r.unit):
            skipped += 1
        else:
            problems.append((r.line, f"contradicts the stored result for {r.site} {r.sample_date} {r.parameter} "
                                     f"(stored {'<' if stored[1] else ''}{stored[0]:g} {stored[2]})"))
    if problems:
        raise LabImportError(sorted(problems))
    rows = [(r.site, r.sample_date.isoformat(), r.parameter, r.value, r.unit, r.value_std, int(r.nondetect),
             r.sample_id, r.sample_type, r.lab, Path(path).name, r.line, now) for r in fresh]
    insert = ("INSERT INTO lab_results (site, sample_date, parameter, value, unit, value_std, nondetect, sample_id, "
              "sample_type, lab, source, line, imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    payload = {"file": Path(path).name, "sha256": digest, "imported": len(fresh), "skipped": skipped}
    if journal is not None:
        from alarms.journal import Entry

        journal.append_many([Entry("lab_import", payload, now)], also=lambda _seqs: [(insert, rows)])
    else:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(insert, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return ImportResult(imported=len(fresh), skipped=skipped, sha256=digest)


def read_results(conn: sqlite3.Connection, *, site: str | None = None, first: date | None = None,
                 last: date | None = None) -> list[LabResult]:
    """Stored results, by site, date and parameter; ``first``..``last`` both included."""
    ensure_schema(conn)
    sql = ("SELECT site, sample_date, parameter, value, unit, value_std, nondetect, sample_id, sample_type, lab, line "
           "FROM lab_results WHERE 1 = 1")
    args: list[object] = []
    for cond, value in (("site = ?", site), ("sample_date >= ?", first and first.isoformat()),
                        ("sample_date <= ?", last and last.isoformat())):
        if value is not None:
            sql += f" AND {cond}"
            args.append(value)
    rows = conn.execute(sql + " ORDER BY site, sample_date, parameter, sample_id", args)
    return [LabResult(site=s, sample_date=date.fromisoformat(d), parameter=p, value=v, unit=u, value_std=vs,
                      nondetect=bool(nd), sample_id=sid, sample_type=st, lab=lab, line=ln)
            for s, d, p, v, u, vs, nd, sid, st, lab, ln in rows]
