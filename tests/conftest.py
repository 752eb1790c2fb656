"""Fixtures that start real servers on free loopback ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Mosquitto, VictoriaMetrics


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A fresh broker per test (tests restart it to exercise reconnects)."""
    broker = Mosquitto(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """A fresh VictoriaMetrics (InfluxDB write API) per test; tests stop/start it to simulate outages."""
    server = VictoriaMetrics(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[Any]:
    """A real SMTP server (aiosmtpd) requiring STARTTLS and AUTH, with a self-signed certificate
    (tests.notify_servers.SmtpServer: ``cert`` to trust, ``user``/``password``, ``messages``)."""
    from tests.notify_servers import SmtpServer

    server = SmtpServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_receiver() -> Iterator[Any]:
    """A real HTTP server recording POSTs (tests.notify_servers.HttpReceiver: ``url``, ``statuses``)."""
    from tests.notify_servers import HttpReceiver

    server = HttpReceiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
