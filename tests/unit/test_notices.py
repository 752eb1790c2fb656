"""Notice clauses (config/notices/*.toml): each quotes its seed line, states only the correction period the
ordinance prints, and a jurisdiction without a clause gets no invented deadline."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from config.limits import load_profile
from config.notice import NOTICES_DIR, NoticeConfigError, notice_clause, template_path
from tests.support import IN_CI

SEEDS = Path(os.environ.get("PRETREAT_ORDINANCES") or Path(__file__).resolve().parents[3] / "shared" / "seeds")
CLAUSES = sorted(p.stem for p in NOTICES_DIR.glob("*.toml"))


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def test_the_shipped_clauses() -> None:
    assert CLAUSES == ["pawling", "southeast"]
    se = notice_clause("southeast")
    assert (se.authority, se.citation, se.correction_days, se.correction_is_ceiling) == (
        "Town of Southeast", "Town of Southeast § 112-11", 30, False)
    pw = notice_clause("pawling")
    assert (pw.correction_days, pw.correction_is_ceiling) == (30, True)


@pytest.mark.parametrize("key", CLAUSES)
def test_each_clause_quotes_its_seed_line_and_its_days(key: str) -> None:
    if not SEEDS.is_dir():
        (pytest.fail if IN_CI else pytest.skip)(f"seed ordinance texts not found at {SEEDS}")
    profile, _ = load_profile(key)
    assert profile is not None
    clause = notice_clause(key)
    lines = (SEEDS / profile.seed).read_text(encoding="utf-8").splitlines()
    text = _normalized(" ".join(lines[clause.line - 1: clause.line_end or clause.line]))
    assert _normalized(clause.quote) in text
    assert f"{clause.correction_days} days" in clause.quote  # the period is the ordinance's own number
    assert template_path(key).name == f"{key}.md"


def test_no_clause_no_deadline() -> None:
    c = notice_clause("wilson")
    assert (c.authority, c.citation, c.correction_days) == ("Town of Wilson", "", None)
    assert template_path("wilson").name == "default.md"


def test_a_broken_clause_file_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "wilson.toml").write_text('authority = "Town of Wilson"\ncorrection_days = -3\n')
    monkeypatch.setattr("config.notice.NOTICES_DIR", tmp_path)
    with pytest.raises(NoticeConfigError, match="correction_days = -3"):
        notice_clause("wilson")
    (tmp_path / "wilson.toml").write_text('authority = "x"\ncorection_days = 3\n')
    with pytest.raises(NoticeConfigError, match="corection_days"):
        notice_clause("wilson")


SITE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme"
address = "12 Route 22, Brewster, NY 10509"
jurisdiction = "southeast"
timezone = "America/New_York"

[[site.instrument]]
id = "m"
driver = "mqtt"
poll_interval = 60.0

[[site.channel]]
id = "ph"
instrument = "m"
topic = "mh1/ph"
payload = "number"
kind = "ph"
unit = "pH"

[site.permit]
id = "SE-IU-2025-07"
categorical = "40 CFR 433"
"""


def test_site_address_and_permit_dates_are_read_and_checked(tmp_path: Path) -> None:
    from config.errors import ConfigErrors
    from config.loader import load_config

    path = tmp_path / "site.toml"
    path.write_text(SITE + 'issued = 2025-04-01\nexpires = "2030-03-31"\n')
    site = load_config(path).sites[0]
    assert site.address == "12 Route 22, Brewster, NY 10509" and site.permit is not None
    assert (site.permit.issued, site.permit.expires, site.permit.categorical) == ("2025-04-01", "2030-03-31",
                                                                                  "40 CFR 433")
    path.write_text(SITE + 'issued = "last spring"\n')
    with pytest.raises(ConfigErrors) as caught:
        load_config(path)
    assert any("permit.issued" in str(e) and "a date" in str(e) for e in caught.value.errors)


def test_every_bound_rule_of_the_demo_site_carries_the_words_it_cites() -> None:
    """A notice quotes the section violated from the rule's binding: a binding without its quote would print
    "(no quote on file)" in a legal draft although the profile or the permit has the words (slug, fridge band)."""
    from config.loader import load_config
    from config.rule_catalogue import DATA_QUALITY_RULES

    config = load_config(Path(__file__).resolve().parents[2] / "config" / "sites" / "demo.toml")
    bound = [(s.id, b.channel, b.rule, str(b.params.get("quote", ""))) for s in config.sites for b in s.checks
             if b.rule not in DATA_QUALITY_RULES]  # an instrument fault cites no law
    assert {r for _s, _c, r, _q in bound} >= {"slug", "sampler_temperature", "ph_low", "lel_single"}
    assert [b for b in bound if not b[3]] == []


def test_the_confirmation_words_of_a_successive_readings_rule() -> None:
    """``lel_successive`` starts at the N-th successive reading past the limit: the notice must not say "a
    single reading violates" of it."""
    from types import SimpleNamespace

    from monitor.notices.document import onset_words

    def facts(params: dict[str, object] | None) -> Any:
        return SimpleNamespace(binding=None if params is None else SimpleNamespace(params=params))

    assert onset_words(facts({"readings": 2})) == "the 2nd successive reading past the limit"
    assert onset_words(facts({"readings": 3})) == "the 3rd successive reading past the limit"
    assert onset_words(facts({"readings": 1})) == onset_words(facts(None)) == "a single reading violates"
