"""A daemon killed with SIGKILL while notifications are undelivered: the broker announces it offline (last
will), and the restarted daemon delivers what was queued, in order, without repeating what was delivered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.notify_servers import HttpReceiver, MqttProbe
from tests.support import Mosquitto, eventually

REPO = Path(__file__).resolve().parents[2]
PREFIX = "pretreat/killtest"

CHILD = textwrap.dedent('''
    import asyncio, sys
    from pathlib import Path
    from alarms.dispatcher import Dispatcher
    from alarms.model import Kind, Priority, State, Transition
    from config.alarms import AlarmConfig, Route, SiteAlarms
    from config.notify import (MqttNotify, NotifierConfig, NotifierKind, NotifySection, WebhookNotify)
    from drivers.backoff import Backoff

    state_dir, port, url, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    channels = (
        NotifierConfig(id="scada", kind=NotifierKind.MQTT, every_transition=True, settings=MqttNotify(
            host="127.0.0.1", port=port, client_id="pretreat-killtest", topic_prefix="@PREFIX@")),
        NotifierConfig(id="hook", kind=NotifierKind.WEBHOOK, settings=WebhookNotify(url=url, timeout=2.0)),
    )
    cfg = AlarmConfig(notify=NotifySection(channels=channels, state_dir=state_dir),
                      sites={"acme": SiteAlarms(site="acme", routes=(Route(name="industry", site="acme",
                                                                           notify="hook"),))})

    def tr(seq):
        return Transition(time=1.7e9 + seq, alarm_id="acme/ph/ph_high", kind=Kind.RAISE if seq % 2 else Kind.CLEAR,
                          from_state=State.NORMAL, to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH,
                          who="system", why="", value=float(seq), limit=10.5, citation="", seq=seq)

    async def main():
        d = Dispatcher(config=cfg, backoff=Backoff(initial=0.05, maximum=0.2, jitter=0.0))
        await d.start()
        if mode == "first":
            d.submit([tr(i) for i in range(1, 11)])
            while d.health()["scada"]["depth"]:
                await asyncio.sleep(0.01)
            print("READY", d.health()["hook"]["depth"], flush=True)
            await asyncio.sleep(3600)
        ok = await d.wait_idle(20)
        await d.stop()
        print("DONE" if ok else "TIMEOUT", flush=True)

    asyncio.run(main())
''').replace("@PREFIX@", PREFIX)


def spawn(tmp_path: Path, broker: Mosquitto, receiver: HttpReceiver, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "notify"), str(broker.port),
                             receiver.url, mode], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


async def test_sigkill_with_undelivered_notifications_then_restart(tmp_path: Path, mosquitto: Mosquitto,
                                                                   http_receiver: HttpReceiver) -> None:
    probe = MqttProbe(mosquitto.port, [f"{PREFIX}/#"]).start()

    def events() -> list[int]:
        return [m.json()["seq"] for m in probe.messages(f"{PREFIX}/events")]

    http_receiver.stop()  # the industry's webhook is down: its notifications wait in the outbox
    child = spawn(tmp_path, mosquitto, http_receiver, "first")
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.split() == ["READY", "10"], (line, child.stderr.read() if child.poll() is not None else "")
        assert await eventually(lambda: events() == list(range(1, 11)))
        assert probe.messages(f"{PREFIX}/status")[-1].payload == b"online"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # the broker fires the last will: SCADA sees the daemon offline
    assert await eventually(lambda: probe.messages(f"{PREFIX}/status")[-1].payload == b"offline")
    http_receiver.start()
    again = spawn(tmp_path, mosquitto, http_receiver, "resume")
    try:
        out, err = again.communicate(timeout=30)
    finally:
        if again.poll() is None:
            again.kill()
            again.wait()
    assert out.split() == ["DONE"], err
    posted = [r.json() for r in http_receiver.received()]
    assert [p["seq"] for p in posted] == list(range(1, 11))  # every queued notice, in order, once
    assert [p["kind"] for p in posted[:2]] == ["raise", "clear"]
    assert events() == list(range(1, 11))  # what the broker confirmed before the kill is not repeated
    statuses = [m.payload for m in probe.messages(f"{PREFIX}/status")]
    assert statuses[-2:] == [b"online", b"offline"]  # the restart came online, then stopped cleanly
    probe.stop()
    assert posted[0]["routes"] == ["industry"]
