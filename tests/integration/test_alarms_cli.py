"""`pretreat alarms …` and `pretreat journal verify` against a running alarm engine: a thread plays the daemon's
tick (a real AlarmEngine and CommandQueue on a temporary SQLite file, `apply_pending` every 20 ms); the CLI
runs in-process through monitor.cli.main, or as a separate process for the cross-process path."""

from __future__ import annotations

import argparse
import io
import json
import os
import pwd
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from alarms.commands import CommandQueue, Status, apply_pending
from alarms.engine import AlarmEngine, AlarmSpec
from alarms.model import AlarmInput, AlarmSettings, Priority, State
from config.loader import load_config
from monitor import alarms_cli, cli
from monitor.console.users import Role, User, default_users_path, hash_password, save_users
from monitor.read.alarms import alarm_rows
from tests.support import PATIENCE, wait_until

REPO = Path(__file__).resolve().parents[2]
PH = "acme-plating/ph/ph_high"
LEL = "acme-plating/lel/lel_single"
SITE_FILE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme-plating"
timezone = "UTC"
jurisdiction = "southeast"

[[site.instrument]]
id = "ph-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
register_map = "ph_meter"

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"

[[site.channel]]
id = "ph"
instrument = "ph-meter"
point = "ph"
kind = "ph"
unit = "pH"

[[site.channel]]
id = "lel"
instrument = "lel-meter"
topic = "mh1/lel"
field = "lel"
kind = "lel"
unit = "%LEL"
"""


def inp(rule: str, active: bool, value: float = 12.0) -> AlarmInput:
    channel = "lel" if rule.startswith("lel") else "ph"
    return AlarmInput(time=time.time(), site="acme-plating", channel=channel, rule=rule, active=active,
                      value=value, limit=10.0 if channel == "lel" else 9.0, citation="§ 112-5A(1)")


PASSWORD = "correct horse battery"
SERVICE = pwd.getpwuid(os.geteuid()).pw_name
JDOE = ("--user", "jdoe", "--password-stdin")  # an operator, authenticated with the password on standard input


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The site file, its console users (beside it, as `pretreat user add` writes them), and standard input
    holding the password for every --password-stdin."""
    p = tmp_path / "site.toml"
    p.write_text(SITE_FILE, encoding="utf-8")
    users = {name: User(name=name, role=role, company=company, hash=hash_password(PASSWORD))
             for name, role, company in (("jdoe", Role.OPERATOR, ""), ("plant-op", Role.OPERATOR, ""),
                                         ("enf", Role.ENFORCEMENT, ""), ("other", Role.INDUSTRY, "Other Co."))}
    save_users(default_users_path(p), users)
    monkeypatch.setattr(sys, "stdin", io.StringIO((PASSWORD + "\n") * 100))
    return p


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "pretreat.sqlite"


@pytest.fixture
def specs(site: Path) -> list[AlarmSpec]:
    return [(b.site, b.channel, b.rule, AlarmSettings(priority=Priority.CRITICAL if b.rule == "lel_single"
                                                      else Priority.HIGH, latched=b.rule == "lel_single"))
            for s in load_config(site).sites for b in s.checks]


class Daemon:
    """The daemon's side of the queue in a thread: it owns the engine (not thread-safe: only this thread
    touches it) and carries out queued commands on each 20 ms tick, as the lead's clock tick will."""

    def __init__(self, db: Path, specs: list[AlarmSpec], inputs: list[AlarmInput]) -> None:
        self.db, self.specs, self.inputs = db, specs, inputs
        self.later: list[AlarmInput] = []  # applied on a later tick (for watch)
        self.ticks = 0  # ticks done: a test waits for one to know the queue has been looked at
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="daemon-tick")

    def _run(self) -> None:
        engine = AlarmEngine(path=self.db, alarms=self.specs, now=time.time())
        queue = CommandQueue(path=self.db)
        try:
            engine.apply_many(self.inputs, time.time())
            self.ready.set()
            while not self.stop.is_set():
                apply_pending(queue, engine, time.time())
                if self.later:
                    engine.apply(self.later.pop(0), time.time())
                self.ticks += 1
                time.sleep(0.02)
        finally:
            queue.close()
            engine.close()

    def __enter__(self) -> Daemon:
        self.thread.start()
        assert self.ready.wait(PATIENCE)
        return self

    def ticked(self, n: int = 2) -> bool:
        """Until ``n`` more ticks have run (each looks at the command queue once)."""
        start = self.ticks
        return wait_until(lambda: self.ticks >= start + n)

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive()


@pytest.fixture
def daemon(db: Path, specs: list[AlarmSpec]) -> Callable[..., Daemon]:
    return lambda *inputs: Daemon(db, specs, list(inputs))


def states(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return {str(r["alarm"]): str(r["state"]) for r in alarm_rows(conn, None)}
    finally:
        conn.close()


def rows(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_list_shows_every_configured_alarm_and_filters(site: Path, daemon: Callable[..., Daemon],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True, 9.6), inp("lel_single", True)):
        pass
    assert cli.main(["alarms", "list", "--config", str(site), "--format", "json"]) == 0
    assert sorted(r["alarm"] for r in rows(capsys)) == [LEL, PH]  # by default: what needs attention
    assert cli.main(["alarms", "list", "--config", str(site), "--format", "json", "--all"]) == 0
    listed = {r["alarm"]: r for r in rows(capsys)}
    assert {PH, LEL, "acme-plating/ph/ph_low", "acme-plating/lel/stale"} <= set(listed)
    assert (listed[PH]["state"], listed[PH]["value"], listed[PH]["limit"]) == ("active-unacknowledged", 9.6, 9.0)
    assert listed["acme-plating/ph/ph_low"]["state"] == "normal"  # never changed: no stored row, still listed
    assert listed["acme-plating/ph/ph_low"]["citation"]  # from the site file's rule
    assert cli.main(["alarms", "list", "--config", str(site), "--state", "active", "--format", "json"]) == 0
    assert sorted(r["alarm"] for r in rows(capsys)) == [LEL, PH]
    assert cli.main(["alarms", "list", "--config", str(site), "--state", "shelved"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ID  STATE  PRIORITY  SINCE (local time)  VALUE  LIMIT  CITATION / NOTE"]
    assert cli.main(["alarms", "list", "--config", str(site)]) == 0
    table = {line.split()[0]: line.split()[1:3] for line in capsys.readouterr().out.splitlines()[1:]}
    assert table[PH] == ["active-unacknowledged", "high"] and table[LEL] == ["active-unacknowledged", "critical"]
    assert set(table) == {PH, LEL}


def test_ack_reaches_the_running_engine_and_prints_the_journal_record(
        site: Path, db: Path, daemon: Callable[..., Daemon], capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True)):
        assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE,
                         "--note", "industry called"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{PH}: ack by jdoe (active-unacknowledged -> active-acknowledged), journal record")
        # acknowledging again is refused by the engine, with its reason
        assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE]) == 1
        assert "refused: alarm is active-acknowledged: nothing to acknowledge" in capsys.readouterr().err
    conn = sqlite3.connect(db)
    try:
        actions = [json.loads(p) for (p,) in conn.execute("SELECT payload FROM journal WHERE kind = 'action'")]
    finally:
        conn.close()
    assert [(a["user"], a["note"]) for a in actions] == [("jdoe", "industry called")]


def test_shelve_reset_and_out_of_service(site: Path, db: Path, daemon: Callable[..., Daemon],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("lel_single", True)) as d:
        before = time.time()
        assert cli.main(["alarms", "shelve", PH, "--config", str(site), *JDOE, "--until", "1h30m",
                         "--reason", "probe cleaning"]) == 0
        assert cli.main(["alarms", "reset", LEL, "--config", str(site), *JDOE]) == 1
        assert "condition still active" in capsys.readouterr().err
        d.later.append(inp("lel_single", False, 1.0))
        # the condition's end is applied on a later tick
        assert wait_until(lambda: states(db).get(LEL) == "latched-unacknowledged"), states(db)
        assert cli.main(["alarms", "reset", LEL, "--config", str(site), *JDOE, "--note", "vented"]) == 0
        assert "reset by jdoe (latched-unacknowledged -> normal)" in capsys.readouterr().out
        # no --user: the daemon's service account (this process owns the database file), recorded as such
        assert cli.main(["alarms", "out-of-service", "acme-plating/ph/ph_low", "--config", str(site),
                         "--reason", "sensor swap"]) == 0
        assert f"out-of-service by service:{SERVICE} (normal -> out-of-service)" in capsys.readouterr().out
    assert cli.main(["alarms", "list", "--config", str(site), "--format", "json", "--all"]) == 0
    listed = {r["alarm"]: r for r in rows(capsys)}
    assert listed[PH]["state"] == "shelved" and listed[PH]["reason"] == "probe cleaning"
    assert before + 5400 - 1 <= float(listed[PH]["until"]) <= time.time() + 5400
    assert listed[LEL]["state"] == "normal"
    assert listed["acme-plating/ph/ph_low"]["state"] == "out-of-service"


def test_no_daemon_withdraws_the_command(site: Path, db: Path, daemon: Callable[..., Daemon],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True)):
        pass  # the daemon ran once (the file exists) and has stopped
    t0 = time.monotonic()
    assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE, "--wait", "0.3"]) == 1
    assert time.monotonic() - t0 < 5  # its own 0.3 s, not the default 5 s wait
    assert "does not appear to be running" in capsys.readouterr().err
    with CommandQueue(path=db) as q:
        assert q.get(1).status is Status.CANCELLED
    with daemon() as d:  # a later start does not act on the withdrawn command
        assert d.ticked()
    assert cli.main(["alarms", "list", "--db", str(db), "--format", "json"]) == 0
    assert {r["alarm"]: r["state"] for r in rows(capsys)}[PH] == "active-unacknowledged"


def test_no_wait_queues_for_the_next_daemon(site: Path, db: Path, daemon: Callable[..., Daemon],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True)):
        pass
    assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE, "--no-wait"]) == 0
    assert capsys.readouterr().out.startswith("queued as command 1")
    def final() -> bool:
        with CommandQueue(path=db) as q:
            return q.get(1).status.final

    with daemon():
        assert wait_until(final)
    with CommandQueue(path=db) as q:
        assert q.get(1).status is Status.DONE


def test_usage_errors(site: Path, db: Path, daemon: Callable[..., Daemon],
                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE]) == 2  # no database yet
    assert "no database" in capsys.readouterr().err
    with daemon():
        pass
    assert cli.main(["alarms", "ack", "acme-plating/ph", "--config", str(site), *JDOE]) == 2
    assert cli.main(["alarms", "ack", "acme-plating/ph/nope", "--config", str(site), *JDOE]) == 2
    assert "is not an alarm of" in capsys.readouterr().err
    assert cli.main(["alarms", "shelve", PH, "--config", str(site), *JDOE, "--until", "tomorrow",
                     "--reason", "x"]) == 2
    assert cli.main(["alarms", "shelve", PH, "--config", str(site), *JDOE,
                     "--until", "2026-01-05T10:00", "--reason", "x"]) == 2
    assert "no UTC offset" in capsys.readouterr().err
    with CommandQueue(path=db) as q:  # nothing was queued by any of them
        with pytest.raises(KeyError):
            q.get(1)


def test_ack_from_another_process(site: Path, daemon: Callable[..., Daemon]) -> None:
    with daemon(inp("ph_high", True)):
        done = subprocess.run([sys.executable, "-m", "monitor.cli", "alarms", "ack", PH, "--config", str(site),
                               "--user", "plant-op", "--password-stdin", "--note", "seen on SCADA"], cwd=REPO,
                              capture_output=True, text=True, timeout=30, input=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert "ack by plant-op" in done.stdout


def test_watch_follows_transitions_live(site: Path, db: Path, daemon: Callable[..., Daemon]) -> None:
    with daemon(inp("ph_high", True)) as d:
        out = io.StringIO()
        args = argparse.Namespace(command="alarms", alarms_command="watch", config=str(site), db=None, last=1,
                                  duration=3.0, interval=0.05, format="json")
        watcher = threading.Thread(target=alarms_cli._watch, args=(args, out))
        watcher.start()
        assert wait_until(lambda: out.getvalue().endswith("\n"))  # it showed the last transition so far
        d.later += [inp("ph_high", False, 8.0), inp("lel_single", True)]
        watcher.join(PATIENCE)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["alarm"], e["kind"]) for e in events] == [(PH, "raise"), (PH, "clear"), (LEL, "raise")]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    text = io.StringIO()
    args.format, args.duration, args.last = "text", 0.01, 3
    assert alarms_cli._watch(args, text) == 0
    assert f"{LEL}  RAISE  normal -> active-unacknowledged  [critical]" in text.getvalue()


def test_journal_verify_names_the_first_altered_record(site: Path, db: Path, daemon: Callable[..., Daemon],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True), inp("lel_single", True)):
        pass
    assert cli.main(["journal", "verify", "--config", str(site)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("journal intact: ")
    head = out.strip().rsplit(" ", 1)[1]
    assert cli.main(["journal", "verify", "--db", str(db), "--anchor", head]) == 0
    capsys.readouterr()
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER journal_no_update")  # someone editing the file directly
        seq = conn.execute("SELECT seq FROM journal WHERE kind = 'transition' ORDER BY seq LIMIT 1").fetchone()[0]
        conn.execute("UPDATE journal SET payload = replace(payload, 'active-unacknowledged', 'normal') "
                     "WHERE seq = ?", (seq,))
        conn.commit()
    finally:
        conn.close()
    assert cli.main(["journal", "verify", "--config", str(site)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"journal NOT intact: record {seq} altered:")
    assert cli.main(["journal", "verify", "--db", str(db), "--anchor", "12:xyz"]) == 2
    empty = db.with_name("empty.sqlite")
    sqlite3.connect(empty).close()
    assert cli.main(["journal", "verify", "--db", str(empty)]) == 1
    assert "no journal" in capsys.readouterr().err


def test_an_active_alarm_raised_later_is_not_acked_by_a_stale_command(
        site: Path, db: Path, daemon: Callable[..., Daemon]) -> None:
    """The ISA-18.2 point behind withdrawing and expiring commands: nothing acts on what nobody saw."""
    with daemon():
        pass
    with CommandQueue(path=db) as q:
        q.submit(alarm_id=PH, action="ack", user="jdoe", ttl=0.1)
    time.sleep(0.2)
    with daemon(inp("ph_high", True)) as d:
        assert d.ticked()
    with CommandQueue(path=db) as q:
        assert q.get(1).status is Status.EXPIRED
    assert states(db)[PH] == State.ACTIVE_UNACKED.value


def test_actions_carry_an_authenticated_user(site: Path, db: Path, daemon: Callable[..., Daemon],
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with daemon(inp("ph_high", True)):
        monkeypatch.setattr(sys, "stdin", io.StringIO("wrong password\n"))
        assert cli.main(["alarms", "ack", PH, "--config", str(site), *JDOE]) == 1
        assert "wrong password for 'jdoe'" in capsys.readouterr().err  # a wrong one
        monkeypatch.setattr(sys, "stdin", io.StringIO((PASSWORD + "\n") * 3))
        assert cli.main(["alarms", "ack", PH, "--config", str(site), "--user", "nobody", "--password-stdin"]) == 1
        assert cli.main(["alarms", "ack", PH, "--config", str(site), "--user", "enf", "--password-stdin"]) == 1
        assert "an enforcement user may not ack alarms" in capsys.readouterr().err
        assert cli.main(["alarms", "ack", PH, "--config", str(site), "--user", "other", "--password-stdin"]) == 1
        assert "not one of Other Co.'s sites" in capsys.readouterr().err
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal, no --password-stdin: refused
        assert cli.main(["alarms", "ack", PH, "--config", str(site), "--user", "jdoe"]) == 1
        assert "--password-stdin" in capsys.readouterr().err
        os.chown(db, 4242, -1)  # the database is another account's: this one is not the service account
        try:
            assert cli.main(["alarms", "ack", PH, "--config", str(site)]) == 1
            assert "not the daemon's service account" in capsys.readouterr().err
        finally:
            os.chown(db, os.geteuid(), -1)
    with CommandQueue(path=db) as q:  # none of them was queued
        with pytest.raises(KeyError):
            q.get(1)
