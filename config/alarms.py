"""Alarm settings and notification routing of a site file: who is told what, and how each rule's alarm behaves.

The channels themselves are the top-level ``[notify]`` table (`config.notify`). Each site then says who gets
what (the Pawling ordinance wants "the industry and the operator of the sewage treatment plant" notified)::

    [[site.route]]                  # the industry's own environmental staff
    name = "industry"
    notify = "smtp"                 # a [[notify.channel]] id
    to = ["ehs@acme.example"]       # e-mail: the addresses (each gets its own message); other kinds: none
    min_priority = "high"           # this priority and above (critical > high > medium > low > diagnostic)
    kinds = ["raise", "escalate", "clear", "latch"]   # the default; "all" for every transition kind
    level = 1                       # escalation level: 1 = first list, 2 = after escalate_after[0] s unacked …
    rules = []                      # only these rules (empty: all)
    channels = []                   # only these channels (empty: all)

    [[site.route]]                  # the plant operator: everything down to low priority
    name = "plant-operator"
    notify = "smtp"
    to = ["operator@pawling-wwtp.example"]
    min_priority = "low"

    [site.alarm.lel_single]         # per-rule alarm settings (alarms.model.AlarmSettings), over the defaults
    priority = "critical"
    latched = true
    realarm_interval = 900          # s; 0 = off
    escalate_after = [1800]         # s unacknowledged before level 2 (a list: one entry per extra level)

    [[site.alarm]]                  # or, as an array, optionally for one channel only (wins over the rule's)
    rule = "ph_high"
    channel = "ph"
    on_delay = 30

Matching: a transition goes to a route when its priority is at least ``min_priority``, its kind is listed,
its escalation level is at least ``level`` (a level-2 list hears from the escalation onwards), and its rule
and channel pass the filters. A recipient named by several matching routes gets one notification.

Default alarm settings per rule (`DEFAULT_ALARMS`, from the rule catalogue): explosive vapour (``lel_*``)
critical and latched (an operator must reset it after the vapour is gone); pH, temperature and slug
exceedances high; the monthly pH excursion count and the sampler's checks medium; data-quality rules (stale,
sensor_fault, flatline) low, kept apart from discharge exceedances. Every other setting defaults to off (0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from alarms.model import AlarmSettings, Kind, Priority
from config.calibration import CALIBRATION_OVERDUE
from config.errors import MISSING
from config.notify import NotifierConfig, NotifierKind, NotifySection, is_address, parse_notify
from config.reader import Reader
from config.rule_catalogue import CATALOGUE, RULE_NAMES, RuleName
from config.schema import Site

PRIORITY_RANK: dict[Priority, int] = {Priority.DIAGNOSTIC: 0, Priority.LOW: 1, Priority.MEDIUM: 2,
                                      Priority.HIGH: 3, Priority.CRITICAL: 4}
DEFAULT_KINDS = frozenset({Kind.RAISE, Kind.ESCALATE, Kind.CLEAR, Kind.LATCH})

DEFAULT_ALARMS: Mapping[str, AlarmSettings] = {  # the rule catalogue's priority and latching, per rule
    rule.value: AlarmSettings(priority=Priority(row.priority), latched=row.latched) for rule, row in CATALOGUE.items()
}
# alarms that are no rule of the catalogue: the calibration watch's (monitor.calibration), data quality
OTHER_ALARMS: Mapping[str, AlarmSettings] = {CALIBRATION_OVERDUE: AlarmSettings(priority=Priority.LOW)}
_UNKNOWN_RULE = AlarmSettings(priority=Priority.HIGH)  # a rule name the catalogue does not know (an old record)
ALARM_RULES = (*RULE_NAMES, CALIBRATION_OVERDUE)  # what routes and [site.alarm] may name
_ROUTE_KEYS = {"name", "notify", "to", "min_priority", "kinds", "level", "rules", "channels", "description",
               "audience"}
RECORD_CHANNEL = "record"  # the alarm id's channel part for alarms about the record itself (no instrument)
RECORD_INTEGRITY = "record_integrity"  # <site>/record/record_integrity: the record failed a check
RECORD_CITATION = "40 CFR 403.12(o): monitoring records kept, and kept unaltered"
AUDIENCES = ("industry", "plant_operator")  # who a route's recipients are: Pawling item (4) wants both told
_SETTING_KEYS = {f.name for f in fields(AlarmSettings)}


@dataclass(frozen=True, slots=True)
class Route:
    """One ``[[site.route]]``: which transitions of the site go to which recipients of one channel.

    ``recipients`` are e-mail addresses for an e-mail channel and empty otherwise (the channel itself is the
    recipient: a webhook, a broker). ``level`` is the minimum escalation level (1 = always).
    """

    name: str
    site: str
    notify: str
    recipients: tuple[str, ...] = ()
    min_priority: Priority = Priority.LOW
    kinds: frozenset[Kind] = DEFAULT_KINDS
    level: int = 1
    rules: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    audience: str = ""  # "industry" or "plant_operator" (optional; Pawling sites need one route of each)

    def matches(self, *, priority: Priority, kind: Kind, level: int, rule: str, channel: str) -> bool:
        return (PRIORITY_RANK[priority] >= PRIORITY_RANK[self.min_priority] and kind in self.kinds
                and level >= self.level and (not self.rules or rule in self.rules)
                and (not self.channels or channel in self.channels))


@dataclass(frozen=True, slots=True)
class SiteAlarms:
    """A site's routes and alarm settings: per rule, and per (rule, channel) overriding them."""

    site: str
    routes: tuple[Route, ...] = ()
    rules: Mapping[str, AlarmSettings] = field(default_factory=dict)
    channels: Mapping[tuple[str, str], AlarmSettings] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlarmConfig:
    """Everything about alarms in one site file. ``notify`` is None when no channel is configured (alarms
    are still kept, journaled and shown; nobody is told)."""

    notify: NotifySection | None = None
    sites: Mapping[str, SiteAlarms] = field(default_factory=dict)

    def settings(self, site: str, channel: str, rule: str) -> AlarmSettings:
        """The settings of one alarm: its channel's override, else its rule's, else `DEFAULT_ALARMS`."""
        return alarm_settings(self, site, channel, rule)

    def routes(self, site: str) -> tuple[Route, ...]:
        s = self.sites.get(site)
        return s.routes if s is not None else ()


def alarm_settings(config: AlarmConfig | None, site: str, channel: str, rule: str) -> AlarmSettings:
    """See `AlarmConfig.settings`; a None config gives the defaults."""
    s = config.sites.get(site) if config is not None else None
    if s is not None:
        found = s.channels.get((rule, channel)) or s.rules.get(rule)
        if found is not None:
            return found
    return _default(rule)


def _default(rule: str) -> AlarmSettings:
    return DEFAULT_ALARMS.get(rule) or OTHER_ALARMS.get(rule, _UNKNOWN_RULE)


def alarm_specs(sites: Iterable[Site], config: AlarmConfig | None) -> list[tuple[str, str, str, AlarmSettings]]:
    """The engine's alarm list (`alarms.engine.AlarmSpec`): one alarm per compiled rule binding of each site
    (``Site.checks``), in configuration order, each with its settings; a slug with a trailing baseline also has
    its ``slug_no_baseline`` data-quality alarm (raised by the same check while no slug can be judged)."""
    out = []
    for site in sites:
        for b in site.checks:
            out.append((site.id, b.channel, b.rule, alarm_settings(config, site.id, b.channel, b.rule)))
            if b.rule == "slug" and b.params.get("baseline") is None:
                out.append((site.id, b.channel, "slug_no_baseline",
                            alarm_settings(config, site.id, b.channel, "slug_no_baseline")))
    return out


def parse_alarms(doc: dict[str, Any], reader: Reader, base: Path, *, sites: Sequence[Site] = (),
                 historian: Path | None = None) -> AlarmConfig | None:
    """Parse ``[notify]`` and every site's ``[[site.route]]`` / ``[site.alarm]`` of a whole site file.

    ``doc`` is the whole TOML document. ``sites`` are the already-parsed sites, in file order (to check that
    routes and overrides name real channels); without them only names are checked. ``historian`` sets the
    default outbox folder. None when the file has no ``[notify]`` and no site has routes or alarm settings.
    Mistakes go to ``reader`` with their key paths.
    """
    notify = parse_notify(doc, reader, base, historian=historian)
    channels = {c.id: c for c in notify.channels} if notify is not None else {}
    raw_sites = doc.get("site", [])
    if not isinstance(raw_sites, list):
        return None if notify is None else AlarmConfig(notify=notify)
    out: dict[str, SiteAlarms] = {}
    for i, raw in enumerate(raw_sites):
        if not isinstance(raw, dict) or ("route" not in raw and "alarm" not in raw):
            continue
        site = sites[i] if i < len(sites) else None
        parsed = parse_site_alarms(raw, f"site[{i}]", reader, site=site, notifiers=channels)
        out[parsed.site] = parsed
    if notify is None and not out:
        return None
    return AlarmConfig(notify=notify, sites=out)


def parse_site_alarms(raw: dict[str, Any], p: str, reader: Reader, *, site: Site | None,
                      notifiers: Mapping[str, NotifierConfig]) -> SiteAlarms:
    """One site table's ``route`` and ``alarm`` entries. ``site`` (if parsed) validates channel names."""
    site_id = site.id if site is not None else str(raw.get("id", ""))
    known = _channel_names(site)
    routes: list[Route] = []
    names: set[str] = set()
    for i, r in enumerate(reader.tables(raw, "route", p)):
        reader.name(f"{p}.route[{i}]", r, key="name")
        route = _route(r, f"{p}.route[{i}]", reader, site_id, notifiers, known)
        if route.name in names:
            reader.error(f"{p}.route[{i}].name", route.name, "a route name not already used in this site")
        names.add(route.name)
        routes.append(route)
    rules, per_channel = _alarm_settings(raw.get("alarm", {}), f"{p}.alarm", reader, known)
    return SiteAlarms(site=site_id, routes=tuple(routes), rules=rules, channels=per_channel)


def _channel_names(site: Site | None) -> set[str] | None:
    if site is None:
        return None
    return {c.id for c in site.channels} | {b.channel for b in site.checks}


def _route(raw: dict[str, Any], p: str, reader: Reader, site: str, notifiers: Mapping[str, NotifierConfig],
           known: set[str] | None) -> Route:
    reader.unknown_keys(raw, p, _ROUTE_KEYS)
    name = reader.text(raw, "name", p, check=bool, expected="a route name (e.g. 'industry', 'plant-operator')")
    nid = reader.text(raw, "notify", p, expected=f"the id of a [[notify.channel]]: {sorted(notifiers)}")
    channel = notifiers.get(nid)
    if nid and channel is None:
        reader.error(f"{p}.notify", nid, f"the id of a [[notify.channel]]: {sorted(notifiers)}")
    to = _strings(raw, "to", p, reader)
    if channel is not None and channel.kind is NotifierKind.EMAIL:
        if not to:
            reader.error(f"{p}.to", to or MISSING, "at least one e-mail address")
        for a in to:
            if not is_address(a):
                reader.error(f"{p}.to", a, "an e-mail address like name@example.org")
    elif channel is not None and to:
        reader.error(f"{p}.to", to, f"no recipients: a {channel.kind.value} channel is the recipient itself")
    if channel is not None and channel.every_transition:
        reader.error(f"{p}.notify", nid, "a channel without every_transition (this one already gets every "
                     "transition of every site)")
    level = reader.integer(raw, "level", p, default=1, minimum=1, maximum=10)
    rules = _strings(raw, "rules", p, reader)
    for r in rules:
        if r not in ALARM_RULES:
            reader.error(f"{p}.rules", r, f"a rule name, one of {list(ALARM_RULES)}")
    channels = _strings(raw, "channels", p, reader)
    for c in channels:
        if known is not None and c not in known:
            reader.error(f"{p}.channels", c, f"a channel of this site: {sorted(known)}")
    audience = reader.text(raw, "audience", p, default="", check=("", *AUDIENCES).__contains__,
                          expected="'industry' (the discharger's people) or 'plant_operator' (the treatment plant's)")
    return Route(name=name, site=site, notify=nid, recipients=tuple(dict.fromkeys(to)),
                 min_priority=reader.enum(raw, "min_priority", p, Priority, default="low"),
                 kinds=_kinds(raw, p, reader), level=level, rules=frozenset(rules),
                 channels=frozenset(channels), audience=audience)


PAWLING_PH_NOTICE = ("Town of Pawling sewer use chapter, item (4): \"notify the industry and the operator of the "
                     "sewage treatment plant when the pH exceeds the limit\"")


def check_ph_notification(sites: Sequence[Site], config: AlarmConfig | None, reader: Reader) -> None:
    """Pawling item (4) requires the pH alarm to notify both the industry and the plant operator: every pH
    alarm of a Pawling site must reach, when raised, a route of each audience (``audience = "industry"`` and
    ``"plant_operator"``); otherwise the site file is refused, naming the clause."""
    for i, site in enumerate(sites):
        if site.jurisdiction != "pawling":
            continue
        routes = config.routes(site.id) if config is not None else ()
        for b in site.checks:
            if b.rule not in (RuleName.PH_LOW, RuleName.PH_HIGH):
                continue
            prio = alarm_settings(config, site.id, b.channel, b.rule).priority
            heard = {r.audience for r in routes
                     if r.matches(priority=prio, kind=Kind.RAISE, level=1, rule=b.rule, channel=b.channel)}
            missing = [a for a in AUDIENCES if a not in heard]
            if missing:
                reader.error(f"site[{i}].route", f"{b.rule} on channel {b.channel}",
                             f"a [[site.route]] with audience = {' and '.join(repr(m) for m in missing)} that the "
                             f"raised {b.rule} alarm ({prio.value}) reaches: {PAWLING_PH_NOTICE}")


def _kinds(raw: dict[str, Any], p: str, reader: Reader) -> frozenset[Kind]:
    if "kinds" not in raw:
        return DEFAULT_KINDS
    values = _strings(raw, "kinds", p, reader)
    if values == ["all"]:
        return frozenset(Kind)
    out: set[Kind] = set()
    for v in values:
        try:
            out.add(Kind(v))
        except ValueError:
            reader.error(f"{p}.kinds", v, f"\"all\" or transition kinds from {[k.value for k in Kind]}")
    if not values:
        reader.error(f"{p}.kinds", values, "at least one transition kind")
    return frozenset(out)


def _strings(raw: dict[str, Any], key: str, p: str, reader: Reader) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        reader.error(f"{p}.{key}", value, "a list of strings")
        return []
    return value


def _alarm_settings(raw: Any, p: str, reader: Reader, known: set[str] | None
                    ) -> tuple[dict[str, AlarmSettings], dict[tuple[str, str], AlarmSettings]]:
    """``[site.alarm.<rule>]`` tables or ``[[site.alarm]]`` entries (with ``rule`` and optional ``channel``).
    A rule's entry applies over `DEFAULT_ALARMS`; a channel's entry applies over its rule's entry."""
    if isinstance(raw, dict):
        entries = [(f"{p}.{rule}", rule, "", t) for rule, t in raw.items()]
    elif isinstance(raw, list) and all(isinstance(t, dict) for t in raw):
        entries = [(f"{p}[{i}]", t.get("rule", MISSING), t.get("channel", ""), t) for i, t in enumerate(raw)]
    else:
        reader.error(p, raw, "[site.alarm.<rule>] tables or [[site.alarm]] entries")
        return {}, {}
    changes: dict[tuple[str, str], dict[str, Any]] = {}
    for where, rule, channel, t in entries:
        if not isinstance(t, dict):
            reader.error(where, t, "a table of alarm settings")
            continue
        if rule not in ALARM_RULES:
            reader.error(f"{where}.rule" if isinstance(raw, list) else where, rule,
                         f"a rule name, one of {list(ALARM_RULES)}")
            continue
        if not isinstance(channel, str) or (channel and known is not None and channel not in known):
            reader.error(f"{where}.channel", channel, f"a channel of this site: {sorted(known or ())}")
            continue
        reader.unknown_keys(t, where, _SETTING_KEYS | ({"rule", "channel"} if isinstance(raw, list) else set()))
        if (rule, channel) in changes:
            reader.error(where, f"{rule} {channel}".strip(), "one settings entry per rule (and channel)")
        changes[(rule, channel)] = _changes(t, where, reader)
    rules = {r: _build(_default(r), c) for (r, ch), c in changes.items() if not ch}
    per_channel = {(r, ch): _build(rules.get(r, _default(r)), c)
                   for (r, ch), c in changes.items() if ch}
    return rules, per_channel


def _build(base: AlarmSettings, changes: dict[str, Any]) -> AlarmSettings:
    try:
        return replace(base, **changes)
    except ValueError:  # every value was checked one by one; a combination cannot be wrong today
        return base


def _changes(t: dict[str, Any], p: str, reader: Reader) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if "priority" in t:
        changes["priority"] = reader.enum(t, "priority", p, Priority)
    if "latched" in t:
        if isinstance(t["latched"], bool):
            changes["latched"] = t["latched"]
        else:
            reader.error(f"{p}.latched", t["latched"], "true or false")
    for key in ("on_delay", "off_delay", "deadband", "realarm_interval"):
        if key in t:
            changes[key] = reader.number(t, key, p, minimum=0.0)
    if "escalate_after" in t:
        changes["escalate_after"] = _escalation(t["escalate_after"], f"{p}.escalate_after", reader)
    return changes


def _escalation(value: Any, p: str, reader: Reader) -> tuple[float, ...]:
    steps = value if isinstance(value, list) else [value]
    ok = all(isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) and s > 0
             for s in steps) and all(b > a for a, b in pairwise(steps))
    if not ok:
        reader.error(p, value, "seconds (> 0) unacknowledged before escalating, or a strictly increasing list")
        return ()
    return tuple(float(s) for s in steps)
