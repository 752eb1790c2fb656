"""The significant-noncompliance screen on a hand-computed set, with the ties the rule turns on: exactly 66 %
and exactly 33 % of results, and results exactly equal to the limit (not "in excess") and to limit × TRC
("equal or exceed")."""

from __future__ import annotations

from datetime import date
from fractions import Fraction
from pathlib import Path

from monitor.reports.snc import SncScreen, percent, window_ending
from tests.unit.lab_scenarios import lab_config, screen_imported


def _rows(site: str, param: str, values: list[str], start: int = 0, month: int = 3) -> list[str]:
    return [f"{site},2026-{month:02d}-{1 + (i % 28):02d},{param},{v},mg/L,{param}-{start + i}"
            for i, v in enumerate(values)]


def _dataset() -> str:
    rows = ["site,sample_date,parameter,value,unit,sample_id"]
    # plating copper (limit 1.0, TRC 1.2): 33 of 50 over the limit = exactly 66 % -> chronic;
    # 16 of them at exactly 1.2 = 32 % at TRC -> no TRC violation
    rows += _rows("plating", "copper", ["1.2"] * 16 + ["1.1"] * 17 + ["0.5"] * 17)
    rows += ["plating,2025-12-31,copper,99,mg/L,outside-window"]  # before the window: ignored
    # plating lead (limit 0.1, TRC 1.2 -> 0.12): 33 of 100 at exactly 0.12 (= limit × TRC) -> exactly 33 %: TRC;
    # exceeding share 33 % -> not chronic. In binary floating point 0.1 × 1.2 > 0.12, which would miss all 33.
    rows += _rows("plating", "lead", ["0.12"] * 33 + ["0.05"] * 67)
    # bakery BOD (limit 300, TRC 1.4 -> 420): 420 (= product), 301, 300 (= limit, not in excess)
    # -> 2 of 3 exceed = 66.7 % chronic; 1 of 3 at TRC = 33.3 % TRC
    rows += _rows("bakery", "BOD", ["420", "301", "300"])
    # bakery TSS (limit 350, TRC 1.4 -> 490): 65 of 100 exceed (65 %) and 32 at 490 (32 %): neither
    rows += _rows("bakery", "TSS", ["490"] * 32 + ["351"] * 33 + ["100"] * 35)
    # bakery zinc: no Southeast limit -> listed as unscreened
    rows += _rows("bakery", "zinc", ["5"])
    # wilson-co cyanide (limit 2): non-detects with a detection limit above the limit, and exactly 2 -> 0 %
    rows += ["wilson-co,2026-04-01,cyanide,<5,mg/L,a", "wilson-co,2026-04-02,cyanide,<5,mg/L,b",
             "wilson-co,2026-04-03,cyanide,2,mg/L,c"]
    return "\n".join(rows) + "\n"


def _screen(tmp_path: Path) -> SncScreen:
    return screen_imported(tmp_path, lab_config(tmp_path), _dataset(), 50 + 1 + 100 + 3 + 100 + 1 + 3)


def test_hand_computed_screen_with_ties(tmp_path: Path) -> None:
    s = _screen(tmp_path)
    got = {(x.site, x.parameter): (x.count, x.exceeding, x.at_trc, x.chronic, x.trc_violation) for x in s.screens}
    assert got == {
        ("plating", "copper"): (50, 33, 16, True, False),
        ("plating", "lead"): (100, 33, 33, False, True),
        ("bakery", "bod"): (3, 2, 1, True, True),
        ("bakery", "tss"): (100, 65, 32, False, False),
        ("wilson-co", "cyanide"): (3, 0, 0, False, False),
    }
    assert s.industries_in_snc() == ["bakery", "plating"]
    assert [(r.site, r.parameter) for r in s.unscreened] == [("bakery", "zinc")]
    copper = next(x for x in s.screens if x.parameter == "copper")
    assert copper.exceed_share == Fraction(66, 100) and percent(copper.exceed_share) == "66.0 %"


def test_shares_print_rounded_down() -> None:
    assert percent(Fraction(2, 3)) == "66.6 %"  # never shown as 66.7 % ≥ 66 when it is the true 66.66…
    assert percent(Fraction(6599, 10000)) == "65.9 %"
    assert percent(Fraction(1, 3)) == "33.3 %"


def test_window_is_six_calendar_months() -> None:
    assert window_ending(date(2026, 8, 31)) == (date(2026, 3, 1), date(2026, 8, 31))
    assert window_ending(date(2026, 3, 15)) == (date(2025, 9, 16), date(2026, 3, 15))
