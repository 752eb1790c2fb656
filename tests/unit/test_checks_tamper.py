"""The tamper signs (`monitor.checks.tamper`) on generated traces (hypothesis) and at their edges:
- the quiet-band fast path never changes a result (every trace gives the same events with the band disabled);
- live (samples one at a time) and `pretreat replay`'s code give identical episodes;
- the edges the golden cases (tests/cases/tamper_*) do not show: a gap ends or forgets, a bad flow reading
  changes nothing, ``at = "low"``, a tolerance, ``[site.rules.<rule>]`` mistakes.

Traces are runs of one value repeated (frozen, pinned, zero), level shifts around excursions, and sampler
counts rising, with gaps and bad samples between."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.errors import ConfigErrors
from config.schema import SiteConfig
from monitor.checks.events import EpisodeEvent
from tests.unit.checks_helpers import (
    T0,
    Row,
    brief,
    channel,
    csv_text,
    live,
    load,
    replayed,
    site_toml,
)

TAMPER = site_toml(
    channel("ph"), channel("flow"), channel("sampler_count"), channel("lel"),
    extra="""
[site.rules.ph_frozen]
readings = 3
[site.rules.offset_step]
readings = 2
step = 0.5
[site.rules.flow_zero_sampling]
samples = 2
[site.rules.span_pinned]
readings = 2
""",
)
VALUES = {
    "ph": [7.0, 7.0, 7.01, 7.6, 4.5, 9.5, 14.0, 0.0, 13.99, 6.4, 7.2],
    "flow": [0.0, 0.0, 10.0, 12.5, 5000.0, 4999.0],
    "sampler_count": [0.0, 1.0, 2.0, 3.0, 5.0],
    "lel": [0.0, 100.0, 120.0, 3.0],
}
BAD = ["comm_failure", "stale", "out_of_range", "device_fault"]


def traces() -> st.SearchStrategy[list[Row]]:
    segment = st.tuples(st.sampled_from(sorted(VALUES)), st.integers(0, 99), st.integers(1, 8),
                        st.sampled_from([1, 30, 60, 60, 60, 61, 179, 181, 600]), st.sampled_from(sorted(VALUES)),
                        st.sampled_from(BAD), st.integers(0, 5))

    def build(segments: list[tuple[str, int, int, int, str, str, int]]) -> list[Row]:
        t, rows, count = T0, [], 0.0
        for ch, pick, repeat, dt, other, quality, roll in segments:
            for i in range(repeat):
                t += dt
                value = VALUES[ch][pick % len(VALUES[ch])] if ch != "sampler_count" else count
                rows.append((t, ch, value, "good"))
                if roll in (1, 3):  # a second channel interleaved; the count rises now and then
                    if other == "sampler_count":
                        count += float(roll == 1)
                        rows.append((t, other, count, "good"))
                    else:
                        rows.append((t, other, VALUES[other][(pick + i) % len(VALUES[other])], "good"))
                if roll == 2 and i == repeat // 2:
                    rows.append((t, ch, None, quality))
        return rows

    return st.lists(segment, min_size=1, max_size=30).map(build)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> SiteConfig:
    return load(tmp_path_factory.mktemp("tamper"), TAMPER)


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(rows=traces())
def test_fast_path_never_changes_results(config: SiteConfig, rows: list[Row]) -> None:
    assert live(config, rows) == live(config, rows, fast=False)


@PROPERTY
@given(rows=traces())
def test_live_and_replay_agree(config: SiteConfig, rows: list[Row]) -> None:
    events, err = replayed(config, csv_text(rows, with_quality=True))
    assert "rows rejected: 0" in err
    expected = sorted((e.to_dict() for e in live(config, rows)), key=lambda d: str(d["time"]))
    assert events == expected


def signs(config: SiteConfig, rows: list[Row]) -> list[EpisodeEvent]:
    """The live events of ``rows`` without the slug's "no baseline yet" notice: the site's flow channel has a
    slug rule, and a trace this short never holds a day of normal operation, so that notice opens on every flow
    trace (tests/unit/test_checks_slug.py tests it); here only the tamper signs are looked at."""
    return [e for e in live(config, rows) if e.rule != "slug_no_baseline"]


def test_each_sign_fires_on_a_short_trace_of_the_generators_values(config: SiteConfig) -> None:
    """The property tests are worth something only if traces like the generated ones reach each sign: a short
    trace of the generator's values for each, by hand."""
    frozen = [(T0 + 60 * i, "ph", 7.0, "good") for i in range(4)] + [(T0 + 60 * i + 30, "flow", 10.0 + i, "good")
                                                                   for i in range(4)]
    assert {e.rule for e in signs(config, sorted(frozen))} == {"ph_frozen"}
    step = [(T0 + 60 * i, "ph", v, "good") for i, v in enumerate([7.0, 7.0, 4.5, 7.6, 7.6, 7.6])]
    assert [(e.rule, e.event) for e in signs(config, step) if e.rule == "offset_step"] == [
        ("offset_step", "start"), ("offset_step", "end")]
    zero = [(T0 + 60 * i, "flow", 0.0, "good") for i in range(4)] + [(T0 + 60 * i + 30, "sampler_count", float(i),
                                                                     "good") for i in range(4)]
    assert [e.rule for e in signs(config, sorted(zero))] == ["flow_zero_sampling"]
    pinned = [(T0 + 60 * i, "lel", v, "good") for i, v in enumerate([100.0, 120.0, 3.0])]
    assert [(e.rule, e.event) for e in signs(config, pinned) if e.rule == "span_pinned"] == [
        ("span_pinned", "start"), ("span_pinned", "end")]


def test_gaps_and_bad_samples(config: SiteConfig) -> None:
    # ph_frozen: a gap in the pH ends the episode at the last reading before it (end_reason gap) and the run
    # starts again; the flow's variation seen before stays seen
    rows = [(T0 + 60 * i, "ph", 7.0, "good") for i in range(3)] + [(T0 + 30, "flow", 1.0, "good"),
                                                                   (T0 + 90, "flow", 2.0, "good"),
                                                                   (T0 + 600, "ph", 7.0, "good")]
    events = signs(config, sorted(rows))
    assert brief(events) == [(0.0, "ph", "ph_frozen", "start", 7.0), (120.0, "ph", "ph_frozen", "end", 7.0)]
    assert events[1].end_reason == "gap"
    # flow_zero_sampling: a bad flow reading changes nothing; a good one above zero ends it
    rows = [(T0, "flow", 0.0, "good"), (T0 + 10, "sampler_count", 1.0, "good"),
            (T0 + 60, "sampler_count", 2.0, "good"), (T0 + 70, "flow", None, "comm_failure"),
            (T0 + 120, "sampler_count", 3.0, "good"), (T0 + 150, "flow", 0.0, "good"),
            (T0 + 170, "flow", 8.0, "good")]
    assert brief(signs(config, rows)) == [(60.0, "flow", "flow_zero_sampling", "start", 3.0),
                                         (170.0, "flow", "flow_zero_sampling", "end", 8.0)]
    # offset_step: a gap between the excursion and the readings after it forgets the level before
    rows = [(T0, "ph", 7.0, "good"), (T0 + 60, "ph", 7.0, "good"), (T0 + 120, "ph", 4.5, "good"),
            (T0 + 600, "ph", 7.9, "good"), (T0 + 660, "ph", 7.9, "good")]
    assert [e for e in signs(config, rows) if e.rule == "offset_step"] == []


def test_span_pinned_at_the_low_end_with_a_tolerance(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("ph"), extra="[site.rules.span_pinned]\nreadings = 2\nat = \"low\"\n"
                                                           "tolerance = 0.05\n"))
    rows = [(T0 + 60 * i, "ph", v, "good") for i, v in enumerate([14.0, 14.0, 0.04, 0.0, 0.06, 7.0])]
    assert [(t, r, ev) for t, _c, r, ev, _v in brief(live(config, rows)) if r == "span_pinned"] == [
        (120.0, "span_pinned", "start"), (240.0, "span_pinned", "end")]


@pytest.mark.parametrize(("extra", "needle"), [
    ("[site.rules.span_pinned]\nat = \"top\"\n", "'high', 'low' or 'both'"),
    ("[site.rules.offset_step]\nstep = 0\n", "a number > 0"),
    ("[site.rules.flow_zero_sampling]\nsampler = \"ph\"\n", "sampler_count channel"),
    ("[site.rules.ph_frozen]\nflow = \"ph\"\n", "flow channel"),
    ("[site.rules.ph_frozen]\nchannels = [\"flow\"]\n", "a channel of this site of kind ['ph']"),
])
def test_rule_setting_mistakes_are_named(tmp_path: Path, extra: str, needle: str) -> None:
    with pytest.raises(ConfigErrors) as info:
        load(tmp_path, site_toml(channel("ph"), channel("flow"), channel("sampler_count"), extra=extra))
    assert needle in str(info.value), str(info.value)


def test_two_channel_signs_need_their_second_channel(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("ph"), extra="[site.rules.ph_frozen]\nenabled = true\n"))
    assert [b.rule for b in config.sites[0].checks if b.rule == "ph_frozen"] == []  # no flow channel: not run
    with pytest.raises(ConfigErrors) as info:  # asked for on a named channel: refused with what it needs
        load(tmp_path, site_toml(channel("ph"), extra="[site.rules.ph_frozen]\nchannels = [\"ph\"]\n"))
    assert "one flow channel" in str(info.value)
