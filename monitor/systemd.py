"""Talking to systemd: the sd_notify protocol (READY, STATUS, WATCHDOG, STOPPING) and the watchdog heartbeat.

The protocol is small enough to speak with a plain socket, so there is no dependency on libsystemd or a
binding: each message is one datagram of ``KEY=VALUE`` lines sent to the ``AF_UNIX`` socket named by
``$NOTIFY_SOCKET``. A name starting with ``@`` is in the abstract namespace (the ``@`` stands for a leading
NUL byte). When ``$NOTIFY_SOCKET`` is unset (a terminal, a test, `make demo`, another init system) every
call is a no-op, so the daemon runs the same way everywhere.

systemd only accepts notifications from the main process (``NotifyAccess=main``, the default for
``Type=notify``); the daemon sends them from its own process, never from a helper.

Watchdog (``WatchdogSec=`` in the unit): systemd passes the interval as ``$WATCHDOG_USEC`` and, so that a
child that inherited the environment does not think it is watched, the watched process id as
``$WATCHDOG_PID``. If ``WATCHDOG=1`` does not arrive within the interval, systemd kills the service with
``WatchdogSignal=`` (SIGABRT) and ``Restart=on-failure`` starts it again. `Heartbeat` decides when to pet:
only when the scheduler job calling it runs (so a stuck event loop or a dead scheduler stops the petting)
*and* polls are still completing (so a daemon whose every poll hangs is restarted too).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from monitor.logtext import duration

if TYPE_CHECKING:
    from config.schema import SiteConfig

log = logging.getLogger(__name__)

# A send waits at most this long when systemd's receive queue is full. sd_notify() itself blocks without
# limit; a bound keeps a wedged service manager from freezing the event loop, at the price of a lost
# message (counted), which for WATCHDOG=1 is repaired by the next heartbeat.
SEND_TIMEOUT = 0.5


def notify_address(value: str) -> str | bytes | None:
    """The ``sendto`` address for a ``$NOTIFY_SOCKET`` value, or None when it is not one we can use.

    ``/path`` is a file-system socket; ``@name`` is the abstract namespace (Linux): the address is the
    name with a leading NUL byte and no trailing one. Other forms (``vsock:…`` from newer systemd
    versions) are not supported and make notifications a no-op, with one warning.
    """
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return b"\0" + value[1:].encode()
    return None


def watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """The watchdog interval in seconds that systemd expects pets within, or None when not watched.

    ``$WATCHDOG_PID``, when set, must be our pid: a process that inherited the variables from its parent
    is not the watched one. A malformed or zero value means "not watched" (what sd_watchdog_enabled does).
    """
    usec = env.get("WATCHDOG_USEC", "")
    if not usec:
        return None
    wpid = env.get("WATCHDOG_PID", "")
    if wpid and wpid != str(pid):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 1_000_000 if value > 0 else None


class SystemdNotifier:
    """Sends sd_notify messages; every method is a no-op when there is no socket.

    ``address`` is what `notify_address` returns (None disables). Failures to send are counted in
    ``failures`` and logged once, never raised: the service manager's bookkeeping must not take the
    monitoring down. (Under ``Type=notify`` a lost READY=1 makes systemd time the start out and restart
    the service, which is the right outcome for a manager we cannot talk to.)
    """

    def __init__(self, *, address: str | bytes | None, watchdog_interval: float | None = None) -> None:
        self.address = address
        self.watchdog_interval = watchdog_interval
        self.sent = 0
        self.failures = 0
        self._sock: socket.socket | None = None
        self._warned = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SystemdNotifier:
        """The notifier described by ``$NOTIFY_SOCKET`` / ``$WATCHDOG_USEC`` / ``$WATCHDOG_PID``.

        The variables are left in the environment: the daemon starts no children that could misuse them.
        """
        env = os.environ if env is None else env
        raw = env.get("NOTIFY_SOCKET", "")
        address = notify_address(raw) if raw else None
        if raw and address is None:
            log.warning("NOTIFY_SOCKET=%r is not a socket address this daemon supports; "
                        "systemd notifications disabled", raw)
        return cls(address=address, watchdog_interval=watchdog_interval(env, os.getpid()))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    # -- the messages ---------------------------------------------------------------------------------
    def ready(self, status: str = "") -> bool:
        """READY=1: the service is up (stores open, polling started). Sent once, after start-up."""
        return self.send(("READY=1", *_status(status)))

    def status(self, text: str) -> bool:
        """STATUS=: one line shown by ``systemctl status`` (newlines are replaced by spaces)."""
        return self.send(_status(text))

    def watchdog(self) -> bool:
        """WATCHDOG=1: "still alive". Call it through `Heartbeat`, which knows when not to."""
        return self.send(("WATCHDOG=1",))

    def stopping(self, status: str = "") -> bool:
        """STOPPING=1: shutdown has begun; systemd stops expecting watchdog pets."""
        return self.send(("STOPPING=1", *_status(status)))

    def extend_timeout(self, seconds: float) -> bool:
        """EXTEND_TIMEOUT_USEC=: ask for more time to start or stop (a long historian flush)."""
        return self.send((f"EXTEND_TIMEOUT_USEC={max(1, round(seconds * 1_000_000))}",))

    # -- the wire -------------------------------------------------------------------------------------
    def send(self, lines: tuple[str, ...]) -> bool:
        """Send one datagram of ``lines``; True if delivered, False if disabled or failed."""
        if self.address is None or not lines:
            return False
        payload = ("\n".join(lines) + "\n").encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.settimeout(SEND_TIMEOUT)
            self._sock.sendto(payload, self.address)
        except OSError as exc:
            self.failures += 1
            if not self._warned:
                self._warned = True  # one line per outage of the notify socket, not one per heartbeat
                log.warning("cannot notify systemd (%s): %s", _errname(exc), " ".join(lines)[:80])
            return False
        if self._warned:
            self._warned = False
            log.info("systemd notifications delivered again after %d failures", self.failures)
        self.sent += 1
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Heartbeat:
    """The watchdog policy: pet systemd only while the daemon is making progress.

    Schedule `job` every `interval` seconds on the daemon's scheduler, and call `progress` whenever a poll completes
    (good or bad samples alike: a device that does not answer still completes its poll, after its
    timeout). The pet is withheld when no poll has completed for ``stall_after`` seconds: that happens
    only if every polled device's poll hangs (an await that never returns), and a restart is then the
    cure. ``stall_after`` = infinity disables the progress test (a site with only MQTT instruments, whose
    silence is a data problem that staleness alarms report, not a stuck daemon).

    Times are on ``clock`` (monotonic by default) so an NTP step of the wall clock changes nothing here.
    A surprise worth knowing: APScheduler 3 plans every job on the *wall* clock (``datetime.now()``), so a
    backward step of the clock delays every job, polls and this one alike, by the size of the step. A step
    longer than WatchdogSec therefore gets the daemon restarted, which is also what resumes its polling.
    """

    def __init__(self, *, notifier: SystemdNotifier, stall_after: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not stall_after > 0:
            raise ValueError(f"stall_after must be positive seconds, got {stall_after!r}")
        self.notifier = notifier
        self.stall_after = stall_after
        self.clock = clock
        self.last_progress = clock()  # start-up counts: the first polls have a full window to complete
        self.pets = 0
        self.withheld = 0
        self.stalled = False

    @property
    def interval(self) -> float | None:
        """How often to call `beat`: a third of systemd's interval (two pets may be late before it
        fires), or None when the service is not watched (no heartbeat job needed)."""
        wd = self.notifier.watchdog_interval
        return None if wd is None else max(wd / 3, 0.05)

    def progress(self) -> None:
        self.last_progress = self.clock()

    def healthy(self) -> bool:
        return self.clock() - self.last_progress <= self.stall_after

    async def job(self) -> bool:
        """The scheduler job. A coroutine on purpose: APScheduler's AsyncIOExecutor runs ``async def`` jobs
        on the event loop but plain functions in a thread pool, where a pet would prove nothing about the
        loop. Schedule it as ``scheduler.add_job(heartbeat.job, "interval", seconds=heartbeat.interval)``."""
        return self.beat()

    def beat(self) -> bool:
        """Pet the watchdog if polls are progressing; log once when that stops and once when it resumes."""
        if self.healthy():
            if self.stalled:
                self.stalled = False
                log.warning("polls progressing again; watchdog resumed")
            self.pets += 1
            self.notifier.watchdog()
            return True
        self.withheld += 1
        if not self.stalled:
            self.stalled = True
            log.error("no poll completed for %s; withholding the systemd watchdog so the service "
                      "is restarted", duration(self.clock() - self.last_progress))
        return False


def stall_after_for(config: SiteConfig, *, floor: float = 60.0, factor: float = 3.0) -> float:
    """How long without any completed poll means the daemon is stuck, for `Heartbeat`.

    The slowest polled instrument needs at most one interval plus its reply timeout to complete a poll
    (a dead device answers nothing and its poll ends at the timeout); ``factor`` of that, never less than
    ``floor`` seconds, leaves room for a bus shared by several slow units. Infinity when nothing is polled.
    """
    polled = [i for s in config.sites for i in s.instruments if i.driver.is_modbus]
    if not polled:
        return math.inf
    slowest = max(i.poll_interval + i.timeout for i in polled)
    return max(floor, factor * slowest)


def _status(text: str) -> tuple[str, ...]:
    if not text:
        return ()
    return ("STATUS=" + " ".join(text.splitlines()),)


def _errname(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)
