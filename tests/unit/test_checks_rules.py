"""Per-reading rules at their boundaries: pH, temperature per measuring point, LEL, sampler, data quality."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from config.schema import PayloadFormat, SiteConfig
from drivers.mqtt.payload import TopicDecoder
from monitor.checks.engine import CheckEngine
from monitor.sample import Quality, Sample
from tests.unit.checks_helpers import T0, Row, brief, channel, live, load, site_toml

PAWLING_PERMIT = """
[site.permit]
id = "PJSC-IU-7"
[site.permit.limits.ph_min]
value = 6.0
cite = "Permit PJSC-IU-7 Part I.A"
[site.permit.limits.ph_max]
value = 10.0
cite = "Permit PJSC-IU-7 Part I.A"
"""


def rows_of(
    ch: str, values: list[float | None], *, step: float = 60.0, bad: str = "comm_failure"
) -> list[Row]:
    return [(T0 + step * i, ch, v, "good" if v is not None else bad) for i, v in enumerate(values)]


def config(tmp_path: Path, *channels: str, jurisdiction: str = "southeast", extra: str = "",
           site_kind: str = "") -> SiteConfig:
    return load(tmp_path, site_toml(*channels, jurisdiction=jurisdiction, extra=extra, site_kind=site_kind))


@pytest.mark.parametrize(
    ("jurisdiction", "extra", "complies", "violates_low", "violates_high"),
    [
        ("southeast", "", [5.0, 9.0], 4.99, 9.01),  # "less than 5.0 or higher than 9.0"
        ("vestal_endicott", "", [6.0, 9.0], 5.99, 9.01),  # "between six (6) and nine (9)": ends comply
        ("wilson", "", [5.5, 9.5], 5.49, 9.51),  # "lower than 5.5", "in excess of 9.5"
        ("pawling", PAWLING_PERMIT, [6.0, 10.0], 5.99, 10.01),  # only the permit states the range
    ],
)
def test_ph_boundaries_follow_the_ordinance_words(
    tmp_path: Path,
    jurisdiction: str,
    extra: str,
    complies: list[float],
    violates_low: float,
    violates_high: float,
) -> None:
    c = config(tmp_path, channel("ph"), jurisdiction=jurisdiction, extra=extra)
    values = [7.0, complies[0], complies[1], violates_low, complies[0], violates_high, complies[1]]
    got = [(e.rule, e.event, e.value) for e in live(c, rows_of("ph", values))]
    assert got == [
        ("ph_low", "start", violates_low),
        ("ph_low", "end", complies[0]),
        ("ph_high", "start", violates_high),
        ("ph_high", "end", complies[1]),
    ]


def test_mineola_has_no_ph_maximum(tmp_path: Path) -> None:
    c = config(tmp_path, channel("ph"), jurisdiction="mineola")
    got = [(e.rule, e.event, e.value) for e in live(c, rows_of("ph", [7.0, 13.5, 5.5, 5.4, 7.0]))]
    assert got == [("ph_low", "start", 5.4), ("ph_low", "end", 7.0)]
    assert "Village of Mineola § 46.53(3)" in live(c, rows_of("ph", [5.0]))[0].citation


def test_bad_samples_neither_start_end_nor_interrupt_an_episode(tmp_path: Path) -> None:
    c = config(tmp_path, channel("ph"))
    values: list[float | None] = [7.0, 4.0, None, None, 3.5, None, 7.0]
    events = live(c, rows_of("ph", values))
    assert [(e.rule, e.event, e.value, e.peak) for e in events if e.rule == "ph_low"] == [
        ("ph_low", "start", 4.0, None),
        ("ph_low", "end", 7.0, 3.5),
    ]
    assert [e.rule for e in events if e.rule != "ph_low"] == []  # comm_failure is not a sensor fault


@pytest.mark.parametrize(
    ("jurisdiction", "location", "unit", "limit", "cite"),
    [
        ("southeast", "influent", "degC", 40.0, "Town of Southeast § 112-5A(1)(i)"),
        ("southeast", "influent", "degF", 104.0, "Town of Southeast § 112-5A(1)(i)"),
        # printed "150° Fahrenheit (65° Celsius)": the figure most favourable to the discharger, 150 °F = 65.56 °C
        ("mineola", "discharge", "degC", 65.0 + 5.0 / 9.0, "Village of Mineola § 46.54A(1)"),
        ("mineola", "discharge", "degF", 150.0, "Village of Mineola § 46.54A(1)"),
        ("mineola", "influent", "degC", 40.0, "converted from 104 °F as printed"),  # °C cut off in the seed
        ("wilson", "discharge", "degF", 150.0, "Town of Wilson § 105-5C(13)"),
        ("vestal_endicott", "discharge", "degC", 40.0, "§ 18-76(a)(1)"),
        ("vestal", "grease_interceptor", "degC", 60.0, "section 18-29(i)(6)"),
        (
            "vestal_endicott",
            "grease_interceptor",
            "degF",
            140.0,
            "section 18-29(i)(6)",
        ),  # inherited town-wide
    ],
)
def test_temperature_limit_depends_on_the_measuring_point(
    tmp_path: Path, jurisdiction: str, location: str, unit: str, limit: float, cite: str
) -> None:
    c = load(tmp_path, site_toml(channel("temperature", unit=unit, location=location), jurisdiction=jurisdiction,
                                 site_kind="plant" if location == "influent" else ""))
    events = live(c, rows_of("temperature", [20.0, limit, limit + 0.1, limit, 20.0]))
    assert [(e.event, e.value, e.limit) for e in events] == [
        ("start", limit + 0.1, limit),
        ("end", limit, limit),
    ]
    assert cite in events[0].citation


def test_temperature_without_location_is_not_judged_and_unstated_points_are_skipped(tmp_path: Path) -> None:
    c = config(tmp_path, channel("temperature"), channel("t2", "temperature", location="discharge"))
    assert [
        b.channel for b in c.sites[0].checks if b.rule == "temperature_high"
    ] == []  # Southeast: no discharge


def test_lel_exactly_five_percent_twice_is_compliant(tmp_path: Path) -> None:
    c = config(tmp_path, channel("lel"))
    events = live(c, rows_of("lel", [5.0, 5.0, 5.0, 5.1, 4.0, 5.1, 5.1, 5.0], step=1.0))
    assert [(e.rule, e.event, e.time - T0, e.value) for e in events] == [
        ("lel_successive", "start", 6.0, 5.1),
        ("lel_successive", "end", 7.0, 5.0),
    ]


def test_lel_single_reading_over_ten_percent(tmp_path: Path) -> None:
    c = config(tmp_path, channel("lel"))
    events = live(c, rows_of("lel", [10.0, 0.0, 10.5, 10.0], step=1.0))
    assert [(e.rule, e.event, e.value) for e in events] == [
        ("lel_single", "start", 10.5),
        ("lel_successive", "start", 10.0),
        ("lel_single", "end", 10.0),
    ]


def test_lel_succession_spans_a_bad_sample(tmp_path: Path) -> None:
    c = config(tmp_path, channel("lel"))
    events = live(c, rows_of("lel", [6.0, None, 6.5, 1.0], step=1.0, bad="decode_error"))
    assert [(e.rule, e.event) for e in events if e.rule == "lel_successive"] == [
        ("lel_successive", "start"),
        ("lel_successive", "end"),
    ]


def test_sampler_temperature_four_plus_or_minus_two(tmp_path: Path) -> None:
    c = config(tmp_path, channel("sampler_temperature"), jurisdiction="pawling")
    events = live(c, rows_of("sampler_temperature", [4.0, 2.0, 6.0, 6.1, 9.0, 0.5, 5.0, 1.9, 2.0]))
    assert [(e.event, e.value, e.limit, e.peak) for e in events] == [
        ("start", 6.1, 6.0, None),
        ("end", 5.0, 6.0, 9.0),  # peak: furthest from 4 °C (9.0, not 0.5)
        ("start", 1.9, 2.0, None),
        ("end", 2.0, 2.0, 1.9),
    ]
    assert events[0].citation == "Town of Pawling sewer use chapter, item (3)"  # the legal citation, no seed line


def test_sampler_interval_counts_only_flowing_time(tmp_path: Path) -> None:
    c = config(tmp_path, channel("sampler_count", max_gap=14400), channel("flow", max_gap=14400),
               jurisdiction="pawling")  # sparse readings, all measured
    rows: list[Row] = [
        (T0, "sampler_count", 1.0, "good"),
        (T0, "flow", 5.0, "good"),
        (T0 + 900, "sampler_count", 1.0, "good"),  # exactly 15 minutes: complies
        (T0 + 901, "flow", 0.0, "good"),  # 901 s counted: starts here
        (T0 + 5000, "flow", 5.0, "good"),
        (T0 + 5100, "sampler_count", 2.0, "good"),
        (T0 + 5200, "flow", 0.0, "good"),
        (T0 + 9000, "flow", 5.0, "good"),  # idle: not counted
        (T0 + 9800, "sampler_count", 2.0, "good"),
        (T0 + 9800, "flow", None, "comm_failure"),
        (T0 + 20000, "sampler_count", 2.0, "good"),
    ]  # flow unknown: not counted either
    events = live(c, rows)
    # the overdue interval starts at its onset, the last sample (T0), confirmed once 901 s are counted
    assert [
        (e.rule, e.event, e.time - T0, e.value, e.peak) for e in events if e.rule == "sampler_interval"
    ] == [("sampler_interval", "start", 0.0, 1.0, None), ("sampler_interval", "end", 5100.0, 2.0, 1001.0)]
    assert [e.confirmed for e in events if e.rule == "sampler_interval" and e.event == "start"] == [T0 + 901]


def sampler_events(c: SiteConfig, rows: list[Row], rule: str = "sampler_interval") -> list[tuple[object, ...]]:
    """(event, time, confirmed, peak, end_reason) of ``rule``, times from T0; the same with the band disabled."""
    got = []
    for fast in (True, False):
        got.append([(e.event, e.time - T0, e.confirmed and e.confirmed - T0, e.peak, e.end_reason)
                    for e in live(c, rows, fast=fast) if e.rule == rule])
    assert got[0] == got[1]
    return got[0]


def test_sampler_interval_is_confirmed_at_a_count_reading_not_on_the_flow_alone(tmp_path: Path) -> None:
    """Flow above zero read every minute, the count every ten minutes. The limit (900 s of flow) passes at
    15 minutes, but the count was last read unchanged at 10 minutes: a sample taken between 10 and 15 minutes
    was on time, so nothing is shown until the count is read again. At 20 minutes it is unchanged: overdue,
    confirmed then, and the sample seen at 30 minutes ends it. In the next interval the count is unchanged at 40
    minutes (600 s counted) and higher at 50 (1200 s): that sample may have been taken before the limit, so
    there is no episode."""
    c = config(tmp_path, channel("sampler_count", max_gap=1800), channel("flow"), jurisdiction="pawling")
    rows: list[Row] = []
    for m in range(61):
        rows.append((T0 + 60 * m, "flow", 5.0, "good"))
        if m % 10 == 0:
            count = 1.0 if m <= 20 else 2.0 if m <= 40 else 3.0  # samples seen at 30 and 50 minutes
            rows.append((T0 + 60 * m, "sampler_count", count, "good"))
    assert sampler_events(c, rows) == [("start", 0.0, 1200.0, None, None), ("end", 1800.0, None, 1800.0, "cleared")]


def test_sampler_interval_counts_flow_time_the_count_was_unread_only_once_read_unchanged(tmp_path: Path) -> None:
    """The count's reads fail for 14 minutes while the flow goes on. Read again unchanged, it shows that no sample
    was taken meanwhile: the time counts and the interval is overdue at that reading. Read again higher, a sample
    was taken at some unknown moment: no episode."""
    c = config(tmp_path, channel("sampler_count", max_gap=1800), channel("flow"), jurisdiction="pawling")

    def rows_with(after: float) -> list[Row]:
        rows: list[Row] = []
        for m in range(17):
            rows.append((T0 + 60 * m, "flow", 5.0, "good"))
            if m == 0:
                rows.append((T0, "sampler_count", 1.0, "good"))
            elif m < 16:
                rows.append((T0 + 60 * m, "sampler_count", None, "comm_failure"))
            else:
                rows.append((T0 + 60 * m, "sampler_count", after, "good"))
        return rows

    assert sampler_events(c, rows_with(1.0)) == [("start", 0.0, 960.0, None, None)]
    assert sampler_events(c, rows_with(2.0)) == []


def test_a_gap_in_the_count_ends_the_episode_with_the_time_counted_at_its_last_reading(tmp_path: Path) -> None:
    """An overdue interval (onset 0, confirmed at 16 minutes); the count is read every minute to 20 minutes,
    then falls silent past its max_gap while the flow stops at 25 minutes and resumes at 40. The episode ends at
    the count's last reading (20 minutes), its peak the flow time counted then: 1200 s, not a figure computed
    from the flow's later state (which gave 300 s: the 1500 s counted to 25 minutes less the 20 minutes from
    the count's last reading to the flow resuming; with other timings it was negative)."""
    c = config(tmp_path, channel("sampler_count", max_gap=600), channel("flow", max_gap=600),
               jurisdiction="pawling")
    rows: list[Row] = []
    for m in range(61):
        rows.append((T0 + 60 * m, "flow", 0.0 if 25 <= m < 40 else 5.0, "good"))
        if m <= 20 or m == 60:
            rows.append((T0 + 60 * m, "sampler_count", 1.0, "good"))
    assert sampler_events(c, rows) == [("start", 0.0, 960.0, None, None), ("end", 1200.0, None, 1200.0, "gap")]


def test_a_gap_in_the_flow_found_after_a_sample_takes_no_time_from_the_new_interval(tmp_path: Path) -> None:
    """The flow is read every minute to 600 s, then not until 1500 s (a gap: max_gap 600 s); the sampler takes a
    sample at 700 s, inside that silence. The gap's unmeasured time runs from the flow's last reading (600 s),
    but the new interval begins at the sample: its unknown-flow time is 800 s (700–1500), not 900, and its
    flowing time is not reduced by the 100 s before it began (which made it -100 s). The flowing time passes
    900 s at 2400 s: the count's next reading (2440 s) shows it once the flow reading after it (2460 s) shows
    the time it counted measured, confirmed then. Unverified (its total counts unknown time too): the count
    read unchanged at 1600 s with 800 s unknown plus 100 s flowing behind it, passed at the flow's next reading
    (1620 s)."""
    c = config(tmp_path, channel("sampler_count", max_gap=600), channel("flow", max_gap=600),
               jurisdiction="pawling")
    rows: list[Row] = [(T0 + t, "flow", 5.0, "good") for t in range(0, 601, 60)]
    rows += [(T0 + t, "flow", 5.0, "good") for t in range(1500, 2700, 60)]
    rows += [(T0, "sampler_count", 1.0, "good"), (T0 + 60, "sampler_count", 1.0, "good")]
    rows += [(T0 + t, "sampler_count", 2.0, "good") for t in range(700, 2700, 60)]  # the sample: 700 s
    rows.sort(key=lambda r: r[0])
    assert sampler_events(c, rows) == [("start", 700.0, 2460.0, None, None)]
    assert sampler_events(c, rows, "sampler_interval_unverified") == [("start", 700.0, 1620.0, None, None)]


def test_a_count_read_at_exactly_the_limit_while_nothing_flows_shows_no_lateness(tmp_path: Path) -> None:
    """900 s of flow, then none; the count is read unchanged at 960 s with exactly the limit counted. A sample
    in the still time after it would come at exactly 15 minutes, which complies: nothing is shown late, even once
    the flow resumes (1200 s) and runs past the limit while the count is not read again (it next reads after a
    gap, or higher). The record had an episode confirmed at 1260 s on the flow alone, ended by the count's gap at
    960 s with a peak of 900 s (found by an adversarial review)."""
    c = config(tmp_path, channel("sampler_count", max_gap=1800), channel("flow", max_gap=1800),
               jurisdiction="pawling")
    rows: list[Row] = [(T0, "sampler_count", 1.0, "good"), (T0, "flow", 5.0, "good"), (T0 + 900, "flow", 0.0, "good"),
                       (T0 + 960, "sampler_count", 1.0, "good"), (T0 + 1200, "flow", 5.0, "good"),
                       (T0 + 1260, "flow", 5.0, "good")]
    assert sampler_events(c, [*rows, (T0 + 3061, "sampler_count", 1.0, "good")]) == []
    assert sampler_events(c, [*rows, (T0 + 1500, "sampler_count", 2.0, "good")]) == []
    unknown = [(T0, "sampler_count", 1.0, "good"), (T0, "flow", None, "comm_failure"), (T0 + 900, "flow", 0.0, "good"),
               (T0 + 960, "sampler_count", 1.0, "good"), (T0 + 1200, "flow", None, "comm_failure"),
               (T0 + 1260, "flow", None, "comm_failure"), (T0 + 2761, "sampler_count", 1.0, "good")]
    assert sampler_events(c, unknown, "sampler_interval_unverified") == []


def test_a_flow_gap_takes_back_the_staleness_window_it_had_counted(tmp_path: Path) -> None:
    """The flow is read at 0 s, marked stale at 180 s (its max_gap), read again at 400 s and every minute to
    1200 s; the count is read unchanged at 0 and 1200 s. The 180 s the STALE sample let count as flowing lie in
    the gap (0–400 s), which was not measured: 800 s of flow are counted, not 980, so the interval is not shown
    overdue but unverified (800 s flowing plus 400 s unknown). The same as without the STALE row; before, the
    STALE row turned this data-quality episode into an exceedance (found by an adversarial review)."""
    c = config(tmp_path, channel("sampler_count", max_gap=1800), channel("flow", max_gap=180),
               jurisdiction="pawling")
    rows: list[Row] = [(T0, "sampler_count", 1.0, "good"), (T0, "flow", 5.0, "good"),
                       *[(T0 + t, "flow", 5.0, "good") for t in range(400, 1201, 60)],
                       (T0 + 1200, "sampler_count", 1.0, "good")]
    stale = sorted([*rows, (T0 + 180, "flow", None, "stale")], key=lambda r: r[0])
    for trace in (rows, stale):
        assert sampler_events(c, trace) == []
        assert sampler_events(c, trace, "sampler_interval_unverified") == [("start", 0.0, 1200.0, None, None)]


def test_a_count_reading_shows_lateness_only_on_flow_time_measured_through_it(tmp_path: Path) -> None:
    """Flow and count read every minute; the flow meter falls silent from 600 s to 1200 s (max_gap 90 s), with
    or without the daemon's STALE row. Count readings in the silence found more than 900 s counted while the
    flow was taken to run on; the flow's next reading shows a gap, so those readings show nothing. 600 s were
    measured before the silence: 900 s are reached at 1500 s (the flow read then: measured) and passed at the
    next reading, 1560 s. The record had the interval confirmed at 960 s on flow time that was never measured
    (found by an adversarial review's random search)."""
    c = config(tmp_path, channel("sampler_count", max_gap=3900), channel("flow", max_gap=90),
               jurisdiction="pawling")
    rows: list[Row] = []
    for t in range(0, 1801, 60):
        rows.append((T0 + t, "sampler_count", 1.0, "good"))
        if not 600 < t < 1200:
            rows.append((T0 + t, "flow", 5.0, "good"))
    stale = sorted([*rows, (T0 + 690, "flow", None, "stale")], key=lambda r: r[0])
    for trace in (rows, stale):
        assert sampler_events(c, trace) == [("start", 0.0, 1560.0, None, None)]


def test_a_count_read_at_exactly_the_limit_as_the_flow_stops_shows_no_lateness(tmp_path: Path) -> None:
    """900 s of flow; at 900 s the count is read unchanged (exactly the limit) and, at the same instant, the flow
    reads zero. The flow did not run on after the count reading, so a sample in the still time would come at
    exactly 15 minutes: nothing is shown late when the flow resumes while the count is not read (it next reads
    after a gap). The state that decides is the flow's after the count reading, at the same instant; whichever
    of the two the site file lists first (found by an adversarial review's random search)."""
    rows: list[Row] = [(T0, "sampler_count", 1.0, "good"), (T0, "flow", 5.0, "good"),
                       (T0 + 900, "sampler_count", 1.0, "good"), (T0 + 900, "flow", 0.0, "good"),
                       *[(T0 + t, "flow", 5.0, "good") for t in range(1500, 3001, 60)],
                       (T0 + 3000, "sampler_count", 1.0, "good")]
    for order in (("sampler_count", "flow"), ("flow", "sampler_count")):
        chans = {"sampler_count": channel("sampler_count", max_gap=1800), "flow": channel("flow", max_gap=1800)}
        c = config(tmp_path, *(chans[k] for k in order), jurisdiction="pawling")
        assert sampler_events(c, rows) == []


def test_what_a_bad_flow_sample_and_a_flow_gap_show_of_a_waiting_count_reading(tmp_path: Path) -> None:
    """Found by a second adversarial review. A count reading with the limit counted waits for the flow:
    - a bad sample other than STALE shows the meter's last value held until it, and the interval is confirmed
      at that sample (it was left to the next reading, or to none);
    - not after a STALE sample: the meter had fallen silent (840 s measured were taken for 1020);
    - a gap in the flow shows what was measured up to its start: 950 s, late (the reading was thrown away);
    - exactly the limit with nothing flowing after the count reading shows nothing, even when a STALE sample
      comes before the flow's next reading (the unverified check took the STALE sample's state); nor does
      exactly the limit at the flow's last reading before a gap (the flow running on was not measured)."""
    def pawling(count_gap: float, flow_gap: float) -> SiteConfig:
        return config(tmp_path, channel("sampler_count", max_gap=count_gap), channel("flow", max_gap=flow_gap),
                      jurisdiction="pawling")

    def at(*rows: tuple[float, str, float | None, str]) -> list[Row]:
        return sorted(((T0 + t, ch, v, q) for t, ch, v, q in rows), key=lambda r: r[0])

    c = pawling(1800, 1800)
    bad = at((0, "sampler_count", 0.0, "good"), (0, "flow", 5.0, "good"), (901, "sampler_count", 0.0, "good"),
             (950, "flow", None, "device_exception"), (1000, "sampler_count", 1.0, "good"))
    assert sampler_events(c, bad) == [("start", 0.0, 950.0, None, None), ("end", 1000.0, None, 950.0, "cleared")]
    silent = at((0, "sampler_count", 0.0, "good"), *[(t, "flow", 5.0, "good") for t in range(0, 841, 60)],
                (1000, "sampler_count", 0.0, "good"), (1020, "flow", None, "stale"),
                (1080, "flow", None, "device_exception"), (1100, "sampler_count", 0.0, "good"),
                (1990, "sampler_count", 1.0, "good"), (2000, "flow", 5.0, "good"))
    assert sampler_events(pawling(3600, 180), silent) == []
    cut = at((0, "sampler_count", 0.0, "good"), (0, "flow", 5.0, "good"), (950, "flow", 5.0, "good"),
             (1000, "sampler_count", 0.0, "good"), (2800, "flow", 5.0, "good"), (2900, "sampler_count", 1.0, "good"))
    assert sampler_events(pawling(3600, 1800), cut) == [("start", 0.0, 2800.0, None, None),
                                                        ("end", 2900.0, None, 1050.0, "cleared")]
    # exactly the limit at the flow's last reading before a gap: the flow running on after it was not measured
    c = config(tmp_path, channel("flow", max_gap=600), channel("sampler_count", max_gap=3900), jurisdiction="pawling")
    into_gap = at(*[(t, "flow", 5.0, "good") for t in (0, 300, 600, 900, 1800, 2100)],
                  (0, "sampler_count", 0.0, "good"), (900, "sampler_count", 0.0, "good"),
                  (2400, "sampler_count", 1.0, "good"))
    assert sampler_events(c, into_gap) == []
    still = at((0, "sampler_count", 0.0, "good"), (100, "flow", 5.0, "good"), (900, "flow", 0.0, "good"),
               (950, "sampler_count", 0.0, "good"), (1000, "flow", None, "stale"), (1010, "flow", 0.0, "good"),
               (1100, "flow", 0.0, "good"), (1200, "sampler_count", 1.0, "good"))
    assert sampler_events(pawling(3900, 600), still, "sampler_interval_unverified") == []


def test_sampler_interval_needs_a_flow_channel(tmp_path: Path) -> None:
    from config.errors import ConfigErrors

    with pytest.raises(ConfigErrors, match=r"rules\.sampler_interval\.flow"):
        config(tmp_path, channel("sampler_count"), jurisdiction="pawling")


def test_stale_row_starts_and_next_good_reading_ends(tmp_path: Path) -> None:
    c = config(tmp_path, channel("ph"))
    rows = rows_of("ph", [7.0, None, None, 7.1], bad="stale")
    assert [(e.rule, e.event, e.time - T0, e.value) for e in live(c, rows)] == [
        ("stale", "start", 60.0, None),
        ("stale", "end", 180.0, 7.1),
    ]


@pytest.mark.parametrize(
    "quality",
    ["out_of_range", "bad_value", "device_exception", "decode_error", "device_fault", "unit_mismatch", "clock_skew"],
)
def test_sensor_fault_qualities(tmp_path: Path, quality: str) -> None:
    c = config(tmp_path, channel("lel"))
    events = live(c, rows_of("lel", [1.0, None, None, 1.0], bad=quality))
    assert [(e.rule, e.event) for e in events] == [("sensor_fault", "start"), ("sensor_fault", "end")]
    assert "not a discharge exceedance" in events[0].citation


def test_a_clock_skew_reading_opens_a_sensor_fault_episode_and_is_never_judged(tmp_path: Path) -> None:
    """An LEL meter whose clock is an hour fast publishes 50 %LEL: the MQTT decoder makes it clock_skew (its time
    is unknown); the reading opens the data-quality episode that tells the operator to set the clock, and no LEL
    exceedance, not even when a sample of that quality carries a number (it never counts as a measurement)."""
    c = config(tmp_path, channel("lel"))
    ch = c.sites[0].channel("lel")
    dec = TopicDecoder(topic="acme/lel", channels=[replace(ch, topic="acme/lel", field="lel",
                                                                         payload=PayloadFormat.JSON)], time_field="ts")
    (skewed,) = dec.decode(json.dumps({"lel": 50.0, "ts": T0 + 120 + 3600}).encode(), received=T0 + 120).samples
    assert skewed.quality is Quality.CLOCK_SKEW and skewed.time == T0 + 120 and "(read 50 %LEL)" in skewed.reason
    with_number = replace(skewed, time=T0 + 180, value=50.0)
    readings = [Sample(time=T0, site="acme", channel="lel", value=1.0, unit="%LEL"),
                replace(skewed, time=T0 + 60), skewed, with_number,
                Sample(time=T0 + 240, site="acme", channel="lel", value=1.0, unit="%LEL")]
    for live_engine in (False, True):
        events = CheckEngine.for_config(c, live=live_engine).process_many(readings)
        assert brief(events) == [(60.0, "lel", "sensor_fault", "start", None),
                                 (240.0, "lel", "sensor_fault", "end", 1.0)]
        assert "not a discharge exceedance" in events[0].citation


def test_flatline_is_opt_in_and_counts_identical_readings(tmp_path: Path) -> None:
    c = config(tmp_path, channel("ph"), extra='[site.rules.flatline]\nchannels = ["ph"]\nreadings = 3\n')
    events = live(c, rows_of("ph", [7.0, 7.0, 7.01, 7.01, None, 7.01, 7.01, 7.02]))
    assert brief(events) == [(300.0, "ph", "flatline", "start", 7.01), (420.0, "ph", "flatline", "end", 7.02)]
    assert not [b for b in config(tmp_path, channel("ph")).sites[0].checks if b.rule == "flatline"]


def test_sampler_interval_overdue_when_flow_turns_bad_starts_at_the_next_reading(tmp_path: Path) -> None:
    """Found by the fast-path property test: 3600 s of flow counted, then the flow reading goes bad; the next
    count reading (unchanged) must start the episode in the fast path as in the slow one."""
    c = config(tmp_path, channel("sampler_count", max_gap=7200), channel("flow", max_gap=7200),
               jurisdiction="pawling")
    rows: list[Row] = [
        (T0, "flow", 10.0, "good"),
        (T0, "sampler_count", 5.0, "good"),
        (T0 + 3600, "flow", 6000.0, "good"),  # above valid_max: out_of_range, flow unknown
        (T0 + 3600, "sampler_count", 5.0, "good"),
    ]
    for fast in (True, False):
        events = [
            (e.rule, e.event, e.time - T0, e.confirmed)
            for e in live(c, rows, fast=fast)
            if e.rule == "sampler_interval"
        ]
        assert events == [("sampler_interval", "start", 0.0, T0 + 3600.0)]  # onset: the last sample


def test_sampler_interval_with_the_flow_unknown_is_an_unverified_interval_not_silence(tmp_path: Path) -> None:
    """The sampling-interval clock does not stop because the flow reading is bad: 10 minutes of flow, then the
    meter fails for 10 minutes with no new sample. Counted flowing time (600 s) complies, counted plus unknown
    time (1200 s) passes 15 minutes: a data-quality episode from the last sample, ended by the next sample. The
    count is read every 1000 s or less here (max_gap 1800 s), so its readings are not a gap."""
    c = config(tmp_path, channel("sampler_count", max_gap=1800), channel("flow"), jurisdiction="pawling")
    rows: list[Row] = [
        (T0, "sampler_count", 1.0, "good"),
        (T0, "flow", 5.0, "good"),
        (T0 + 600, "flow", None, "comm_failure"),
        (T0 + 1000, "sampler_count", 1.0, "good"),  # 600 + 400 = 1000 s > 900: unverifiable from here
        (T0 + 1200, "sampler_count", 2.0, "good"),
    ]
    for fast in (True, False):
        events = [(e.rule, e.event, e.time - T0, e.confirmed, e.citation.startswith("data quality"))
                  for e in live(c, rows, fast=fast) if e.rule.startswith("sampler_interval")]
        assert events == [
            ("sampler_interval_unverified", "start", 0.0, T0 + 1000, True),
            ("sampler_interval_unverified", "end", 1200.0, None, True),
        ]


def test_a_gap_in_the_flow_is_not_counted_and_a_gap_in_the_count_ends_the_episode(tmp_path: Path) -> None:
    """max_gap 180 s. Flow 5 gpm read every minute for 10 minutes, then a 30-minute hole in the flow readings
    (the daemon marks the flow stale at 13 minutes, three polls on): the hole is not counted (flow above zero
    was not measured), the three minutes the STALE sample let count included once the hole is known at 40
    minutes, so the sampler is not late at 40 minutes but past 45 (10 + 5 = 15 minutes, exactly the limit, with
    the flow running when the count is read): confirmed at the next reading, 46 minutes, the episode's onset
    being the last sample (here the count's first reading). Then the count itself
    goes silent for 20 minutes while late: the episode ends at its last reading before the gap (a sample may
    have been taken unseen)."""
    c = config(tmp_path, channel("sampler_count"), channel("flow"), jurisdiction="pawling")
    rows: list[Row] = []
    for i in range(53):  # the count every minute to 52 min; flow 0-10 and 40-52 min
        rows += [(T0 + 60 * i, "sampler_count", 1.0, "good")]
        if i <= 10 or i >= 40:
            rows += [(T0 + 60 * i, "flow", 5.0, "good")]
        elif i == 13:
            rows += [(T0 + 60 * i, "flow", None, "stale")]
    rows += [(T0 + 60 * 73, "sampler_count", 1.0, "good"), (T0 + 60 * 73, "flow", 5.0, "good")]
    got = [(e.event, (e.time - T0) / 60, e.confirmed and (e.confirmed - T0) / 60, e.end_reason)
           for e in live(c, rows) if e.rule == "sampler_interval"]
    assert got == [("start", 0.0, 46.0, None), ("end", 52.0, None, "gap")]  # onset: the last sample (the first)


@pytest.mark.parametrize("fast", [True, False])
def test_an_episode_ends_at_the_last_reading_before_a_gap_and_restarts_after_it(tmp_path: Path,
                                                                                fast: bool) -> None:
    c = config(tmp_path, channel("temperature", location="influent"), site_kind="plant")
    rows = [*rows_of("temperature", [20.0, 41.0, 42.0]), (T0 + 600, "temperature", 43.0, "good"),
            (T0 + 660, "temperature", 20.0, "good")]
    got = [(e.event, e.time - T0, e.value, e.peak, e.end_reason, e.measured, e.unmeasured)
           for e in live(c, rows, fast=fast) if e.rule == "temperature_high"]
    assert got == [("start", 60.0, 41.0, None, None, None, None), ("end", 120.0, 42.0, 42.0, "gap", 60.0, 0.0),
                   ("start", 600.0, 43.0, None, None, None, None),
                   ("end", 660.0, 20.0, 43.0, "cleared", 60.0, 0.0)]


def test_a_bad_sample_neither_makes_nor_bridges_a_gap(tmp_path: Path) -> None:
    c = config(tmp_path, channel("lel"))
    rows: list[Row] = [(T0, "lel", 6.0, "good"), (T0 + 60, "lel", None, "comm_failure"),
                       (T0 + 120, "lel", 6.0, "good"),  # 120 s after the last good one: successive
                       (T0 + 180, "lel", 2.0, "good"), (T0 + 240, "lel", 6.0, "good"),
                       (T0 + 300, "lel", None, "comm_failure"), (T0 + 400, "lel", None, "comm_failure"),
                       (T0 + 500, "lel", 6.0, "good")]  # 260 s after the last good one: a gap, not successive
    assert [(e.event, e.time - T0) for e in live(c, rows) if e.rule == "lel_successive"] == [
        ("start", 120.0), ("end", 180.0)]


def test_flatline_run_does_not_continue_across_a_gap(tmp_path: Path) -> None:
    c = config(tmp_path, channel("temperature", location="influent"), site_kind="plant",
               extra='[site.rules.flatline]\nchannels = ["temperature"]\nreadings = 3\n')
    rows = rows_of("temperature", [20.0, 20.0]) + [(T0 + 1000 + 60 * i, "temperature", 20.0, "good")
                                                   for i in range(4)]
    got = [(e.event, e.time - T0, e.end_reason) for e in live(c, rows) if e.rule == "flatline"]
    assert got == [("start", 1120.0, None)]  # the third identical reading after the gap, not the first


@pytest.mark.parametrize("opt_in", [True, False])
def test_a_ph_probe_saturating_at_14_is_judged_only_when_the_channel_opts_in(tmp_path: Path, opt_in: bool) -> None:
    from monitor.checks.engine import CheckEngine
    from monitor.sample import Quality, Sample

    c = config(tmp_path, channel("ph", judge_over_range=opt_in))
    s = Sample(time=T0 + 60, site="acme", channel="ph", value=14.2, unit="pH", quality=Quality.OVER_RANGE,
               reason="14.2 pH above the span")
    engine = CheckEngine.for_config(c)
    events = engine.process_many([Sample(time=T0, site="acme", channel="ph", value=7.0, unit="pH"), s])
    got = [(e.rule, e.event, e.value, e.censored) for e in events]
    assert got == ([("ph_high", "start", 14.0, True)] if opt_in else [("sensor_fault", "start", None, False)])
