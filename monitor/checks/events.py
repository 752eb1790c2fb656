"""Episode transitions: what the check engine emits, the episode store keeps, and `pretreat replay` prints.

An exceedance *episode* is a pair of transitions on one rule and channel: ``start`` at the sample that made
the rule fire, ``end`` at the sample that cleared it (an episode still open has no ``end`` yet). Both carry
the reading at that sample, the threshold in force and the citation an enforcement notice quotes; the ``end``
also carries the episode's ``peak``. Times are sample times, never a wall clock, so live and replayed runs
agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

START = "start"
END = "end"


@dataclass(frozen=True, slots=True)
class EpisodeEvent:
    """One transition of one rule on one channel.

    ``time``: epoch seconds UTC of the sample that caused it. ``value``: that sample's reading in the
    channel's unit (None for data-quality starts, which are caused by bad samples). ``limit``: the threshold
    in force, in the channel's unit, or seconds for duration rules (for a slug: multiplier × the frozen
    baseline).
    ``peak`` (``end`` only): the extreme of the compared quantity over the episode: the highest (or, for low
    limits, lowest) reading; for a sampler temperature the reading furthest from the set point; for duration
    rules the duration in seconds (the excursion's length, the month's total, the time without a sample).
    ``end_reason`` (``end`` only): ``cleared`` (a reading back within limits, a new sample, a good reading),
    ``gap`` (the last reading before a gap in the data: `monitor.checks.coverage`) or ``month_end``.
    ``measured`` / ``unmeasured`` (``end`` only): seconds of the episode's span (end time − start time) covered
    by readings no further apart than the channel's ``max_gap``, and the rest. ``maintenance`` (``end`` only): seconds
    of the span the instrument reported itself in service or calibration (`monitor.checks.coverage`): neither
    measured nor unmeasured; measured + unmeasured + maintenance is the span.
    ``censored``: the reading that caused this transition was above the instrument's span and judged as its top
    (``over_range``): the true value was at least that. (A peak equal to the span's top in an episode whose
    start was censored is likewise a lower bound.)
    ``confirmed`` (``start`` of a duration rule only: slug, single pH excursion, sampler interval): the moment
    the duration was exceeded, when the live alarm fires; ``time`` is then the onset, the first reading of the
    run, so an episode spans what the discharge did, not what the rule had to wait for.
    """

    time: float
    site: str
    channel: str
    rule: str
    event: str  # START or END
    value: float | None
    limit: float | None
    citation: str
    peak: float | None = None
    end_reason: str | None = None
    measured: float | None = None
    unmeasured: float | None = None
    censored: bool = False
    confirmed: float | None = None  # start of a duration rule: when the duration was exceeded (time = onset)
    maintenance: float | None = None  # end: s of the span the instrument was in service/calibration (None: 0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "time": iso_utc(self.time),
            "site": self.site,
            "channel": self.channel,
            "rule": self.rule,
            "event": self.event,
            "value": self.value,
            "limit": self.limit,
            "citation": self.citation,
        }
        if self.event == END:
            out["peak"] = self.peak
            out["end_reason"] = self.end_reason
            out["measured_seconds"] = self.measured
            out["unmeasured_seconds"] = self.unmeasured
            if self.maintenance:  # only an instrument with a service/calibration status reports any
                out["maintenance_seconds"] = self.maintenance
        if self.censored:
            out["censored"] = True
        if self.confirmed is not None:
            out["confirmed"] = iso_utc(self.confirmed)
        return out

    def to_json(self) -> str:
        """One JSON Lines record; keys in the documented order, UTF-8 text (citations carry '§')."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeEvent:
        return cls(
            time=parse_iso(d["time"]),
            site=d["site"],
            channel=d["channel"],
            rule=d["rule"],
            event=d["event"],
            value=d["value"],
            limit=d["limit"],
            citation=d["citation"],
            peak=d.get("peak"),
            end_reason=d.get("end_reason"),
            measured=d.get("measured_seconds"),
            unmeasured=d.get("unmeasured_seconds"),
            censored=bool(d.get("censored", False)),
            confirmed=parse_iso(d["confirmed"]) if d.get("confirmed") else None,
            maintenance=d.get("maintenance_seconds"),
        )


def iso_utc(t: float) -> str:
    """ISO 8601 UTC with 'Z'; milliseconds only when the time has a fraction (as `pretreat readings`
    writes)."""
    ms_total = round(t * 1000)
    secs, ms = divmod(ms_total, 1000)
    text = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{ms:03d}Z" if ms else f"{text}Z"


def parse_iso(text: str) -> float:
    """Epoch seconds of an ISO 8601 time with an offset or 'Z' (naive times are refused: ambiguous)."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError(f"time without offset: {text!r}")
    return dt.timestamp()
