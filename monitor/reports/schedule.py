"""Scheduled report generation (APScheduler 3, in the daemon's event loop), and the reports directory.

Jobs, per site, in the site's time zone:
- ``report-daily:<site>``: at 01:00 local, the previous day's summary (JSON and CSV). An hour after midnight
  leaves time for the last readings of the day to arrive and be flushed (the aggregator is flushed first).
- ``report-periodic:<site>``: at 02:00 local on each due date (`periods`: Pawling's 15 March, September,
  December; elsewhere 1 June and 1 December, the first day of 40 CFR 403.12(e)(1)'s submission months), the
  periodic compliance report in each format.
- ``report-catch-up``: once, a minute after start: daily summaries missing for the last 7 days (the daemon was
  down at 01:00; APScheduler's in-memory job store does not remember missed runs). Why not at once: at 10,000
  channels the catch-up is seconds of CPU, and at start it shared the cores with the first round's connects,
  which then took longer than the staleness window (bench/bench_peers.py, paced 1,000 × 1 s).
- ``report-flush``: every minute, the aggregator's accrual into SQLite (when an aggregator is given).

Neither daily job writes a day that ends before the site's record begins (its first aggregated day, `first_day`):
such a summary would show every channel down all day, for days before anything was monitored. A first start
wrote seven of them, 10,000 channels each. Days after the record began are written, gaps and all.

Jobs are plain functions, so APScheduler runs them in its thread pool: building a report reads SQLite and
draws with matplotlib's object API (thread-safe; see `charts`), and never blocks the event loop that polls the
instruments. Files are written to a temporary name and renamed, so the console never lists a half-written one.

Layout of ``reports_dir``: ``<site>/daily/<YYYY-MM-DD>.json|.csv`` and
``<site>/periodic/<site>_<first>_<last>.pdf|.html|.csv``; `list_reports` reads it back for the console's
history page. Where it is: `reports_dir`, ``reports/`` beside the historian (the daemon writes there and the
console, a separate process given the same site file, reads there; the site file has no setting for it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from config.schema import Site, SiteConfig
from monitor.reports.aggregates import DailyAggregator
from monitor.reports.aggregates_db import connect, first_day
from monitor.reports.daily import summarize
from monitor.reports.days import zone
from monitor.reports.periods import FEDERAL_MONTHS, Period, period_for_due
from monitor.reports.plan import ChannelPlan, compile_plans
from monitor.reports.render_csv import daily_csv
from monitor.stores.episodes import EpisodeStore

if TYPE_CHECKING:
    from monitor.progress import Progress

log = logging.getLogger(__name__)
FORMATS = ("pdf", "html", "csv")
CATCH_UP_DAYS = 7
CATCH_UP_AFTER = 60.0  # s after start (see the module doc)


def reports_dir(config: SiteConfig) -> Path:
    """The folder the daemon writes reports into: ``reports/`` beside the historian's SQLite file."""
    return Path(config.daemon.historian).parent / "reports"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_daily(config: SiteConfig, site: Site, day: date, reports_dir: Path, *, now: float,
                plans: dict[tuple[str, str], ChannelPlan] | None = None) -> list[Path]:
    """The summary of ``day`` (local) as JSON and CSV; returns the files written. ``plans``: the configuration's
    `compile_plans`, when the caller writes many (the scheduled jobs: one compilation, not one a site and day)."""
    db = Path(config.daemon.historian)
    conn = connect(db)
    store = EpisodeStore(path=db)
    try:
        summaries = summarize(conn, site, compile_plans(config) if plans is None else plans, day, day,
                              episodes=store.episodes(site=site.id), now=now)
    finally:
        store.close()
        conn.close()
    base = reports_dir / site.id / "daily" / day.isoformat()
    json_path, csv_path = base.with_suffix(".json"), base.with_suffix(".csv")
    _atomic_write(json_path, json.dumps([s.to_dict() for s in summaries], indent=1, ensure_ascii=False).encode())
    _atomic_write(csv_path, daily_csv(summaries).encode())
    return [json_path, csv_path]


def write_periodic(config: SiteConfig, site: Site, period: Period, reports_dir: Path, *, now: float,
                   formats: Sequence[str] = FORMATS, progress: Progress | None = None) -> list[Path]:
    """The periodic compliance report in each of ``formats``; returns the files written. ``progress`` (the
    command line's bar) advances once the record is read and once when the files are written."""
    from monitor.reports.compliance import build_report
    from monitor.reports.render_csv import render_csv
    from monitor.reports.render_html import render_html
    from monitor.reports.render_pdf import render_pdf

    if progress is not None:
        progress.note("reading the record")
    report = build_report(config, site.id, period, now=now)
    if progress is not None:
        progress.advance()
        progress.note("writing " + ", ".join(formats))
    out = []
    for fmt in formats:
        path = reports_dir / site.id / "periodic" / f"{site.id}_{period.first}_{period.last}.{fmt}"
        tmp = path.with_name(f".{path.name}.tmp")
        if fmt == "pdf":
            render_pdf(report, tmp)
        elif fmt == "html":
            render_html(report, tmp)
        else:
            render_csv(report, tmp)
        os.replace(tmp, path)
        out.append(path)
    if progress is not None:
        progress.advance()
    return out


def record_begins(config: SiteConfig, site: Site, conn: sqlite3.Connection | None = None) -> date | None:
    """The first local day of ``site``'s record (its earliest aggregated day), None while it has none. ``conn``:
    an open aggregates connection, when the caller asks for many sites (the catch-up asks for every one: a
    connection a site, each opening checks the tables' schema, and the site's channels looked up among all of
    the configuration's, took ~3 s of CPU at 1,000 sites)."""
    own = conn if conn is not None else connect(Path(config.daemon.historian))
    try:
        first = first_day(own, site=site.id, channels=(c.id for c in site.channels))
    finally:
        if conn is None:
            own.close()
    return None if first is None else date.fromisoformat(first)


def _yesterday(site: Site, now: float) -> date:
    return datetime.fromtimestamp(now, zone(site.timezone)).date() - timedelta(days=1)


def schedule_reports(scheduler: AsyncIOScheduler, config: SiteConfig, reports_dir: Path, *,
                     aggregator: DailyAggregator | None = None, formats: Sequence[str] = FORMATS,
                     clock: Callable[[], float] = time.time, stopping: threading.Event | None = None,
                     catch_up_after: float = CATCH_UP_AFTER) -> list[str]:
    """Add the report jobs to ``scheduler`` (before or after it starts); returns their ids. ``stopping`` set (the
    daemon's stop) ends the catch-up between two reports: the next start writes the rest. The catch-up runs
    ``catch_up_after`` s from now (on the real clock: ``clock`` is the time the reports are written for)."""
    reports_dir = Path(reports_dir)
    flush = aggregator.flush if aggregator is not None else (lambda: 0)
    ids: list[str] = []
    # every channel's plan, compiled once for every summary the jobs write: the day aggregates' own (compiled at
    # start), else on first use. Compiled again for each site and day, the 01:00 jobs of 1,000 sites compiled
    # 10,000 channels' plans 1,000 times a night
    compiled = [aggregator.plans] if aggregator is not None else []

    def plans() -> dict[tuple[str, str], ChannelPlan]:
        if not compiled:
            compiled.append(compile_plans(config))
        return compiled[0]

    def daily(site: Site) -> None:
        flush()
        day, begins = _yesterday(site, clock()), record_begins(config, site)
        if begins is None or day < begins:
            log.info("no daily summary of %s for %s: the site's record begins %s", site.id, day,
                     begins or "with its first reading (none yet)")
            return
        write_daily(config, site, day, reports_dir, now=clock(), plans=plans())

    def periodic(site: Site) -> None:
        flush()
        today = datetime.fromtimestamp(clock(), zone(site.timezone)).date()
        paths = write_periodic(config, site, period_for_due(site, today), reports_dir, now=clock(), formats=formats)
        log.info("periodic report for %s written: %s", site.id, ", ".join(p.name for p in paths))

    def catch_up() -> None:
        flush()
        conn = connect(Path(config.daemon.historian))
        try:
            begin = {site.id: record_begins(config, site, conn) for site in config.sites}
        finally:
            conn.close()
        for site in config.sites:
            last, begins = _yesterday(site, clock()), begin[site.id]
            for k in range(CATCH_UP_DAYS):
                day = last - timedelta(days=k)
                if stopping is not None and stopping.is_set():
                    return
                if begins is None or day < begins:
                    break  # (the days go back in time: every one after this is before the record too)
                if not (reports_dir / site.id / "daily" / f"{day.isoformat()}.json").exists():
                    write_daily(config, site, day, reports_dir, now=clock(), plans=plans())

    for site in config.sites:
        tz = zone(site.timezone)
        scheduler.add_job(daily, CronTrigger(hour=1, minute=0, timezone=tz), args=[site], id=f"report-daily:{site.id}",
                          misfire_grace_time=3600, coalesce=True, replace_existing=True)
        months = "3,9,12" if site.jurisdiction == "pawling" else ",".join(str(m) for m in FEDERAL_MONTHS)
        day = 15 if site.jurisdiction == "pawling" else 1
        scheduler.add_job(periodic, CronTrigger(month=months, day=day, hour=2, minute=0, timezone=tz), args=[site],
                          id=f"report-periodic:{site.id}", misfire_grace_time=6 * 3600, coalesce=True,
                          replace_existing=True)
        ids += [f"report-daily:{site.id}", f"report-periodic:{site.id}"]
    scheduler.add_job(catch_up, "date", run_date=datetime.now(UTC) + timedelta(seconds=catch_up_after),
                      id="report-catch-up", replace_existing=True, misfire_grace_time=None)
    ids.append("report-catch-up")
    if aggregator is not None:
        scheduler.add_job(aggregator.flush, "interval", seconds=60, id="report-flush", coalesce=True,
                          replace_existing=True)
        ids.append("report-flush")
    return ids


@dataclass(frozen=True, slots=True)
class ReportFile:
    """One written report. ``size`` in bytes; ``modified``: when it was written (Unix time, s)."""

    site: str
    kind: str  # daily | periodic
    name: str
    path: Path
    size: int
    modified: float

    @property
    def format(self) -> str:
        """The file's format from its suffix: json, csv, pdf or html."""
        return self.path.suffix.lstrip(".").lower()

    @property
    def period(self) -> str:
        """The local days covered, from the name (``2026-03-08``, ``2026-01-01 to 2026-06-30``); '' if the name
        does not follow the layout above."""
        stem = self.path.stem
        if self.kind == "daily" and _DAY.fullmatch(stem):
            return stem
        m = _PERIOD.fullmatch(stem[len(self.site) + 1:]) if stem.startswith(self.site + "_") else None
        return f"{m[1]} to {m[2]}" if self.kind == "periodic" and m else ""


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_PERIOD = re.compile(r"(\d{4}-\d{2}-\d{2})_(\d{4}-\d{2}-\d{2})")


def list_reports(reports_dir: Path) -> list[ReportFile]:
    """Every report written, newest first (for the console's history page)."""
    out = []
    for path in Path(reports_dir).glob("*/*/*"):
        if path.name.startswith(".") or not path.is_file():
            continue
        st = path.stat()
        out.append(ReportFile(site=path.parent.parent.name, kind=path.parent.name, name=path.name, path=path,
                              size=st.st_size, modified=st.st_mtime))
    return sorted(out, key=lambda r: (-r.modified, r.name))
