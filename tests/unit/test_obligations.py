"""Obligations per jurisdiction (golden, each cited and quoted from its seed), their due times in the site's zone,
and which episodes start them."""

from __future__ import annotations

import os
import re
import unicodedata
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.limits import known_jurisdictions
from config.obligations import obligations_of, obliges, profile_obligations, silence_note, site_obligations
from tests.support import IN_CI
from tests.unit.checks_helpers import channel, load, site_toml

SEEDS = Path(os.environ.get("PRETREAT_ORDINANCES") or Path(__file__).resolve().parents[3] / "shared" / "seeds")
NY = "America/New_York"

# (key, citation, due_text, written, to): what each ordinance states, and nothing more
IMMEDIATELY = "immediately (no period stated)"
GOLDEN: dict[str, list[tuple[str, str, str, bool, str]]] = {
    "southeast": [("telephone_notice", "Town of Southeast § 112-5H", IMMEDIATELY, False, "the POTW")],
    "wilson": [
        ("immediate_notice", "Town of Wilson § 105-7E(8)", IMMEDIATELY, False, "the Town"),
        ("written_statement", "Town of Wilson § 105-7E(8)", "within 15 days of the date of the occurrence", True,
         "the Town"),
    ],
    "vestal_endicott": [
        ("immediate_notice", "Town of Vestal § 18-76(j) [section number inferred]", IMMEDIATELY, False,
         "the town engineer and the village superintendent of public works"),
        ("written_report", "Town of Vestal § 18-76(j) [section number inferred]", "within 5 days of the occurrence",
         True, "the commissioner of public works, the village superintendent of public works and town engineer"),
    ],
    "pawling": [],
    "mineola": [],
    "vestal": [],
}
FEDERAL = [
    ("notice_24h", "40 CFR 403.12(g)(2)", "within 24 hours of becoming aware", False, "the Control Authority"),
    ("repeat_sampling", "40 CFR 403.12(g)(2)", "within 30 days after becoming aware", True, "the Control Authority"),
]


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\u2011", "-")
    return re.sub(r"\s+", " ", text).strip()


def _seed_lines(seed: str) -> list[str]:
    if not SEEDS.is_dir():
        if IN_CI:
            pytest.fail(f"seed ordinance texts not found at {SEEDS}")
        pytest.skip(f"seed ordinance texts not found at {SEEDS}")
    return (SEEDS / seed).read_text(encoding="utf-8").splitlines()


def _golden(rules: tuple) -> list[tuple[str, str, str, bool, str]]:  # type: ignore[type-arg]
    return [(r.key, r.citation, r.due_text, r.written, r.to) for r in rules]


def test_every_jurisdiction_has_its_golden_obligations() -> None:
    assert sorted(GOLDEN) == known_jurisdictions()
    for key, expected in GOLDEN.items():
        assert _golden(profile_obligations(key)) == expected, key
    assert _golden(profile_obligations("federal")) == FEDERAL


@pytest.mark.parametrize("key", [k for k, v in GOLDEN.items() if v])
def test_each_obligation_quotes_its_seed_line_with_its_deadline(key: str) -> None:
    import tomllib

    from config.limits import JURISDICTIONS_DIR

    seed = tomllib.loads((JURISDICTIONS_DIR / f"{key}.toml").read_text(encoding="utf-8"))["seed"]
    lines = _seed_lines(seed)
    for r in profile_obligations(key):
        assert r.line > 0 and r.citation and "seed" not in r.citation
        assert _normalize(r.quote) in _normalize(lines[r.line - 1]), f"{key}.{r.key}: quote not at line {r.line}"
        words = _normalize(r.quote).lower()
        if r.within_days is None and r.within_hours is None:
            assert "immediately" in words, f"{key}.{r.key}: due at once, but the quote does not say so"
        else:
            assert f"{r.within_days}" in words, f"{key}.{r.key}: the quote does not state {r.within_days} days"


def test_the_federal_obligations_state_24_hours_and_30_days() -> None:
    notice, repeat = profile_obligations("federal")
    assert notice.within_hours == 24 and "within 24 hours of becoming aware of the violation" in notice.quote
    assert repeat.within_days == 30 and "within 30 days after becoming aware of the violation" in repeat.quote


def test_a_jurisdiction_stating_none_says_so_and_gets_only_the_federal_ones() -> None:
    assert "Village of Pawling" in silence_note("pawling") or "Pawling" in silence_note("pawling")
    assert "states no notification" in silence_note("mineola")
    assert silence_note("southeast") == ""
    assert [r.source for r in site_obligations(jurisdiction="pawling")] == ["federal", "federal"]
    assert site_obligations(jurisdiction="southeast", kind="plant") == ()


def _ts(text: str, zone: str = NY) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def test_due_times_in_the_site_zone_across_the_spring_dst_change() -> None:
    onset, aware = _ts("2026-03-07T15:00"), _ts("2026-03-07T15:20")  # EST; DST starts 2026-03-08
    wilson = {r.key: r for r in profile_obligations("wilson")}
    vestal = {r.key: r for r in profile_obligations("vestal_endicott")}
    fed = {r.key: r for r in profile_obligations("federal")}
    assert wilson["immediate_notice"].due(onset=onset, aware=aware, timezone=NY) == aware
    # "within 15 days of the date of the occurrence": through the end of 2026-03-22, local (EDT) midnight
    assert wilson["written_statement"].due(onset=onset, aware=aware, timezone=NY) == _ts("2026-03-23T00:00")
    # "within five (5) days of the occurrence": the same local wall time five days on (EDT by then)
    due = vestal["written_report"].due(onset=onset, aware=aware, timezone=NY)
    assert due == _ts("2026-03-12T15:00") and due - onset == 5 * 86400 - 3600
    assert fed["notice_24h"].due(onset=onset, aware=aware, timezone=NY) == aware + 86400
    assert fed["repeat_sampling"].due(onset=onset, aware=aware, timezone=NY) == _ts("2026-04-06T15:20")


def test_only_violations_oblige(tmp_path: Path) -> None:
    text = site_toml(channel("ph"), channel("sampler_temperature"), jurisdiction="southeast", timezone=NY)
    site = load(tmp_path, text).sites[0]
    assert [r.key for r in obligations_of(site)] == ["telephone_notice", "notice_24h", "repeat_sampling"]
    assert obliges(site, "ph", "ph_low")
    assert not obliges(site, "ph", "stale") and not obliges(site, "ph", "sensor_fault")
    assert not obliges(site, "sampler_temperature", "sampler_temperature")


def test_a_pH_excursion_the_permit_permits_under_401_17_obliges_nothing(tmp_path: Path) -> None:
    permit = ('[site.permit]\nid = "P-1"\nadopt = ["ph_excursion_single", "ph_excursion_monthly"]\n')
    site = load(tmp_path, site_toml(channel("ph"), jurisdiction="southeast", timezone=NY, extra=permit)).sites[0]
    assert not obliges(site, "ph", "ph_low")
    assert obliges(site, "ph", "ph_excursion_duration")
