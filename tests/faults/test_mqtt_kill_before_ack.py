"""The daemon is SIGKILLed after committing an MQTT reading and before acknowledging it: the broker delivers it
again to the next run, which must recognise it as a reading already in the record (the duplicate filter is
seeded from the record at start) instead of recording it twice (issue 15). The same reading with its JSON keys in
another order is the same reading; another value at the same instant is kept as a BAD_VALUE conflict.

The kill comes from the daemon itself, at the exact point (the `drivers.mqtt.acks` test seam
``PRETREAT_TEST_KILL_BEFORE_ACK=1``): a kill from outside cannot hit the gap between a commit and its PUBACK
reliably.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import paho.mqtt.publish as publish

from drivers.mqtt.acks import KILL_BEFORE_ACK
from drivers.mqtt.dedupe import CONFLICT
from tests.faults.harness import DaemonProcess, by_channel, channel, mqtt_instrument, recorded, site_file, wait_until
from tests.support import PATIENCE, Mosquitto

TOPIC = "plant/mh1/lel"


def test_a_reading_committed_before_a_kill_is_recorded_once_after_the_restart(tmp_path: Path,
                                                                            mosquitto: Mosquitto) -> None:
    instruments = [mqtt_instrument("meter", port=mosquitto.port, poll=60, client_id="pretreat-kill-ack")]
    channels = [channel("lel", instrument="meter", kind="lel", unit="%LEL", topic=TOPIC, field="lel_pct",
                        valid_min=0, valid_max=100)]
    site = site_file(tmp_path, instruments=instruments, channels=channels)
    db = tmp_path / "pretreat.sqlite"
    t = round(time.time() - 5, 3)

    def lel_rows() -> list[tuple[float | None, str, str]]:
        if not db.exists():
            return []
        return [(r.value, r.quality, r.reason) for r in by_channel(recorded(db)).get("lel", []) if r.time == t]

    def send(payload: str) -> None:
        publish.single(TOPIC, payload, qos=1, hostname="127.0.0.1", port=mosquitto.port)

    first = DaemonProcess(site, tmp_path / "daemon.log", env={KILL_BEFORE_ACK: "1"}).start()
    try:
        first.wait_ready()
        assert wait_until(lambda: "connected to MQTT broker" in first.output(), PATIENCE), first.output()[-2000:]
        send(f'{{"lel_pct": 2.5, "ts": {t}}}')
        assert first.proc is not None
        assert first.proc.wait(30) == -signal.SIGKILL  # killed itself after the commit, before the PUBACK
    finally:
        first.kill()
    assert lel_rows() == [(2.5, "good", "")]  # committed before the kill
    send(f'{{"ts": {t}, "lel_pct": 2.5}}')  # the same reading, keys reordered (queued for the session)
    send(f'{{"lel_pct": 3.75, "ts": {t}}}')  # another value for the same instant
    second = DaemonProcess(site, tmp_path / "daemon.log").start()
    try:
        second.wait_ready()
        assert wait_until(lambda: len(lel_rows()) >= 2, 30), lel_rows()
        assert second.stop() == 0
    finally:
        second.kill()
    rows = lel_rows()
    assert rows[0] == (2.5, "good", "")
    assert len(rows) == 2, rows  # the redelivered original and the reordered copy: not recorded again
    value, quality, reason = rows[1]
    assert (value, quality) == (None, "bad_value") and reason.startswith(CONFLICT)
    assert "3.75" in reason and "2.5 was recorded" in reason
