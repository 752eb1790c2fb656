"""Reading a replay CSV: each line a row, fast for every documented layout, and every odd row rejected alone.

Layouts: a header naming ``time``, ``channel`` and ``value``, optionally ``site`` and ``quality``, in any
order, with any other columns ignored (``unit`` and ``reason`` of `pretreat readings` exports). The three
documented ones are ``time,channel,value``, ``time,channel,value,site,quality`` and the export's
``time,site,channel,value,unit,quality,reason``.

Each row is one line. A bad line is rejected on its own, with its line number and why, and reading goes on
at the next line:

- a line with quotes goes through `csv.reader` alone; a quoted field may continue on the following lines (a
  reason holding a line break, as an export writes it) only when the row closes within `MAX_ROW_LINES`
  lines with a valid quote and the header's number of fields; otherwise the line is rejected (``unbalanced
  quote``) and the lines read ahead are read as rows of their own. A field over `csv.field_size_limit` is
  the same kind of bad line, never the end of the run;
- a value must be a plain decimal number (`monitor.number_text`): ``1_000``, ``infinity``, `` 5 `` are
  rejected, not guessed at. The one exception is the export's own spelling of a stored infinite number,
  exactly ``inf`` or ``-inf`` (`EXPORT_INFINITIES`): such a row is judged as the daemon and `pretreat audit`
  judge that reading (a ``bad_value`` sample, `Processor.slow_good`), so that ``pretreat readings … | pretreat
  replay …`` finds the episodes the audit finds in the same record;
- an implausible time is rejected without moving its channel's order on (so one bad time cannot make every
  later row "out of order"): a time more than `FUTURE_TOLERANCE` after now, or a time more than `JUMP`
  after every row read so far (the data's frontier) that its channel's next row does not follow (that row
  is back more than `JUMP` before it). A row beyond the frontier is held, not judged, until the rows after
  it decide: a genuine jump (a gap in the data) is confirmed once `CONFIRM` rows are held, which are then
  judged in file order; at the end of the file rows still held are judged (nothing follows them that they
  could put out of order). Rows of channels with nothing held, within the frontier, are judged meanwhile,
  so in a file holding one channel after another a gap at the end of one channel is not taken for an
  outlier; in a time-sorted file every row after a gap is held, so the channels' interleaving is kept.

Speed: a month of 1-s data is millions of rows, so the common row (no quote, the header's width, quality
``good``, a time seen on the row before or plausible) is handled inline in one loop with no function call per
row beyond `str.split` (and `SlugDetector.add_quiet` on a channel whose slug baseline is accumulating);
`Processor.good`'s fast path is inlined (see its docstring). Like the time parser's cache of minutes, a bounded
cache of value texts already checked against the number rule (an instrument's readings repeat: a pH meter's 0.01
steps) saves `float` and the rule's `str.strip` on most rows. Every other row goes to `_Reader.row`, which
checks everything and says why.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import TextIO

from drivers.mqtt.payload import MAX_FUTURE_SKEW
from monitor.checks.engine import Processor
from monitor.checks.replay_io import Rejections, time_parser
from monitor.number_text import PLAIN_CHARS, excerpt, is_plain

CHUNK = 16384  # rows between yields (the caller drains the engine's events: bounds the events in memory)
MAX_ROW_LINES = 8  # lines one quoted row may span (an export's reason with line breaks)
FUTURE_TOLERANCE = MAX_FUTURE_SKEW  # s after now that a time may be, as for a device clock (MQTT)
JUMP = 300.0  # s beyond the data's frontier from which a time must be confirmed by the rows after it
CONFIRM = 4  # rows beyond the frontier, agreeing with each other, that confirm a jump
VALUES_MAX = 65_536  # distinct value texts remembered as checked (bounded, whatever the file)
KNOWN = ("time", "channel", "value", "site", "quality")
_INF = float("inf")
# how `pretreat readings` writes a stored infinite value (`monitor.export_render`): read back as one, judged bad
EXPORT_INFINITIES = frozenset(("inf", "-inf"))


class InputError(Exception):
    """The CSV cannot be replayed at all (no usable header, or no site column with several sites)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Column positions from the header (``si``/``qi`` None when absent) and the line ending it used."""

    width: int
    ti: int
    ci: int
    vi: int
    si: int | None
    qi: int | None
    eol: str = "\n"

    @classmethod
    def of(cls, header: list[str], source: str, eol: str = "\n") -> Layout:
        names = [h.strip().lower() for h in header]
        missing = [c for c in ("time", "channel", "value") if c not in names]
        if missing:
            raise InputError(f"{source}: header {excerpt(','.join(header))} lacks {missing} "
                             "(expected time,channel,value[,site][,quality])")
        dupes = sorted({n for n in names if names.count(n) > 1 and n in KNOWN})
        if dupes:
            raise InputError(f"{source}: header repeats {dupes}")
        at = {n: i for i, n in enumerate(names) if n in KNOWN}
        return cls(width=len(names), ti=at["time"], ci=at["channel"], vi=at["value"], si=at.get("site"),
                   qi=at.get("quality"), eol=eol)


def read_header(src: TextIO, source: str) -> Layout:
    first = src.readline()
    try:
        header = next(csv.reader([first]), []) if first.strip() else []
    except csv.Error as exc:
        raise InputError(f"{source}:1: header is not CSV ({exc})") from exc
    if not header:
        raise InputError(f"{source}: empty file (expected a header time,channel,value)")
    eol = first[len(first.rstrip("\r\n")):] or "\n"  # the file's line ending, as its header has it
    return Layout.of(header, source, eol)


class _Reader:
    """State shared by the fast loop and the odd-row path: processors, the frontier and the held rows."""

    def __init__(self, *, layout: Layout, by_site: Mapping[str, Mapping[str, Processor]], default_site: str,
                 reject: Rejections, now: float) -> None:
        self.layout = layout
        self.by_site = by_site
        self.default_site = default_site
        self.reject = reject
        self.parse = time_parser()
        self.horizon = now + FUTURE_TOLERANCE
        self.frontier = -_INF  # latest time read so far (any channel)
        self.limit = -_INF  # times up to this go the fast way: min(frontier + JUMP, horizon)
        self.held: list[tuple[int, float, Processor, float | None, str, str]] = []  # line, t, p, x, quality, ts
        self.first: dict[Processor, float] = {}  # channels with rows held: the first held time
        self.saved: dict[Processor, float] = {}  # and their ``last`` before it

    # ---- one row, everything checked -------------------------------------------------------------------

    def row(self, cells: list[str], line: int) -> None:
        """A row that is not the common case: check every cell, say why it is rejected, or judge it."""
        lay = self.layout
        if len(cells) != lay.width:
            self.reject(line, "unparseable", f"{len(cells)} fields, expected {lay.width}: "
                                             f"{excerpt(','.join(cells))}")
            return
        cells[-1] = cells[-1].rstrip("\r\n")
        site = cells[lay.si] if lay.si is not None else self.default_site
        ch = cells[lay.ci]
        proc = self.by_site.get(site, {}).get(ch)
        if proc is None:
            where = f"site {excerpt(site)} channel " if lay.si is not None else ""
            self.reject(line, "unknown channel", where + excerpt(ch))
            return
        quality = cells[lay.qi].strip().lower() if lay.qi is not None else "good"
        quality = quality or "good"
        ts = cells[lay.ti]
        try:
            t = self.parse(ts)
        except ValueError as exc:
            self.reject(line, "unparseable", f"time {excerpt(ts)}: {excerpt(str(exc))}")
            return
        x: float | None = None
        # an over_range row keeps the instrument's number: Processor.good judges it as the daemon does
        if quality == "good" or (quality == "over_range" and cells[lay.vi].strip() != ""):
            v = cells[lay.vi]
            try:
                x = float(v)
                if not is_plain(v) and v not in EXPORT_INFINITIES:
                    raise ValueError
            except ValueError:
                self.reject(line, "unparseable", f"value {excerpt(v)} is not a plain decimal number")
                return
        if self.plausible(line, t, ts, proc, x, quality):
            self.judge(line, t, ts, proc, x, quality)

    def judge(self, line: int, t: float, ts: str, proc: Processor, x: float | None, quality: str) -> None:
        if proc.good(t, x) if x is not None else proc.bad(t, quality):
            self.reject(line, "out of order", f"{ts} is before the previous row of its channel")
        elif t > self.frontier:
            self.frontier = t
            self.limit = min(t + JUMP, self.horizon)

    # ---- times: the frontier and the rows held beyond it -----------------------------------------------

    def plausible(self, line: int, t: float, ts: str, proc: Processor, x: float | None, quality: str) -> bool:
        """True to judge the row now; False when it was rejected or is held (see the module doc).

        Held rows wait in file order, whatever their channel, and are judged in that order when confirmed
        (a time-sorted file keeps its interleaving). While a channel has rows held, its processor's
        ``last`` is +inf, so that the fast loop sends that channel's later rows here (its "out of order"
        test) at no cost to the other rows."""
        if t > self.horizon:
            self.reject(line, "implausible time", f"{ts} is more than {FUTURE_TOLERANCE:.0f} s after now")
            return False
        first = self.first.get(proc)
        if first is not None and t < first - JUMP:  # its channel came back: the held rows were outliers
            self.drop(proc, f"the next row of its channel is back at {ts}")
            first = None
        if first is None and (self.frontier == -_INF or t <= self.frontier + JUMP):
            return True  # a channel with nothing held, within the frontier: judged now
        if proc not in self.first:
            self.first[proc], self.saved[proc] = t, proc.last
            proc.last = _INF
        self.held.append((line, t, proc, x, quality, ts))
        if len(self.held) >= CONFIRM:
            self.release_all()
        return False

    def drop(self, proc: Processor, why: str) -> None:
        """``proc``'s held rows were outliers: reject them; the other channels' held rows stay."""
        del self.first[proc]
        proc.last = self.saved.pop(proc)
        before = proc.last if proc.last > -_INF else self.frontier
        for line, t, _p, _x, _q, ts in (h for h in self.held if h[2] is proc):
            self.reject(line, "implausible time",
                        f"{ts} is {(t - before) / 3600:,.1f} h after the rows before it and {why}")
        self.held = [h for h in self.held if h[2] is not proc]

    def release_all(self) -> None:
        """Judge the held rows in file order: confirmed, or at the end of the file (where nothing follows
        them that they could put out of order)."""
        for proc, last in self.saved.items():
            proc.last = last
        held, self.held = self.held, []
        self.first.clear()
        self.saved.clear()
        for line, t, proc, x, quality, ts in held:
            self.judge(line, t, ts, proc, x, quality)

    # ---- lines ------------------------------------------------------------------------------------------

    def quoted(self, line: str, lineno: int, src: TextIO) -> tuple[int, int]:
        """A line holding quotes (the csv tokenizer, or a row spanning lines); returns the lines read ahead
        and the rows they turned out to be (none when the row spans them)."""
        ahead: list[str] = []
        text = line
        while text.count('"') % 2 and len(ahead) < MAX_ROW_LINES - 1:
            nxt = src.readline()
            if not nxt:
                break
            ahead.append(nxt)
            text += nxt
        cells, why = self._cells(text)
        if cells is not None and len(cells) == self.layout.width:
            self.row(cells, lineno)
            return len(ahead), 0
        if ahead:
            cells, why = self._cells(line)
        if cells is None:
            self.reject(lineno, "unparseable", f"{why}: {excerpt(line.rstrip())}")
        else:
            self.row(cells, lineno)
        for i, extra in enumerate(ahead, start=1):  # read ahead for nothing: each is a row of its own
            self.line(extra, lineno + i)
        return len(ahead), len(ahead)

    def line(self, text: str, lineno: int) -> None:
        """One line on its own (no look-ahead): the slow road for lines read ahead."""
        if '"' in text:
            cells, why = self._cells(text)
            if cells is None:
                self.reject(lineno, "unparseable", f"{why}: {excerpt(text.rstrip())}")
                return
            self.row(cells, lineno)
        else:
            self.row(text.split(","), lineno)

    @staticmethod
    def _cells(text: str) -> tuple[list[str] | None, str]:
        """The one row in ``text`` (strict quoting), or None and why it is not exactly one well-formed row."""
        try:
            rows = list(csv.reader(text.splitlines(keepends=True) or [""], strict=True))
        except csv.Error as exc:
            return None, "unbalanced quote" if text.count('"') % 2 else str(exc)
        return (rows[0], "") if len(rows) == 1 else (None, "unbalanced quote")


def read_rows(src: TextIO, *, layout: Layout, by_site: Mapping[str, Mapping[str, Processor]],
              default_site: str, reject: Rejections, now: float | None = None) -> Iterator[int]:
    """Feed every row after the header to its channel's processor; yields the rows read per chunk."""
    r = _Reader(layout=layout, by_site=by_site, default_site=default_site, reject=reject,
                now=time.time() if now is None else now)
    lay = layout
    width, ti, ci, vi, si, qi = lay.width, lay.ti, lay.ci, lay.vi, lay.si, lay.qi
    # The last cell keeps the line ending unless it is one the loop compares (time, channel, site): the value
    # is checked with it (`chars`), the quality compared to "good" with it, an unused cell (the export's
    # reason) ignores it. The odd row's path strips it.
    last = width - 1
    strip_eol = last in (ti, ci, si)
    chars = PLAIN_CHARS + ("\r\n" if last == vi else "")
    good = "good" + (layout.eol if last == qi else "")
    extra = si is not None or qi is not None
    values: dict[str, float] = {}  # value text -> float, plain numbers only (instrument readings repeat)
    parse, slow, seen = r.parse, r.row, values.get
    last_ts, t, lineno = "", 0.0, 1
    last_site, procs = default_site, by_site.get(default_site, {})
    while True:
        first, spanned = lineno, 0  # spanned: lines that continued a row (not rows of their own)
        for line in islice(src, CHUNK):
            lineno += 1
            if '"' in line:
                ahead, rows = r.quoted(line, lineno, src)
                lineno += ahead
                spanned += ahead - rows
                continue
            cells = line.rstrip("\r\n").split(",") if strip_eol else line.split(",")
            if len(cells) != width:
                slow(cells, lineno)
                continue
            if extra:  # a quality or site column
                if qi is not None and cells[qi] != good:
                    slow(cells, lineno)
                    continue
                if si is not None and cells[si] != last_site:
                    last_site = cells[si]
                    procs = by_site.get(last_site, {})
            ts = cells[ti]
            if ts != last_ts:
                try:
                    t = parse(ts)
                except ValueError:
                    slow(cells, lineno)
                    continue
                if t > r.limit:
                    slow(cells, lineno)
                    continue
                if t > r.frontier:
                    r.frontier, r.limit = t, min(t + JUMP, r.horizon)
                last_ts = ts
            v = cells[vi]
            x = seen(v)
            if x is None:  # a value text not met lately: the number rule, then remember it
                try:
                    x = float(v)
                except ValueError:
                    slow(cells, lineno)
                    continue
                if v.strip(chars):
                    slow(cells, lineno)
                    continue
                if len(values) >= VALUES_MAX:
                    values.clear()
                values[v] = x
            try:
                p = procs[cells[ci]]
            except KeyError:
                slow(cells, lineno)
                continue
            if t < p.last:  # out of order, or its channel has rows held (see _Reader.plausible)
                slow(cells, lineno)
                continue
            if t < p.until and t - p.last <= p.gap and p.lo <= x <= p.hi:
                p.last = t
                p.gv = x
                acc = p.acc
                if acc is not None:
                    acc.add_quiet(x)
                continue
            p.slow_good(t, x)
        n = lineno - first - spanned
        if lineno - first < CHUNK:
            r.release_all()
            yield n
            return
        yield n
