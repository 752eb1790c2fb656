"""What an exceedance episode obliges the industry to do, with the deadline the law states, cited.

Each jurisdiction profile lists its obligations under ``[obligations.<key>]`` (``config/jurisdictions/*.toml``),
each with the action, to whom, whether it is a written report, the deadline and the section with its verbatim
quote (checked against the seed ordinance by the tests, as the limits are). The federal 40 CFR 403.12(g)(2)
(``federal.toml``) binds every industrial user whatever the ordinance says, so it applies to the episodes of
an industry's own control manhole (``kind = "industry"``: its self-monitoring), not to a plant's influent.

Only what the text states is a deadline:

- ``within_hours = N`` (``from = "awareness"``): N hours after the episode was confirmed (when the daemon
  raised it: "becoming aware").
- ``within_days = N``: N calendar days in the site's time zone (a local-midnight-safe addition, so a DST change
  in between neither adds nor loses an hour), counted ``from`` the episode's onset (``occurrence``), its
  confirmation (``awareness``) or, for "within N days of the date of the occurrence", to the end of the N-th
  local day after the onset's date (``date_of_occurrence``).
- neither: the text says "immediately" and states no number; the obligation is due at the episode's
  confirmation (``due_text = "immediately"``), and no number of hours is invented for it.

A jurisdiction whose ordinance states none (Pawling, Mineola, the town-wide Vestal article) gets none; its
``rules`` output says so. Only discharge-limit episodes oblige: data-quality episodes (an instrument fault)
and the pH excursions 40 CFR 401.17 permits are not violations.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from config.limits import FEDERAL, JURISDICTIONS_DIR
from config.rules import is_data_quality
from config.schema import Site

FROM = ("occurrence", "awareness", "date_of_occurrence")
OBLIGATION_CHANNEL = "obligations"  # the overdue alarm's id: <site>/obligations/obligation_overdue (no instrument)
OBLIGATION_OVERDUE = "obligation_overdue"
IMMEDIATELY = "immediately (no period stated)"


def is_immediate(due_text: str) -> bool:
    """An "immediately" duty states no period: its due time is the confirmation itself, so no judgement of
    lateness is made against it (a zero-second deadline would call every call "late"); it is *outstanding*
    until a fulfilment is recorded. Files from before this wording say just "immediately"."""
    return due_text.startswith("immediately")


_KEYS = {"action", "to", "written", "within_hours", "within_days", "from", "cite", "line", "quote"}


class ObligationProfileError(ValueError):
    """A profile's ``[obligations]`` table is malformed (names the file and key)."""


@dataclass(frozen=True, slots=True)
class ObligationRule:
    """One obligation a profile states. ``within_hours``/``within_days`` None for both: "immediately"."""

    key: str
    action: str
    to: str
    written: bool
    citation: str
    quote: str
    source: str  # the profile it comes from ("southeast", "federal", ...)
    line: int = 0  # seed line (provenance; none for the CFR)
    within_hours: float | None = None
    within_days: int | None = None
    counted_from: str = "awareness"

    @property
    def due_text(self) -> str:
        """The deadline in the law's own terms, for tables and letters."""
        if self.within_hours is not None:
            return f"within {self.within_hours:g} hours of becoming aware"
        if self.within_days is not None:
            return {"occurrence": f"within {self.within_days} days of the occurrence",
                    "awareness": f"within {self.within_days} days after becoming aware",
                    "date_of_occurrence": f"within {self.within_days} days of the date of the occurrence",
                    }[self.counted_from]
        return IMMEDIATELY

    def due(self, *, onset: float, aware: float, timezone: str) -> float:
        """The deadline (epoch s UTC) of this obligation for an episode that started at ``onset`` and was
        confirmed at ``aware``; "immediately" is due at ``aware``. Fulfilled at or before it is on time."""
        if self.within_hours is not None:
            return aware + self.within_hours * 3600.0
        if self.within_days is None:
            return aware
        tz = ZoneInfo(timezone)
        if self.counted_from == "date_of_occurrence":
            day = datetime.fromtimestamp(onset, tz).date() + timedelta(days=self.within_days + 1)
            return datetime.combine(day, time(0), tz).timestamp()  # the end of the N-th day after the date
        base = datetime.fromtimestamp(onset if self.counted_from == "occurrence" else aware, tz)
        local = datetime.combine(base.date() + timedelta(days=self.within_days), base.time(), tz)
        return local.timestamp()


def _rule(key: str, raw: Any, source: str) -> ObligationRule:
    where = f"{source}.toml obligations.{key}"
    if not isinstance(raw, dict):
        raise ObligationProfileError(f"{where}: expected a table")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ObligationProfileError(f"{where}: unknown key(s) {sorted(unknown)}, expected {sorted(_KEYS)}")
    for need in ("action", "to", "cite", "quote"):
        if not isinstance(raw.get(need), str) or not raw[need].strip():
            raise ObligationProfileError(f"{where}: {need} is required (text)")
    hours, days = raw.get("within_hours"), raw.get("within_days")
    counted = raw.get("from", "awareness")
    if hours is not None and days is not None:
        raise ObligationProfileError(f"{where}: within_hours or within_days, not both")
    if (hours is not None and not (isinstance(hours, int | float) and hours > 0)) or (
            days is not None and not (isinstance(days, int) and days > 0)) or counted not in FROM:
        raise ObligationProfileError(f"{where}: a positive within_hours/within_days and from in {FROM}")
    return ObligationRule(key=key, action=raw["action"], to=raw["to"], written=bool(raw.get("written", False)),
                          citation=raw["cite"], quote=raw["quote"], source=source, line=int(raw.get("line", 0)),
                          within_hours=None if hours is None else float(hours), within_days=days,
                          counted_from=counted)


@functools.cache
def profile_obligations(key: str) -> tuple[ObligationRule, ...]:
    """The obligations a profile states itself (with its parent's first): () when it states none."""
    with (JURISDICTIONS_DIR / f"{key}.toml").open("rb") as fh:
        data = tomllib.load(fh)
    parent = data.get("parent")
    inherited = profile_obligations(parent) if isinstance(parent, str) and parent and parent != key else ()
    table = data.get("obligations", {})
    if not isinstance(table, dict):
        raise ObligationProfileError(f"{key}.toml obligations: expected a table")
    return (*inherited, *(_rule(k, v, key) for k, v in table.items()))


def site_obligations(*, jurisdiction: str, kind: str = "industry") -> tuple[ObligationRule, ...]:
    """What an episode at a site of this jurisdiction and kind obliges: the ordinance's, then the CFR's (for an
    industry's own manhole). A plant's influent monitoring obliges no industry notice."""
    if kind != "industry" or not jurisdiction:
        return ()
    return (*profile_obligations(jurisdiction), *profile_obligations(FEDERAL))


def silence_note(jurisdiction: str) -> str:
    """What `pretreat rules` and `pretreat obligations` print where the ordinance states no obligation."""
    if not jurisdiction or profile_obligations(jurisdiction):
        return ""
    with (JURISDICTIONS_DIR / f"{jurisdiction}.toml").open("rb") as fh:
        name = tomllib.load(fh).get("name", jurisdiction)
    return (f"{name}: the ordinance states no notification or report obligation for a violation (none is "
            "assumed); only the federal 40 CFR 403.12(g)(2) obligations apply")


def is_monitoring_requirement(rule: str) -> bool:
    """A sampler requirement (refrigeration band, sampling interval): a deviation of the monitoring equipment
    from a permit or ordinance condition, not a discharge violation. It opens no obligation, and reports count
    it in its own category (`monitor.reports.verdict`)."""
    return rule.startswith("sampler_")


def obliges(site: Site, channel: str, rule: str) -> bool:
    """Whether an episode of ``rule`` on ``channel`` is a violation that starts the site's obligations: a
    discharge limit, neither an instrument fault, nor a sampler requirement (no discharge), nor a pH excursion
    the permit's adoption of 40 CFR 401.17 permits."""
    if is_data_quality(rule) or is_monitoring_requirement(rule):
        return False
    return not any(b.channel == channel and b.rule == rule and b.params.get("permitted") for b in site.checks)


def obligations_of(site: Site) -> tuple[ObligationRule, ...]:
    return site_obligations(jurisdiction=site.jurisdiction, kind=site.kind)
