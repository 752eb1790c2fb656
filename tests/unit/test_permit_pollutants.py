"""A permit's own concentration limits for lab-measured pollutants: validated at load (every mistake, with its key
path, value and expectation), used by the SNC screen where stricter than the jurisdiction's and set aside where
looser (hand-computed below), and listed in the periodic report's limits with the limit they stand beside."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from config.errors import ConfigError, ConfigErrors
from config.loader import load_config
from config.pollutants import limits_for
from config.schema import SiteConfig
from monitor.cli import main
from monitor.reports.compliance import permit_limits
from monitor.reports.snc import SncScreen
from tests.unit.lab_scenarios import SITE, SITES, screen_imported

PERMIT = """
[site.permit]
id = "SE-2026-014"
[site.permit.pollutants.cu]
max = 1.5
unit = "mg/L"
cite = "Permit SE-2026-014, Part I.A.1"
quote = "Copper: 1.5 mg/L daily maximum"
[site.permit.pollutants.lead]
max = 50
unit = "ug/L"
cite = "Permit SE-2026-014, Part I.A.2"
"""


def permit_config(tmp_path: Path, permit: str = PERMIT) -> SiteConfig:
    """Two Southeast industries: ``plating`` with ``permit``, ``bakery`` without one."""
    text = SITES.format(db=tmp_path / "pretreat.sqlite", sites=SITE.format(id="plating", jurisdiction="southeast")
                        + permit + SITE.format(id="bakery", jurisdiction="southeast"))
    (tmp_path / "site.toml").write_text(text)
    return load_config(tmp_path / "site.toml")


def errors(tmp_path: Path, pollutants: str) -> list[ConfigError]:
    with pytest.raises(ConfigErrors) as info:
        permit_config(tmp_path, '[site.permit]\nid = "SE-2026-014"\n' + pollutants)
    return info.value.errors


def test_permit_limits_load_by_canonical_parameter_with_their_citations(tmp_path: Path) -> None:
    site = permit_config(tmp_path).site("plating")
    assert site.permit is not None
    copper, lead = site.permit.pollutants["copper"], site.permit.pollutants["lead"]
    assert (copper.max, copper.unit, copper.citation, copper.permit) == (
        Fraction(3, 2), "mg/L", "Permit SE-2026-014, Part I.A.1", "SE-2026-014")
    assert copper.quote == "Copper: 1.5 mg/L daily maximum"
    assert (lead.printed, lead.max_std) == ("50 ug/L", Fraction(1, 20))  # 50 µg/L is exactly 0.05 mg/L


@pytest.mark.parametrize(("pollutants", "path", "found", "expected"), [
    ('[site.permit.pollutants.unobtainium]\nmax = 1.0\nunit = "mg/L"\ncite = "Permit SE-2026-014"\n',
     "site[0].permit.pollutants.unobtainium", "unobtainium", "a pollutant parameter or an alias of one"),
    ('[site.permit.pollutants.copper]\nmax = 1.0\nunit = "gpm"\ncite = "Permit SE-2026-014, Part I.A"\n',
     "site[0].permit.pollutants.copper.unit", "gpm", "a unit Copper is measured in: mg/L, ppm, ug/L"),
    ('[site.permit.pollutants.copper]\nmax = 1.0\nunit = "mg/L"\n',
     "site[0].permit.pollutants.copper.cite", None, "the permit's citation for this limit, naming the permit"),
    ('[site.permit.pollutants.copper]\nmax = 1.0\nunit = "mg/L"\ncite = "Part I.A"\n',
     "site[0].permit.pollutants.copper.cite", "Part I.A", "e.g. 'Permit SE-2026-014, Part I.A'"),
    ('[site.permit.pollutants.copper]\nmax = -1.5\nunit = "mg/L"\ncite = "Permit SE-2026-014, Part I.A"\n',
     "site[0].permit.pollutants.copper.max", -1.5, "a number > 0"),
    ('[site.permit.pollutants.copper]\nmax = inf\nunit = "mg/L"\ncite = "Permit SE-2026-014, Part I.A"\n',
     "site[0].permit.pollutants.copper.max", float("inf"), "a number > 0"),
    ('[site.permit.pollutants.copper]\nmax = "1.5"\nunit = "mg/L"\ncite = "Permit SE-2026-014, Part I.A"\n',
     "site[0].permit.pollutants.copper.max", "1.5", "a number > 0"),
    ('[site.permit.pollutants.ph]\nmax = 9.0\nunit = "mg/L"\ncite = "Permit SE-2026-014, Part I.A"\n',
     "site[0].permit.pollutants.ph", "ph", "[site.permit.limits.ph_min]"),
    ('[site.permit.pollutants.copper]\nmax = 1.0\nunit = "mg/L"\ncite = "Permit SE-2026-014, I"\nlimit = 2\n',
     "site[0].permit.pollutants.copper.limit", 2, "one of the known keys"),
])
def test_each_mistake_names_its_key_path_value_and_expectation(tmp_path: Path, pollutants: str, path: str,
                                                               found: object, expected: str) -> None:
    [err] = errors(tmp_path, pollutants)
    assert err.path == path and expected in err.expected, str(err)
    assert "(missing)" in str(err) if found is None else err.found == found


def test_two_names_for_one_parameter_are_an_error_not_a_silent_choice(tmp_path: Path) -> None:
    [err] = errors(tmp_path, '[site.permit.pollutants.copper]\nmax = 1.0\nunit = "mg/L"\ncite = "Permit SE-2026-014"\n'
                             '[site.permit.pollutants.cu]\nmax = 2.0\nunit = "mg/L"\ncite = "Permit SE-2026-014"\n')
    assert err.path == "site[0].permit.pollutants.cu" and "'copper' already limits copper" in err.expected


def test_check_config_reports_permit_pollutant_mistakes_with_every_other_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = ('[site.permit]\nid = "SE-2026-014"\n[site.permit.pollutants.zinc]\nmax = 0\nunit = "mg/L"\n'
           '[site.permit.pollutants.adamantium]\nmax = 1\nunit = "mg/L"\ncite = "Permit SE-2026-014"\n')
    text = SITES.format(db=tmp_path / "db.sqlite", sites=SITE.format(id="plating", jurisdiction="southeast") + bad)
    path = tmp_path / "site.toml"
    path.write_text(text.replace('unit = "gpm"', 'unit = "gpm"\nscale = 0'))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    for where in ("site[0].channel[0].scale", "permit.pollutants.zinc.max", "permit.pollutants.zinc.cite",
                  "permit.pollutants.adamantium"):
        assert where in err, where
    assert "4 error(s)" in err


def _screen(tmp_path: Path) -> SncScreen:
    config = permit_config(tmp_path)
    rows = ["site,sample_date,parameter,value,unit,sample_id"]
    for site in ("plating", "bakery"):  # the same results at both industries
        rows += [f"{site},2026-03-0{i + 1},copper,{v},mg/L,cu{i}" for i, v in enumerate(("1.2", "1.2", "1.6", "1.8"))]
        rows += [f"{site},2026-04-0{i + 1},lead,{v},{u},pb{i}" for i, (v, u) in
                 enumerate((("0.06", "mg/L"), ("40", "ug/L"), ("60", "ug/L")))]
    return screen_imported(tmp_path, config, "\n".join(rows) + "\n", 14)


def test_the_stricter_of_permit_and_jurisdiction_limits_is_screened(tmp_path: Path) -> None:
    s = _screen(tmp_path)
    got = {(x.site, x.parameter): (x.count, x.exceeding, x.at_trc, x.chronic, x.trc_violation, x.limit.citation)
           for x in s.screens}
    assert got == {
        # permit copper 1.5 is looser than the town's 1.0, which stays in force (the permit would have found
        # 2 of 4 over 1.5, 50 %, no SNC): all four exceed 1.0 and equal or exceed 1.2, chronic and TRC
        ("plating", "copper"): (4, 4, 4, True, True, "Town of Southeast § 112-5D(5)"),
        # permit lead 50 µg/L = 0.05 mg/L (× 1.2 = 0.06): 0.06 mg/L and 60 µg/L exceed and equal 0.06:
        # 2 of 3 (66.7 %): chronic and TRC, where the town's 0.1 mg/L finds nothing
        ("plating", "lead"): (3, 2, 2, True, True, "Permit SE-2026-014, Part I.A.2"),
        ("bakery", "copper"): (4, 4, 4, True, True, "Town of Southeast § 112-5D(5)"),
        ("bakery", "lead"): (3, 0, 0, False, False, "Town of Southeast § 112-5D(7)"),
    }
    assert s.industries_in_snc() == ["bakery", "plating"]


def test_the_report_lists_the_limit_in_force_with_its_citation_and_the_one_set_aside(tmp_path: Path) -> None:
    config = permit_config(tmp_path)
    lines = {x.subject: x for x in permit_limits(config.site("plating"))}
    assert (lines["Copper (lab)"].condition, lines["Copper (lab)"].citation) == (
        "a composite result > 1 mg/l (stricter than the permit's 1.5 mg/L, Permit SE-2026-014, Part I.A.1)",
        "Town of Southeast § 112-5D(5)")
    assert (lines["Lead (lab)"].condition, lines["Lead (lab)"].citation) == (
        "a composite result > 50 ug/L (the permit's, stricter than 0.1 mg/l, Town of Southeast § 112-5D(7))",
        "Permit SE-2026-014, Part I.A.2")
    assert (lines["Arsenic (lab)"].condition, lines["Arsenic (lab)"].citation) == (  # printed as a decimal
        "a composite result > 0.05 mg/l", "Town of Southeast § 112-5D(3)")
    bakery = {x.subject: x for x in permit_limits(config.site("bakery"))}
    assert bakery["Copper (lab)"].citation == "Town of Southeast § 112-5D(5)"
    assert set(limits_for(config.site("plating"))) == set(limits_for(config.site("bakery")))
