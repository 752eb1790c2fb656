"""A process is SIGKILLed in the gap between an alarm state change being committed (journal and state, the
alarm engine) and its notification being handed to the durable outbox (the dispatcher), and in the gap
between that outbox append and the dispatcher's mark. Then `pretreat run` starts on the same files, while the
condition has ended (the start-up reconcile announces a clear): plant SCADA, on a real mosquitto, must hear the
raise the killed process never announced, before the clear, with the journal's seq (a notice announced
twice is the same message: same seq, same body).

The killed process is the daemon's own alarm side (`monitor.alarming.Alarming` built from the site file),
run up to the exact point of the kill, since a SIGKILL at a random moment would hit that gap only by chance.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_config
from tests.faults.harness import ROOT, SITE, DaemonProcess, channel, mqtt_notify, site_file, tcp_instrument
from tests.notify_servers import MqttProbe, Received
from tests.support import Mosquitto, free_port, wait_until

EVENTS = "pretreat/faults/events"
PH_LOW = f"{SITE}/ph/ph_low"

# Runs the alarm side as `pretreat run` builds it, raises ph_low through the engine (committed), and is
# killed at ``where``: "committed" (before the dispatcher saw it) or "queued" (outbox appended, mark not).
_CHILD = textwrap.dedent("""
    import asyncio, os, signal, sys, time
    from alarms.dispatcher import Dispatcher
    from alarms.model import AlarmInput
    from config.loader import load_config
    from monitor.alarming import Alarming

    site, where = sys.argv[1], sys.argv[2]

    def die(*_args):
        os.kill(os.getpid(), signal.SIGKILL)

    async def main():
        now = time.time()
        alarming = Alarming(config=load_config(site), now=now, influx=None)
        await alarming.start(time.time)
        raised = alarming.engine.apply_many([AlarmInput(time=now, site="plant", channel="ph", rule="ph_low",
                                                        active=True, value=4.2, limit=5.0)], now)
        print(raised[0].seq, flush=True)
        if where == "committed":
            die()
        Dispatcher._store_marks = die  # the outbox append is done, the dispatcher's mark is not
        alarming.announce(raised)

    asyncio.run(main())
""")


def handoff_site(tmp_path: Path, broker: int) -> Path:
    # the pH meter never answers: no reading, so no episode, and the start-up reconcile clears ph_low
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.5, timeout=0.2)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    return site_file(tmp_path, instruments=instruments, channels=channels, top=mqtt_notify(broker))


@pytest.mark.parametrize("where", ["committed", "queued"])
def test_a_kill_between_state_change_and_outbox_loses_no_notification(tmp_path: Path, mosquitto: Mosquitto,
                                                                      where: str) -> None:
    site = handoff_site(tmp_path, mosquitto.port)
    config = load_config(site)
    probe = MqttProbe(mosquitto.port, [EVENTS], client_id="scada-probe", clean_session=False).start()
    daemon = DaemonProcess(site, tmp_path / "daemon.log")
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD, str(site), where], cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
        assert child.returncode == -9, child.stderr[-3000:]  # SIGKILLed where it was meant to be
        raise_seq = int(child.stdout.split()[0])
        daemon.start()
        daemon.wait_ready()
        heard = wait_until(lambda: any(_event(m)["alarm"] == PH_LOW and _event(m)["kind"] == "clear"
                                       for m in probe.messages(EVENTS)))
        assert daemon.stop() == 0, daemon.output()[-3000:]
    finally:
        daemon.kill()
        probe.stop()
    assert heard, (probe.messages(EVENTS), daemon.output()[-3000:])
    ph = [(m, _event(m)) for m in probe.messages(EVENTS) if _event(m)["alarm"] == PH_LOW]
    kinds = [(e["seq"], e["kind"]) for _, e in ph]
    firsts = list(dict.fromkeys(kinds))
    assert firsts[0] == (raise_seq, "raise") and firsts[-1][1] == "clear", kinds  # raise heard, then its clear
    bodies: dict[int, bytes] = {}
    for m, e in ph:  # a notice announced twice (at-least-once) is the same message
        assert bodies.setdefault(int(e["seq"]), m.payload) == m.payload
    assert config.daemon.historian.exists()


def _event(m: Received) -> dict[str, Any]:
    return dict(m.json())
