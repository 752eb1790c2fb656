"""Structured logs: one line per record in logfmt or JSON, journald priorities and no timestamps when stderr
is the journal stream, secrets masked, state changes logged once."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.logs import (
    MASK,
    SKIPPED_EVERY,
    Redactor,
    SkippedRuns,
    StateLog,
    StructuredFormatter,
    configure_logging,
    is_journal_stream,
    priority,
    register_secret,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    """configure_logging replaces the root handlers; put pytest's back afterwards."""
    root, aps = logging.getLogger(), logging.getLogger("apscheduler")
    handlers, level, aps_level = list(root.handlers), root.level, aps.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    aps.setLevel(aps_level)


def record(msg: str, *args: object, level: int = logging.INFO, extra: dict[str, object] | None = None,
           exc: bool = False) -> logging.LogRecord:
    logger = logging.getLogger("pretreat.test")
    exc_info = None
    if exc:
        try:
            raise RuntimeError("disk full\nsecond line")
        except RuntimeError:
            exc_info = sys.exc_info()
    return logger.makeRecord("pretreat.test", level, __file__, 1, msg, args, exc_info, extra=extra)


def parse_logfmt(line: str) -> dict[str, str]:
    """A minimal logfmt reader: bare values, or JSON-quoted strings."""
    out = {}
    for m in re.finditer(r'(\S+?)=("(?:[^"\\]|\\.)*"|\S*)', line):
        key, value = m.group(1), m.group(2)
        out[key] = json.loads(value) if value.startswith('"') else value
    return out


def test_kv_line_is_one_line_with_escaped_message_extras_and_traceback() -> None:
    f = StructuredFormatter(fmt="kv")
    line = f.format(record('link %s down: "%s"\nretrying', "rtu:/dev/ttyUSB0", "no reply", level=logging.WARNING,
                           extra={"link": "rtu:/dev/ttyUSB0", "outage_s": 12.5, "up": False}, exc=True))
    assert "\n" not in line
    fields = parse_logfmt(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fields["time"])
    assert fields["level"] == "warning" and fields["logger"] == "pretreat.test"
    assert fields["msg"] == 'link rtu:/dev/ttyUSB0 down: "no reply"\nretrying'  # round-trips exactly
    assert (fields["link"], fields["outage_s"], fields["up"]) == ("rtu:/dev/ttyUSB0", "12.5", "false")
    assert fields["exc"].startswith("Traceback") and "disk full\nsecond line" in fields["exc"]
    assert list(fields)[:4] == ["time", "level", "logger", "msg"]


def test_json_line_parses_and_keeps_types() -> None:
    f = StructuredFormatter(fmt="json")
    line = f.format(record("sample", extra={"value": float("nan"), "polls": 3, "site": "acme"}))
    doc = json.loads(line)  # NaN would make the line invalid JSON: it is logged as a string
    assert doc["message"] == "sample" and doc["polls"] == 3 and doc["value"] == "nan" and doc["site"] == "acme"
    assert "time" in doc


def test_an_extra_named_like_a_standard_field_does_not_overwrite_it() -> None:
    line = StructuredFormatter(fmt="kv").format(record("x", extra={"logger": "spoofed"}))
    fields = parse_logfmt(line)
    assert fields["logger"] == "pretreat.test" and fields["field.logger"] == "spoofed"


@pytest.mark.parametrize(("level", "prio"), [(logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4),
                                             (logging.INFO, 6), (logging.DEBUG, 7), (25, 6), (35, 4)])
def test_python_levels_map_to_syslog_priorities(level: int, prio: int) -> None:
    assert priority(level) == prio


def test_journal_lines_carry_the_priority_prefix_and_no_timestamp() -> None:
    for fmt in ("kv", "json"):
        f = StructuredFormatter(fmt=fmt, journal=True)
        err = f.format(record("historian write failed", level=logging.ERROR))
        info = f.format(record("running", level=logging.INFO))
        assert err.startswith("<3>") and info.startswith("<6>")
        assert "time" not in (parse_logfmt(info[3:]) if fmt == "kv" else json.loads(info[3:]))


def test_journal_stream_is_recognised_by_device_and_inode(tmp_path: Path) -> None:
    with (tmp_path / "stream").open("w") as journal, (tmp_path / "other").open("w") as other:
        st = os.fstat(journal.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert is_journal_stream(journal, env)
        assert not is_journal_stream(other, env)  # inherited variable, stderr redirected elsewhere
        assert not is_journal_stream(journal, {})
        assert not is_journal_stream(journal, {"JOURNAL_STREAM": "garbage"})
        assert not is_journal_stream(io.StringIO(), env)


def test_a_process_whose_stderr_is_the_journal_stream_writes_journald_lines(tmp_path: Path) -> None:
    """As under systemd: stderr is a stream whose dev:inode is in $JOURNAL_STREAM (here a file)."""
    code = ("import logging; from monitor.logs import configure_logging; configure_logging(level='DEBUG'); "
            "log = logging.getLogger('monitor.app'); log.debug('d'); log.info('i'); log.warning('w'); "
            "log.error('e'); log.critical('c')")
    out = tmp_path / "stderr"
    with out.open("w") as err:
        st = os.fstat(err.fileno())
        for env_extra in ({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, {}):
            subprocess.run([sys.executable, "-c", code], cwd=ROOT, stderr=err, check=True, timeout=30,
                           env={**{k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}, **env_extra})
    lines = out.read_text().splitlines()
    assert [ln[:3] for ln in lines[:5]] == ["<7>", "<6>", "<4>", "<3>", "<2>"]
    assert all("time=" not in ln for ln in lines[:5])
    # elsewhere the operator's text lines: local time and zone first (the default format)
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) \w$", ln)
               for ln in lines[5:]) and len(lines) == 10


def test_secrets_are_masked_in_messages_fields_tracebacks_and_urls() -> None:
    r = Redactor()
    r.add("s3cr3t-t0ken-value")
    f = StructuredFormatter(fmt="kv", redactor=r)
    line = f.format(record("connect mqtt://plant:hunter2@broker:1883 password=hunter2 token: abc Authorization: "
                           "Bearer xyz.123 with s3cr3t-t0ken-value", extra={"smtp_password": "pw", "token": "t"}))
    for secret in ("hunter2", "abc", "xyz.123", "s3cr3t-t0ken-value", "=pw", "token=t "):
        assert secret not in line + " ", f"{secret!r} leaked: {line}"
    fields = parse_logfmt(line)
    assert fields["smtp_password"] == MASK and fields["token"] == MASK
    assert "mqtt://plant:***@broker:1883" in fields["msg"] and "Authorization: Bearer ***" in fields["msg"]
    # names of secrets are not secrets: the credential name and the file path stay readable
    ok = "token_credential 'influx-token': $CREDENTIALS_DIRECTORY is not set; token file /etc/x unreadable"
    assert r.text(ok) == ok


def test_a_registered_secret_never_reaches_the_log_even_inside_an_exception(
        restore_root_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(fmt="json", stream=stream)
    register_secret("Zq9-influx-token-Xw")
    log = logging.getLogger("monitor.stores.influx")
    try:
        raise PermissionError("server refused token Zq9-influx-token-Xw")
    except PermissionError:
        log.exception("InfluxDB write failed")
    doc = json.loads(stream.getvalue())
    assert "Zq9-influx-token-Xw" not in stream.getvalue()
    assert MASK in doc["exc"]


def test_configure_logging_rejects_unknown_levels_and_formats(restore_root_logging: None) -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging(level="VERBOSE", stream=io.StringIO())
    with pytest.raises(ValueError, match="log format"):
        configure_logging(fmt="xml", stream=io.StringIO())  # type: ignore[arg-type]


def test_configure_logging_applies_level_and_replaces_handlers(restore_root_logging: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(level="INFO", stream=first, journal=False)
    configure_logging(level="WARNING", stream=second, journal=False)
    log = logging.getLogger("monitor.app")
    log.info("not shown")
    log.warning("shown")
    assert first.getvalue() == ""  # replaced, not duplicated
    assert second.getvalue().count("\n") == 1 and second.getvalue().endswith(" WARNING shown\n")


def test_state_log_logs_each_change_once(caplog: pytest.LogCaptureFixture) -> None:
    states = StateLog(logging.getLogger("drivers.modbus.link"), quiet_initial=frozenset({"up"}))
    with caplog.at_level(logging.INFO, logger="drivers.modbus.link"):
        assert not states.change("tcp:10.0.0.5:502", "up")  # a healthy start says nothing
        assert states.change("tcp:10.0.0.5:502", "down", level=logging.WARNING, reason="no reply")
        assert not states.change("tcp:10.0.0.5:502", "down", level=logging.WARNING, reason="no reply")
        assert states.change("tcp:10.0.0.5:502", "up", outage_s=12.0)
        assert states.change("rtu:/dev/ttyUSB0", "down", level=logging.WARNING, msg="spoof")
    assert [r.getMessage() for r in caplog.records] == [
        "tcp:10.0.0.5:502: down", "tcp:10.0.0.5:502: up", "rtu:/dev/ttyUSB0: down"]
    down, up, other = caplog.records
    assert (down.levelno, down.state, down.previous, down.reason) == (logging.WARNING, "down", "up", "no reply")  # type: ignore[attr-defined]
    assert (up.previous, up.outage_s) == ("down", 12.0)  # type: ignore[attr-defined]
    assert getattr(other, "field.msg") == "spoof"  # a field named like a LogRecord attribute is renamed
    assert states.state("tcp:10.0.0.5:502") == "up"


def test_per_job_chatter_of_the_scheduler_is_silenced_above_debug(restore_root_logging: None) -> None:
    stream = io.StringIO()
    aps = logging.getLogger("apscheduler.executors.default")
    configure_logging(level="INFO", stream=stream, journal=False)
    aps.info('Job "Daemon._poll" executed successfully')
    aps.warning("Run time of job was missed by 0:00:02")
    configure_logging(level="DEBUG", stream=stream, journal=False)
    aps.info('Job "Daemon._tick" executed successfully')
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "missed" in lines[0] and "_tick" in lines[1]


def test_a_job_still_running_when_due_again_is_said_in_words_once_a_minute(restore_root_logging: None) -> None:
    """A real APScheduler with a job slower than its interval (what a busy machine does to the demo's 50 ms
    tick): APScheduler warns at every skipped run, with its job repr and a UTC time; the daemon's log says it in
    words, once a minute at most, with the count so far."""
    import asyncio

    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, journal=False)
    [skips] = [f for f in logging.getLogger("apscheduler.scheduler").filters if isinstance(f, SkippedRuns)]
    skips.skipped.clear()

    async def tick() -> None:
        await asyncio.sleep(0.3)

    async def scenario() -> None:
        scheduler = AsyncIOScheduler()
        scheduler.add_job(tick, "interval", seconds=0.05, max_instances=1, name="Daemon._tick")
        scheduler.start()
        try:
            for _ in range(400):  # until APScheduler has skipped three runs (at most 20 s)
                if skips.skipped.get("Daemon._tick", 0) >= 3:
                    break
                await asyncio.sleep(0.05)
        finally:
            scheduler.shutdown(wait=False)

    asyncio.run(scenario())
    assert skips.skipped["Daemon._tick"] >= 3
    lines = [line for line in stream.getvalue().splitlines() if "still running" in line or "skipped" in line]
    assert len(lines) == 1, lines  # one line for all of them within the minute
    assert ("the clock tick (staleness, alarm timers) (every 0.05 s) was still running when it was due again: "
            "1 run(s) skipped so far") in lines[0]
    assert "trigger" not in lines[0] and "next run at" not in lines[0]


def test_the_skipped_runs_line_comes_again_after_a_minute_with_the_count() -> None:
    now = [1000.0]
    skips = SkippedRuns(clock=lambda: now[0])
    job = type("Job", (), {"name": "Polls.round", "trigger": None})()

    def record() -> logging.LogRecord:
        return logging.LogRecord("apscheduler.scheduler", logging.WARNING, "", 0,
                                 'Execution of job "%s" skipped: maximum number of running instances reached (%d)',
                                 (job, 2), None)

    shown = [skips.filter(r := record()) and r.getMessage() for _ in range(3)]
    now[0] += SKIPPED_EVERY
    later = record()
    assert skips.filter(later)
    assert shown[1:] == [False, False] and "a round of polls (when due)" in str(shown[0])
    assert "4 run(s) skipped so far" in later.getMessage()
    other = logging.LogRecord("apscheduler.scheduler", logging.WARNING, "", 0, "Run time of job was missed", (), None)
    assert skips.filter(other) and other.getMessage() == "Run time of job was missed"
