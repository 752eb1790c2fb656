"""The daemon's log: one line per record, for operators (``text``, the default) or for machines (``json``,
``kv``), journald-friendly, no secrets.

``text`` is what an operator reads at the site: ``2026-12-01 16:04:05 EST WARNING ALARM [high] acme-plating
ph ph_low: 4.82 pH (limit 5.00 pH)``, times in the sites' local zone, readings at their channel's resolution
(`monitor.logtext`, which the log calls use to word their messages). ``json`` keeps the structured form for
journald and log shippers: one object a line with ``time`` (ISO 8601, UTC), ``level``, ``logger``,
``message`` and the record's fields (``extra=``: site, channel, value as measured, seconds...). ``kv`` is
the same as logfmt ``key=value`` pairs (``msg=`` for the message).

Why one line: journald (and every log shipper) splits a stream on newlines, so a traceback printed over
twenty lines becomes twenty entries, of which only the first carries the priority. Here a record is always
one line: newlines inside the message, a field or a traceback are escaped (``\\n``; in ``text``, `` | ``
before a traceback).

Under systemd, stderr is connected to the journal and ``$JOURNAL_STREAM`` holds its ``device:inode``.
When our stderr is that stream, lines carry no timestamp of our own (journald stamps each entry, more
precisely and in one clock for every service) and start with the syslog priority in angle brackets
(``<3>`` error, ``<4>`` warning, ``<6>`` info, ``<7>`` debug), which journald strips and stores as the
entry's PRIORITY, so ``journalctl -p warning`` works. Anywhere else lines start with the time (``text``:
local, ``json``/``kv``: UTC).

Extra fields: ``log.warning("link down", extra={"link": key, "reason": why})`` adds ``link=… reason=…``
to the line (and keys to the JSON object). `StateLog` logs a state change once and stays quiet while the
state holds (style rule 11: log state changes, count everything else).

Secrets never reach the log: values of fields named like secrets (``password``, ``token``, ``secret``,
``authorization``, ``api_key``), ``password=…``/``token: …``/``Authorization: Bearer …`` inside messages,
the password of a URL (``mqtt://user:pw@host``) and every value passed to `register_secret` are replaced by
``***``. Nothing in the daemon calls `register_secret` yet: the tokens and passwords of the site file are
masked only by the field-name and message rules above, so code that logs one must log it under such a name.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import Mapping
from datetime import tzinfo
from typing import IO, Any, Literal

from monitor.logtext import local_time

LogFormat = Literal["text", "json", "kv"]
FORMATS: tuple[LogFormat, ...] = ("text", "json", "kv")
MASK = "***"

# syslog priorities (RFC 5424 severity) for Python's levels; NOTICE (5) has no Python level.
_PRIORITY = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}

_SECRET_WORDS = r"password|passwd|secret|token|api[_-]?key|access[_-]?key|authorization"
_SECRET_KEY = re.compile(rf"(?i)(^|[_.-])({_SECRET_WORDS})($|[_.-])")
# key=value, key: value, "key": "value", 'key': 'value'; an auth scheme word (Bearer/Token/Basic) is kept.
# A quote after the key must match one before it, so "…'influx-token': …" (a name, not a key) is left alone.
_SECRET_IN_TEXT = re.compile(
    rf"""(?ix)(["']?)\b({_SECRET_WORDS})\b\1 (\s*[=:]\s*) ((?:bearer|token|basic)\s+)?
         ("[^"]*"|'[^']*'|[^\s,;&}})\]]+)""")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):([^/\s@]+)@")
# Libraries that log an INFO line per routine event: APScheduler says "Job … executed successfully" for
# every poll (three lines a second for the demo site), which would bury the state changes in the journal.
_CHATTY = ("apscheduler",)
_MIN_SECRET = 4  # shorter registered values would mask ordinary words; such secrets are too weak anyway


class Redactor:
    """Masks secrets in text and fields. Thread-safe: the historian's writer thread logs too."""

    def __init__(self) -> None:
        self._values: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, secret: str) -> None:
        """Mask this exact value wherever it appears (and each of its lines, for a multi-line secret)."""
        parts = {p.strip() for p in secret.splitlines()} | {secret.strip()}
        with self._lock:
            self._values = self._values | {p for p in parts if len(p) >= _MIN_SECRET}

    def text(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):  # longest first: no partial leftovers
            if value in text:
                text = text.replace(value, MASK)
        text = _URL_PASSWORD.sub(rf"\1:{MASK}@", text)
        return _SECRET_IN_TEXT.sub(_mask_match, text)

    def field(self, key: str, value: Any) -> Any:
        if _SECRET_KEY.search(key) and value not in (None, ""):
            return MASK
        return self.text(value) if isinstance(value, str) else value


def _mask_match(m: re.Match[str]) -> str:
    value = m.group(5)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4) or ''}{quote}{MASK}{quote}"


REDACTOR = Redactor()


def register_secret(value: str) -> None:
    """Never log ``value`` (a token, a password) from now on. Call it where the secret is read."""
    REDACTOR.add(value)


def priority(levelno: int) -> int:
    """The syslog priority journald should store for a Python level."""
    for threshold, prio in _PRIORITY:
        if levelno >= threshold:
            return prio
    return 7


def is_journal_stream(stream: IO[str], env: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` is the journal stream systemd connected (``$JOURNAL_STREAM`` = ``dev:inode``).

    Comparing device and inode, not just testing that the variable is set, matters: a process started
    from a service's shell inherits the variable while its stderr may be a terminal or a file.
    """
    value = (os.environ if env is None else env).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    try:
        st = os.fstat(stream.fileno())
        return (st.st_dev, st.st_ino) == (int(dev), int(ino))
    except (ValueError, OSError, AttributeError):  # no such variable, no fileno (StringIO), closed
        return False


class StructuredFormatter(logging.Formatter):
    """Formats a record as one text, JSON or logfmt line (see the module docstring).

    ``zone``: the time zone of ``text`` lines; None follows `monitor.logtext` (the sites' zone once the
    daemon has loaded its site file, the machine's before)."""

    def __init__(self, *, fmt: LogFormat = "text", journal: bool = False, redactor: Redactor = REDACTOR,
                 zone: tzinfo | None = None) -> None:
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.fmt = fmt
        self.journal = journal
        self.redactor = redactor
        self.zone = zone

    def fields(self, record: logging.LogRecord) -> dict[str, Any]:
        """The record as ordered fields: time (unless journald), level, logger, msg, extras, exc."""
        out: dict[str, Any] = {}
        if not self.journal:
            out["time"] = _iso(record.created)
        out["level"] = record.levelname.lower()
        out["logger"] = record.name
        out["msg"] = self.redactor.text(record.getMessage())
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key if key not in out else f"field.{key}"] = self.redactor.field(key, value)
        if record.exc_info:
            out["exc"] = self.redactor.text(self.formatException(record.exc_info))
        if record.stack_info:
            out["stack"] = self.redactor.text(self.formatStack(record.stack_info))
        return out

    def format(self, record: logging.LogRecord) -> str:
        if self.fmt == "text":
            line = self.text(record)
        elif self.fmt == "json":
            fields = {("message" if k == "msg" else k): v for k, v in self.fields(record).items()}
            line = json.dumps({k: _json_safe(v) for k, v in fields.items()}, ensure_ascii=False, default=str)
        else:
            line = " ".join(f"{k}={_kv_value(v)}" for k, v in self.fields(record).items())
        return f"<{priority(record.levelno)}>{line}" if self.journal else line

    def text(self, record: logging.LogRecord) -> str:
        """``2026-12-01 16:04:05 EST WARNING message | traceback``: the message as the log call worded it
        (its fields are for ``json``), one line; no time under journald, which stamps each entry."""
        parts = [] if self.journal else [local_time(record.created, self.zone)]
        parts += [record.levelname, self.redactor.text(record.getMessage())]
        line = " ".join(parts)
        if record.exc_info:
            line += " | " + self.redactor.text(self.formatException(record.exc_info))
        if record.stack_info:
            line += " | " + self.redactor.text(self.formatStack(record.stack_info))
        return _one_line(line)


_BARE = re.compile(r'[^\s"=\\]+')


def _one_line(text: str) -> str:
    """Line breaks shown as ``\\n``: journald and shippers split a stream on them (an operator's line is
    text, so nothing else is escaped)."""
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def _kv_value(value: Any) -> str:
    """logfmt: bare when unambiguous, else a JSON string (so quotes, backslashes and newlines escape)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = value if isinstance(value, str) else str(value)
    if _BARE.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: a bad reading's NaN is logged as the string "nan", not as an
    invalid document that a log shipper would drop."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _iso(created: float) -> str:
    ms = int(created * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{ms:03d}Z"


_SKIPPED = 'Execution of job "%s" skipped: maximum number of running instances reached (%d)'  # APScheduler 3's
_JOB_WORDS = {"Daemon._tick": "the clock tick (staleness, alarm timers)", "Polls.round": "a round of polls",
              "HealthWriter.write_async": "the health snapshot"}
SKIPPED_EVERY = 60.0  # s: at most one line a job in this long


class SkippedRuns(logging.Filter):
    """APScheduler's warning that a job was still running when it was due again, in the operator's words.

    Its own line names the job by its repr, with the next run time in UTC inside a line stamped in the site's
    time and the interval unrounded (``trigger: interval[0:00:00.050000]``), and comes once per skipped run:
    twice in one second on a busy machine at the demo's 50 ms tick. Here it says what was skipped and why it
    matters (the machine or the job is too slow for the interval), once a minute at most per job, with the runs
    of that job skipped so far. Other APScheduler records pass unchanged."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last: dict[str, float] = {}  # job -> when its last line was logged
        self.skipped: dict[str, int] = {}  # job -> runs skipped since the start
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _SKIPPED or not isinstance(record.args, tuple) or len(record.args) != 2:
            return True
        job, _limit = record.args
        name = str(getattr(job, "name", job))
        now = self._clock()
        with self._lock:
            self.skipped[name] = total = self.skipped.get(name, 0) + 1
            if now - self._last.get(name, -SKIPPED_EVERY) < SKIPPED_EVERY:
                return False
            self._last[name] = now
        interval = getattr(getattr(job, "trigger", None), "interval", None)
        every = f"every {interval.total_seconds():g} s" if interval is not None else "when due"
        record.msg = ("%s (%s) was still running when it was due again: %d run(s) skipped so far (the machine is "
                      "busy, or the job is slow for its interval)")
        record.args = (_JOB_WORDS.get(name, name), every, total)
        return True


_SKIPPED_RUNS = SkippedRuns()


def configure_logging(*, level: str | int = "INFO", fmt: LogFormat = "text", stream: IO[str] | None = None,
                      journal: bool | None = None) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as structured lines; replaces the root's handlers.

    ``journal`` None detects journald (`is_journal_stream`). ``level`` is a name or a number; an unknown
    name is an error (a typo in ``--log-level`` must not silently log at another level). Above DEBUG,
    libraries that log every routine run (APScheduler) are limited to warnings.
    """
    stream = sys.stderr if stream is None else stream
    numeric = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(StructuredFormatter(
        fmt=fmt, journal=is_journal_stream(stream) if journal is None else journal))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()  # a StreamHandler's close() leaves its stream open; a FileHandler's closes the file
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CHATTY:  # per-run facts are counted, not logged; DEBUG still shows them
        logging.getLogger(name).setLevel(logging.NOTSET if numeric <= logging.DEBUG else logging.WARNING)
    scheduler = logging.getLogger("apscheduler.scheduler")
    if _SKIPPED_RUNS not in scheduler.filters:
        scheduler.addFilter(_SKIPPED_RUNS)
    return handler


class StateLog:
    """Logs a thing's state only when it changes: the first state seen, then each change, once.

    ``change("rtu:/dev/ttyUSB0", "down", reason="no reply")`` logs
    ``msg="rtu:/dev/ttyUSB0: down" key=rtu:/dev/ttyUSB0 state=down previous=null reason="no reply"``; the
    same state again logs nothing. ``quiet`` states (e.g. "up" at start) are recorded without a line the
    first time, so a healthy start is not a wall of "up" lines.
    """

    def __init__(self, logger: logging.Logger, *, quiet_initial: frozenset[str] = frozenset()) -> None:
        self.logger = logger
        self.quiet_initial = quiet_initial
        self._states: dict[str, str] = {}

    def state(self, key: str) -> str | None:
        return self._states.get(key)

    def change(self, key: str, state: str, *, level: int = logging.INFO, **fields: Any) -> bool:
        """Record ``state`` for ``key``; log (and return True) only if it differs from the last one."""
        previous = self._states.get(key)
        if previous == state:
            return False
        self._states[key] = state
        if previous is None and state in self.quiet_initial:
            return False
        extra = {"key": key, "state": state, "previous": previous}
        extra.update({(k if k not in _STANDARD and k not in extra else f"field.{k}"): v
                      for k, v in fields.items()})
        self.logger.log(level, "%s: %s", key, state, extra=extra)
        return True
