"""`pretreat rules` and check-config's summary: every rule in force as the law reads, and every channel left
unchecked with why; the report prints the same words beside each limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from monitor.reports.compliance import permit_limits
from tests.unit.checks_helpers import channel, load, record, site_toml

LOOSER = '[site.permit]\nid = "SE-9"\n[site.permit.limits.ph_min]\nvalue = 4.0\ncite = "Permit SE-9, Part I.A"\n'


def _date(t: float) -> str:
    """The UTC date of ``t`` (the test sites' zone is UTC)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).date().isoformat()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_rules_prints_limits_wording_citation_quote_and_the_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, site_toml(channel("ph"), channel("flow"), channel("sampler_temperature"),
                                      extra="[site.rules.slug]\nloading = false\n"))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ph_low: ph: a reading < 5 pH; violated below it (the limit itself complies)" in out
    assert "citation: Town of Southeast § 112-5A(1)(c)" in out
    assert 'words: Any wastewater having a pH less than 5.0 or higher than 9.0' in out
    assert "reading in force: read as more than five times the baseline" in out  # § 112-5A(1)(j)'s "or"
    # what the trailing baseline means for a batch discharger, and that this ordinance allows no way out
    assert "batch operation: a batch discharger is measured against its own 24-hour average, zero-flow hours " \
           "included, so a batch above the limit for longer than 15 min is a slug every day (60 gpm for 4 h " \
           "a day, the same every day, averages 10 gpm: each batch is 6 × it); at this site the permit cannot " \
           "replace the ordinance's average with fixed values (Town of Southeast § 112-5A(1)(j) measures against " \
           "\"the average twenty-four-hour concentration, quantities or flow during normal operation\"" in out
    assert "baseline today: none (no reading yet): no baseline, so no slug is judged: no day of normal operation " \
           "yet in the last 60 days" in out  # no historian yet
    assert "NO RULE: sampler_temperature: Town of Southeast states no sampler_temperature limit" in out
    assert "[site.permit.limits.sampler_temperature]" in out
    assert "seed" not in out.replace("seed ordinance", "")  # legal citations only
    assert "1 channel(s) left unchecked" in out


def test_rules_states_how_the_sampling_interval_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pawling's "intervals of 15 minutes or less" is judged on two instruments: where the rule is shown, so is
    what makes an interval late (a count reading, flow time only while read above zero, the limit strict)."""
    path = _write(tmp_path, site_toml(channel("sampler_count"), channel("flow"), jurisdiction="pawling"))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sampler_interval: sampler_count: no sample for more than 15 min while flow > 0" in out
    assert "reading in force: the interval counts time with the flow read above zero since the sampler's count " \
           "last rose (a gap in the flow readings is not counted); it is late once more than the limit is " \
           "counted and a count reading showed it" in out
    assert "no interval is shown late by flow time after the count's last reading; exactly the limit complies" in out


def test_rules_lists_the_clauses_no_streaming_rule_judges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, site_toml(channel("ph"), jurisdiction="wilson"))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "temperature_reserved_60f [note]" in out and "Town of Wilson § 105-5C(13)" in out
    assert "fats_oils_grease [lab]" in out and "100 milligrams per liter" in out


def test_check_config_warns_of_a_looser_permit_and_counts_unchecked_channels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, site_toml(channel("ph"), channel("sampler_temperature"), extra=LOOSER))
    assert main(["check-config", str(path)]) == 0
    captured = capsys.readouterr()
    assert "warning: site acme: the permit's < 4 pH (Permit SE-9, Part I.A) is looser than the ordinance's < 5 pH" \
        in captured.err
    assert "40 CFR 403.5(d)" in captured.err
    assert "OK; 1 channel(s) left unchecked by any discharge rule" in captured.out


def test_the_report_prints_the_looser_permit_figure_beside_the_one_in_force(tmp_path: Path) -> None:
    site = load(tmp_path, site_toml(channel("ph"), extra=LOOSER)).sites[0]
    low = next(x for x in permit_limits(site) if "< 5 pH" in x.condition)
    assert low.citation == "Town of Southeast § 112-5A(1)(c)"
    assert "set aside: the permit's < 4 pH (Permit SE-9, Part I.A) is looser" in low.condition


def test_a_stricter_permit_figure_is_in_force_with_its_citation(tmp_path: Path) -> None:
    extra = '[site.permit]\nid = "SE-9"\n[site.permit.limits.ph_max]\nvalue = 8.5\ncite = "Permit SE-9, Part I.A"\n'
    site = load(tmp_path, site_toml(channel("ph"), extra=extra)).sites[0]
    high = next(b for b in site.checks if b.rule == "ph_high")
    assert (high.params["limit"], high.citation, "looser" in high.params) == (8.5, "Permit SE-9, Part I.A", False)


def test_the_report_states_the_reading_of_150_f_and_65_c(tmp_path: Path) -> None:
    site = load(tmp_path, site_toml(channel("t", "temperature", location="discharge"), jurisdiction="mineola")).sites[0]
    line = next(x for x in permit_limits(site) if x.citation == "Village of Mineola § 46.54A(1)")
    assert "a reading > 65.5556 degC" in line.condition
    assert "the figure most favourable to the discharger is in force, 65.56 °C = 150.0 °F" in line.condition


def test_permitted_excursions_are_marked_where_the_permit_adopts_40_cfr_401_17(tmp_path: Path) -> None:
    extra = '[site.permit]\nid = "SE-9"\nadopt = ["ph_excursion_single", "ph_excursion_monthly"]\n'
    site = load(tmp_path, site_toml(channel("ph"), extra=extra)).sites[0]
    marked = {b.rule for b in site.checks if b.params.get("permitted")}
    assert marked == {"ph_low", "ph_high"}  # the duration rules stay violations
    assert any("are permitted, listed apart" in x.condition for x in permit_limits(site))


async def test_rules_shows_the_slug_baseline_rebuilt_from_the_historian(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baseline `pretreat rules` shows is the one the daemon's warm-up and a replay compute: two recorded
    days at 12 gpm (every minute) before today."""
    import time as _time

    from monitor.rules_cli import slug_baselines
    from monitor.sample import Sample

    config = load(tmp_path, site_toml(channel("flow"), extra="[site.rules.slug]\nloading = false\n"))
    now = _time.time()
    midnight = now - now % 86400.0  # UTC midnight today (the site's zone is UTC)
    record(config, [Sample(time=midnight - 2 * 86400.0 + 60.0 * i, site="acme", channel="flow", value=12.0, unit="gpm")
              for i in range(2 * 1440 + 1)])  # two whole days, and a first reading of today
    text = slug_baselines(config, now)[("acme", "flow")]
    days = [_date(midnight - k * 86400.0) for k in (2, 1, 0)]
    assert text == (f"12 gpm on {days[2]} (fixed at local midnight), the mean of the 24-hour averages of 2 day(s) of "
                    f"normal operation ({days[0]}, {days[1]}); a slug is above 60 gpm (5 × the baseline) for longer "
                    "than 15 min")


async def test_rules_forms_the_slug_baseline_from_a_meter_publishing_every_5_minutes(tmp_path: Path) -> None:
    """A meter publishing every 300 s (max_gap 900 s) measures its whole day: its days are days of normal
    operation (≥ 90 % measured time), though only one minute in five holds a reading."""
    import time as _time

    from monitor.rules_cli import slug_baselines
    from monitor.sample import Sample
    from monitor.stores.historian import Historian

    config = load(tmp_path, site_toml(channel("flow"), extra="[site.rules.slug]\nloading = false\n",
                                      poll_interval=300.0))
    now = _time.time()
    midnight = now - now % 86400.0
    h = Historian(path=config.daemon.historian, commit_interval=0.01)
    await h.start()
    h.submit([Sample(time=midnight - 2 * 86400.0 + 300.0 * i, site="acme", channel="flow",
                     value=12.0 if i % 2 else 14.0, unit="gpm") for i in range(2 * 288 + 1)])
    await h.close()
    text = slug_baselines(config, now)[("acme", "flow")]
    assert text.startswith(f"13 gpm on {_date(midnight)} (fixed at local midnight)") and "above 65 gpm" in text
    assert "of 2 day(s) of normal operation" in text


def test_rules_states_the_slug_screen_on_lab_results_and_the_no_baseline_notice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Vestal-Endicott measures a slug "by suspended solids and BOD" (laboratory tests): `pretreat rules` says the
    slug is screened on lab results, with the thresholds and the citation; a trailing-baseline slug channel lists
    the slug_no_baseline data-quality notice among its rules."""
    path = _write(tmp_path, site_toml(channel("flow"), jurisdiction="vestal_endicott"))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "slug screened on composite-sample lab results (pretreat labs import):" in out
    assert "tss: a result > 2000 mg/L (5 × 400 mg/L normal sewage, the ordinance's 400 ppm read as mg/L) is a slug " \
           "finding (Town of Vestal § 18-76(a)(13) [section number inferred]" in out
    assert "bod: a result > 1200 mg/L (5 × 240 mg/L normal sewage, the ordinance's 240 ppm read as mg/L)" in out
    path = _write(tmp_path, site_toml(channel("flow")))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "slug_no_baseline" in out.split("data quality (not discharge exceedances):")[1].splitlines()[0]
    assert "lab results" not in out


MIXED_SLUG = ('[site.permit]\nid = "SE-9"\n[site.permit.limits.slug]\nmultiplier = 3.0\nminutes = 30\n'
              '[site.rules.slug]\nloading = false\n')


def test_a_permit_slug_limit_tighter_in_one_figure_binds_figure_by_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Permit 3× for > 30 min against the ordinance's 5× for > 15 min: each the stricter figure, 3× for
    > 15 min (40 CFR 403.5(d)), citing both sources; check-config warns of the permit's looser duration."""
    path = _write(tmp_path, site_toml(channel("flow"), extra=MIXED_SLUG))
    [b] = [b for b in load(tmp_path, site_toml(channel("flow"), extra=MIXED_SLUG)).sites[0].checks
           if b.rule == "slug"]
    assert (b.params["multiplier"], b.params["duration"], b.params["duration_operator"]) == (3.0, 900.0, ">")
    assert b.citation == ("Permit SE-9 (multiplier 3); Town of Southeast § 112-5A(1)(j) "
                          "(duration longer than 15 minutes)")
    assert main(["check-config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "the permit's duration longer than 30 minutes (Permit SE-9) is looser than the ordinance's longer " \
           "than 15 minutes (Town of Southeast § 112-5A(1)(j))" in err
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "citation: Permit SE-9 (multiplier 3); Town of Southeast § 112-5A(1)(j) (duration longer than 15" in out
    assert "read as more than 3 times the baseline of normal operation for longer than 15 minutes" in out
    site = load(tmp_path, site_toml(channel("flow"), extra=MIXED_SLUG)).sites[0]
    [line] = [x for x in permit_limits(site) if x.subject == "Slug load"]
    assert "Permit SE-9 (multiplier 3)" in line.citation and "§ 112-5A(1)(j) (duration" in line.citation


def test_a_permit_slug_limit_tighter_in_both_figures_binds_whole_and_a_looser_one_is_set_aside(
        tmp_path: Path) -> None:
    tighter = MIXED_SLUG.replace("minutes = 30", "minutes = 10")
    [b] = [b for b in load(tmp_path, site_toml(channel("flow"), extra=tighter)).sites[0].checks if b.rule == "slug"]
    assert (b.params["multiplier"], b.params["duration"], b.citation) == (3.0, 600.0, "Permit SE-9")
    looser = MIXED_SLUG.replace("multiplier = 3.0", "multiplier = 6.0")
    [b] = [b for b in load(tmp_path, site_toml(channel("flow"), extra=looser)).sites[0].checks if b.rule == "slug"]
    assert (b.params["multiplier"], b.params["duration"], b.citation) == (5.0, 900.0,
                                                                          "Town of Southeast § 112-5A(1)(j)")
    assert "multiplier 6, minutes 30" in str(b.params["looser"])


@pytest.mark.parametrize(("jurisdiction", "note"), [
    ("mineola", "conditioned on harm"), ("wilson", "as defined herein"), ("vestal", "'Normal sewage' is not defined"),
    ("vestal_endicott", "measures a slug by suspended solids and BOD"), ("pawling", "states no slug limit")])
def test_an_unchecked_flow_channel_says_why_with_the_jurisdictions_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], jurisdiction: str, note: str) -> None:
    """check-config counts the flow channel as unchecked where the slug is not stated; `pretreat rules` says why
    under the channel, with the ordinance's own note, without a slug rule having to be added and refused."""
    path = _write(tmp_path, site_toml(channel("flow"), jurisdiction=jurisdiction))
    assert main(["rules", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    flow = out.split("flow (flow,")[1].split("calibration:")[0]
    assert "NO RULE: slug: " in flow and note in flow
    assert "1 channel(s) left unchecked" in out


def test_rules_prints_the_whole_clause_the_literal_it_refers_to_and_at_any_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The slug's words are the whole sentence (its quote stops mid-clause), the reading's "see literal" is
    followed by the literal words it refers to, and the literal reading selected by a permit has no duration."""
    slug = "[site.rules.slug]\nloading = false\n"
    assert main(["rules", "--config", str(_write(tmp_path, site_toml(channel("flow"), extra=slug)))]) == 0
    out = capsys.readouterr().out
    assert "  words: In no case shall a slug load have a flow rate or contain concentration or quantities of " \
           "pollutants that exceed for any time period longer than 15 minutes or more than five times the average " \
           "twenty-four-hour concentration, quantities or flow during normal operation.\n" in out
    assert "see literal)" in out
    assert "  literal: exceed for any time period longer than 15 minutes or more than five times the average " \
           "twenty-four-hour concentration, quantities or flow during normal operation\n" in out
    literal = ('[site.permit]\nid = "SE-9"\n[site.permit.slug]\nreading = "multiple_alone"\n'
               'cite = "Permit SE-9, Part I.D"\n')
    assert main(["rules", "--config", str(_write(tmp_path, site_toml(channel("flow"), extra=slug + literal)))]) == 0
    out = capsys.readouterr().out
    assert "slug: flow: over 5× the baseline (mean 24-hour average of the last 7 days of normal operation) at any " \
           "reading\n" in out
    assert ">= 0 min" not in out


def test_a_quote_cut_mid_sentence_is_marked_with_an_ellipsis() -> None:
    from monitor.rules_cli import whole_words

    assert whole_words("Any wastewater having a pH less than 5.0", "") == "Any wastewater having a pH less than 5.0 …"
    assert whole_words("Discharge shall not exceed 5.0.", "") == "Discharge shall not exceed 5.0."
    assert whole_words("a fragment", "The whole sentence with a fragment in it.") == \
        "The whole sentence with a fragment in it."


def test_a_combined_permit_and_ordinance_slug_reading_says_for_longer_than(tmp_path: Path) -> None:
    extra = ('[site.permit]\nid = "SE-9"\n[site.permit.limits.slug]\nmultiplier = 3.0\nminutes = 30.0\n'
             'cite = "Permit SE-9, Part I.C"\n[site.rules.slug]\nloading = false\n')
    site = load(tmp_path, site_toml(channel("flow"), extra=extra)).sites[0]
    slug = next(b for b in site.checks if b.rule == "slug")
    assert "read as more than 3 times the baseline of normal operation for longer than 15 minutes" in \
        str(slug.params["reading"])
