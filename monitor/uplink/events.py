"""The JSON events of the uplink's events topic (`monitor.uplink.contract.events_topic`): episodes, alarm
transitions and journal seals, one object per message.

Why JSON beside Sparkplug and not Sparkplug metrics: an episode event or an alarm transition is a record
with a dozen named fields (rule, citation, limit, peak, measured seconds, who, why), not a value of a tag
over time; as Sparkplug metrics it would be a Template or a dozen loose metrics a SCADA would show as
tags, and a seal is not a measurement at all. Each object carries ``type`` and ``seq`` (strictly increasing
per type per node: the episode store's row id, the journal seq of an alarm transition or of the journal
head a sealing pass reached), so the hub keys them by (node, type, seq) and a redelivery is a repeat.
"""

from __future__ import annotations

from typing import Any

from alarms.model import Transition
from monitor.checks.events import EpisodeEvent


def episode_event(e: EpisodeEvent, row_id: int) -> dict[str, Any]:
    return {"type": "episode", "seq": row_id, "site": e.site, "channel": e.channel, "rule": e.rule,
            "event": e.event, "time": e.time, "value": e.value, "limit": e.limit, "citation": e.citation,
            "peak": e.peak, "end_reason": e.end_reason, "measured_seconds": e.measured,
            "unmeasured_seconds": e.unmeasured, "censored": e.censored, "confirmed": e.confirmed}


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
