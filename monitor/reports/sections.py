"""The report as a sequence of titled sections of text and tables, formatted once for every renderer.

PDF, HTML and CSV print the same sections with the same words and numbers (a coordinator comparing the CSV with
the filed PDF must find the same figures); only the layout differs. Times are printed in the site's local time
with the zone's abbreviation; flows in the channels' units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from config.rule_catalogue import DATA_QUALITY_RULES, DURATION_RULES, label
from config.schema import ChannelKind
from monitor.reports.annotations import Annotation
from monitor.reports.compliance import ComplianceReport, EpisodeLine, fmt_minutes
from monitor.reports.daily import DailySummary
from monitor.reports.days import zone
from monitor.reports.snc import percent

CERTIFICATION = (
    "I certify under penalty of law that this document and all attachments were prepared under my direction "
    "or supervision in accordance with a system designed to assure that qualified personnel properly gather "
    "and evaluate the information submitted. Based on my inquiry of the person or persons who manage the "
    "system, or those persons directly responsible for gathering the information, the information submitted "
    "is, to the best of my knowledge and belief, true, accurate, and complete. I am aware that there are "
    "significant penalties for submitting false information, including the possibility of fine and "
    "imprisonment for knowing violations. (40 CFR 403.6(a)(2)(ii), required by 40 CFR 403.12(l))"
)


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    text: tuple[str, ...] = ()  # paragraphs before the table
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    widths: tuple[float, ...] = ()  # relative column widths (PDF)
    kind: str = "table"  # table | charts | signature
    empty: str = "None in this period."
    key: str = ""  # short machine name (CSV section ids)
    extra: dict[str, str] = field(default_factory=dict)
    highlight: tuple[int, ...] = ()  # rows to highlight (days with a violation)


def num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


class Clock:
    def __init__(self, tz_name: str) -> None:
        self.tz = zone(tz_name)

    def __call__(self, t: float | None, fmt: str = "%Y-%m-%d %H:%M %Z") -> str:
        return "—" if t is None else datetime.fromtimestamp(t, self.tz).strftime(fmt)


def _daily_rows(days: Sequence[DailySummary], invalid: frozenset[tuple[str, str, float]] = frozenset()
                ) -> list[tuple[str, ...]]:
    """One row a day; its episode count leaves out data-quality episodes and those marked invalid (``invalid``:
    (channel, rule, start) of each)."""
    rows: list[tuple[str, ...]] = []
    for d in days:
        h = d.headline()
        f = d.flow
        worst = min((c.completeness for c in d.channels), default=0.0)
        eps = sum(1 for e in d.episodes if e.rule not in DATA_QUALITY_RULES
                  and (e.channel, e.rule, e.start) not in invalid)
        rows.append((d.day, f"{d.hours:g}", num(h["total_flow"], 0), num(h["integrated_flow"], 0),
                     (num(100 * f.difference, 1) + (" !" if f.flagged else "")) if f and f.difference is not None
                     else "—", num(h["peak_flow"]), num(h["peak_30min_flow"]), num(h["ph_min"], 2),
                     num(h["ph_max"], 2), num(h["ph_minutes_outside"], 0), num(h["temperature_max"]),
                     num(h["lel_max"]), num(h["samples_taken"], 0),
                     f"{num(h['fridge_min'])}/{num(h['fridge_max'])}", num(h["fridge_minutes_out_of_band"], 0),
                     num(worst, 1), str(eps)))
    return rows


def _episode_rows(eps: Sequence[EpisodeLine], clock: Clock, units: dict[str, str]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for e in eps:
        a = e.annotation
        duration = fmt_minutes(e.duration) if e.end is not None else "open"
        timed = e.rule in DURATION_RULES  # peak and limit are seconds
        peak = fmt_minutes(e.peak) if timed else num(e.peak, 2)
        limit = fmt_minutes(e.limit) if timed else num(e.limit, 2)
        unit = "" if timed else units.get(e.channel, "")
        start = clock(e.start) + (f" (confirmed {clock(e.confirmed)})" if e.confirmed not in (None, e.start) else "")
        cause, action, by = annotation_cells(e.annotations or ((a,) if a else ()), clock)
        rows.append((e.id, label(e.rule), start, duration, peak, limit, unit, e.citation, cause, action, by,
                     e.calibration))
    return rows


def annotation_cells(entries: Sequence[Annotation], clock: Clock) -> tuple[str, str, str]:
    """Cause, corrective action and who/when of every entry, oldest first, numbered where there are several
    (a later entry never hides an earlier one); who/when in the site's zone, with the zone."""
    if not entries:
        todo = "(to be completed by the industry)"
        return todo, todo, ""
    if len(entries) == 1:
        a = entries[0]
        return a.cause, a.action, f"{a.user}, {clock(a.time)}"
    return ("; ".join(f"({i}) {a.cause}" for i, a in enumerate(entries, 1)),
            "; ".join(f"({i}) {a.action}" for i, a in enumerate(entries, 1)),
            "; ".join(f"({i}) {a.user}, {clock(a.time)}" for i, a in enumerate(entries, 1)))


def _invalid_figures(e: EpisodeLine, clock: Clock, units: dict[str, str]) -> tuple[str, ...]:
    """Id, rule, start, peak, limit and unit of an invalidated episode, as the episode table shows them."""
    [row] = _episode_rows([e], clock, units)
    return (row[0], row[1], row[2], row[4], row[5], row[6])


def _units(r: ComplianceReport) -> dict[str, str]:
    return {c.id: c.unit for c in r.site.channels}


def _unit_of(r: ComplianceReport, kind: ChannelKind, fallback: str = "") -> str:
    return next((c.unit for c in r.site.channels if c.kind is kind), fallback)


def _permit_text(r: ComplianceReport) -> str:
    p = r.site.permit
    if p is None:
        return "(none on file)"
    dates = ", ".join(x for x in (f"issued {p.issued}" if p.issued else "", f"expires {p.expires}" if p.expires
                                  else "") if x)
    return p.id + (f" ({dates})" if dates else " (dates not on file)")


def _cover(r: ComplianceReport, clock: Clock) -> list[Section]:
    from monitor.reports.verdict import headline, verdict_rows

    p = r.period
    permit = r.site.permit
    return [
        Section("Compliance verdict", key="verdict", text=(headline(r),),
                columns=("Rule", "Citation", "Violations", "Days out of compliance"), widths=(2, 3, 1, 1.2),
                rows=verdict_rows(r), empty="No violations recorded (see the line above for the time measured)."),
        Section("Report", key="report", columns=("Item", "Value"), widths=(1, 3), rows=(
            ("Control authority", r.jurisdiction),
            ("Industry / site", f"{r.site.name or r.site.id} ({r.site.id})"),
            ("Industry's address", r.site.address or "(not on file: [[site]] address)"),
            ("Permit", _permit_text(r)),
            ("Categorical standard", permit.categorical if permit and permit.categorical else "(none given)"),
            ("Reporting period", f"{p.label} (local time, {r.site.timezone})"),
            ("Due", f"{p.due_label}: {p.basis}"),
            ("Generated", clock(r.generated)),
            ("Exceedance episodes (violations)", str(len(r.exceedances))),
            ("Journal head at generation", f"#{r.journal_head[0]} {r.journal_head[1][:16]}…" if r.journal_head
             else "(no journal)"),
        ))]


def build_sections(r: ComplianceReport) -> list[Section]:
    clock = Clock(r.site.timezone)
    out = _cover(r, clock)
    out.append(Section("Limits in force", key="limits", columns=("Subject", "Violation when", "Citation"),
                       widths=(1.1, 2.2, 2.7), rows=tuple((x.subject, x.condition, x.citation) for x in r.limits)))
    out.extend(_slug_baseline_sections(r, clock))
    out.append(Section("Charts", kind="charts", key="charts"))
    flow, total = _unit_of(r, ChannelKind.FLOW, "rate"), _unit_of(r, ChannelKind.FLOW_TOTAL, "volume")
    temp, lel = _unit_of(r, ChannelKind.TEMPERATURE), _unit_of(r, ChannelKind.LEL, "%LEL")
    fridge = _unit_of(r, ChannelKind.SAMPLER_TEMPERATURE)
    rows = tuple(_daily_rows(r.days, frozenset((e.channel, e.rule, e.start) for e in r.invalidated)))
    out.append(Section(
        "Daily summary", key="daily",
        text=("Flow totals from the totaliser and from the integrated flow rate; Δ is their difference (! over 5 %). "
              "Peak: highest reading; 30-min: highest 30-minute average rate (Town of Wilson § 105-7E). Minutes "
              "outside the pH range and the sampler's 4 ± 2 °C band are timed from the first reading outside to the "
              "first reading back inside. Compl.: the least complete channel that day (% of expected readings "
              "received good). Days with a violation episode are highlighted.",),
        columns=("Day (local)", "Hours (h)", f"Flow total ({total})", f"Integrated ({total})", "Δ (%)",
                 f"Peak ({flow})", f"30-min ({flow})", "pH min (pH)", "pH max (pH)", "pH out (min)",
                 f"T max ({temp or '—'})", f"LEL max ({lel})", "Samples (count)",
                 f"Fridge min/max ({fridge or '—'})", "Fridge out (min)", "Compl. (%)", "Episodes (count)"),
        widths=(1.45, 0.6, 1.15, 1.15, 0.7, 0.75, 0.75, 0.7, 0.7, 0.8, 0.65, 0.7, 0.75, 1.1, 0.8, 0.8, 0.8),
        rows=rows, highlight=_violation_days(r)))
    out.extend(_record_sections(r, clock))
    out.extend(_enforcement_sections(r, clock))
    out.extend(_lab_sections(r, clock))
    if r.notes:
        out.append(Section("Notes", key="notes", kind="text", text=r.notes))
    out.append(Section("Certification", key="certification", kind="signature", text=(CERTIFICATION,)))
    return out


def _slug_baseline_sections(r: ComplianceReport, clock: Clock) -> list[Section]:
    """The slug baseline in force on each day of the period, per slug rule, with the days it rests on (only
    where a slug rule measures against a trailing baseline)."""
    if not r.slug_baselines:
        return []
    from monitor.slug_history import batch_words

    day = "%Y-%m-%d"
    trailing = [b for b in r.site.checks if b.rule == "slug" and "baseline" not in b.params]
    literal = bool(trailing) and all(float(b.params["duration"]) == 0 for b in trailing)  # multiple_alone
    when = "at any reading (the literal reading)" if literal else "for longer than the rule's duration"
    return [Section(
        "Slug baseline in force", key="slug_baselines",
        text=("The baseline is the mean of the 24-hour averages of the most recent days of normal operation (at "
              "least 90 % measured time, no slug, above zero for at least an hour) before the day; it is fixed at "
              f"local midnight for the whole day. A slug is a value above the threshold {when}. Without a "
              f"baseline no slug is judged that day.",
              *(f"Batch operation: {batch_words(b, r.site)}." for b in trailing[:1])),
        columns=("Channel", "Day (local)", "Baseline", "Threshold", "Unit", "Days of normal operation it rests on"),
        widths=(1.2, 0.9, 0.8, 0.8, 0.7, 3.0),
        rows=tuple((b.channel, clock(b.day, day),
                    "none" if b.baseline is None else f"{b.baseline:.6g}",
                    "none: no slug judged" if b.threshold is None else f"{b.threshold:.6g}", b.unit,
                    ", ".join(clock(x, day) for x in b.rests_on) or "—") for b in r.slug_baselines))]


def _violation_days(r: ComplianceReport) -> tuple[int, ...]:
    from monitor.reports.verdict import days_overlapped

    bad = set().union(*(days_overlapped(e, r) for e in r.exceedances)) if r.exceedances else set()
    return tuple(i for i, d in enumerate(r.days) if datetime.fromisoformat(d.day).date() in bad)


def _enforcement_sections(r: ComplianceReport, clock: Clock) -> list[Section]:
    """The obligations each violation started, and the episodes invalidated with their justification."""
    from monitor.reports.verdict import obligations_empty

    when = "%Y-%m-%d %H:%M %Z"
    return [
        Section("Obligations timeline", key="obligations",
                text=("Notifications, written reports and repeat sampling each violation requires, with their due "
                      "times (local) and when and how the industry met them.",),
                columns=("Episode id", "Obligation", "Citation", "Due (local)", "Status", "Met at (local)",
                         "How / to whom"), widths=(2.2, 1.6, 1.8, 1.2, 0.7, 1.2, 1.8),
                rows=tuple((o.episode, o.duty, o.citation,
                            clock(o.due, when) + (f" ({o.due_text})" if o.due_text else ""),
                            o.status(r.generated), clock(o.fulfilled, when), o.how or "—")
                           for o in sorted(r.obligations, key=lambda o: (o.due is None, o.due or 0.0, o.episode))),
                empty=obligations_empty(r)),
    ]


def _record_sections(r: ComplianceReport, clock: Clock) -> list[Section]:
    """pH accounting, episodes, completeness and instrument faults."""
    out: list[Section] = []
    out.append(Section(
        "Monthly pH accounting (40 CFR 401.17)", key="ph_monthly",
        columns=("Month", "Days (days)", "Channel", "Excursion (min)", "Unmeasured (min)", "Maintenance (min)",
                 "Allowance (min)", "Remaining (min)", "Longest (min)", "Single limit (min)", "Result", "Basis"),
        widths=(0.8, 0.6, 0.8, 1.0, 1.1, 1.1, 0.9, 0.9, 0.9, 0.9, 1.3, 2.0),
        rows=tuple((m.month, str(m.days), m.channel, num(m.excursion_minutes, 0), num(m.unmeasured_minutes, 0),
                    num(m.maintenance_minutes, 0),
                    num(m.allowance_minutes, 0),
                    num(m.remaining_minutes, 0), num(m.longest_minutes, 0) + (" (open)" if m.longest_open else ""),
                    num(m.single_limit_minutes, 0),
                    ", ".join(x for x in ("total exceeded" if m.total_exceeded else "",
                                          "single exceeded" if m.single_exceeded else "") if x) or "complies",
                    m.total_citation) for m in r.months),
        empty="No pH channel with a stated range."))
    out.append(_episodes_section(
        "Exceedance episodes", "episodes", "Each episode with the cause and corrective action entered by the "
        "industry (pretreat report annotate --episode ID).", r.exceedances, clock, _units(r)))
    if r.monitoring_deviations:
        out.append(_episodes_section(
            "Monitoring-requirement deviations (sampler: not discharge violations)", "monitoring",
            "The monitoring equipment outside a condition of the permit or ordinance (sampler refrigeration, "
            "sampling interval): listed in their own category, not counted as discharge violations.",
            r.monitoring_deviations, clock, _units(r)))
    if r.permitted_excursions:
        out.append(_episodes_section(
            "Permitted pH excursions (40 CFR 401.17, adopted by the permit: not violations)", "permitted",
            "Excursions from the pH range within 40 CFR 401.17's allowances are permitted; a single excursion over "
            "60 minutes or over 7 h 26 min in a calendar month is a violation, listed above.",
            r.permitted_excursions, clock, _units(r)))
    if r.invalidated:
        out.append(Section(
            "Episodes marked invalid by the control authority (not violations)", key="invalidated",
            text=("Each stays in the record with the justification given; none is counted as a violation.",),
            columns=("Episode id", "Rule", "Start (local)", "Peak", "Limit", "Unit", "Citation", "Justification",
                     "Marked by"),
            widths=(2.2, 1.1, 1.3, 0.6, 0.6, 0.5, 2.0, 2.6, 1.2),
            rows=tuple((*_invalid_figures(e, clock, _units(r)), e.citation, e.invalid.reason,
                        f"{e.invalid.user}, {clock(e.invalid.time, '%Y-%m-%d')}")
                       for e in r.invalidated if e.invalid is not None)))
    out.append(Section(
        "Data completeness and instrument downtime", key="completeness",
        text=("Expected readings follow each instrument's poll interval; downtime is time with no good reading "
              "within the channel's staleness window. Maintenance is time the instrument itself reported being "
              "serviced or calibrated: not downtime, and not a measurement. The flow meter must be kept in "
              "continuous operation.",),
        columns=("Channel", "Kind", "Received (readings)", "Good (readings)", "Expected (readings)",
                 "Complete (%)", "Downtime (min or h)", "Maintenance (min or h)", "Days < 90 % (days)"),
        widths=(1.2, 1.4, 1, 1, 1, 0.9, 0.9, 0.9, 0.9),
        rows=tuple((c.channel, c.kind, f"{c.received:,}", f"{c.good:,}", f"{c.expected:,}", num(c.completeness, 2),
                    fmt_minutes(c.downtime), fmt_minutes(c.maintenance), str(c.days_incomplete))
                   for c in r.completeness)))
    out.append(Section(
        "Instrument faults (data quality, not discharge exceedances)", key="faults",
        columns=("Channel", "Kind", "Start (local)", "Duration (min or h)", "Calibration during the episode",
                 "Fault (as the instrument reported it)"),
        widths=(1.2, 1.4, 1.6, 1, 3, 3),
        rows=tuple((e.channel, label(e.rule), clock(e.start),
                    fmt_minutes(e.duration) if e.end is not None else "open", e.calibration, e.fault)
                   for e in r.faults)))
    out.append(Section(
        "Instrument calibration", key="calibration",
        text=("Each channel's calibration status at the end of the period (or now, if earlier), from the "
              "calibration log (pretreat calibration add) and the interval in force (the permit's or the site's), "
              "as known at the time: a calibration entered later with an earlier date is shown beside it. "
              "Readings of an overdue instrument are marked in the readings export.",),
        columns=("Channel", "Status"), widths=(1.2, 5), rows=tuple(r.calibration)))
    return out


def _episodes_section(title: str, key: str, text: str, episodes: tuple[EpisodeLine, ...], clock: Clock,
                      units: dict[str, str]) -> Section:
    return Section(
        title, key=key, text=(text,),
        columns=("Episode id", "Rule", "Start (local)", "Duration", "Peak", "Limit", "Unit",
                 "Citation", "Cause", "Corrective action", "Entered by", "Calibration during the episode"),
        widths=(2.0, 1.0, 1.2, 0.6, 0.6, 0.6, 0.5, 1.9, 1.5, 1.5, 0.9, 1.8),
        rows=tuple(_episode_rows(episodes, clock, units)))


def _lab_sections(r: ComplianceReport, clock: Clock) -> list[Section]:
    labs = Section("Lab results", key="labs", columns=("Sample date", "Parameter", "Result", "Unit", "Sample id",
                                                        "Type", "Lab"), widths=(1, 1.6, 0.9, 0.7, 1, 1, 1.2),
                   rows=tuple((x.sample_date.isoformat(), x.parameter, ("<" if x.nondetect else "") + f"{x.value:g}",
                               x.unit, x.sample_id, x.sample_type, x.lab) for x in r.labs),
                   empty="No lab results on file for this period.")
    out = [labs]
    if r.lab_slugs:
        out.append(Section(
            "Slug findings on lab results (composite samples)", key="lab_slugs",
            text=("The ordinance measures a slug by suspended solids and BOD, laboratory tests: a composite result "
                  "strictly greater than the multiple of normal sewage is a slug finding. A composite shows the "
                  "average over its collection period, not how long the concentration was above the threshold.",),
            columns=("Sample date", "Parameter", "Result (mg/L)", "Normal sewage (mg/L = the ordinance's ppm)",
                     "Threshold (mg/L)",
                     "Sample id", "Citation"),
            widths=(1, 1.3, 0.9, 1, 0.9, 1, 2.8),
            rows=tuple((f.result.sample_date.isoformat(), f.result.parameter, f"{f.result.value_std:g}",
                        f"{f.limit.normal:g}", f"{f.limit.multiplier:g} × {f.limit.normal:g} = {f.limit.threshold:g}",
                        f.result.sample_id, f.limit.citation) for f in r.lab_slugs)))
    if r.snc is None:
        return out
    s = r.snc
    snc = Section(
        f"Significant noncompliance screen, {s.first.isoformat()} to {s.last.isoformat()} (40 CFR 403.8(f)(2)(viii))",
        key="snc",
        text=("Chronic: 66 % or more of results exceed the limit. TRC: 33 % or more equal or exceed the limit × TRC "
              "(1.4 for BOD, TSS, FOG; 1.2 for others).",),
        columns=("Parameter", "Limit", "Results", "Exceeding", "Share", "≥ limit × TRC", "Share", "SNC", "Citation"),
        widths=(1.3, 0.8, 0.7, 0.8, 0.7, 1.0, 0.7, 1.0, 2.6),
        rows=tuple((x.limit.label, x.limit.printed, str(x.count), str(x.exceeding),
                    percent(x.exceed_share), str(x.at_trc) if x.trc is not None else "n/a",
                    percent(x.trc_share) if x.trc is not None else "n/a",
                    ", ".join(k for k in ("chronic" if x.chronic else "", "TRC" if x.trc_violation else "") if k)
                    or "no", x.limit.citation) for x in s.screens if x.site == r.site.id))
    return [*out, snc]
