"""A local mosquitto for `pretreat sim`, so the demo's MQTT instruments work without setting up a broker.

Started only for brokers configured on a loopback address whose port nobody listens on yet, and only if the
``mosquitto`` binary is installed; stopped (SIGTERM) when the simulator stops. Anonymous, no persistence,
bound to 127.0.0.1: a demo convenience, never a production broker.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from config.schema import DriverKind, SiteConfig

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def missing_brokers(config: SiteConfig) -> list[int]:
    """Loopback broker ports of the configured MQTT instruments that nothing listens on."""
    ports = {i.mqtt.port for i in config.instruments
             if i.driver is DriverKind.MQTT and i.mqtt is not None and i.mqtt.host in _LOOPBACK}
    return sorted(p for p in ports if not listening("127.0.0.1", p))


class LocalBroker:
    """One mosquitto process on 127.0.0.1:``port``."""

    def __init__(self, *, port: int, binary: str | None = None) -> None:
        found = binary or shutil.which("mosquitto") or next(
            (p for p in ("/usr/sbin/mosquitto",) if Path(p).exists()), None)
        if found is None:
            raise FileNotFoundError("mosquitto is not installed (apt-get install -y mosquitto)")
        self.binary = found
        self.port = port
        self._dir = tempfile.TemporaryDirectory(prefix="pretreat-sim-broker-")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: float = 5.0) -> None:
        conf = Path(self._dir.name) / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                        f"log_dest file {Path(self._dir.name) / 'broker.log'}\nmax_queued_messages 100000\n")
        self._proc = subprocess.Popen([self.binary, "-c", str(conf)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + wait
        while not listening("127.0.0.1", self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise OSError(f"mosquitto did not start on 127.0.0.1:{self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._dir.cleanup()
