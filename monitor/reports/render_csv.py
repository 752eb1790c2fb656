"""The compliance report as CSV for spreadsheets: every table section in turn, each introduced by a row
``# <section title>`` and its header row, separated by a blank row. Same words and numbers as the PDF.

Daily summaries alone (the scheduled daily job) are written by `daily_csv` as one plain table, one row per
day, with unrounded numbers for further calculation.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from monitor.reports.compliance import ComplianceReport
from monitor.reports.daily import DailySummary
from monitor.reports.sections import build_sections


def render_csv(report: ComplianceReport, path: Path | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for sec in build_sections(report):
        if sec.kind == "charts":
            continue
        w.writerow([f"# {sec.title}"])
        for t in sec.text:
            w.writerow([f"# {t}"])
        if sec.columns:
            w.writerow(sec.columns)
            w.writerows(sec.rows)
        w.writerow([])
    text = buf.getvalue()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return text


HEADLINE = ("total_flow", "integrated_flow", "peak_flow", "peak_30min_flow", "ph_min", "ph_max",
            "ph_minutes_outside", "temperature_max", "lel_max", "samples_taken", "fridge_min", "fridge_max",
            "fridge_minutes_out_of_band")


def daily_csv(days: Sequence[DailySummary]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(("site", "day", "hours", *HEADLINE, "flow_difference", "flow_flagged", "least_complete_pct",
                "episodes"))
    for d in days:
        h = d.headline()
        w.writerow((d.site, d.day, d.hours, *("" if h[k] is None else repr(h[k]) for k in HEADLINE),
                    "" if d.flow is None or d.flow.difference is None else repr(d.flow.difference),
                    "" if d.flow is None else int(d.flow.flagged),
                    min((c.completeness for c in d.channels), default=0.0), len(d.episodes)))
    return buf.getvalue()
