"""Charts of every monitored channel (flow, pH, temperature, explosive vapour, the sampler's refrigerator) over
the report period, with limits and episodes marked (matplotlib).

Each chart shows, per local day, the range of readings (shaded min–max band) and the time-weighted mean
(line), from the per-day aggregates; the limits in force as dashed lines; and the days with exceedance
episodes on that channel shaded red. Drawing uses matplotlib's object API (``Figure``), never ``pyplot``: the
scheduler renders reports in worker threads, and pyplot's global state is not thread-safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from config.rule_catalogue import RuleName
from config.schema import ChannelKind
from monitor.reports.compliance import ComplianceReport
from monitor.reports.days import zone

_KINDS = ((ChannelKind.FLOW, "Flow"), (ChannelKind.PH, "pH"), (ChannelKind.TEMPERATURE, "Temperature"),
          (ChannelKind.LEL, "Explosive vapour"), (ChannelKind.SAMPLER_TEMPERATURE, "Sampler refrigerator"))
# Episodes of a reading against a limit are shaded; duration rules (a month's excursion total stays open to the
# month's end) would shade everything and say less than the pH accounting table does.
_SPAN_RULES = (RuleName.PH_LOW, RuleName.PH_HIGH, RuleName.TEMPERATURE_HIGH, RuleName.SLUG, RuleName.LEL_SINGLE,
               RuleName.LEL_SUCCESSIVE, RuleName.SAMPLER_TEMPERATURE)
_LIMIT_RULES = (RuleName.PH_LOW, RuleName.PH_HIGH, RuleName.TEMPERATURE_HIGH, RuleName.LEL_SINGLE,
                RuleName.LEL_SUCCESSIVE)
INK = "#1f3b5a"
BAND = "#9db4cc"
LIMIT = "#b03a2e"


@dataclass(frozen=True, slots=True)
class Series:
    title: str
    channel: str
    unit: str
    days: tuple[date, ...]
    low: tuple[float, ...]  # NaN where no reading
    high: tuple[float, ...]
    mean: tuple[float, ...]
    limits: tuple[tuple[float, str], ...]  # (value, label)
    episode_spans: tuple[tuple[datetime, datetime], ...]
    period: str = ""  # the period's label, printed under the axis (the ticks never name a month beyond it)


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def _limits(report: ComplianceReport, channel: str) -> tuple[tuple[float, str], ...]:
    out: list[tuple[float, str]] = []
    for b in report.site.checks:
        if b.channel != channel:
            continue
        if b.rule in _LIMIT_RULES:
            out.append((float(b.params["limit"]), f"{b.rule} {b.params['operator']} {float(b.params['limit']):g}"))
        elif b.rule == RuleName.SAMPLER_TEMPERATURE:
            out += [(float(b.params["low"]), f"band {float(b.params['low']):g}"),
                    (float(b.params["high"]), f"band {float(b.params['high']):g}")]
    return tuple(dict.fromkeys(out))


def series(report: ComplianceReport) -> list[Series]:
    """One series per monitored channel of a charted kind, in the order of `_KINDS` then the site file."""
    tz = zone(report.site.timezone)
    end_of_period = datetime.fromtimestamp(report.bounds()[1], tz)
    out: list[Series] = []
    for kind, title in _KINDS:
        for ch in (c for c in report.site.channels if c.kind is kind):
            days, low, high, mean = [], [], [], []
            for d in report.days:
                cd = next((c for c in d.channels if c.channel == ch.id), None)
                days.append(date.fromisoformat(d.day))
                low.append(_nan(cd.min if cd else None))
                high.append(_nan(cd.max if cd else None))
                mean.append(_nan(cd.mean if cd else None))
            spans = tuple((datetime.fromtimestamp(e.start, tz),
                           datetime.fromtimestamp(e.end, tz) if e.end is not None else end_of_period)
                          for e in (*report.exceedances, *report.monitoring_deviations)
                          if e.channel == ch.id and e.rule in _SPAN_RULES)
            out.append(Series(f"{title} ({ch.id}, {ch.unit})", ch.id, ch.unit, tuple(days), tuple(low),
                              tuple(high), tuple(mean), _limits(report, ch.id), spans, report.period.label))
    return out


def draw(ax: Axes, s: Series, *, fontsize: float = 7.0) -> None:
    """Draw one series into ``ax`` (days on x at local noon, so a day's band is centred on its date)."""
    # matplotlib date numbers (days), so the typed API takes floats
    x = [float(mdates.date2num(datetime(d.year, d.month, d.day, 12))) for d in s.days]
    ax.fill_between(x, s.low, s.high, color=BAND, alpha=0.6, linewidth=0, label="daily min–max", step=None)
    ax.plot(x, s.mean, color=INK, linewidth=1.0, label="daily mean")
    for value, label in s.limits:
        ax.axhline(value, color=LIMIT, linestyle="--", linewidth=0.9)
        ax.annotate(label, xy=(1.0, value), xycoords=("axes fraction", "data"), fontsize=fontsize - 1,
                    color=LIMIT, ha="right", va="bottom")
    visible = max(1.0, len(x)) / 300.0  # days: the narrowest span that still shows at print size
    for a, b in s.episode_spans:
        a_n = float(mdates.date2num(a.replace(tzinfo=None)))
        b_n = float(mdates.date2num(b.replace(tzinfo=None)))
        ax.axvspan(a_n, max(b_n, a_n + visible), color=LIMIT, alpha=0.25, linewidth=0)
    ax.set_title(s.title, fontsize=fontsize + 1, loc="left", color=INK)
    ax.tick_params(labelsize=fontsize)
    ax.grid(True, color="#dddddd", linewidth=0.5)
    if x:
        # local midnight to just before the next: a tick at the midnight after the last day would name the next
        # month ("2026-Dec" on a November report)
        ax.set_xlim(x[0] - 0.5, x[-1] + 0.499)
    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, show_offset=False))
    ax.set_ylabel(s.unit, fontsize=fontsize)
    if s.period:
        ax.set_xlabel(f"local days, {s.period}", fontsize=fontsize)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles: list[Any] = []
    if s.episode_spans:
        from matplotlib.patches import Patch

        handles = [Patch(color=LIMIT, alpha=0.18, label="exceedance episode")]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, fontsize=fontsize - 1, loc="upper left",
              frameon=False, ncol=3)


def standalone(s: Series, *, width: float = 7.5, height: float = 2.2) -> Figure:
    """A figure holding one chart (HTML export)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    draw(fig.add_subplot(), s)
    return fig
