"""The readings chart of a notice: the channel's readings from an hour before the onset to an hour after the
end, the limit in force (dashed), the episode (shaded) and bad-quality readings (ticks on the time axis, since
they carry no number). Times on the axis are the site's local time, labelled with the zone. matplotlib's object
API only (`monitor.reports.charts` says why)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from monitor.notices.facts import NoticeFacts
from monitor.reports.charts import INK, LIMIT
from monitor.reports.days import zone


def _x(t: float) -> float:
    """matplotlib's date number (days, UTC) of an epoch time; the axis formatter shows it in the site's zone."""
    return float(mdates.date2num(datetime.fromtimestamp(t, UTC)))


def draw(ax: Axes, f: NoticeFacts, *, fontsize: float = 7.5) -> None:
    tz = zone(f.tz_name)
    good = [(_x(r.time), r.value) for r in f.readings if r.value is not None]
    bad = [_x(r.time) for r in f.readings if r.value is None]
    if good:
        ax.plot([t for t, _ in good], [v for _, v in good], color=INK, linewidth=1.0, marker=".", markersize=2,
                label=f"{f.channel.id} readings")
    if bad:
        ax.plot(bad, [0.0] * len(bad), linestyle="none", marker="|", color="#777777", markersize=8,
                transform=ax.get_xaxis_transform(), label="bad-quality reading (no value)")
    # the limit the episode was judged against (a slug's depends on the day's baseline: the episode's own)
    limit = None if f.timed else f.episode.limit
    if limit is not None:
        ax.axhline(float(limit), color=LIMIT, linestyle="--", linewidth=1.0,
                   label=f"limit {f.binding.params.get('operator', '') if f.binding else ''} {float(limit):g}")
    e = f.episode
    end = e.end if e.end is not None else (f.readings[-1].time if f.readings else e.start)
    ax.axvspan(_x(e.start), _x(max(end, e.start + 1)),
               color=LIMIT, alpha=0.18, linewidth=0, label="episode")
    if f.confirmed is not None and f.confirmed != e.start:
        ax.axvline(_x(f.confirmed), color=LIMIT, linewidth=0.8, linestyle=":",
                   label="confirmed")
    locator = mdates.AutoDateLocator(tz=tz, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=tz, show_offset=False))
    onset = datetime.fromtimestamp(e.start, tz)
    ax.set_xlabel(f"local time from {onset:%Y-%m-%d} ({f.tz_name}, {onset:%Z})", fontsize=fontsize)
    ax.set_ylabel(f"{f.channel.id} ({f.channel.unit})", fontsize=fontsize)
    ax.set_title(f"{f.rule_label}: {f.channel.id} at {f.site.name or f.site.id}", fontsize=fontsize + 1,
                 loc="left", color=INK)
    ax.tick_params(labelsize=fontsize)
    ax.grid(True, color="#dddddd", linewidth=0.5)
    ax.set_facecolor("white")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    # under the axis, never over the readings
    ax.legend(fontsize=fontsize - 1, loc="upper left", bbox_to_anchor=(0.0, -0.3), frameon=False, ncol=5)


def png(f: NoticeFacts, *, width: float = 6.5, height: float = 2.6, dpi: int = 150) -> bytes:
    """The chart as PNG bytes (Markdown and Word drafts)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    draw(fig.add_subplot(), f)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
