"""Notification channels. The registry is a plain dict, channel kind → factory, filled by explicit imports.

A factory takes the channel's `config.notify.NotifierConfig` and the daemon's `NotifierContext` and returns a
`alarms.notifiers.base.Notifier`. Adding a kind: write the module, add it here and to
`config.notify.NotifierKind`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from alarms.notifiers.base import Notifier, NotifierContext
from config.alarms import AlarmConfig
from config.notify import NotifierConfig

Factory = Callable[[NotifierConfig, NotifierContext], Notifier]

# kind -> the module whose ``build`` is its factory; imported when a channel of that kind is configured, so
# that a site without MQTT notification (and `pretreat audit`, which builds no notifier) never loads paho.
NOTIFIERS: dict[str, str] = {
    "mqtt": "alarms.notifiers.mqtt",
    "email": "alarms.notifiers.email",
    "webhook": "alarms.notifiers.webhook",
    "log": "alarms.notifiers.log",
}


def factory(kind: str) -> Factory:
    build: Factory = importlib.import_module(NOTIFIERS[kind]).build
    return build


def build_notifiers(config: AlarmConfig, context: NotifierContext) -> dict[str, Notifier]:
    """One notifier per ``[[notify.channel]]``, by id, in configuration order."""
    if config.notify is None:
        return {}
    return {c.id: factory(c.kind.value)(c, context) for c in config.notify.channels}
