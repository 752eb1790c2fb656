"""Writing `pretreat exceedances` reports: a table for people, CSV and JSON Lines for tools.

Times are ISO 8601 UTC with ``Z`` (milliseconds only when fractional) in CSV and JSON, as `pretreat readings`
and `pretreat replay` write them; the table shows them in each site's local time with the zone (``--utc``:
UTC) and readings at the channel's resolution (`monitor.cli_render`). Numbers are written with up to 10
significant digits in CSV, as JSON numbers in JSON; an unknown value is an empty CSV field and ``null`` in
JSON, never a made-up number.
See `monitor.read.episodes` for what the columns mean.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from monitor.checks.slug_labs import LabSlug
    from monitor.cli_render import Render
    from monitor.read.episodes import Episode

CSV_COLUMNS = ["n", "site", "channel", "rule", "status", "start", "end", "duration_s", "start_value",
               "end_value", "peak", "limit", "unit", "readings_good", "readings_expected", "completeness_pct",
               "citation", "end_reason", "measured_s", "unmeasured_s", "maintenance_s", "censored", "invalid",
               "revisions", "calibration", "confirmed", "permitted", "fault"]
EVIDENCE_COLUMNS = ["evidence_channel", "evidence_time", "evidence_value", "evidence_quality",
                    "evidence_reason"]

_DAYS: dict[int, str] = {}


def iso(t: float | None) -> str:
    """ISO 8601 UTC with 'Z', milliseconds only when fractional (as `pretreat readings` and replay write);
    the date part is cached per day, since a report formats hundreds of thousands of times."""
    if t is None:
        return ""
    secs, ms = divmod(round(t * 1000), 1000)
    day, rem = divmod(secs, 86400)
    date = _DAYS.get(day)
    if date is None:
        date = _DAYS[day] = time.strftime("%Y-%m-%dT", time.gmtime(day * 86400))
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{date}{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z" if ms else f"{date}{h:02d}:{m:02d}:{s:02d}Z"


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.10g}"


def _duration(d: float | None) -> str:
    if d is None:
        return ""
    whole = round(d)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{d:g}s"


def _fields(n: int, e: Episode) -> list[Any]:
    pct = e.completeness
    return [n, e.site, e.channel, e.rule, e.status, iso(e.start), iso(e.end),
            "" if e.duration is None else round(e.duration, 3), _num(e.start_value), _num(e.end_value),
            _num(e.peak), _num(e.limit), e.unit, "" if e.good is None else e.good,
            "" if e.expected is None else e.expected, "" if pct is None else f"{pct:.1f}", e.citation,
            e.end_reason or "", _num(e.measured), _num(e.unmeasured), _num(e.maintenance),
            "true" if e.censored else "false", e.invalid, "; ".join(e.revisions or ()), e.calibration,
            iso(e.confirmed), e.permitted, e.fault]


def write_csv(out: TextIO, episodes: Iterable[tuple[int, Episode]], *, evidence: bool,
              labs: Sequence[LabSlug] = (), first_lab: int = 1) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS + (EVIDENCE_COLUMNS if evidence else []))
    for n, e in episodes:
        row = _fields(n, e)
        if not evidence:
            w.writerow(row)
            continue
        w.writerows([[*row, ch, iso(t), _num(v), q, why] for ch, t, v, q, why in e.evidence or ()] or [row])
    for n, f in enumerate(labs, start=first_lab):  # slug findings on lab results: the episode columns that apply
        cells = {"n": n, "site": f.result.site, "channel": f.channel, "rule": "slug", "status": "lab result",
                 "start": f.result.sample_date.isoformat(), "peak": _num(f.result.value_std),
                 "limit": _num(f.limit.threshold), "unit": "mg/L", "citation": f.limit.citation}
        w.writerow([cells.get(c, "") for c in CSV_COLUMNS] + ([""] * len(EVIDENCE_COLUMNS) if evidence else []))


def lab_slug_record(n: int, f: LabSlug) -> dict[str, Any]:
    """A slug finding on a lab result as its JSON object (``record`` tells it from an episode)."""
    r = f.result
    return {"n": n, "record": "lab_slug", "site": r.site, "channel": f.channel, "rule": "slug",
            "status": "lab result", "sample_date": r.sample_date.isoformat(), "sample_id": r.sample_id or None,
            "parameter": r.parameter, "value": r.value, "unit": r.unit, "value_mg_l": r.value_std,
            "normal_ppm": f.limit.normal, "multiplier": f.limit.multiplier, "limit": f.limit.threshold,
            "citation": f.limit.citation, "reading": f.limit.reading}


def write_lab_slugs_json(out: TextIO, labs: Sequence[LabSlug], *, first: int) -> None:
    for n, f in enumerate(labs, start=first):
        out.write(json_line(lab_slug_record(n, f)))


def write_lab_slugs_table(out: TextIO, labs: Sequence[LabSlug]) -> None:
    """The findings under their own heading, after the episodes (nothing when there are none)."""
    if not labs:
        return
    out.write("SLUG FINDINGS ON LAB RESULTS (composite samples; the ordinance measures a slug by suspended solids "
              "and BOD)\n")
    for f in labs:
        r = f.result
        out.write(f"  {r.sample_date.isoformat()}  {r.site}/{f.channel}  {f.comparison}"
                  f"{'  sample ' + r.sample_id if r.sample_id else ''}  {f.limit.citation}\n")
    out.write(f"{len(labs)} slug finding(s) on lab results: a composite shows the average over its collection "
              "period, not how long the concentration was above the threshold\n")


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # json.dumps with options builds one per call


def write_json(out: TextIO, episodes: Iterable[tuple[int, Episode]], *, evidence: bool) -> None:
    """JSON Lines with the CSV's keys; numbers as numbers, null where CSV has an empty field."""
    for n, e in episodes:
        out.write(json_line(episode_record(n, e, evidence=evidence)))


def json_line(obj: dict[str, Any]) -> str:
    """One JSON Lines line (NaN refused: an unknown value is null, never a made-up number)."""
    return _JSON(obj) + "\n"


def stable_id(e: Episode) -> str:
    """The episode's id as `pretreat nov --episode`, `pretreat report annotate` and the report name it
    (``site/channel/rule@start``, start in UTC rounded to the millisecond)."""
    from monitor.checks.events import iso_utc

    return "" if e.start is None else f"{e.site}/{e.channel}/{e.rule}@{iso_utc(e.start)}"


def episode_record(n: int, e: Episode, *, evidence: bool) -> dict[str, Any]:
    """One episode as its JSON object, with its stable ``episode_id`` (`stable_id`)."""
    pct = e.completeness
    obj: dict[str, Any] = {
        "n": n, "episode_id": stable_id(e) or None, "site": e.site, "channel": e.channel, "rule": e.rule,
        "status": e.status,
        "start": iso(e.start) or None, "end": iso(e.end) or None, "duration_s": e.duration,
        "start_value": e.start_value, "end_value": e.end_value, "peak": e.peak, "limit": e.limit,
        "unit": e.unit, "readings_good": e.good, "readings_expected": e.expected,
        "completeness_pct": None if pct is None else round(pct, 1), "citation": e.citation,
        "end_reason": e.end_reason, "measured_s": e.measured, "unmeasured_s": e.unmeasured,
        "maintenance_s": e.maintenance,
        "censored": e.censored, "invalid": e.invalid or None, "revisions": e.revisions or [],
        "calibration": e.calibration or None, "confirmed": iso(e.confirmed) or None,
        "permitted": e.permitted or None, "fault": e.fault or None}
    if evidence:
        obj["evidence"] = [{"channel": ch, "time": iso(t), "value": v, "quality": q, "reason": why}
                           for ch, t, v, q, why in e.evidence or ()]
    return obj


def _end_text(e: Episode, r: Render) -> str:
    if e.status == "retracted":  # a correction after late readings: announced, and it never happened
        return "RETRACTED"
    text = r.time(e.end, e.site) or ("ongoing" if e.status == "ongoing" else "(not recorded)")
    return f"{text} ({e.end_reason})" if e.end_reason in ("gap", "maintenance") else text


def _measured_text(e: Episode) -> str:
    """The proven duration, what the worst case adds, and the instrument's own service time, which is neither:
    "1h00m00s +2m00s unmeasured +10m00s maintenance"."""
    if e.measured is None:
        return ""
    more = f" +{_duration(e.unmeasured)} unmeasured" if e.unmeasured else ""
    more += f" +{_duration(e.maintenance)} maintenance" if e.maintenance else ""
    return _duration(e.measured) + more


def _value(e: Episode, v: float | None, r: Render) -> str:
    """A peak or limit with its unit: a duration rule's are seconds, shown as a duration."""
    if v is None:
        return ""
    if e.unit == "s":
        return _duration(v)
    return f"{r.number(v, e.site, e.channel)} {e.unit}".strip()


def _citation_text(e: Episode, r: Render) -> str:
    """The citation, after what makes the row no violation: marked invalid, or retracted by a correction."""
    if e.invalid:
        return f"[INVALID: {_invalid_text(e, r)}] {e.citation}"
    if e.status == "retracted":
        return f"[RETRACTED after late readings: never happened] {e.citation}"
    return e.citation


def _invalid_text(e: Episode, r: Render) -> str:
    """Who marked the episode invalid, when (in the table's time: the site's local time unless --utc) and why."""
    if e.invalid_at is None:
        return e.invalid
    return f"marked invalid by {e.invalid_by} at {r.time(e.invalid_at, e.site)}: {e.invalid_reason}"


def write_table(out: TextIO, episodes: list[tuple[int, Episode]], *, total: int, evidence: bool,
                render: Render | None = None) -> None:
    from config.rule_catalogue import counted_limit
    from monitor.cli_render import Render

    r = render or Render(None)
    zone = "UTC" if r.utc else "local time"
    head = ["#", f"START ({zone})", "END", "DURATION", "MEASURED", "SITE/CHANNEL", "RULE", "PEAK", "LIMIT",
            "COMPLETE", "CITATION"]
    rows = [[str(n), r.time(e.start, e.site) or "(not recorded)",
             _end_text(e, r), "" if e.status == "retracted" else _duration(e.duration), _measured_text(e),
             f"{e.site}/{e.channel}", e.rule, _value(e, e.peak, r) + (" (censored)" if e.censored else ""),
             counted_limit(e.rule, e.limit) or _value(e, e.limit, r) if e.limit is not None else "",
             "" if e.completeness is None or e.status == "retracted" else f"{e.completeness:.1f}%",
             _citation_text(e, r)] for n, e in episodes]
    widths = [max([len(h)] + [len(x[i]) for x in rows]) for i, h in enumerate(head)]
    line = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    out.write(line.format(*head) + "\n")
    shown = list(zip(rows, episodes, strict=True))
    for row, (_n, e) in (x for x in shown if not x[1][1].permitted):
        _write_row(out, line, row, e, r, zone)
    permitted = [x for x in shown if x[1][1].permitted]
    if permitted:  # 40 CFR 401.17 adopted by the permit: listed apart, never among the violations
        out.write(f"PERMITTED pH EXCURSIONS ({permitted[0][1][1].permitted}, adopted by the permit: not "
                  "violations)\n")
    for row, (_n, e) in permitted:
        _write_row(out, line, row, e, r, zone)
    ongoing = sum(1 for _n, e in episodes if e.status == "ongoing")
    more = f"; the {total - len(episodes)} earlier ones are not shown (--limit 0 shows all)" \
        if total > len(episodes) else ""
    invalid = sum(1 for _n, e in episodes if e.invalid)
    marked = f", {invalid} of those shown marked invalid by enforcement (not violations)" if invalid else ""
    retracted = sum(1 for _n, e in episodes if e.status == "retracted")
    marked += (f", {retracted} of those shown retracted after late readings (announced, never happened: not "
               "violations)") if retracted else ""
    apart = f", {len(permitted)} of those shown permitted pH excursions (not violations)" if permitted else ""
    out.write(f"{total} episodes, {ongoing} ongoing{marked}{apart}{more}\n")


def _write_row(out: TextIO, line: str, row: list[str], e: Episode, r: Render, zone: str) -> None:
    """One episode's line, then what belongs under it: when it was confirmed, revisions, the fault's own words,
    calibration, evidence."""
    out.write(line.format(*row) + "\n")
    if e.start is not None:
        out.write(f"      episode {stable_id(e)}\n")
    if e.confirmed is not None and e.confirmed != e.start:
        out.write(f"      confirmed {r.time(e.confirmed, e.site)} (the duration was exceeded; the episode starts "
                  "at its onset)\n")
    for rev in e.revisions or ():
        out.write(f"      revised {rev}\n")
    if e.fault:
        out.write(f"      fault: {e.fault}\n")
    if e.calibration:
        out.write(f"      {e.calibration_local or e.calibration}\n")
    if e.evidence:
        out.write(f"      {'TIME (' + zone + ')':<24} {'CHANNEL':<16} {'VALUE':<14} QUALITY / REASON\n")
    for ch, t, v, q, why in e.evidence or ():
        value = f"{r.number(v, e.site, ch)} {r.unit(e.site, ch) or _unit(e, ch)}".strip() if v is not None else ""
        shown = "good" if q == "good" else f"{q.upper()}: {why}"
        out.write(f"      {r.time(t, e.site):<24} {ch:<16} {value:<14} {shown}\n")


def _unit(e: Episode, channel: str) -> str:
    """The unit of an evidence reading: the episode's own channel's (a duration rule's readings are in the
    channel's unit, not seconds, so none is shown for them rather than a wrong one)."""
    return e.unit if channel == e.channel and e.unit != "s" else ""
