"""The periodic compliance report for one site and period: everything the renderers print, assembled once.

Contents (40 CFR 403.12(e),(h) periodic reports; Town of Pawling's report dates, see `periods`): the permit
and jurisdiction limits with their citations (where the permit and the jurisdiction both limit a lab parameter,
the stricter is listed with its citation and the looser beside it), the daily summary table, every exceedance episode
with the cause and corrective action the industry entered (`annotations`), data completeness and instrument
downtime per channel (the flow meter must be kept in continuous operation), the monthly 401.17 pH accounting, lab
results with the SNC screen where there are any, the data behind the charts, and the journal head (sequence
and hash) at the time of the report, so a reader can later check that the journal was not cut short.

Everything comes from the per-day aggregates, the episode store, the annotations and lab tables: a six-month
report reads a few hundred aggregate rows, never the raw readings.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from config.limits import load_profile
from config.obligations import is_monitoring_requirement
from config.pollutants import limits_for, set_aside
from config.rule_catalogue import DATA_QUALITY_RULES, TAMPER_RULES, RuleName, label
from config.rule_model import ThresholdParams
from config.rules import RuleBinding
from config.schema import ChannelKind, Site, SiteConfig
from monitor.calibration import episode_calibration, logs, site_time
from monitor.checks.slug_labs import LabSlug
from monitor.checks.slug_labs import screen as lab_slug_screen
from monitor.permitted_excursions import Span, beyond_allowance
from monitor.reports.aggregates_db import connect
from monitor.reports.annotations import Annotation, all_annotations, episode_id
from monitor.reports.daily import DailySummary, summarize
from monitor.reports.days import day_bounds, zone
from monitor.reports.enforcement import ObligationLine, open_record
from monitor.reports.labs import LabResult, read_results
from monitor.reports.periods import Period
from monitor.reports.ph_accounting import MonthAccount, monthly_accounts
from monitor.reports.plan import compile_plans
from monitor.reports.snc import SncScreen, screen, window_ending
from monitor.stores.calibration import LATER, OVERDUE, Calibration, during, known_overdue_spans
from monitor.stores.casefile import Invalidation, invalid_episodes
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian_db import opening_reason

if TYPE_CHECKING:
    from monitor.slug_history import BaselineDay


@dataclass(frozen=True, slots=True)
class LimitLine:
    subject: str
    condition: str  # when it is violated, in words
    citation: str


@dataclass(frozen=True, slots=True)
class EpisodeLine:
    id: str
    channel: str
    rule: str
    start: float
    end: float | None
    peak: float | None
    limit: float | None
    citation: str
    data_quality: bool
    annotation: Annotation | None  # the latest entry
    permitted: bool = False  # a pH excursion within 40 CFR 401.17's allowances, where the permit adopts it
    invalid: Invalidation | None = None  # marked invalid by enforcement (`monitor.stores.casefile`): no violation
    calibration: str = ""  # the instrument's calibration status during the episode (monitor.calibration)
    confirmed: float | None = None  # duration rules: when the duration was exceeded (start is the onset)
    annotations: tuple[Annotation, ...] = ()  # every cause/corrective-action entry, oldest first
    fault: str = ""  # sensor_fault: the reason of the reading that opened it (the vendor's fault text)

    @property
    def duration(self) -> float | None:
        return None if self.end is None else self.end - self.start

    @property
    def monitoring(self) -> bool:
        """A monitoring-requirement deviation (sampler), not a discharge violation."""
        return is_monitoring_requirement(self.rule)


@dataclass(frozen=True, slots=True)
class ChannelTotal:
    channel: str
    kind: str
    unit: str
    received: int
    good: int
    expected: int
    downtime: float  # s
    days_incomplete: int  # days under 90 % complete
    maintenance: float = 0.0  # s in service/calibration (quality maintenance): not downtime

    @property
    def completeness(self) -> float:
        return min(100.0, 100.0 * self.good / self.expected) if self.expected else 0.0


@dataclass(frozen=True, slots=True)
class ComplianceReport:
    site: Site
    jurisdiction: str
    period: Period
    generated: float
    limits: tuple[LimitLine, ...]
    days: tuple[DailySummary, ...]
    months: tuple[MonthAccount, ...]
    episodes: tuple[EpisodeLine, ...]
    completeness: tuple[ChannelTotal, ...]
    labs: tuple[LabResult, ...]
    snc: SncScreen | None
    journal_head: tuple[int, str] | None
    notes: tuple[str, ...] = field(default=())
    obligations: tuple[ObligationLine, ...] = ()  # of the period's violations (`enforcement`)
    record_available: bool = False  # False: no obligations store in the file ("none recorded")
    calibration: tuple[tuple[str, str], ...] = field(default=())  # (channel, status at the period's end)
    lab_slugs: tuple[LabSlug, ...] = ()  # slug findings on the period's lab results (monitor.checks.slug_labs)
    slug_baselines: tuple[BaselineDay, ...] = ()  # the slug baseline in force on each day of the period

    @property
    def exceedances(self) -> tuple[EpisodeLine, ...]:
        """Violations: discharge episodes that are neither data quality, monitoring-requirement deviations,
        permitted excursions nor marked invalid by enforcement."""
        return tuple(e for e in self.episodes if not e.data_quality and not e.monitoring and not e.permitted
                     and e.invalid is None)

    @property
    def monitoring_deviations(self) -> tuple[EpisodeLine, ...]:
        """Episodes of the monitoring equipment outside a permit or ordinance condition (sampler refrigeration,
        sampling interval): their own category, never discharge violations (they open no obligation either)."""
        return tuple(e for e in self.episodes if e.monitoring and not e.data_quality and e.invalid is None)

    @property
    def invalidated(self) -> tuple[EpisodeLine, ...]:
        """Episodes enforcement marked invalid, with the justification: listed, struck, never counted."""
        return tuple(e for e in self.episodes if e.invalid is not None)

    @property
    def permitted_excursions(self) -> tuple[EpisodeLine, ...]:
        """pH excursions the permit's adoption of 40 CFR 401.17 permits (listed apart from violations; only
        ``ph_excursion_duration`` and ``ph_monthly_excursion`` are then violations)."""
        return tuple(e for e in self.episodes if e.permitted)

    @property
    def faults(self) -> tuple[EpisodeLine, ...]:
        return tuple(e for e in self.episodes if e.data_quality)

    def bounds(self) -> tuple[float, float]:
        tz = _tz(self.site)
        return day_bounds(self.period.first, tz)[0], day_bounds(self.period.last, tz)[1]


def _tz(site: Site) -> ZoneInfo:
    return zone(site.timezone)


def describe(b: RuleBinding, unit: str) -> str:
    """When the rule is violated, in words, with the numbers it runs on."""
    p = b.params
    if isinstance(p, ThresholdParams):
        if b.rule == RuleName.LEL_SUCCESSIVE:
            return f"{b.channel}: {p.readings} successive readings {p.operator} {p.limit:g} {unit}"
        return f"{b.channel}: a reading {p.operator} {p.limit:g} {unit}"
    if b.rule in ("ph_excursion_duration", "ph_monthly_excursion"):
        rng = f"pH {float(p['min']):g}–{float(p['max']):g}"
        what = "one excursion" if b.rule == "ph_excursion_duration" else "total excursion time in a calendar month"
        return f"{b.channel}: {what} outside {rng} longer than {float(p['limit']) / 60:g} min"
    if b.rule == "sampler_temperature":
        return f"{b.channel}: fridge outside {float(p['low']):g}–{float(p['high']):g} {unit}"
    if b.rule == "sampler_interval":
        return f"{b.channel}: no sample for more than {float(p['limit']) / 60:g} min while flow > 0"
    if b.rule in TAMPER_RULES:
        return _tamper_words(b)
    if b.rule == "slug":
        base = (f"the fixed normal-sewage strength {float(p['baseline']):g} {unit}" if "baseline" in p else
                f"the baseline (mean 24-hour average of the last {int(float(p.get('baseline_days', 7)))} days of "
                f"normal operation)")
        if float(p["duration"]) == 0:  # the literal reading (a permit's multiple_alone): no duration
            return f"{b.channel}: over {float(p['multiplier']):g}× {base} at any reading"
        return (f"{b.channel}: over {float(p['multiplier']):g}× {base} for {p['duration_operator']} "
                f"{float(p['duration']) / 60:g} min")
    return b.channel


def _tamper_words(b: RuleBinding) -> str:
    """A tamper sign's rule with every parameter (`monitor.checks.tamper`)."""
    p = b.params
    n = int(float(p.get("readings", p.get("samples", 0))))
    if b.rule == "ph_frozen":
        return (f"{b.channel}: {n} successive readings identical to the last digit while the flow ({p['flow']}) "
                f"varies; from the first of them until a different reading")
    if b.rule == "offset_step":
        rng = f"pH {float(p['min']):g}–{float(p['max']):g}"
        return (f"{b.channel}: the mean of the first {n} readings back within {rng} after an excursion differs by "
                f"≥ {float(p['step']):g} from the mean of the last {n} before it; spans those {n} readings")
    if b.rule == "flow_zero_sampling":
        return (f"{b.channel}: the sampler's count ({p['sampler']}) rises {n} times while the flow reads "
                f"≤ {float(p['zero']):g}; until the flow reads above it")
    ends = {"high": f"{float(p['high']):g}", "low": f"{float(p['low']):g}",
            "both": f"{float(p['low']):g} or {float(p['high']):g}"}[str(p["at"])]
    tol = f" (within {float(p['tolerance']):g})" if float(p["tolerance"]) else ""
    return f"{b.channel}: {n} successive readings at the span limit {ends}{tol}; until a reading off it"


def words_beside(b: RuleBinding) -> str:
    """What is printed beside a limit in force: the reading of ambiguous words chosen, a looser permit figure
    set aside (40 CFR 403.5(d)), and excursions 40 CFR 401.17 permits."""
    p = b.params
    out = []
    if p.get("reading"):
        out.append(f"reading in force: {p['reading']}")
    if p.get("looser"):
        out.append(f"set aside: {p['looser']}")
    if p.get("permitted"):
        out.append(f"excursions within {p['permitted']} (adopted by the permit) are permitted, listed apart")
    return "".join(f" [{x}]" for x in out)


def permit_limits(site: Site) -> list[LimitLine]:
    units = {c.id: c.unit for c in site.channels}
    seen: dict[tuple[str, str], LimitLine] = {}
    for b in site.checks:
        if b.rule in DATA_QUALITY_RULES:
            continue
        seen.setdefault((b.rule, b.channel), LimitLine(label(b.rule),
                                                        describe(b, units.get(b.inputs[0], "")) + words_beside(b),
                                                        b.citation))
    lines = list(seen.values())
    aside = set_aside(site)
    for key, lim in limits_for(site).items():
        other = aside.get(key)
        if other is None:
            note = ""
        elif lim.permit:
            note = f" (the permit's, stricter than {other.printed}, {other.citation})"
        else:
            note = f" (stricter than the permit's {other.printed}, {other.citation})"
        lines.append(LimitLine(f"{lim.label} (lab)", f"a composite result > {lim.printed}{note}", lim.citation))
    return lines


def _completeness(days: list[DailySummary]) -> list[ChannelTotal]:
    acc: dict[str, list[int | float | str]] = {}
    for d in days:
        for c in d.channels:
            a = acc.setdefault(c.channel, [c.kind, c.unit, 0, 0, 0, 0.0, 0, 0.0])
            a[2] = int(a[2]) + c.received
            a[3] = int(a[3]) + c.good
            a[4] = int(a[4]) + c.expected
            a[5] = float(a[5]) + c.downtime
            a[6] = int(a[6]) + (1 if c.completeness < 90.0 else 0)
            a[7] = float(a[7]) + c.maintenance
    return [ChannelTotal(ch, str(a[0]), str(a[1]), int(a[2]), int(a[3]), int(a[4]), float(a[5]), int(a[6]),
                         float(a[7]))
            for ch, a in acc.items()]


def build_report(config: SiteConfig, site_id: str, period: Period, *, now: float,
                 db: Path | None = None) -> ComplianceReport:
    """Assemble the report from the database (``db`` defaults to the site file's historian)."""
    path = Path(db or config.daemon.historian)
    site = config.site(site_id)
    conn = connect(path)
    try:
        return _assemble(conn, path, config, site, period, now)
    finally:
        conn.close()


def _assemble(conn: sqlite3.Connection, path: Path, config: SiteConfig, site: Site, period: Period,
              now: float) -> ComplianceReport:
    plans = compile_plans(config)
    from monitor.slug_history import baseline_days  # the rebuild `pretreat rules` shows

    lo, hi = day_bounds(period.first, _tz(site))[0], day_bounds(period.last, _tz(site))[1]
    store = EpisodeStore(path=path)
    try:
        episodes = [e for e in store.episodes(site=site.id, end=hi) if e.end is None or e.end >= lo]
    finally:
        store.close()
    days = summarize(conn, site, plans, period.first, period.last, episodes=episodes, now=now)
    notes = _notes(site, days)
    annotations = all_annotations(conn, site.id)
    permitted = {(b.channel, b.rule) for b in site.checks if b.params.get("permitted")}
    record = open_record(path)
    invalid = invalid_episodes(conn, site=site.id)
    calibrations = logs(path, site.id)
    spans = [Span(e.channel, e.rule, e.start, e.end) for e in episodes]
    beyond = {episode_id(e): beyond_allowance(e.channel, e.rule, e.start, e.end, spans) for e in episodes
              if (e.channel, e.rule) in permitted}  # 401.17 permits only excursions within its allowances
    lines = tuple(EpisodeLine(id=episode_id(e), channel=e.channel, rule=e.rule, start=e.start, end=e.end,
                              peak=e.peak, limit=e.limit,
                              citation=e.citation + (f" [{beyond[episode_id(e)]}]" if beyond.get(episode_id(e))
                                                     else ""),
                              data_quality=e.rule in DATA_QUALITY_RULES,
                              annotation=(annotations.get(episode_id(e)) or (None,))[-1],
                              annotations=annotations.get(episode_id(e), ()),
                              permitted=(e.channel, e.rule) in permitted and not beyond.get(episode_id(e)),
                              invalid=invalid.get(episode_id(e)),
                              calibration=episode_calibration(site, calibrations, e.channel, e.start, e.end,
                                                              now=now, local=True),
                              confirmed=e.confirmed,
                              fault=opening_reason(conn, site.id, e.channel, e.start)
                              if e.rule == RuleName.SENSOR_FAULT else "")
                  for e in episodes)
    snc_first, snc_last = window_ending(period.last)
    labs = read_results(conn, site=site.id, first=min(snc_first, period.first), last=period.last)
    snc = screen(labs, config, snc_first, snc_last) if labs else None
    profile, _ = load_profile(site.jurisdiction) if site.jurisdiction else (None, [])
    return ComplianceReport(
        site=site, jurisdiction=profile.name if profile else "(none)", period=period, generated=now,
        limits=tuple(permit_limits(site)), days=tuple(days),
        months=tuple(monthly_accounts(conn, site, plans, period.first, period.last)), episodes=lines,
        completeness=tuple(_completeness(days)),
        labs=tuple(r for r in labs if period.first <= r.sample_date <= period.last), snc=snc,
        lab_slugs=tuple(lab_slug_screen((r for r in labs if period.first <= r.sample_date <= period.last), site)),
        journal_head=_journal_head(conn), notes=tuple(notes),
        obligations=tuple(record.obligations([x.id for x in lines if not x.data_quality and not x.permitted])),
        record_available=record.available,
        calibration=tuple(_calibration_rows(site, calibrations, lo, min(hi, now))),
        slug_baselines=tuple(baseline_days(config, site.id, lo, min(hi, now))))


def _calibration_rows(site: Site, calibrations: dict[tuple[str, str], list[Calibration]], lo: float,
                      hi: float) -> list[tuple[str, str]]:
    """Each channel's calibration status at ``hi`` (as known then: `during`), then each span of the period in
    which its readings were taken while the instrument was overdue as known then (the readings export marks the
    same rows). Times in the site's local time with its zone, as the report's tables give them."""
    when = site_time(site)
    rows = []
    for ch in site.channels:
        log = calibrations.get((site.id, ch.id), [])
        interval = site.calibration.interval(ch.id) if site.calibration is not None else None
        rows.append((ch.id, during(log, interval, hi, hi, now=hi, when=when)))  # as known then, and now if differs
        for a, b, why in known_overdue_spans(log, interval):
            if a < hi and b > lo:
                state, later, _ = why.partition(f" {LATER}")
                how = "while overdue for calibration" if state == OVERDUE else "with no calibration on record"
                how += " (as known then; an entry made later says in date)" if later else ""
                rows.append((ch.id, f"readings from {when(max(a, lo))} to {when(min(b, hi))}: taken {how}"))
    return rows


def _notes(site: Site, days: list[DailySummary]) -> list[str]:
    notes = []
    late = sum(c.late for d in days for c in d.channels)
    if late:
        notes.append(f"{late} readings arrived out of time order and are not in the daily figures; "
                     "run `pretreat report rebuild` for the period to include them.")
    flagged = [d.day for d in days if d.flow is not None and d.flow.flagged]
    if flagged:
        notes.append(f"Totaliser and integrated flow rate disagree by more than 5 % on {len(flagged)} day(s) "
                     f"({', '.join(flagged[:5])}{' …' if len(flagged) > 5 else ''}): check the flow meter.")
    if any(c.kind is ChannelKind.FLOW for c in site.channels) and not any(
            c.kind is ChannelKind.FLOW_TOTAL for c in site.channels):
        notes.append("No totaliser channel: total flow is the integrated flow rate only.")
    return notes


def _journal_head(conn: sqlite3.Connection) -> tuple[int, str] | None:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'journal'").fetchone() is None:
        return None
    row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def fmt_minutes(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "—"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
