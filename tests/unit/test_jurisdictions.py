"""Jurisdiction profiles: checked against the seed ordinances, what each enables, and what is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.limits import JURISDICTIONS_DIR, known_jurisdictions, load_profile
from tests.support import IN_CI, SEEDS, normalize_quote
from tests.unit.checks_helpers import channel, load, site_toml

PROFILES = ["mineola", "pawling", "southeast", "vestal", "vestal_endicott", "wilson"]
WORDS = {
    2: "two",
    4: "four",
    5: "five",
    6: "six",
    9: "nine",
    10: "ten",
    15: "fifteen",
    24: "twenty-four",
    40: "forty",
    60: "sixty",
    104: "one hundred four",
}

ALL_CHANNELS = [
    channel("ph"),
    channel("lel"),
    channel("flow"),
    channel("t_out", "temperature", location="discharge"),
    channel("t_grease", "temperature", location="grease_interceptor"),
    channel("sampler_temperature"),
    channel("sampler_count"),
]
PAWLING_PH = (
    '[site.permit]\nid = "PJSC-9"\n[site.permit.limits.ph_min]\nvalue = 6.0\n[site.permit.limits.ph_max]\n'
    "value = 9.5\n"
)


def test_every_seed_jurisdiction_has_a_profile() -> None:
    assert known_jurisdictions() == PROFILES
    for key in [*PROFILES, "federal"]:
        profile, errors = load_profile(key)
        assert errors == [] and profile is not None and profile.key == key


@pytest.mark.parametrize("key", PROFILES)
def test_each_stated_limit_quotes_its_seed_line_and_contains_its_numbers(key: str) -> None:
    if not SEEDS.is_dir():
        # CI lays shared/ beside the clone, so there a missing seed folder is a failure, not a skip
        (pytest.fail if IN_CI else pytest.skip)(
            f"seed ordinance texts not found at {SEEDS}: they are not in the repository; put them in "
            "../shared/seeds beside the clone or set PRETREAT_ORDINANCES to their folder")
    profile, _ = load_profile(key)
    assert profile is not None
    lines = (SEEDS / profile.seed).read_text(encoding="utf-8").splitlines()
    checked = 0
    for limit in profile.limits.values():
        if not limit.quote:
            continue
        text = normalize_quote(" ".join(lines[limit.line - 1 : (limit.line_end or limit.line)]))
        assert normalize_quote(limit.quote) in text, f"{key}.{limit.key}: quote not at line {limit.line}"
        if not limit.stated:
            continue
        for name, number in limit.numbers.items():
            if name in ("baseline_hours", "readings") and number in (24.0, 2.0):
                spelled = [WORDS[int(number)], f"{number:g}"]
            else:
                spelled = [f"{number:g}"] + ([WORDS[int(number)]] if number in WORDS else [])
            assert any(s in normalize_quote(limit.quote).lower() for s in spelled), (
                f"{key}.{limit.key}.{name}={number}"
            )
        assert limit.line > 0 and limit.citation, f"{key}.{limit.key}: no cite or no seed line"
        assert "seed" not in limit.citation and ".txt" not in limit.citation, f"{key}.{limit.key}: provenance in cite"
        checked += 1
    assert checked >= 1
    for clause in profile.clauses.values():  # what the seed states that no streaming rule judges
        text = normalize_quote(" ".join(lines[clause.line - 1 : (clause.line_end or clause.line)]))
        assert normalize_quote(clause.quote) in text, f"{key}.clauses.{clause.key}: quote not at line {clause.line}"
        assert "seed" not in clause.citation


@pytest.mark.parametrize("key", PROFILES)
def test_each_stated_limit_carries_its_whole_clause_as_the_seed_prints_it(key: str) -> None:
    """A notice quotes the words violated: the whole sentence (or list item), omissions marked "…", never a
    fragment that starts or ends mid-sentence ("be more than 5% nor any single reading ...")."""
    if not SEEDS.is_dir():
        (pytest.fail if IN_CI else pytest.skip)(f"seed ordinance texts not found at {SEEDS}")
    profile, _ = load_profile(key)
    assert profile is not None
    lines = (SEEDS / profile.seed).read_text(encoding="utf-8").splitlines()
    for limit in profile.limits.values():
        if not (limit.quote and limit.stated):
            continue
        where = f"{key}.{limit.key}"
        assert limit.clause, f"{where}: no clause (the whole sentence the quote stands in)"
        text = normalize_quote(" ".join(lines[limit.line - 1 : (limit.line_end or limit.line)]))
        clause = normalize_quote(limit.clause)  # NFKC: an ellipsis "…" reads as "..."
        assert normalize_quote(limit.quote) in clause.replace(" ...", "").replace("... ", ""), where
        parts = [p.strip() for p in clause.split("...") if p.strip()]
        at = 0
        for i, part in enumerate(parts):  # each part verbatim, in order
            found = text.find(part, at)
            assert found >= 0, f"{where}: {part!r} not in the seed at line {limit.line}"
            if i == 0 and not clause.startswith("..."):  # opens a sentence or a list item
                before = text[:found].rstrip()
                assert before == "" or before[-1] in ".;:" or re.search(r"\(\w{1,3}\)$|\b\d{1,2}\.$", before), (
                    f"{where}: the clause starts mid-sentence: ...{before[-40:]!r}")
            at = found + len(part)
        assert clause.endswith("...") or (clause.endswith(".") and text[at - 1] == "."), (
            f"{where}: the clause ends mid-sentence")


ENABLED = {
    "southeast": {
        ("ph_low", "ph"),
        ("ph_high", "ph"),
        ("lel_successive", "lel"),
        ("lel_single", "lel"),
        ("slug", "flow"),
    },
    "mineola": {  # § 46.2(24) is a definition only: no slug without a permit's limit
        ("ph_low", "ph"),
        ("temperature_high", "t_out"),
    },
    "wilson": {
        ("ph_low", "ph"),
        ("ph_high", "ph"),
        ("temperature_high", "t_out"),
    },
    "vestal": {("temperature_high", "t_grease")},
    "vestal_endicott": {
        ("ph_low", "ph"),
        ("ph_high", "ph"),
        ("temperature_high", "t_out"),
        ("temperature_high", "t_grease"),
    },
    "pawling": {
        ("ph_low", "ph"),
        ("ph_high", "ph"),
        ("sampler_temperature", "sampler_temperature"),
        ("sampler_interval", "sampler_count"),
        ("sampler_interval_unverified", "sampler_count"),  # data quality: the flow reading bad
    },
}


@pytest.mark.parametrize("key", PROFILES)
def test_what_each_profile_enables_on_a_full_control_manhole(tmp_path: Path, key: str) -> None:
    config = load(
        tmp_path, site_toml(*ALL_CHANNELS, jurisdiction=key, extra=PAWLING_PH if key == "pawling" else "")
    )
    selected = {
        (b.rule, b.channel) for b in config.sites[0].checks if b.rule not in ("stale", "sensor_fault")
    }
    assert selected == ENABLED[key]
    assert {b.channel for b in config.sites[0].checks if b.rule == "stale"} == {
        "ph",
        "lel",
        "flow",
        "t_out",
        "t_grease",
        "sampler_temperature",
        "sampler_count",
    }


def test_pawling_ph_without_a_permit_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors) as info:
        load(tmp_path, site_toml(channel("ph"), jurisdiction="pawling"))
    messages = [str(e) for e in info.value.errors]
    assert len(messages) == 2  # ph_min and ph_max
    assert "site[0].permit.limits.ph_min" in messages[0]
    assert "neither jurisdiction 'pawling' nor the permit states it" in messages[0]
    assert "Town of Pawling sewer use chapter, item (4)" in messages[0]
    assert "seed" not in messages[0]  # the legal citation; the seed line is provenance only
    assert "never another jurisdiction's number" in messages[0]


def test_pawling_ph_uses_the_permit_number_and_citation(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="pawling", extra=PAWLING_PH))
    low = next(b for b in config.sites[0].checks if b.rule == "ph_low")
    assert (low.params["limit"], low.citation) == (6.0, "Permit PJSC-9")


def test_an_explicitly_requested_rule_with_no_stated_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors, match=r"\(site\[0\]\.rules\.ph_high\): .*neither jurisdiction 'mineola'"):
        load(tmp_path, site_toml(channel("ph"), jurisdiction="mineola", extra="[site.rules.ph_high]\n"))


def test_a_permit_overrides_the_jurisdiction_with_its_own_citation(tmp_path: Path) -> None:
    extra = (
        '[site.permit]\nid = "SE-IU-2024-017"\n[site.permit.limits.ph_min]\nvalue = 6.0\n'
        'cite = "Permit SE-IU-2024-017, Part I.A.1"\n'
    )
    config = load(tmp_path, site_toml(channel("ph"), extra=extra))
    by_rule = {b.rule: b for b in config.sites[0].checks}
    assert (by_rule["ph_low"].params["limit"], by_rule["ph_low"].citation) == (
        6.0,
        "Permit SE-IU-2024-017, Part I.A.1",
    )
    assert by_rule["ph_high"].citation == "Town of Southeast § 112-5A(1)(c)"  # not overridden: the town's


def test_vestal_endicott_slug_runs_on_a_surrogate_the_permit_names_against_normal_sewage(tmp_path: Path) -> None:
    extra = (
        '[site.permit]\nid = "VE-7"\n[site.permit.slug]\nsurrogates = ["tss"]\ncite = "Permit VE-7, Part II.C"\n'
        '[site.rules.slug]\nconstituents = { tss = "suspended_solids" }\n'
    )
    config = load(
        tmp_path,
        site_toml(
            channel("flow"), channel("tss", "cod", unit="ppm"), jurisdiction="vestal_endicott", extra=extra
        ),
    )
    slugs = [b for b in config.sites[0].checks if b.rule == "slug"]
    # "longer than fifteen (15) minutes", as the town-wide definition of Slug words it: strict
    assert [(b.channel, b.params["baseline"], b.params["duration_operator"]) for b in slugs] == [
        ("tss", 400.0, ">")
    ]
    assert slugs[0].citation.endswith("surrogate channel: Permit VE-7, Part II.C")


def test_vestal_endicott_slug_without_a_named_surrogate_is_left_to_lab_results(tmp_path: Path) -> None:
    extra = '[site.rules.slug]\nconstituents = { tss = "suspended_solids" }\n'
    with pytest.raises(ConfigErrors, match=r"suspended solids and BOD.*laboratory tests.*pretreat labs import"):
        load(tmp_path, site_toml(channel("flow"), channel("tss", "cod", unit="ppm"), jurisdiction="vestal_endicott",
                                 extra=extra + 'channels = ["tss"]\n'))
    config = load(tmp_path, site_toml(channel("tss", "cod", unit="ppm"), jurisdiction="vestal_endicott", extra=extra))
    assert not [b for b in config.sites[0].checks if b.rule == "slug"]


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ('[site.permit]\nadopt = ["ph_excursion_single"]\n', "site[0].permit.id"),
        ('[site.permit]\nid = "P"\nadopt = ["nonsense"]\n', "site[0].permit.adopt"),
        (
            '[site.permit]\nid = "P"\n[site.permit.limits.ph_mid]\nvalue = 7.0\n',
            "site[0].permit.limits.ph_mid",
        ),
        (
            '[site.permit]\nid = "P"\n[site.permit.limits.ph_min]\nvalue = -1.0\n',
            "site[0].permit.limits.ph_min.value",
        ),
        (
            '[site.permit]\nid = "P"\n[site.permit.limits.ph_min]\nvalue = 6.0\noperator = "=="\n',
            "site[0].permit.limits.ph_min.operator",
        ),
        ("[site.rules.ph_lo]\n", "site[0].rules.ph_lo"),
        ('[site.rules.flatline]\nchannels = ["lel"]\n', "site[0].rules.flatline.channels"),
        ('[site.rules.flatline]\nchannels = ["ph"]\nreadings = 1\n', "site[0].rules.flatline.readings"),
        ("[site.rules.ph_low]\nenable = false\n", "site[0].rules.ph_low.enable"),
    ],
)
def test_rule_and_permit_mistakes_name_their_key_path(tmp_path: Path, extra: str, path: str) -> None:
    with pytest.raises(ConfigErrors) as info:
        load(tmp_path, site_toml(channel("ph"), extra=extra))
    assert any(e.path == path for e in info.value.errors), [str(e) for e in info.value.errors]


def test_unknown_jurisdiction_lists_the_shipped_profiles(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors, match="one of the shipped profiles"):
        load(tmp_path, site_toml(channel("ph"), jurisdiction="gotham"))


def test_a_rule_can_be_switched_off(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("ph"), extra="[site.rules.ph_high]\nenabled = false\n"))
    assert "ph_high" not in {b.rule for b in config.sites[0].checks}


def test_check_config_reports_the_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.cli import main

    path = tmp_path / "site.toml"
    path.write_text(site_toml(channel("ph"), jurisdiction="pawling"), encoding="utf-8")
    assert main(["check-config", str(path)]) == 2
    assert "permit.limits.ph_max" in capsys.readouterr().err


def test_profiles_are_data_files_shipped_with_the_package() -> None:
    assert sorted(p.stem for p in JURISDICTIONS_DIR.glob("*.toml")) == sorted([*PROFILES, "federal"])
