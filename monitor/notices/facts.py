"""The facts a notice of violation states about one episode, gathered once for every output format.

Everything is read from the record, never typed in: the episode (onset, end, peak, measured and unmeasured
time) from the episode store, the readings around it from the historian (the chart), the rule in force with its
citation and the ordinance's words from the compiled rule bindings (the numbers the alarm ran on), the notice
clause and correction period from ``config/notices/`` (`config.notice`), the obligations and any invalidation
from the obligations store (`monitor.reports.enforcement`, "none recorded" without it).

Confirmation: an episode's start event carries its onset; a duration rule (a single pH excursion over 60
minutes, a slug longer than 15 minutes, the sampling interval) is only a violation once the duration is
exceeded, at the first reading past it, which the notice states beside the onset. The time is recomputed from
the stored readings (onset + the duration, first reading strictly after), since the episode store keeps the
onset only. Rules judged on a single reading are confirmed at onset.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from config.notice import NoticeClause, notice_clause
from config.obligations import is_monitoring_requirement
from config.rule_catalogue import DURATION_RULES, label
from config.rules import RuleBinding, is_data_quality
from config.schema import Channel, Site, SiteConfig
from monitor.checks.events import EpisodeEvent
from monitor.reports.annotations import Annotation, AnnotationError, episode_annotations, episode_id, parse_episode_id
from monitor.reports.compliance import describe
from monitor.reports.days import zone
from monitor.reports.enforcement import InvalidationLine, ObligationLine, open_record
from monitor.stores.episodes import Episode, pair_transitions
from monitor.stores.historian import Historian
from monitor.stores.readonly import connect_readonly, has_table, standing

CHART_MARGIN = 3600.0  # s of readings shown before the onset and after the end


class NoticeError(ValueError):
    """The notice cannot be drafted (no such episode, a data-quality episode, an unknown site, a plant's own
    influent episode: a notice of violation is addressed to an industry user)."""


@dataclass(frozen=True, slots=True)
class Reading:
    time: float
    value: float | None  # None: a bad-quality reading (no number)
    quality: str


@dataclass(frozen=True, slots=True)
class NoticeFacts:
    site: Site
    channel: Channel
    episode: Episode
    episode_id: str
    binding: RuleBinding | None  # the rule in force (None: the site file no longer runs it)
    clause: NoticeClause
    dated: date  # the notice's date (the day it is drafted, site local)
    confirmed: float | None  # when the duration was exceeded; the onset for single-reading rules
    readings: tuple[Reading, ...]
    obligations: tuple[ObligationLine, ...]
    obligations_available: bool
    invalidation: InvalidationLine | None
    now: float
    annotations: tuple[Annotation, ...] = ()  # every cause/corrective-action entry, oldest first

    @property
    def tz_name(self) -> str:
        return self.site.timezone

    @property
    def rule_label(self) -> str:
        return label(self.episode.rule)

    @property
    def timed(self) -> bool:
        """Peak and limit are seconds (duration rules), not readings."""
        return self.episode.rule in DURATION_RULES

    @property
    def section(self) -> str:
        return self.binding.citation if self.binding else self.episode.citation

    @property
    def quote(self) -> str:
        return str(self.binding.params.get("quote", "")) if self.binding else ""

    @property
    def monitoring(self) -> bool:
        """A monitoring-requirement deviation (sampler), not a discharge violation
        (`config.obligations.is_monitoring_requirement`)."""
        return is_monitoring_requirement(self.episode.rule)

    @property
    def words_owner(self) -> str:
        """Whose words the section is: the permit's where the binding cites the site's permit, else the
        ordinance's."""
        p = self.site.permit
        return "permit's" if p is not None and p.id and p.id in self.section else "ordinance's"

    @property
    def words_violated(self) -> str:
        """The words a notice quotes as violated: the whole sentence (``clause`` in the profile), never a fragment
        presented as the ordinance's text; where only a snippet is on file (a permit's words), the omissions
        before and after it are marked with "…"."""
        params = self.binding.params if self.binding else {}
        return str(params.get("clause", "")) or elide(str(params.get("quote", "")))

    @property
    def condition(self) -> str:
        return describe(self.binding, self.channel.unit) if self.binding else ""

    @property
    def correction_due(self) -> date | None:
        days = self.clause.correction_days
        return None if days is None else self.dated + timedelta(days=days)

    def local(self, t: float | None, fmt: str = "%Y-%m-%d %H:%M:%S %Z") -> str:
        return "—" if t is None else datetime.fromtimestamp(t, zone(self.tz_name)).strftime(fmt)


def elide(snippet: str) -> str:
    """A snippet marked as one: "…" before it unless it opens a sentence (a capital letter or an item mark),
    and after it unless it closes one."""
    s = snippet.strip()
    if not s:
        return ""
    head = "" if s[0].isupper() or s[0] in "(§" else "… "
    tail = "" if s[-1] in ".;:…" else " …"
    return head + s + tail


_COVERAGE = ("end_reason", "measured", "unmeasured", "maintenance")  # schema 2 (maintenance: 4); older: unknown


def _find(db: Path, ident: str) -> Episode:
    """The episode named ``ident``, read from the episode store's table over a read-only connection (the
    console and enforcement staff may draft notices without write access to the daemon's file)."""
    try:
        site, channel, rule, start = parse_episode_id(ident)
    except AnnotationError as exc:
        raise NoticeError(str(exc)) from exc
    missing = NoticeError(f"no episode {ident} in the record (ids as `pretreat exceedances` and the report "
                          "print them)")
    try:
        conn = connect_readonly(db)
    except sqlite3.Error as exc:
        raise NoticeError(f"cannot read {db}: {exc}") from exc
    try:
        if not has_table(conn, "episode_events"):
            raise missing
        have = {r[1] for r in conn.execute("PRAGMA table_info(episode_events)")}
        # a transition a correction after late readings withdrew is not the episode's (a moved end, a retraction)
        key = f"site = ? AND channel = ? AND rule = ?{standing(conn)}"
        s = conn.execute(f"SELECT time, value, limit_value, citation, censored FROM episode_events WHERE {key} "
                         "AND event = 'start' AND abs(time - ?) < 0.0005", (site, channel, rule, start)).fetchone()
        if s is None:
            if conn.execute("SELECT 1 FROM episode_events WHERE site = ? AND channel = ? AND rule = ? "
                            "AND event = 'start' AND abs(time - ?) < 0.0005", (site, channel, rule, start)).fetchone():
                raise NoticeError(f"episode {ident} was retracted after late readings (it never happened: "
                                  "`pretreat exceedances` shows it RETRACTED); no notice is drafted for it")
            raise missing
        # its end as the episode store pairs them: at one instant two ends can stand (the episode before, cleared
        # there, and this one, begun there and ended by a gap), so "the first end from its start" is not it
        cols = ("time", "value", "limit_value", "citation", "peak", *_COVERAGE[:3], "censored", "maintenance")
        rows = conn.execute(f"SELECT event, {', '.join(c if c in have else 'NULL' for c in cols)} "
                            f"FROM episode_events WHERE {key} ORDER BY time, id", (site, channel, rule)).fetchall()
        events = (EpisodeEvent(t, site, channel, rule, ev, v, lim, cite or "", pk, why, meas, unmeas,
                               bool(cens), maintenance=maint)
                  for ev, t, v, lim, cite, pk, why, meas, unmeas, cens, maint in rows)
        end = next((e for st, e in pair_transitions(events) if abs(st.time - s[0]) < 0.0005), None)
        e = None if end is None else (end.time, end.value, end.peak, end.censored, end.end_reason, end.measured,
                                      end.unmeasured, end.maintenance)
    finally:
        conn.close()
    return Episode(site=site, channel=channel, rule=rule, start=s[0], end=e[0] if e else None, start_value=s[1],
                   end_value=e[1] if e else None, limit=s[2], peak=e[2] if e else None, citation=s[3],
                   end_reason=e[4] if e else None, measured=e[5] if e else None, unmeasured=e[6] if e else None,
                   censored=bool(s[4]) or bool(e and e[3]), maintenance=e[7] if e else None)


def _confirmed(e: Episode, binding: RuleBinding | None, readings: tuple[Reading, ...]) -> float | None:
    if e.rule in DURATION_RULES:
        wait = e.limit
    else:
        wait = float(binding.params["duration"]) if binding and "duration" in binding.params else 0.0
    if not wait:
        return e.start
    due = e.start + float(wait)
    return next((r.time for r in readings if r.time > due and r.value is not None), None)


def _readings(db: Path, e: Episode) -> tuple[Reading, ...]:
    end = (e.end if e.end is not None else e.start) + CHART_MARGIN
    out = []
    for s in Historian.read(path=db, site=e.site, channel=e.channel, start=e.start - CHART_MARGIN, end=end):
        good = s.quality.value in ("good", "over_range") and s.value is not None and math.isfinite(s.value)
        out.append(Reading(s.time, s.value if good else None, s.quality.value))
    return tuple(out)


def gather(config: SiteConfig, ident: str, *, now: float, dated: date | None = None) -> NoticeFacts:
    """The facts of episode ``ident`` (``site/channel/rule@start``) for a notice dated ``dated`` (default: today
    at the site)."""
    db = Path(config.daemon.historian)
    e = _find(db, ident)
    try:
        site = config.site(e.site)
        channel = site.channel(e.channel)
    except KeyError as exc:
        raise NoticeError(f"episode {ident}: site or channel {exc} is not in the site file") from exc
    if site.kind == "plant":
        raise NoticeError(f"episode {ident} is at {site.id}, the plant's own influent monitoring point "
                          f"(kind = \"plant\"): a notice of violation goes to an industry user, from its own "
                          "control manhole's episodes")
    if is_data_quality(e.rule):
        raise NoticeError(f"episode {ident} is an instrument fault ({e.rule}), not a discharge violation")
    binding = next((b for b in site.checks if b.channel == e.channel and b.rule == e.rule), None)
    readings = _readings(db, e)
    record = open_record(db)
    eid = episode_id(e)
    invalid = record.invalidations([eid])
    return NoticeFacts(
        site=site, channel=channel, episode=e, episode_id=eid, binding=binding,
        clause=notice_clause(site.jurisdiction),
        dated=dated or datetime.fromtimestamp(now, zone(site.timezone)).date(),
        confirmed=_confirmed(e, binding, readings), readings=readings,
        obligations=tuple(record.obligations([eid])), obligations_available=record.available,
        invalidation=invalid[0] if invalid else None, now=now, annotations=_annotations(db, eid))


def _annotations(db: Path, eid: str) -> tuple[Annotation, ...]:
    """Every cause/corrective-action entry of the episode, oldest first (none where the file has none)."""
    try:
        conn = connect_readonly(db)
    except sqlite3.Error:
        return ()
    try:
        return tuple(episode_annotations(conn, eid))
    finally:
        conn.close()
