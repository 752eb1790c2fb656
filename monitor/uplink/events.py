"""The JSON events of the uplink's events topic (`monitor.uplink.contract.events_topic`): episodes, alarm
transitions, journal seals and revisions of the episode record, one object per message.

Why JSON beside Sparkplug and not Sparkplug metrics: an episode event or an alarm transition is a record
with a dozen named fields (rule, citation, limit, peak, measured seconds, who, why), not a value of a tag
over time; as Sparkplug metrics it would be a Template or a dozen loose metrics a SCADA would show as
tags, and a seal is not a measurement at all. Each object carries ``type`` and ``seq`` (strictly increasing
per type per node: the episode store's row id, the journal seq of an alarm transition or of the journal
head a sealing pass reached, the episode store's revision row id), so the hub keys them by (node, type, seq)
and a redelivery is a repeat.

A revision (a late reading made the engine correct episodes it had announced, `monitor.checks.revisions`)
names the episode rows it changed by their row ids, the ``seq`` of the episode events the hub already has:
``withdrawn_rows`` (those rows no longer stand) and ``updated`` (rows already sent that now hold other
figures, or stand again: each the row's whole `episode_event`). The transitions it found are new rows, sent
as episode events of their own. ``withdrawn`` and ``added`` are the transitions as the edge's
``episode_revisions`` keeps them (``EpisodeEvent.to_dict``), so the hub shows the same revision history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alarms.model import Transition
from monitor.checks.events import EpisodeEvent
from monitor.stores.episodes import AppliedRevision


def episode_event(e: EpisodeEvent, row_id: int) -> dict[str, Any]:
    return {"type": "episode", "seq": row_id, "site": e.site, "channel": e.channel, "rule": e.rule,
            "event": e.event, "time": e.time, "value": e.value, "limit": e.limit, "citation": e.citation,
            "peak": e.peak, "end_reason": e.end_reason, "measured_seconds": e.measured,
            "unmeasured_seconds": e.unmeasured, "maintenance_seconds": e.maintenance, "censored": e.censored,
            "confirmed": e.confirmed}


def revision_event(a: AppliedRevision) -> dict[str, Any]:
    """A revision as `EpisodeStore.revise` applied it (see the module doc); ``seq``: its revision row id."""
    r = a.revision
    return {"type": "revision", "seq": a.row_id, "site": r.site, "channel": r.channel, "rule": r.rule,
            "reason": r.reason, "late": r.late, "recorded": a.recorded, "changes": r.changes(),
            "withdrawn": [e.to_dict() for e in r.withdrawn], "added": [e.to_dict() for e in r.added],
            "withdrawn_rows": list(a.withdrawn), "updated": [episode_event(e, i) for e, i in a.updated]}


def revision_events(applied: Sequence[AppliedRevision]) -> list[dict[str, Any]]:
    """What `EpisodeStore.revise` changed, as the uplink sends it: the new rows as episode events, then each
    revision (which may name them)."""
    return [*(episode_event(e, i) for a in applied for e, i in a.added), *(revision_event(a) for a in applied)]


def alarm_event(t: Transition) -> dict[str, Any] | None:
    """None for a transition not journaled (no seq): it has no key the hub could deduplicate by."""
    if t.seq is None:
        return None
    site, channel, rule = t.alarm_id.split("/")
    return {"type": "alarm", "seq": t.seq, "site": site, "channel": channel, "rule": rule, "alarm": t.alarm_id,
            "kind": t.kind.value, "from": t.from_state.value, "state": t.to_state.value,
            "priority": t.priority.value, "time": t.time, "who": t.who, "why": t.why, "value": t.value,
            "limit": t.limit, "citation": t.citation}


def seal_event(head: tuple[int, str], time: float, sites: list[str]) -> dict[str, Any]:
    """The journal head after a sealing pass (the same head the anchor file and ``<prefix>/journal/head``
    carry): a hub that keeps them can tell a cut-off journal later."""
    seq, digest = head
    return {"type": "seal", "seq": seq, "site": sites[0] if len(sites) == 1 else None, "sites": sites,
            "hash": digest, "time": time}
