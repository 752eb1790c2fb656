"""Lab-result import: every malformed row rejected with its line number, nothing partially imported; re-import is
harmless, contradictions are refused; imports are journaled; the lab limits quote their seed lines."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from alarms.journal import Journal
from config.pollutants import JURISDICTION_LIMITS, PARAMETERS, canonical_parameter
from config.schema import SiteConfig
from monitor.reports.aggregates_db import connect
from monitor.reports.labs import LabImportError, read_results
from tests.support import IN_CI, SEEDS, normalize_quote
from tests.unit.lab_scenarios import import_lab, lab_config


def _stored(config: SiteConfig) -> int:
    conn = connect(config.daemon.historian)
    try:
        return len(read_results(conn))
    finally:
        conn.close()


def _journal_kinds(config: SiteConfig) -> list[str]:
    j = Journal(path=config.daemon.historian)
    try:
        return [r.kind for r in j.records()]
    finally:
        j.close()


BAD = """site,sample_date,parameter,value,unit,sample_id
plating,2026-03-02,BOD,250,mg/L,S1
plating,2026-03-02,copper,0.4
plating,2026-02-30,copper,0.4,mg/L,S2
nowhere,2026-03-02,copper,0.4,mg/L,S3
plating,2026-03-02,coper,0.4,mg/L,S4
plating,2026-03-02,lead,abc,mg/L,S5
plating,2026-03-02,lead,-1,mg/L,S6
plating,2026-03-02,nickel,0.2,kg,S7

plating,2026-03-02,BOD,250,mg/L,S1
plating,2026-08-01,BOD,250,mg/L,S9
plating,2026-03-03,lead,nan,mg/L,S10
plating,2026-03-03,lead,<0.005,ug/L,S11
"""


def test_every_malformed_row_is_reported_with_its_line_and_nothing_is_imported(tmp_path: Path) -> None:
    config = lab_config(tmp_path)
    with pytest.raises(LabImportError) as err:
        import_lab(tmp_path, config, BAD)
    lines = [line for line, _msg in err.value.problems]
    assert lines == [3, 4, 5, 6, 7, 8, 9, 11, 12, 13]  # line 10 is blank; 2 and 14 are good
    text = dict(err.value.problems)
    assert text[3] == "4 fields, the header has 6"
    assert "2026-02-30" in text[4]
    assert "'nowhere'" in text[5]
    assert "'coper'" in text[6]
    assert "'abc'" in text[7] and "'-1'" in text[8] and "'nan'" in text[13]
    assert "'kg'" in text[9]
    assert "duplicate of line 2" in text[11]
    assert "future" in text[12]
    assert _stored(config) == 0  # the good rows (2, 14) were not imported either
    assert "lab_import" not in _journal_kinds(config)


def test_a_bad_header_is_line_1(tmp_path: Path) -> None:
    config = lab_config(tmp_path)
    with pytest.raises(LabImportError) as err:
        import_lab(tmp_path, config, "site,date,parameter,value,unit\nplating,2026-03-02,BOD,250,mg/L\n")
    assert [line for line, _ in err.value.problems] == [1]
    assert "sample_date" in err.value.problems[0][1]


def test_import_then_reimport_then_contradiction(tmp_path: Path) -> None:
    config = lab_config(tmp_path)
    good = ("site,sample_date,parameter,value,unit,sample_id,sample_type,lab\n"
            "plating,2026-03-02,BOD,250,mg/L,S1,composite,Acme Labs\n"
            "plating,2026-03-02,Total Chromium,120,ug/L,S1,composite,Acme Labs\n"
            "plating,2026-03-03,lead,<0.005,mg/L,S2,composite,Acme Labs\n")
    first = import_lab(tmp_path, config, good)
    assert (first.imported, first.skipped) == (3, 0)
    again = import_lab(tmp_path, config, good)
    assert (again.imported, again.skipped) == (0, 3) and again.sha256 == first.sha256
    assert _journal_kinds(config) == ["lab_import", "lab_import"]
    conn = connect(config.daemon.historian)
    results = read_results(conn, site="plating")
    conn.close()
    chromium = next(r for r in results if r.parameter == "chromium_total")
    assert chromium.value_std == pytest.approx(0.12)  # µg/L converted to mg/L
    lead = next(r for r in results if r.parameter == "lead")
    assert lead.nondetect and lead.value == 0.005
    with pytest.raises(LabImportError) as err:
        import_lab(tmp_path, config, good.replace(",250,", ",260,"), name="corrected.csv")
    assert [line for line, _ in err.value.problems] == [2]
    assert "contradicts" in err.value.problems[0][1]
    assert _stored(config) == 3


def test_parameter_names_as_labs_write_them() -> None:
    assert canonical_parameter(" Suspended  Solids ") == "tss"
    assert canonical_parameter("Cyanide (amendable)") == "cyanide_amenable"
    assert canonical_parameter("O&G") == "fog"
    assert canonical_parameter("coper") is None
    assert PARAMETERS["bod"].trc == PARAMETERS["fog"].trc == Fraction(14, 10)
    assert PARAMETERS["zinc"].trc == Fraction(12, 10)
    assert PARAMETERS["ph"].trc is None


@pytest.mark.parametrize("key", sorted(JURISDICTION_LIMITS))
def test_lab_limits_quote_their_seed_line(key: str) -> None:
    if not SEEDS.is_dir():
        (pytest.fail if IN_CI else pytest.skip)(f"seed ordinances not found at {SEEDS}")
    for lim in JURISDICTION_LIMITS[key]:
        lines = (SEEDS / lim.seed).read_text(encoding="utf-8").splitlines()
        assert normalize_quote(lim.quote) in normalize_quote(lines[lim.line - 1]), (key, lim.parameter)


@pytest.mark.parametrize("value", ["1_000", "4_0", "infinity", "Infinity", " 5 ", "5 ", "٣", "0x10", "1e"])
def test_only_plain_decimal_numbers_are_results(tmp_path: Path, value: str) -> None:
    """`float` takes each of these; a lab result written so is a guess, refused with its line."""
    config = lab_config(tmp_path)
    text = f"site,sample_date,parameter,value,unit,sample_id\nplating,2026-03-02,lead,{value},mg/L,S1\n"
    with pytest.raises(LabImportError) as err:
        import_lab(tmp_path, config, text)
    assert [line for line, _ in err.value.problems] == [2]
    assert "plain decimal number" in err.value.problems[0][1]


def test_ph_outside_0_to_14_is_refused(tmp_path: Path) -> None:
    config = lab_config(tmp_path)
    head = "site,sample_date,parameter,value,unit,sample_id\n"
    with pytest.raises(LabImportError) as err:
        import_lab(tmp_path, config, head + "plating,2026-03-02,pH,15.2,SU,S1\nplating,2026-03-03,pH,-0.5,SU,S2\n")
    assert [line for line, _ in err.value.problems] == [2, 3]
    assert "between 0 and 14" in err.value.problems[0][1]
    import_lab(tmp_path, config, head + "plating,2026-03-02,pH,14,SU,S1\nplating,2026-03-03,pH,0.0,SU,S2\n"
            "plating,2026-03-04,lead,2.5E-3,mg/L,S3\n")
    assert _stored(config) == 3
