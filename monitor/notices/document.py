"""A notice draft as a list of blocks (headings, paragraphs, tables, the chart), from the jurisdiction's letter
template and the facts, so that Markdown, PDF and Word print the same words.

Template syntax (`config.notice`): Markdown headings (``#``, ``##``), paragraphs separated by blank lines, a
line ending in a backslash is a hard line break (CommonMark), ``**bold**``; ``$name`` placeholders; a line
holding only ``$facts``, ``$violation``, ``$obligations``, ``$invalidation`` or ``$chart`` becomes that block.
An unknown placeholder is left as written, so a typo in an edited template shows in the draft rather than
vanishing.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from datetime import date

from config.obligations import is_immediate
from monitor.notices.facts import NoticeFacts
from monitor.reports.compliance import fmt_minutes
from monitor.reports.enforcement import NONE_RECORDED

BLOCKS = ("facts", "violation", "obligations", "annotations", "invalidation", "chart")


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # h1 | h2 | p | table | chart
    text: str = ""  # h1, h2, p (lines joined by "\n" at hard breaks)
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = field(default=())


def _long_date(d: date) -> str:
    return f"{d:%B} {d.day}, {d.year}"


def _value(f: NoticeFacts, x: float | None) -> str:
    """A peak or limit: minutes for duration rules, else a reading."""
    return fmt_minutes(x) if f.timed and x is not None else _value_reading(f, x)


def onset_words(f: NoticeFacts) -> str:
    """Why the onset is the confirmation: one reading violates, or (``lel_successive``) the episode starts at
    the N-th successive reading past the limit, so N readings make it."""
    n = int(f.binding.params.get("readings", 1)) if f.binding is not None else 1
    return "a single reading violates" if n <= 1 else f"the {_ordinal(n)} successive reading past the limit"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def fact_rows(f: NoticeFacts) -> tuple[tuple[str, str], ...]:
    e = f.episode
    confirmed = (f"at onset ({onset_words(f)})" if f.confirmed == e.start
                 else f.local(f.confirmed) if f.confirmed is not None else "not confirmed by a later reading")
    duration = fmt_minutes(e.duration) if e.end is not None else "still open when drafted"
    rows = [
        ("Monitoring point",
         f"{f.channel.id} ({f.channel.kind.value}, {f.channel.unit}) at {f.site.name or f.site.id}"),
        ("Rule", f"{f.rule_label}: {f.condition}" if f.condition else f.rule_label),
        ("Onset", f"{f.local(e.start)} (reading {_value_reading(f, e.start_value)})"),
        ("Confirmed", confirmed),
        ("End", f"{f.local(e.end)}" + (f" ({e.end_reason})" if e.end_reason else "") if e.end is not None
         else "open"),
        ("Duration", duration),
        ("Peak", _value(f, e.peak) + (" (over-range reading taken as the span's top)" if e.censored else "")),
        ("Limit", _value(f, e.limit)),
        ("Measured time", fmt_minutes(e.measured) if e.measured is not None else "—"),
        ("Unmeasured time (gaps, counted as exceeding)", fmt_minutes(e.unmeasured) if e.unmeasured is not None
         else "—"),
        *([("Maintenance time (the instrument in service or calibration: not judged, not a gap)",
            fmt_minutes(e.maintenance))] if e.maintenance else []),
        ("Episode id", f.episode_id),
    ]
    return tuple(rows)


def _value_reading(f: NoticeFacts, x: float | None) -> str:
    """A reading at the channel's resolution (as recorded where the resolution is unknown), with its unit."""
    if x is None:
        return "—"
    places = f.channel.decimals
    return f"{x:.{places}f} {f.channel.unit}" if places is not None else f"{x:g} {f.channel.unit}"


def _obligation_rows(f: NoticeFacts) -> tuple[tuple[str, ...], ...]:
    return tuple((o.duty, o.citation, o.due_text if is_immediate(o.due_text) else
                  (f.local(o.due, "%Y-%m-%d %H:%M %Z") if o.due is not None else "—")
                  + (f" ({o.due_text})" if o.due_text else ""),
                  o.status(f.now), f.local(o.fulfilled, "%Y-%m-%d %H:%M %Z") if o.fulfilled is not None else "—",
                  o.how or "—") for o in f.obligations)


def _block(name: str, f: NoticeFacts) -> list[Block]:
    if name == "facts":
        return [Block("table", columns=("Fact", "Recorded"), rows=fact_rows(f))]
    if name == "chart":
        return [Block("chart")]
    if name == "violation":
        when = "Condition not met when" if f.monitoring else "Violation when"
        out = [Block("p", f"{when}: {f.condition}.")] if f.condition else []
        reading = f.binding.params.get("reading") if f.binding else None
        if reading:
            out.append(Block("p", f"Reading of the {f.words_owner} words in force: {reading}."))
        return out
    if name == "obligations":
        if not f.obligations:
            why = "" if f.obligations_available else " (no obligations record in this monitoring database)"
            return [Block("p", NONE_RECORDED + why)]
        return [Block("table", columns=("Obligation", "Citation", "Due", "Status", "Met at", "How / to whom"),
                      rows=_obligation_rows(f))]
    if name == "annotations":
        if not f.annotations:
            return [Block("p", "None recorded by the user.")]
        return [Block("table", columns=("Entered", "By", "Cause", "Corrective action"),
                      rows=tuple((f.local(a.time, "%Y-%m-%d %H:%M %Z"), a.user, a.cause, a.action)
                                 for a in f.annotations))]
    if name == "invalidation" and f.invalidation is not None:
        i = f.invalidation
        return [Block("p", f"**Note: this episode was marked invalid** by {i.user} on "
                           f"{f.local(i.time, '%Y-%m-%d %H:%M %Z')}: {i.reason}. Review before serving.")]
    return []


def correction_text(f: NoticeFacts) -> str:
    c = f.clause
    due = f.correction_due
    if due is None:
        return (f"The ordinance states no period for correction. {c.authority} sets the time for "
                f"{c.correction or 'the correction of the violation'} in this notice: ______________.")
    ceiling = " (the ordinance allows at most this period; a shorter one may be set)" if c.correction_is_ceiling else ""
    # no calendar date: counted from the date of the notice as served, which a draft's date is not
    return (f"{c.correction[:1].upper() + c.correction[1:] if c.correction else 'Correction'} is due "
            f"**{correction_period(f)}**{ceiling} ({c.citation}: \"{c.quote}\").")


def correction_period(f: NoticeFacts) -> str:
    """The correction period as the ordinance counts it, from the date of the notice (as served)."""
    days = f.clause.correction_days
    return "(none stated)" if days is None else f"within {days} days of the date of the notice"


def variables(f: NoticeFacts) -> dict[str, str]:
    s, p = f.site, f.site.permit
    permit = "(no permit on file)"
    if p is not None:
        dates = ", ".join(x for x in (f"issued {p.issued}" if p.issued else "",
                                      f"expires {p.expires}" if p.expires else "") if x)
        permit = p.id + (f" ({dates})" if dates else "")
    name = s.name or s.id
    finding = (f"the monitoring equipment at {name} ({f.channel.id}) did not meet the condition of" if f.monitoring
               else f"the discharge from {name} violated")
    return {
        "finding": finding,
        "authority": f.clause.authority, "date": _long_date(f.dated), "industry": s.company or s.name or s.id,
        "site_id": s.id, "site_name": s.name or s.id, "address": s.address or "(address not on file)",
        "permit": permit, "rule_label": f.rule_label, "onset_local": f.local(f.episode.start, "%Y-%m-%d %H:%M %Z"),
        "episode_id": f.episode_id, "section": f.section, "quote": f.words_violated or "(no quote on file)",
        "notice_section": f.clause.citation or "(none on file)", "notice_quote": f.clause.quote,
        "correction_due": correction_period(f), "correction_text": correction_text(f),
        "channel": f.channel.id, "unit": f.channel.unit,
    }


def build(template: str, f: NoticeFacts) -> list[Block]:
    subst = variables(f)
    out: list[Block] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(Block("p", "".join(para).strip()))
            para.clear()

    for raw in template.splitlines():
        line = raw.rstrip()
        name = line.strip()[1:] if line.strip().startswith("$") else ""
        if name in BLOCKS:
            flush()
            out.extend(_block(name, f))
            continue
        text = string.Template(line).safe_substitute(subst)
        if not text.strip():
            flush()
        elif text.startswith("## "):
            flush()
            out.append(Block("h2", text[3:].strip()))
        elif text.startswith("# "):
            flush()
            out.append(Block("h1", text[2:].strip()))
        elif text.endswith("\\"):
            para.append(text[:-1].rstrip() + "\n")
        else:
            para.append(text.strip() + " ")
    flush()
    return out
