"""Every alarm the daemon's engine holds is one the CLI and the console know (`configured_alarms`), so each can
be acknowledged: the record-integrity alarm was missing, and `pretreat alarms ack` refused it."""

from __future__ import annotations

from pathlib import Path

from monitor.alarming import Alarming
from monitor.read.alarms import configured_alarms
from tests.unit.checks_helpers import channel, load, site_toml


def test_every_alarm_the_daemon_creates_is_configured(tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("ph"), jurisdiction="wilson", timezone="America/New_York"))
    alarming = Alarming(config=config, now=1_800_000_000.0, influx=None)
    try:
        created = {s.id for s in alarming.engine.states()}
    finally:
        alarming.engine.close()
        alarming.commands.close()
    known = configured_alarms(config)
    assert "acme/record/record_integrity" in created and "acme/obligations/obligation_overdue" in created
    assert created <= set(known), sorted(created - set(known))
    assert known["acme/record/record_integrity"] == ("acme", "40 CFR 403.12(o): monitoring records kept, and kept "
                                                     "unaltered")
