"""How a log line tells an operator a reading, a limit, a duration and a time.

The daemon's log is read by treatment plant operators at the site, not only by log shippers: a line says
``4.82 pH`` (the channel's resolution: a pH meter with ``scale = 0.01`` reads in hundredths) rather than
``4.8199999``, ``no reading`` rather than ``None``, ``2 min 5 s`` rather than ``125.0521s``, and times in
the site's local time with its zone (``2026-12-01 16:04:05 EST``), which says on which side of a daylight
saving change a time falls. Only what is printed is rounded: the record, the structured fields of
``--log-format json`` and every report keep the values as measured.

`use_site_config` is called once the site file is loaded (`monitor.app.Daemon`): the log is a process-wide
thing, so the zone and the channels' resolutions are process-wide too. Before that, times are in the
machine's local zone and readings are shown to four significant digits.

The rule catalogue and the episode constants are imported inside the functions that use them, not with the
module: every `pretreat` command imports this module (through its logging), and a command's start should not
pay for the configuration's schema it may never load (~0.1 s of CPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from monitor.number_text import NO_READING, duration, number

if TYPE_CHECKING:
    from alarms.model import Transition
    from config.schema import SiteConfig
    from monitor.checks.events import EpisodeEvent



@dataclass(slots=True)
class _SiteLogSettings:
    zone: tzinfo | None = None  # None: the machine's local zone
    channels: dict[tuple[str, str], tuple[int | None, str]] = field(default_factory=dict)  # decimals, unit


SETTINGS = _SiteLogSettings()


def use_site_config(config: SiteConfig) -> None:
    """Log in the sites' time zone (UTC when the sites of one file are in different zones: one log, one
    clock) and round each channel's readings to its resolution (`config.schema.Channel.decimals`)."""
    zones = {s.timezone for s in config.sites}
    SETTINGS.zone = ZoneInfo(zones.pop()) if len(zones) == 1 else ZoneInfo("UTC")
    SETTINGS.channels = {(ch.site, ch.id): (ch.decimals, ch.unit) for ch in config.channels}


def local_time(t: float, zone: tzinfo | None = None) -> str:
    """``2026-12-01 16:04:05 EST``: epoch seconds in ``zone`` (default: the sites' zone), whole seconds."""
    zone = zone if zone is not None else SETTINGS.zone
    moment = datetime.fromtimestamp(t, zone) if zone is not None else datetime.fromtimestamp(t).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def reading(value: float | None, *, site: str, channel: str) -> str:
    """A reading of a configured channel at its resolution with its unit (``4.82 pH``), or ``no reading``."""
    decimals, unit = SETTINGS.channels.get((site, channel), (None, ""))
    if value is None:
        return NO_READING
    text = number(value, decimals)
    return f"{text} {unit}" if unit else text


def limit(value: float | None, *, site: str, channel: str, rule: str) -> str:
    """A rule's limit: a duration for the duration rules, else a number in the channel's unit, at the
    channel's resolution (``5.00 pH``) unless that would round it (a limit is never shown other than it is)."""
    if value is None:
        return "none"
    from config.rule_catalogue import DURATION_RULES, counted_limit  # imported here: see the module's docstring

    if rule in DURATION_RULES:
        return duration(value)
    counted = counted_limit(rule, value)  # a tamper sign's count of readings is no limit in the channel's unit
    if counted is not None:
        return counted
    decimals, unit = SETTINGS.channels.get((site, channel), (None, ""))
    text = number(value, decimals) if decimals is not None and round(value, decimals) == value else number(value)
    return f"{text} {unit}" if unit else text


# Notices whose start carries no value although readings came in: "no reading" would say the meter was silent.
_NO_VALUE = {"slug_no_baseline": "no baseline yet"}


def episode_message(e: EpisodeEvent) -> str:
    """``episode started: acme-plating ph ph_low at 2026-12-01 16:04:03 EST, 4.82 pH (limit 5.00 pH;
    Town of Southeast § 112-5A(1)(c))``; an end adds the peak. A data-quality rule (``stale``) has no limit:
    its citation says what it is."""
    from config.rule_catalogue import DURATION_RULES
    from monitor.checks.events import START

    what = "started" if e.event == START else "ended"
    bound = "" if e.limit is None else f"limit {limit(e.limit, site=e.site, channel=e.channel, rule=e.rule)}; "
    value = _NO_VALUE.get(e.rule) if e.value is None else None
    text = (f"episode {what}: {e.site} {e.channel} {e.rule} at {local_time(e.time)}, "
            f"{value or reading(e.value, site=e.site, channel=e.channel)} ({bound}{e.citation})")
    if e.confirmed is not None:  # a duration rule: started at its onset, confirmed (alarmed) now
        text += f", confirmed at {local_time(e.confirmed)}"
    if e.event != START and e.peak is not None:
        peak = duration(e.peak) if e.rule in DURATION_RULES else reading(e.peak, site=e.site, channel=e.channel)
        text += f", peak {peak}"
    return text


def transition_message(t: Transition, words: str) -> str:
    """``ALARM [high] acme-plating ph ph_low: 4.82 pH (limit 5.00 pH)``, with who acted and why when an
    operator did; ``words`` says what happened (`alarms.notifiers.base.KIND_WORDS`)."""
    site, channel, rule = t.alarm_id.split("/")
    what = reading(t.value, site=site, channel=channel)
    from config.calibration import CALIBRATION_OVERDUE
    from config.obligations import OBLIGATION_OVERDUE

    if rule == CALIBRATION_OVERDUE and t.value is None:  # no reading: the status is what to say
        what = t.citation.split("; ", 1)[-1]
    elif t.value is None and rule in _NO_VALUE:
        what = _NO_VALUE[rule]
    elif rule == OBLIGATION_OVERDUE:  # no instrument: the obligation, its due time and citation
        what = t.citation
    text = f"{words} [{t.priority.value}] {site} {channel} {rule}: {what}"
    if t.limit is not None:
        text += f" (limit {limit(t.limit, site=site, channel=channel, rule=rule)})"
    if t.who != "system":
        text += f", by {t.who}"
    return text + (f": {spoken(t.why) if t.who == 'system' else t.why}" if t.why else "")  # notes: as typed


# The alarm machine's explanations are journaled as written ("condition started at 1796159830.637",
# "still unacknowledged after 900 s"); the log says the same for people.
_EPOCH = re.compile(r"(?<![\d.])(1\d{9}(?:\.\d+)?)(?![\d.])")
_SECONDS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?) s\b")


def spoken(text: str) -> str:
    """``text`` with epoch seconds as local times and ``N s`` as durations (`local_time`, `duration`)."""
    text = _EPOCH.sub(lambda m: local_time(float(m.group(1))), text)
    return _SECONDS.sub(lambda m: duration(float(m.group(1))), text)


def episode_fields(e: EpisodeEvent) -> dict[str, Any]:
    """An episode event's structured log fields (``--log-format json``), values as measured; ``time`` is
    the log record's own, so the sample's is ``event_time``."""
    fields = e.to_dict()
    fields["event_time"] = fields.pop("time")
    return fields
