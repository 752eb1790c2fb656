"""A notice draft written as Markdown (with the chart as a PNG beside it), PDF (US letter portrait, drawn with
matplotlib as the reports are, `monitor.reports.render_pdf`) or Word (python-docx, an optional dependency:
``make docx``)."""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from monitor.notices import chart
from monitor.notices.document import Block
from monitor.notices.facts import NoticeFacts
from monitor.reports.charts import INK

W, H = 8.5, 11.0  # inches, US letter portrait
LEFT, TOP, BOTTOM = 0.9, 0.9, 0.8
BODY_W = W - 2 * LEFT
CHART_H = 3.3  # in: the chart with its title, axis labels and the legend under it
_BOLD = re.compile(r"\*\*(.+?)\*\*")
Op = Callable[[Figure], object]


def plain(text: str) -> str:
    return _BOLD.sub(r"\1", text)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_md(blocks: list[Block], f: NoticeFacts, path: Path) -> list[Path]:
    """The Markdown draft and its chart (``<name>.png``); returns both paths."""
    image = path.with_suffix(".png")
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2"):
            out += [("# " if b.kind == "h1" else "## ") + b.text, ""]
        elif b.kind == "p":
            out += [b.text.replace("\n", "\\\n"), ""]
        elif b.kind == "table":
            out.append("| " + " | ".join(b.columns) + " |")
            out.append("|" + "---|" * len(b.columns))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif b.kind == "chart":
            out += [f"![Readings of {f.channel.id} with the limit and the episode]({image.name})", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out), encoding="utf-8")
    image.write_bytes(chart.png(f))
    return [path, image]


class _Page:
    """Portrait pages of drawing operations, laid out top to bottom (inches from the top)."""

    def __init__(self) -> None:
        self.pages: list[list[Op]] = [[]]
        self.y = TOP

    def need(self, h: float) -> None:
        if self.y + h > H - BOTTOM and self.y > TOP:
            self.pages.append([])
            self.y = TOP

    def text(self, s: str, *, size: float = 9.5, weight: str = "normal", color: str = "black",
             x: float = LEFT, width: float = BODY_W) -> None:
        chars = max(8, int(width * 72 / (size * 0.55)))
        for part in s.split("\n"):
            for line in textwrap.wrap(part, chars) or [""]:
                self.need(size * 1.5 / 72)
                y = self.y

                def paint(fig: Figure, y: float = y, line: str = line) -> None:
                    fig.text(x / W, 1 - y / H, line, fontsize=size, weight=weight, color=color, va="top")

                self.pages[-1].append(paint)
                self.y += size * 1.45 / 72

    def table(self, b: Block, size: float = 8.0) -> None:
        n = len(b.columns)
        widths = [BODY_W * 0.32, BODY_W * 0.68] if n == 2 else [BODY_W / n] * n
        line_h = size * 1.35 / 72
        for i, row in enumerate((b.columns, *b.rows)):
            cells = [textwrap.wrap(c, max(6, int((w - 0.08) * 72 / (size * 0.55)))) or [""]
                     for c, w in zip(row, widths, strict=True)]
            h = max(len(c) for c in cells) * line_h + 0.06
            self.need(h)
            y0, bold = self.y, i == 0

            def paint(fig: Figure, cells: list[list[str]] = cells, y0: float = y0, h: float = h,
                      bold: bool = bold) -> None:
                x = LEFT
                for lines, w in zip(cells, widths, strict=True):
                    fig.text((x + 0.04) / W, 1 - (y0 + 0.03) / H, "\n".join(lines), fontsize=size, va="top",
                             weight="bold" if bold else "normal", linespacing=1.2)
                    x += w
                fig.add_artist(Line2D([LEFT / W, (W - LEFT) / W], [1 - (y0 + h) / H] * 2, color="#999999",
                                      linewidth=0.8 if bold else 0.3))

            self.pages[-1].append(paint)
            self.y += h
        self.y += 0.12


def render_pdf(blocks: list[Block], f: NoticeFacts, path: Path) -> int:
    """Write the PDF draft; returns its number of pages."""
    lay = _Page()
    for b in blocks:
        if b.kind == "h1":
            lay.need(0.6)
            lay.text(plain(b.text), size=16, weight="bold", color=INK)
            lay.y += 0.1
        elif b.kind == "h2":
            lay.need(0.7)
            lay.y += 0.08
            lay.text(plain(b.text), size=11.5, weight="bold", color=INK)
            lay.y += 0.04
        elif b.kind == "p":
            lay.text(plain(b.text))
            lay.y += 0.08
        elif b.kind == "table":
            lay.table(b)
        elif b.kind == "chart":
            lay.need(CHART_H)
            y0 = lay.y

            def plot(fig: Figure, y0: float = y0) -> None:
                chart.draw(fig.add_axes((LEFT / W + 0.06, 1 - (y0 + CHART_H - 0.85) / H, BODY_W / W - 0.08,
                                         (CHART_H - 1.2) / H)), f)

            lay.pages[-1].append(plot)
            lay.y += CHART_H
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(lay.pages)
    title = f"DRAFT Notice of Violation {f.episode_id}"
    with PdfPages(path, metadata={"Title": title, "Creator": "pretreat-monitor"}) as pdf:
        for i, ops in enumerate(lay.pages, start=1):
            fig = Figure(figsize=(W, H))
            fig.text(LEFT / W, 1 - 0.5 / H, f"DRAFT · {f.clause.authority} · {f.site.name or f.site.id}",
                     fontsize=7.5, color="#555555")
            fig.text(1 - LEFT / W, 0.45 / H, f"Page {i} of {n}", fontsize=7.5, ha="right")
            fig.text(LEFT / W, 0.45 / H, f"Episode {f.episode_id}", fontsize=6.5, color="#555555")
            for op in ops:
                op(fig)
            pdf.savefig(fig)
    return n


def render_docx(blocks: list[Block], f: NoticeFacts, path: Path) -> None:
    """Write the Word draft (python-docx); ImportError names the extra to install."""
    try:
        import docx  # type: ignore[import-not-found,unused-ignore]
        from docx.shared import Inches  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ImportError("Word drafts need python-docx: `make docx` in the project's folder installs it into "
                          "its .venv (`make test` does too; elsewhere: pip install -e '.[docx]')") from exc
    doc = docx.Document()
    for b in blocks:
        if b.kind in ("h1", "h2"):
            doc.add_heading(plain(b.text), level=1 if b.kind == "h1" else 2)
        elif b.kind == "p":
            para = doc.add_paragraph()
            for i, piece in enumerate(_BOLD.split(b.text)):  # odd pieces were **bold**
                para.add_run(piece).bold = i % 2 == 1
        elif b.kind == "table":
            t = doc.add_table(rows=1, cols=len(b.columns))
            t.style = "Table Grid"
            for cell, text in zip(t.rows[0].cells, b.columns, strict=True):
                cell.text = text
            for row in b.rows:
                for cell, text in zip(t.add_row().cells, row, strict=True):
                    cell.text = text
        elif b.kind == "chart":
            doc.add_picture(io.BytesIO(chart.png(f)), width=Inches(6.5))
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
