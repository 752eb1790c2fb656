"""A permit's slug limit as check-config reads it: a fixed baseline where the ordinance words an average, an
unknown constituent of normal sewage, and the keys a permit may set."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import check_config
from monitor.cli import main
from tests.unit.checks_helpers import channel, site_toml, write_file

FIXED = ('[site.permit]\nid = "SE-9"\n[site.permit.limits.slug]\nmultiplier = 5.0\nminutes = 15.0\n'
         'baseline = "normal_sewage"\nnormal_sewage = {{ {sewage} }}\ncite = "Permit SE-9, Part I.C"\n{more}')


def _write(tmp_path: Path, text: str) -> Path:
    return write_file(tmp_path, "site.toml", text)


def test_a_fixed_baseline_at_a_trailing_average_ordinance_is_a_different_basis_not_looser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, site_toml(channel("flow"), extra=FIXED.format(sewage="bod = 240", more="")))
    assert main(["check-config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "looser" not in err
    assert "the permit's fixed normal_sewage baseline (Permit SE-9, Part I.C) is a different basis from the " \
           "ordinance's trailing average (Town of Southeast § 112-5A(1)(j))" in err
    assert '"the average twenty-four-hour concentration, quantities or flow during normal operation"' in err
    assert "do not allow fixed values in its place" in err
    assert main(["rules", "--config", str(path)]) == 0
    assert "is a different basis from the ordinance's trailing average" in capsys.readouterr().out


def test_a_normal_sewage_entry_that_is_no_constituent_is_refused_with_the_known_list(tmp_path: Path) -> None:
    path = _write(tmp_path, site_toml(channel("flow"), extra=FIXED.format(sewage="flow = 40", more="")))
    errors = [e for e in check_config(path) if e.path.endswith("normal_sewage.flow")]
    assert len(errors) == 1, check_config(path)
    assert "a constituent" in errors[0].expected and "'bod'" in errors[0].expected and \
        "'tss'" in errors[0].expected


def test_the_keys_a_permit_may_set_exclude_the_profiles_own(tmp_path: Path) -> None:
    path = _write(tmp_path, site_toml(channel("flow"), extra=FIXED.format(sewage="bod = 240", more="lin = 4\n")))
    (error,) = [e for e in check_config(path) if e.path.endswith(".lin")]
    for internal in ("'line'", "'line_end'", "'literal'", "'stated'", "'required'"):
        assert internal not in error.expected
    assert "'multiplier'" in error.expected and "'cite'" in error.expected
    path = _write(tmp_path, site_toml(channel("flow"), extra=FIXED.format(sewage="bod = 240", more="line = 4\n")))
    (error,) = [e for e in check_config(path) if e.path.endswith(".line")]
    assert "the ordinance's profile" in error.expected and "'line'" not in error.expected.split("known keys")[-1]


def test_batch_operation_says_plainly_per_site_whether_the_permit_can_fix_the_baseline(tmp_path: Path) -> None:
    from monitor.slug_history import batch_words
    from tests.unit.checks_helpers import load

    slug = "[site.rules.slug]\nloading = false\n"
    southeast = load(tmp_path, site_toml(channel("flow"), extra=slug)).sites[0]
    (b,) = [x for x in southeast.checks if x.rule == "slug"]
    text = batch_words(b, southeast)
    assert "for longer than 15 min is a slug every day" in text
    assert "at this site the permit cannot replace the ordinance's average with fixed values (Town of Southeast " \
           "§ 112-5A(1)(j) measures against \"the average twenty-four-hour concentration, quantities or flow " \
           "during normal operation\"; check-config warns of a permit that states them)" in text
    assert "way out" not in text and "Wilson" not in text
    literal = ('[site.permit]\nid = "SE-9"\n[site.permit.slug]\nreading = "multiple_alone"\n'
               'cite = "Permit SE-9, Part I.D"\n')
    site = load(tmp_path, site_toml(channel("flow"), extra=slug + literal)).sites[0]
    (b,) = [x for x in site.checks if x.rule == "slug"]
    text = batch_words(b, site)
    assert "duration" not in text and "longer than" not in text
    assert "any reading of a batch above the limit is a slug every day" in text
    mineola = ('[site.permit]\nid = "MI-3"\n[site.permit.limits.slug]\nmultiplier = 5.0\nminutes = 15.0\n'
               'cite = "Permit MI-3, Part I.C"\n')
    site = load(tmp_path, site_toml(channel("flow"), jurisdiction="mineola", extra=slug + mineola)).sites[0]
    (b,) = [x for x in site.checks if x.rule == "slug"]
    text = batch_words(b, site)
    assert "at this site the permit may state fixed normal values in place of the average" in text
    assert 'baseline = "normal_sewage"' in text and "cannot" not in text
