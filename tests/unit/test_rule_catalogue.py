"""The rule catalogue is the one table of rules: every rule has its check, its alarm, its label, and the bindings
the loader compiles carry the parameter class the catalogue names for their rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.alarms import DEFAULT_ALARMS
from config.loader import load_config
from config.rule_catalogue import CATALOGUE, NO_READING_PEAK, RULE_NAMES, RuleName, label, spec
from config.rule_model import RuleBinding, RuleParams, SlugParams, ThresholdParams
from monitor.checks.engine import CHECKS, CheckEngine

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cases"
SITES = sorted([ROOT / "config" / "sites" / "demo.toml",  # and every golden case the loader accepts
                *(p for p in CASES.glob("*/site.toml") if not (p.parent / "refused.txt").exists())])


def test_every_rule_of_the_catalogue_has_a_check_an_alarm_and_a_label() -> None:
    assert list(RULE_NAMES) == [r.value for r in RuleName]
    assert sorted(CHECKS) == sorted(RULE_NAMES)
    assert sorted(DEFAULT_ALARMS) == sorted(RULE_NAMES)
    assert all(CATALOGUE[r].label and label(r) == CATALOGUE[r].label for r in RuleName)
    assert label("a_rule_from_an_old_record") == "a_rule_from_an_old_record"
    assert spec("a_rule_from_an_old_record") is None


def test_the_catalogue_says_what_the_old_tables_said() -> None:
    assert DEFAULT_ALARMS["lel_single"].latched and DEFAULT_ALARMS["lel_single"].priority.value == "critical"
    assert DEFAULT_ALARMS["ph_monthly_excursion"].priority.value == "medium"
    assert DEFAULT_ALARMS["sampler_interval_unverified"].priority.value == "low"
    assert NO_READING_PEAK == {"ph_excursion_duration", "ph_monthly_excursion", "sampler_interval", "stale",
                               "sensor_fault", "flatline", "sampler_interval_unverified", "maintenance",
                               "slug_no_baseline",
                               "ph_frozen", "offset_step", "flow_zero_sampling", "span_pinned"}  # tamper signs


@pytest.mark.parametrize("path", SITES, ids=lambda p: p.parent.name if p.name == "site.toml" else p.name)
def test_compiled_bindings_carry_the_catalogue_s_parameter_class(path: Path) -> None:
    config = load_config(path)
    bindings = [b for s in config.sites for b in s.checks]
    for b in bindings:
        assert type(b.params) is CATALOGUE[RuleName(b.rule)].params, (b.rule, b.channel)
    CheckEngine.for_config(config)  # every check takes its binding's parameters


def test_parameters_are_frozen_and_read_as_a_mapping_of_what_is_set() -> None:
    p = SlugParams(multiplier=5.0, operator=">", duration=900.0, duration_operator=">", baseline_days=7)
    assert "baseline" not in p and "looser" not in p and p["multiplier"] == 5.0
    assert dict(p) == {"multiplier": 5.0, "operator": ">", "duration": 900.0, "duration_operator": ">",
                       "baseline_days": 7, "timezone": "UTC"}
    with pytest.raises(AttributeError):
        p.multiplier = 6.0  # type: ignore[misc]


def test_a_check_given_another_rule_s_parameters_names_the_binding() -> None:
    b = RuleBinding(rule="ph_low", site="s", channel="ph", citation="c", inputs=("ph",),
                    params=SlugParams(multiplier=5.0, operator=">", duration=0.0, duration_operator=">=",
                                      baseline_days=7))
    with pytest.raises(TypeError, match="ph_low on s/ph: parameters are SlugParams, expected ThresholdParams"):
        CHECKS["ph_low"](binding=b, out=[])
    assert isinstance(RuleParams(), RuleParams) and ThresholdParams(limit=5.0, operator="<").readings == 1


def test_parameters_read_as_a_mapping_leave_out_the_words_not_given() -> None:
    """`RuleParams.get` (its own, not Mapping's KeyError round trip) answers as the mapping does: a number or
    word given, else the default, for an empty word, a field of another class and a name of none."""
    p = ThresholdParams(limit=5.0, operator="<", quote="pH below 5.0")
    for key in ("limit", "operator", "readings", "quote", "clause", "multiplier", "nonsense"):
        expected = p[key] if key in p else None
        assert p.get(key) == expected and p.get(key, "x") == (expected if key in p else "x")
    assert dict(p) == {"limit": 5.0, "operator": "<", "readings": 1, "quote": "pH below 5.0"}
    assert SlugParams(multiplier=5.0, operator=">", duration=0.0, duration_operator=">=", baseline_days=7).get(
        "limit", 0) == 0
