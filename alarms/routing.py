"""Routing: which channels and recipients hear of a transition. Compiled once from `config.alarms.AlarmConfig`.

A transition goes to every channel configured with ``every_transition`` (the plant's MQTT feed, the daemon
log), and to each recipient of each of its site's routes that match it (`config.alarms.Route.matches`:
priority at least the route's minimum, kind listed, escalation level reached, rule/channel filters). One
recipient of one channel named by several matching routes gets it once (the route names are kept on it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from alarms.model import Transition
from config.alarms import AlarmConfig, Route

EVERYONE = "*"  # the recipient when the channel itself is the recipient (a broker, a webhook, the log)


@dataclass(frozen=True, slots=True)
class Addressed:
    """One delivery target of a transition: a channel id, a recipient on it, and the routes that chose it."""

    notifier: str
    target: str
    routes: tuple[str, ...]


class Router:
    """``targets(transition)`` → the `Addressed` list, in configuration order (channels, then routes)."""

    def __init__(self, *, config: AlarmConfig, notifiers: Iterable[str] | None = None) -> None:
        channels = config.notify.channels if config.notify is not None else ()
        self._every = tuple(c.id for c in channels if c.every_transition)
        self._routes: dict[str, tuple[Route, ...]] = {site: s.routes for site, s in config.sites.items()}
        known = set(notifiers) if notifiers is not None else {c.id for c in channels}
        for routes in self._routes.values():
            for r in routes:
                if r.notify not in known:
                    raise ValueError(f"route {r.site}/{r.name} names channel {r.notify!r}, which is not "
                                     f"configured ({sorted(known)})")

    def targets(self, t: Transition) -> list[Addressed]:
        key = t.key
        out: dict[tuple[str, str], list[str]] = {(nid, EVERYONE): [] for nid in self._every}
        for r in self._routes.get(key.site, ()):
            if not r.matches(priority=t.priority, kind=t.kind, level=t.level, rule=key.rule,
                             channel=key.channel):
                continue
            for target in r.recipients or (EVERYONE,):
                out.setdefault((r.notify, target), []).append(r.name)
        return [Addressed(nid, target, tuple(names)) for (nid, target), names in out.items()]
