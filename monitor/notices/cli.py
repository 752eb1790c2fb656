"""`pretreat nov`: draft a notice of violation for one recorded episode.

    pretreat nov --config FILE --episode ID [--format pdf|docx|md] [--output PATH]

``ID`` is the episode id the reports and `pretreat exceedances` print (``site/channel/rule@start``). The draft
is written to ``PATH`` (default ``nov_<site>_<channel>_<rule>_<start>.<format>`` in the current folder); a
Markdown draft writes its chart beside it as a PNG. Exit codes: 0 written, 1 it could not be written, 2 bad
usage, an invalid configuration or no such episode.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from config.loader import load_config_or_report
from config.notice import NoticeConfigError, template_path
from config.schema import SiteConfig

FORMATS = ("pdf", "docx", "md")  # what monitor.notices.render writes


def default_name(episode: str, fmt: str) -> str:
    return "nov_" + re.sub(r"[^A-Za-z0-9.-]+", "_", episode).strip("_") + f".{fmt}"


def write_notice(config: SiteConfig, episode: str, fmt: str, path: Path, *, now: float) -> list[Path]:
    """Draft the notice for ``episode`` into ``path``; returns the files written (Markdown: with its chart).
    Raises NoticeError (no such episode, a fault episode), NoticeConfigError, ImportError (docx missing)."""
    # the reports, the stores and matplotlib (~1 s of CPU) only when a notice is drawn, not for `--help`
    from monitor.notices.document import build
    from monitor.notices.facts import gather
    from monitor.notices.render import render_docx, render_md, render_pdf

    facts = gather(config, episode, now=now)
    template = template_path(facts.site.jurisdiction).read_text(encoding="utf-8")
    blocks = build(template, facts)
    if fmt == "md":
        return render_md(blocks, facts, path)
    if fmt == "docx":
        render_docx(blocks, facts, path)
    else:
        render_pdf(blocks, facts, path)
    return [path]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", required=True, help="site file (TOML)")
    p.add_argument("--episode", metavar="ID", required=True, help="site/channel/rule@start, as the report prints")
    p.add_argument("--format", choices=FORMATS, default="pdf")
    p.add_argument("--output", type=Path, metavar="PATH", help="file to write (default: in the current folder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.notices.facts import NoticeError

    config = load_config_or_report(args.config)
    if config is None:
        return 2
    path = args.output or Path.cwd() / default_name(args.episode, args.format)
    try:
        written = write_notice(config, args.episode, args.format, path, now=time.time())
    except (NoticeError, NoticeConfigError) as exc:
        print(f"pretreat: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"pretreat: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"pretreat: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    print("draft notice of violation: " + ", ".join(str(w) for w in written))
    return 0
