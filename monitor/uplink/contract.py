"""The uplink contract (SPARKPLUG.md, README "Uplink"): topics, metric and property names, quality codes.

One module, importable without the rest of the daemon, so the hub (`pretreat hub`) and its load generator
speak exactly what the edge publishes. Sparkplug B v1.0 namespace::

    spBv1.0/<group>/NBIRTH|NDEATH|NCMD/<node>          the edge daemon (one Sparkplug edge node)
    spBv1.0/<group>/DBIRTH|DDATA/<node>/<site>         one Sparkplug device per site
    pretreat/v1/<group>/<node>/events                  episodes, alarm transitions, seals (JSON, QoS 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NAMESPACE: Final = "spBv1.0"
EVENTS_PREFIX: Final = "pretreat/v1"

BDSEQ: Final = "bdSeq"  # NBIRTH/NDEATH metric: the MQTT session's birth/death sequence (0..255)
REBIRTH: Final = "Node Control/Rebirth"  # NBIRTH metric (false); NCMD with true asks for NBIRTH + DBIRTHs

# DBIRTH metric properties
ENG_UNIT: Final = "engUnit"  # String: the channel's engineering unit
KIND: Final = "kind"  # String: the channel kind (ph, flow, lel, temperature, ...)
ENG_LOW: Final = "engLow"  # Double: valid_min (the instrument's span, inclusive), where configured
ENG_HIGH: Final = "engHigh"  # Double: valid_max

# DDATA metric properties
QUALITY: Final = "Quality"  # Int32, OPC/Ignition convention
PRETREAT_QUALITY: Final = "pretreat_quality"  # String: our quality word (monitor.sample.Quality)
REASON: Final = "reason"  # String: why a sample is bad (bad samples only)
RSEQ: Final = "rseq"  # UInt64: the historian's row seq; hub idempotence key (site, channel, time, rseq)

QUALITY_GOOD: Final = 192
QUALITY_BAD: Final = 0
QUALITY_STALE: Final = 500

EVENT_TYPES: Final = ("episode", "alarm", "seal")  # "type" of a JSON event; "seq" increases per type per node


def node_topic(group: str, message: str, node: str) -> str:
    """``spBv1.0/<group>/<NBIRTH|NDEATH|NCMD|NDATA>/<node>``."""
    return f"{NAMESPACE}/{group}/{message}/{node}"


def device_topic(group: str, message: str, node: str, device: str) -> str:
    """``spBv1.0/<group>/<DBIRTH|DDATA|DDEATH|DCMD>/<node>/<device>`` (device: the site id)."""
    return f"{NAMESPACE}/{group}/{message}/{node}/{device}"


def events_topic(group: str, node: str) -> str:
    return f"{EVENTS_PREFIX}/{group}/{node}/events"


def subscriptions(group: str, share: str | None = None) -> tuple[str, str]:
    """The filters that take everything the edges of ``group`` publish: the Sparkplug namespace and every
    node's events topic; with ``share``, as an MQTT 5 shared subscription ``$share/<share>/…`` (the hubs)."""
    prefix = f"$share/{share}/" if share else ""
    return f"{prefix}{NAMESPACE}/{group}/#", f"{prefix}{events_topic(group, '+')}"


class TopicError(ValueError):
    """A topic outside the uplink's namespace for the group (the message names the topic and the group)."""


@dataclass(frozen=True)
class Topic:
    """A parsed uplink topic: ``kind`` is the Sparkplug message type (NBIRTH, NDEATH, DBIRTH, DDATA, DDEATH,
    NDATA, NCMD, DCMD, STATE) or "events" (the JSON topic); ``device`` is the site of a device message."""

    kind: str
    node: str
    device: str | None = None


def parse_topic(topic: str, group: str) -> Topic:
    """The inverse of `node_topic`, `device_topic` and `events_topic` for ``group``; `TopicError` otherwise."""
    parts = topic.split("/")
    if len(parts) == 5 and "/".join(parts[:2]) == EVENTS_PREFIX and parts[2] == group and parts[4] == "events":
        return Topic("events", parts[3])
    if len(parts) in (4, 5) and parts[0] == NAMESPACE and parts[1] == group and all(parts[2:]):
        return Topic(parts[2], parts[3], parts[4] if len(parts) == 5 else None)
    raise TopicError(f"topic {topic!r} is not in the uplink namespace of group {group!r}")


def quality_code(quality: str) -> int:
    """The OPC quality of one of our quality words: good 192, stale 500, every other (bad) 0."""
    if quality == "good":
        return QUALITY_GOOD
    if quality == "stale":
        return QUALITY_STALE
    return QUALITY_BAD


class UplinkStartupError(Exception):
    """The uplink cannot start: its queue file is in use or unusable, the password file unreadable. Here, not
    in `monitor.uplink.publisher`, so the daemon can catch it without importing the uplink (and protobuf,
    ~9 MB of RSS) at a site that has no ``[uplink]``."""
