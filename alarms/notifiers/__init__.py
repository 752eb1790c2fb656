"""Notification channels. The registry is a plain dict, channel kind → factory, filled by explicit imports.

A factory takes the channel's `config.notify.NotifierConfig` and the daemon's `NotifierContext` and returns a
`alarms.notifiers.base.Notifier`. Adding a kind: write the module, add it here and to
`config.notify.NotifierKind`.
"""

from __future__ import annotations

from collections.abc import Callable

from alarms.notifiers import email, log, mqtt, webhook
from alarms.notifiers.base import Notifier, NotifierContext
from config.alarms import AlarmConfig
from config.notify import NotifierConfig

Factory = Callable[[NotifierConfig, NotifierContext], Notifier]

NOTIFIERS: dict[str, Factory] = {
    "mqtt": mqtt.build,
    "email": email.build,
    "webhook": webhook.build,
    "log": log.build,
}


def build_notifiers(config: AlarmConfig, context: NotifierContext) -> dict[str, Notifier]:
    """One notifier per ``[[notify.channel]]``, by id, in configuration order."""
    if config.notify is None:
        return {}
    return {c.id: NOTIFIERS[c.kind.value](c, context) for c in config.notify.channels}
