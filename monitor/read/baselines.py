"""The slug baseline in force, as the console's site page shows it: the running daemon's own, read from its
health snapshot (``slug_baselines``, written from its live check engine: `monitor.slug_history.BaselineSection`),
never rebuilt here by replaying 62 days of readings per request.

Each slug rule of the site gets one entry, shown on the card of its first input channel (a mass loading's
``flow*cod`` on the flow's): the citation, the reading in force where the words are ambiguous, and the
baseline with its limit in the words `pretreat rules` prints (`monitor.slug_history.words`), so the page and the
command say the same of the same record. Where no number can honestly be shown the entry says why instead:
the console reads a hub's PostgreSQL database (the baselines live in each site's daemon), there is no
snapshot (the daemon has not run with this site file) or it holds no baseline for the rule (a daemon running
another site file or an older version). A snapshot of a daemon that is not running is shown with that said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.schema import Site, SiteConfig
from monitor.health import health_path
from monitor.read.status import default_max_age, liveness, read_snapshot
from monitor.slug_history import batch_words, unit_of, words

HUB = ("not shown: the console reads the hub's PostgreSQL database, which holds readings, not the daemons' rule "
       "state; the baseline in force is on the site's own console and in `pretreat rules` there")
NO_SNAPSHOT = "not shown: no health snapshot of the daemon (it has not run with this site file), so no baseline"
NOT_IN_SNAPSHOT = ("not shown: the daemon's health snapshot holds no baseline for this rule (the daemon runs another "
                   "site file, or a version that does not publish it)")


def daemon_snapshot(db: Path | str) -> tuple[dict[str, Any] | None, str]:
    """The daemon's health snapshot beside the historian ``db``, or (None, why not): a PostgreSQL URL (the hub's
    database) has none."""
    if not isinstance(db, Path):
        return None, HUB
    try:
        snap = read_snapshot(health_path(db))
    except (OSError, ValueError) as exc:
        return None, f"not shown: the daemon's health snapshot cannot be read ({exc})"
    return (snap, "") if snap is not None else (None, NO_SNAPSHOT)


def site_baselines(config: SiteConfig, site: Site, snapshot: dict[str, Any] | None, why: str, *,
                   now: float) -> list[dict[str, Any]]:
    """One entry per slug rule of ``site``: ``channel`` (the rule's), ``card`` (the channel whose card shows it),
    ``citation``, ``reading``, ``unit``; ``text`` (the baseline and limit in `pretreat rules`' words) and
    ``state`` (the snapshot's numbers) or ``unavailable`` (why none is shown); ``as_of`` (the snapshot's time)
    and ``stale`` (why the daemon is not running, or ""); ``batch``, what a trailing baseline means for a
    batch discharger ("" for a fixed normal-sewage strength)."""
    published = (snapshot or {}).get("slug_baselines") or {}
    running, stale = liveness(snapshot, now=now, max_age=default_max_age(config)) if snapshot else (False, "")
    out = []
    for b in site.checks:
        if b.rule != "slug":
            continue
        unit = unit_of(b, site)
        state = published.get(f"{site.id}/{b.channel}") if snapshot is not None else None
        entry: dict[str, Any] = {
            "channel": b.channel, "card": b.inputs[0], "citation": b.citation, "reading": b.params.get("reading", ""),
            "unit": unit, "as_of": snapshot.get("time") if snapshot else None, "stale": "" if running else stale,
            "state": state, "text": None, "unavailable": None,
            "batch": "" if b.params.get("baseline") is not None else batch_words(b, site)}
        if isinstance(state, dict):
            entry["text"] = words(b, unit, state)
        else:
            entry["unavailable"] = why or NOT_IN_SNAPSHOT
        out.append(entry)
    return out
