"""`pretreat run` killed with SIGKILL at random points (during start-up, mid-poll, mid-episode, mid-delivery) while
a pH excursion comes and goes, restarted each time, then left to run once the process is back to normal:

- the historian has no reading twice (same channel and time), and every reading the MQTT instrument published
  while some daemon run was subscribed is recorded;
- the journal verifies, and no alarm is raised twice without a clear between, nor cleared twice;
- no episode is recorded twice: starts and ends alternate per rule;
- plant SCADA heard every journaled transition (repeats after a kill carry the same seq and body);
- every alarm that started has its clear once the scenario is back to normal.

The simulators run on a thread of this process, so they keep serving (and keep their ground truth) while the
daemon is dead. The fast variant kills three times; the slow one 20 times (``make test-slow``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.journal import Journal
from config.loader import load_config
from config.schema import SiteConfig
from monitor.stores.readonly import connect_readonly
from simulators.playback import Hold
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    DaemonProcess,
    SimThread,
    by_channel,
    channel,
    duplicates,
    mqtt_instrument,
    mqtt_notify,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.notify_servers import MqttProbe
from tests.support import Mosquitto, free_port, wait_until

EVENTS = "pretreat/faults/events"
PH_LOW = f"{SITE}/ph/ph_low"
TOGGLE = 2.5  # s between pH going below 5.0 and coming back


def kill_site(tmp_path: Path, port: int) -> Path:
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.5, timeout=0.3),
                   tcp_instrument("flow-meter", port=free_port(), poll=0.5, timeout=0.3),
                   mqtt_instrument("lel-meter", port=port, poll=0.5)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14),
                channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate",
                        valid_min=0, valid_max=2000),
                channel("lel", instrument="lel-meter", kind="lel", unit="%LEL", topic="plant/mh1/lel",
                        field="lel_pct", valid_min=0, valid_max=100)]
    return site_file(tmp_path, instruments=instruments, channels=channels, top=mqtt_notify(port))


@contextlib.contextmanager
def excursions(sims: SimThread) -> Iterator[None]:
    """pH below 5.0 for TOGGLE s, back for TOGGLE s, over and over, until the block ends (then normal)."""
    overrides = sims.call(lambda: sims.sim.playback.overrides.setdefault(SITE, {}))

    async def toggle() -> None:
        while True:
            overrides["ph"] = Hold(4.4)
            await asyncio.sleep(TOGGLE)
            overrides.pop("ph", None)
            await asyncio.sleep(TOGGLE)

    task = asyncio.run_coroutine_threadsafe(toggle(), sims.loop)
    try:
        yield
    finally:
        task.cancel()
        sims.call(lambda: overrides.pop("ph", None))


OVERDUE = "/obligations/obligation_overdue"
# the slug's data-quality notice stays open (its alarm active, across every restart) until a day of normal
# operation exists, which a scenario of minutes never has: a standing condition, not one a restart must settle
NO_BASELINE = "/slug_no_baseline"


def alarm_records(config: SiteConfig) -> dict[str, dict[str, Any]]:
    conn = connect_readonly(config.daemon.historian, timeout=10)
    try:
        return {a: json.loads(r) for a, r in conn.execute("SELECT alarm_id, record FROM alarm_state")}
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def journal_transitions(config: SiteConfig) -> list[Any]:
    j = Journal(path=config.daemon.historian)
    try:
        return list(j.records(kinds=["transition"]))
    finally:
        j.close()


def run_kills(tmp_path: Path, mosquitto: Mosquitto, kills: int, seed: int, raises: int) -> None:
    config = load_config(kill_site(tmp_path, mosquitto.port))
    rng = random.Random(seed)
    log = tmp_path / "daemon.log"
    probe = MqttProbe(mosquitto.port, [EVENTS], client_id="scada-probe", clean_session=False).start()
    factory = lambda: SiteSimulator(config=config, history=100_000, mqtt_time_format="epoch")  # noqa: E731
    daemon = DaemonProcess(config.source, log)  # type: ignore[arg-type]
    killed_when: list[str] = []
    try:
        with SimThread(factory) as sims:
            with excursions(sims):
                for _ in range(kills):
                    daemon.start()
                    if rng.random() < 0.25:  # during start-up: stores opening, warm-up, first polls
                        time.sleep(rng.uniform(0.05, 1.5))
                        killed_when.append("start-up")
                    else:
                        daemon.wait_ready()
                        time.sleep(rng.uniform(0.1, 2 * TOGGLE))
                        killed_when.append("running")
                    daemon.signal(signal.SIGKILL)
            # back to normal: one last run must clear what the killed ones raised, and announce it
            daemon.start()
            daemon.wait_ready()
            settled = wait_until(lambda: _settled(config, probe), 60, 0.25)
            time.sleep(1.0)
            assert daemon.stop() == 0, daemon.output()[-3000:]
            assert settled, _unsettled(config, probe) + "\n" + daemon.output()[-3000:]
            served = sims.call(lambda: list(sims.sim.history[(SITE, "lel")]))
    finally:
        daemon.kill()
        probe.stop()
    check_record(config, probe, served, log, raises)
    assert "running" in killed_when


def _settled(config: SiteConfig, probe: MqttProbe) -> bool:
    """Every alarm's condition is gone and SCADA heard every journaled transition."""
    return not _unsettled(config, probe)


def _unsettled(config: SiteConfig, probe: MqttProbe) -> str:
    """What keeps the record from being settled, in words ("" when it is): the alarms still active or in
    condition, and the journaled transitions SCADA has not heard."""
    states = alarm_records(config)  # (obligations stay overdue until the industry records them: not a discharge)
    if not states:
        return "no alarm state recorded"
    standing = [a for a in states if a.endswith(NO_BASELINE)]
    if any(not (states[a]["condition"] and states[a]["active"]) for a in standing):
        return f"the slug's no-baseline notice is not standing: { {a: states[a] for a in standing} }; "
    busy = {a: (r["phase"], r["condition"], r["active"]) for a, r in states.items()
            if not a.endswith((OVERDUE, NO_BASELINE)) and (r["condition"] or r["active"])}
    heard = {int(m.json()["seq"]) for m in probe.messages(EVENTS)}
    unheard = sorted({r.seq for r in journal_transitions(config)} - heard)
    return (f"alarms not settled (phase, condition, active): {busy}; " if busy else "") + \
        (f"journaled transitions SCADA has not heard: {unheard}" if unheard else "")


def check_record(config: SiteConfig, probe: MqttProbe, served: list[Any], log: Path, raises: int) -> None:
    rows = recorded(config.daemon.historian)
    assert duplicates(rows) == []
    # the MQTT readings: each published one is recorded once (the broker kept them while no daemon ran)
    lel = {round(r.time, 3): r.value for r in by_channel(rows)["lel"] if r.good}
    first = min(lel)  # the first daemon run's subscription: the broker keeps nothing for it before that
    missing = [s for s in served if s.wall_time > first + 1 and lel.get(round(s.wall_time, 3)) != s.value]
    last = max(lel)
    missing = [s for s in missing if s.wall_time < last - 1]
    assert missing == [], f"{len(missing)} of {len(served)} published LEL readings not recorded: {missing[:3]}"

    journal = Journal(path=config.daemon.historian)
    verified = journal.verify()
    transitions = list(journal.records(kinds=["transition"]))
    journal.close()
    assert verified.ok, verified
    per_alarm: dict[str, list[str]] = {}
    for r in transitions:
        per_alarm.setdefault(r.payload["alarm"], []).append(r.payload["kind"])
    for alarm, kinds in per_alarm.items():
        edges = [k for k in kinds if k in ("raise", "clear")]
        assert all(a != b for a, b in itertools.pairwise(edges)), (alarm, kinds)
        if alarm.endswith(NO_BASELINE):  # raised once, and no kill or restart cleared it while the notice is open
            assert edges == ["raise"], (alarm, kinds, _story(config, alarm, log))
            continue
        assert edges[0] == "raise" and (edges[-1] == "clear" or alarm.endswith(OVERDUE)), (alarm, kinds)
    assert any(a.endswith(OVERDUE) for a in per_alarm), "the episodes' obligations fell overdue"
    j = Journal(path=config.daemon.historian)
    try:
        obligations = [r.payload for r in j.records(kinds=["obligation"])]
    finally:
        j.close()
    assert len({(o["episode"], o["source"], o["key"]) for o in obligations}) == len(obligations)  # once each
    assert per_alarm[PH_LOW].count("raise") >= raises

    conn = connect_readonly(config.daemon.historian)
    episodes = conn.execute("SELECT site, channel, rule, event, time FROM episode_events ORDER BY time, id")
    per_rule: dict[tuple[str, str, str], list[str]] = {}
    for site, ch, rule, event, _t in episodes:
        per_rule.setdefault((site, ch, rule), []).append(event)
    conn.close()
    for key, events in per_rule.items():
        assert all(a != b for a, b in itertools.pairwise(events)), (key, events)

    msgs = probe.messages(EVENTS)
    bodies: dict[int, bytes] = {}
    for m in msgs:  # a notice re-sent after a kill is the same event: same seq, same body
        assert bodies.setdefault(int(m.json()["seq"]), m.payload) == m.payload
    assert set(bodies) == {r.seq for r in transitions}
    first_seen = list(dict.fromkeys(int(m.json()["seq"]) for m in msgs))
    assert first_seen == sorted(first_seen)
    assert "Traceback" not in log.read_text()


def _story(config: SiteConfig, alarm: str, log: Path) -> str:
    """What the record and the daemons' logs say of one alarm: its journaled inputs and transitions (with the
    reason each input gives) and the log lines naming it or its channel's episodes, so a failure says which
    path (live episode, start-up reconcile, late-reading revision) moved it."""
    site, ch, rule = alarm.split("/")
    j = Journal(path=config.daemon.historian)
    try:
        lines = [f"{r.time:.3f} {r.kind} {json.dumps({k: v for k, v in r.payload.items() if k != 'citation'})}"
                 for r in j.records(kinds=["episode", "transition", "revision"])
                 if r.payload.get("alarm") == alarm or (r.payload.get("channel") == ch and
                                                        r.payload.get("rule") == rule)]
    finally:
        j.close()
    said = [ln for ln in log.read_text(errors="replace").splitlines()
            if alarm in ln or f"{site}/{ch}" in ln or "reconcil" in ln or "daemon running" in ln
            or "revised" in ln or "rebuilt" in ln]
    return "\njournal:\n" + "\n".join(lines) + "\nlog:\n" + "\n".join(said[-80:])


def test_sigkill_three_times_loses_and_repeats_nothing(tmp_path: Path, mosquitto: Mosquitto) -> None:
    run_kills(tmp_path, mosquitto, kills=3, seed=3, raises=1)


@pytest.mark.slow
def test_sigkill_twenty_times_loses_and_repeats_nothing(tmp_path: Path, mosquitto: Mosquitto) -> None:
    run_kills(tmp_path, mosquitto, kills=20, seed=20, raises=8)
