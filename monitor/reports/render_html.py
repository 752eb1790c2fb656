"""The compliance report as one self-contained HTML file (inline CSS and SVG charts, no external requests), for
the console's report history and for e-mail. Same sections, words and numbers as the PDF (`sections`)."""

from __future__ import annotations

import html
import io
from pathlib import Path

from monitor.reports.charts import series, standalone
from monitor.reports.compliance import ComplianceReport
from monitor.reports.sections import Section, build_sections

_CSS = """
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;color:#111;margin:2em auto;max-width:80em;font-size:13px}
h1{color:#1f3b5a;margin-bottom:.1em}
h2{color:#1f3b5a;border-bottom:1px solid #1f3b5a;padding-bottom:.15em;margin-top:1.6em}
table{border-collapse:collapse;width:100%;font-size:12px}
th{text-align:left;border-bottom:1px solid #888;padding:3px 5px}
td{padding:3px 5px;vertical-align:top}tr:nth-child(even) td{background:#f2f5f8}p.note{color:#444}
tr.violation td{background:#f6d5d1}p.verdict{font-size:15px;font-weight:bold}
.sig td{padding:1.2em .5em .2em 0}.sig td.line{border-bottom:1px solid #000;width:30em}
@media print{body{margin:0;max-width:none}h2{page-break-after:avoid}}
"""


def _table(sec: Section) -> str:
    if not sec.rows:
        return f"<p class='note'>{html.escape(sec.empty)}</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in sec.columns)
    marked = set(sec.highlight)
    body = "".join(("<tr class='violation'>" if i in marked else "<tr>")
                   + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for i, row in enumerate(sec.rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _charts(report: ComplianceReport) -> str:
    out = []
    for s in series(report):
        buf = io.StringIO()
        standalone(s).savefig(buf, format="svg")
        svg = buf.getvalue()
        out.append(svg[svg.index("<svg"):])  # drop the XML prolog and doctype: inline SVG in HTML5
    return "".join(f"<figure>{x}</figure>" for x in out)


def render_html(report: ComplianceReport, path: Path | None = None) -> str:
    """The HTML text; also written to ``path`` if given."""
    p = report.period
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Periodic Compliance Report "
             f"{html.escape(report.site.id)} {p.label}</title><style>{_CSS}</style></head><body>",
             "<h1>Periodic Compliance Report</h1>",
             f"<p><strong>{html.escape(report.site.name or report.site.id)}</strong><br>Reporting period "
             f"{p.label} · due {p.due_label}</p>"]
    for sec in build_sections(report):
        parts.append(f"<h2 id='{sec.key}'>{html.escape(sec.title)}</h2>")
        cls = " class='verdict'" if sec.key == "verdict" else ""
        parts.extend(f"<p{cls}>{html.escape(t)}</p>" for t in sec.text)
        if sec.kind == "charts":
            parts.append(_charts(report))
        elif sec.kind == "table":
            parts.append(_table(sec))
        elif sec.kind == "signature":
            parts.append("<table class='sig'>" + "".join(f"<tr><td>{x}</td><td class='line'></td></tr>"
                                                       for x in ("Name", "Title", "Signature", "Date")) + "</table>")
    parts.append("</body></html>")
    text = "\n".join(parts)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return text
