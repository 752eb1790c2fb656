"""The compliance report as a PDF a coordinator can file: letter landscape pages, a running header and footer
("Page i of n"), tables that continue across pages with their header repeated, the charts, and a
certification and signature block. Drawn with matplotlib alone (``PdfPages``), so no second PDF library is
needed.

Layout is done first into a list of pages of drawing operations, then drawn, so the footer knows the page
count. Text is wrapped to column widths estimated from the font size (DejaVu Sans, matplotlib's default,
which has the §, –, ≥ and ± the citations use).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from monitor.reports.charts import INK, draw, series
from monitor.reports.compliance import ComplianceReport
from monitor.reports.days import zone
from monitor.reports.sections import Section, build_sections

W, H = 11.0, 8.5  # inches, US letter landscape
LEFT, RIGHT, TOP, BOTTOM = 0.6, 0.6, 0.85, 0.7
BODY_W = W - LEFT - RIGHT
Op = Callable[[Figure], object]
RULE = "#888888"
ZEBRA = "#f2f5f8"
HIGHLIGHT = "#f6d5d1"  # a day with a violation


def _chars(width_in: float, size: float) -> int:
    return max(4, int(width_in * 72 / (size * 0.56)))


class _Layout:
    def __init__(self) -> None:
        self.pages: list[list[Op]] = [[]]
        self.y = TOP

    @property
    def room(self) -> float:
        return H - BOTTOM - self.y

    def new_page(self) -> None:
        self.pages.append([])
        self.y = TOP

    def need(self, h: float) -> None:
        if h > self.room and self.y > TOP:
            self.new_page()

    def op(self, f: Op) -> None:
        self.pages[-1].append(f)

    def text(self, x: float, s: str, *, size: float = 8, weight: str = "normal", color: str = "black",
             dy: float | None = None) -> None:
        y = self.y
        self.op(lambda fig: fig.text(x / W, 1 - y / H, s, fontsize=size, weight=weight, color=color, va="top"))
        self.y += dy if dy is not None else size * 1.45 / 72

    def heading(self, s: str) -> None:
        self.need(0.9)
        self.y += 0.12
        self.text(LEFT, s, size=11.5, weight="bold", color=INK, dy=0.24)
        y = self.y - 0.04
        self.op(lambda fig: fig.add_artist(Line2D([LEFT / W, (W - RIGHT) / W], [1 - y / H] * 2, color=INK,
                                                  linewidth=0.8)))
        self.y += 0.06

    def paragraph(self, s: str, *, size: float = 7.5, width: float = BODY_W, weight: str = "normal") -> None:
        for line in textwrap.wrap(s, _chars(width, size)):
            self.need(size * 1.5 / 72)
            self.text(LEFT, line, size=size, weight=weight, dy=size * 1.45 / 72)
        self.y += 0.05

    def table(self, sec: Section, size: float = 6.6) -> None:
        total = sum(sec.widths) or 1.0
        widths = [BODY_W * w / total for w in (sec.widths or (1.0,) * len(sec.columns))]
        line_h = size * 1.32 / 72

        def wrap(cells: tuple[str, ...]) -> list[list[str]]:
            return [textwrap.wrap(c, _chars(w - 0.06, size)) or [""] for c, w in zip(cells, widths, strict=True)]

        head = wrap(sec.columns)
        marked = set(sec.highlight)
        head_h = max(len(c) for c in head) * line_h + 0.06
        self.need(head_h + 3 * line_h)
        self._row(head, widths, head_h, size, bold=True)
        for i, row in enumerate(sec.rows):
            cells = wrap(row)
            h = max(len(c) for c in cells) * line_h + 0.05
            if h > self.room:
                self.new_page()
                self._row(head, widths, head_h, size, bold=True)
            self._row(cells, widths, h, size, shade=i % 2 == 1, mark=i in marked)
        if not sec.rows:
            self.text(LEFT + 0.05, sec.empty, size=size + 0.4, color="#555555")
        self.y += 0.1

    def _row(self, cells: list[list[str]], widths: list[float], h: float, size: float, *, bold: bool = False,
             shade: bool = False, mark: bool = False) -> None:
        y0 = self.y

        def paint(fig: Figure) -> None:
            if shade or mark:
                fig.add_artist(Rectangle((LEFT / W, 1 - (y0 + h) / H), BODY_W / W, h / H,
                                         color=HIGHLIGHT if mark else ZEBRA, linewidth=0, zorder=-1))
            x = LEFT
            for lines, w in zip(cells, widths, strict=True):
                fig.text((x + 0.03) / W, 1 - (y0 + 0.03) / H, "\n".join(lines), fontsize=size, va="top",
                         weight="bold" if bold else "normal", linespacing=1.15)
                x += w
            if bold:
                fig.add_artist(Line2D([LEFT / W, (W - RIGHT) / W], [1 - (y0 + h) / H] * 2, color=RULE,
                                      linewidth=0.6))

        self.op(paint)
        self.y += h


def layout(report: ComplianceReport) -> _Layout:
    lay = _Layout()
    p = report.period
    lay.y = TOP + 0.2
    lay.text(LEFT, "Periodic Compliance Report", size=20, weight="bold", color=INK, dy=0.42)
    lay.text(LEFT, f"{report.site.name or report.site.id}", size=13, dy=0.28)
    lay.text(LEFT, f"Reporting period {p.label}  ·  due {p.due_label}", size=10, color="#444444", dy=0.3)
    for sec in build_sections(report):
        if sec.kind == "charts":
            _charts(lay, report)
            continue
        if sec.kind == "signature":
            lay.need(3.0)  # the certification and the signature lines stay on one page
        elif sec.kind == "table":  # a heading never ends a page: it moves with its text and the table's first rows
            lay.need(1.1 + 0.2 * len(sec.text))
        lay.heading(sec.title)
        for t in sec.text:
            if sec.key == "verdict":  # the first thing a regulator reads
                lay.paragraph(t, size=10.5, weight="bold")
            else:
                lay.paragraph(t)
        if sec.kind == "signature":
            _signature(lay)
        elif sec.kind == "table":
            lay.table(sec)
    return lay


def _charts(lay: _Layout, report: ComplianceReport) -> None:
    """Two charts to a page where they fit, continuing on the next page (never a forced page break that would
    leave the previous page near blank)."""
    all_series = series(report)
    if not all_series:
        return
    h = 2.25  # in: one chart with its title and axis labels (three to a page)
    lay.need(0.9 + h)
    lay.heading("Charts")
    lay.paragraph("Daily range of readings (band), daily time-weighted mean (line), limits in force (dashed) and "
                  "exceedance episodes (red) over the reporting period, for every monitored channel.")
    for s in all_series:
        lay.need(h)
        y0 = lay.y

        def paint(fig: Figure, s: object = s, y0: float = y0) -> None:
            ax = fig.add_axes((LEFT / W + 0.05, 1 - (y0 + h - 0.3) / H, BODY_W / W - 0.07, (h - 0.75) / H))
            draw(ax, s)  # type: ignore[arg-type]

        lay.op(paint)
        lay.y += h + 0.05


def _signature(lay: _Layout) -> None:
    lay.need(1.6)
    lay.y += 0.25
    for label in ("Name", "Title", "Signature", "Date"):
        y = lay.y + 0.22

        def paint(fig: Figure, label: str = label, y: float = y) -> None:
            fig.text(LEFT / W, 1 - y / H, label, fontsize=8, va="bottom")
            fig.add_artist(Line2D([(LEFT + 0.9) / W, (LEFT + 5.4) / W], [1 - y / H] * 2, color="black",
                                  linewidth=0.6))

        lay.op(paint)
        lay.y += 0.36


def render_pdf(report: ComplianceReport, path: Path) -> int:
    """Write the PDF; returns the number of pages."""
    lay = layout(report)
    generated = datetime.fromtimestamp(report.generated, zone(report.site.timezone)).strftime("%Y-%m-%d %H:%M %Z")
    n = len(lay.pages)
    head = report.journal_head
    anchor = f"journal #{head[0]} {head[1][:12]}…" if head else "no journal"
    path.parent.mkdir(parents=True, exist_ok=True)
    with PdfPages(path, metadata={"Title": f"Periodic Compliance Report {report.site.id} {report.period.label}",
                                  "Creator": "pretreat-monitor"}) as pdf:
        for i, ops in enumerate(lay.pages, start=1):
            fig = Figure(figsize=(W, H))
            fig.text(LEFT / W, 1 - 0.45 / H, f"{report.site.name or report.site.id}  ·  Periodic Compliance Report",
                     fontsize=7.5, color="#555555")
            fig.text(1 - RIGHT / W, 1 - 0.45 / H, f"Period {report.period.label}", fontsize=7.5, color="#555555",
                     ha="right")
            fig.add_artist(Line2D([LEFT / W, 1 - RIGHT / W], [1 - 0.52 / H] * 2, color=RULE, linewidth=0.5))
            fig.text(LEFT / W, 0.4 / H, f"Generated {generated} by pretreat-monitor  ·  {anchor}", fontsize=6.5,
                     color="#555555")
            fig.text(1 - RIGHT / W, 0.4 / H, f"Page {i} of {n}", fontsize=7.5, ha="right")
            for op in ops:
                op(fig)
            pdf.savefig(fig)
    return n
