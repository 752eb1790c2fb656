"""Real servers for the notification tests: SMTP (aiosmtpd, STARTTLS + AUTH) and an HTTP receiver.

Both run in a background thread on a free loopback port and record what they received. The SMTP server uses
a self-signed certificate made with the ``openssl`` CLI for the test, and requires STARTTLS before AUTH
(PLAIN or LOGIN) and AUTH before MAIL: a client that skips either is refused, as a real submission server
would. Tests can make either server answer with chosen failures, or stop and start it on the same port.
"""

from __future__ import annotations

import email
import email.policy
import http.server
import json
import ssl
import subprocess
import threading
from collections import deque
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.support import PATIENCE, free_port, require_binary, wait_until


def self_signed_cert(workdir: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 / localhost, valid for a day."""
    openssl = require_binary("openssl")
    cert, key = workdir / "smtp-cert.pem", workdir / "smtp-key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return cert, key


@dataclass
class _Mailbox:
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    auth: list[tuple[str, str]] = field(default_factory=list)  # (mechanism, login) of accepted logins
    reject_rcpt: dict[str, str] = field(default_factory=dict)  # address → SMTP reply, e.g. "550 no such user"
    data_replies: deque[str] = field(default_factory=deque)  # next DATA replies (then "250 OK")
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler:
    def __init__(self, box: _Mailbox) -> None:
        self.box = box

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope, address: str,
                          rcpt_options: list[str]) -> str:
        reply = self.box.reject_rcpt.get(address)
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self.box.lock:
            if self.box.data_replies:
                return self.box.data_replies.popleft()
            raw = envelope.original_content or envelope.content or b""
            msg = email.message_from_bytes(raw if isinstance(raw, bytes) else raw.encode(),
                                           policy=email.policy.default)
            assert isinstance(msg, EmailMessage)
            self.box.messages.append(msg)
            self.box.envelopes.append((str(envelope.mail_from), list(envelope.rcpt_tos)))
        return "250 OK"


class SmtpServer:
    """aiosmtpd on 127.0.0.1:``port`` with STARTTLS required and AUTH (``user``/``password``) required."""

    def __init__(self, workdir: Path, *, user: str = "alarms@example.org", password: str = "s3cret pw") -> None:
        self.user, self.password = user, password
        self.cert, self.key = self_signed_cert(workdir)
        self.port = free_port()
        self.box = _Mailbox()
        self._controller: Controller | None = None

    def _authenticate(self, server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                      data: Any) -> AuthResult:
        if (isinstance(data, LoginPassword) and data.login.decode() == self.user
                and data.password.decode() == self.password):
            with self.box.lock:
                self.box.auth.append((mechanism, self.user))
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    def start(self) -> None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(self.cert, self.key)
        self._controller = Controller(_Handler(self.box), hostname="127.0.0.1", port=self.port,
                                      tls_context=tls, require_starttls=True, authenticator=self._authenticate,
                                      auth_required=True, auth_require_tls=True, ready_timeout=10.0)
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    @property
    def messages(self) -> list[EmailMessage]:
        with self.box.lock:
            return list(self.box.messages)

    def wait_for(self, count: int, timeout: float = PATIENCE) -> list[EmailMessage]:
        wait_until(lambda: len(self.messages) >= count, timeout)
        return self.messages


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class HttpReceiver:
    """A small HTTP server that records every POST and answers with queued statuses (then 200)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Request] = []
        self.statuses: deque[int] = deque()  # the next replies' status codes; 200 when empty
        self.lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    status = receiver.statuses.popleft() if receiver.statuses else 200
                    receiver.requests.append(Request(self.path, dict(self.headers.items()), body))
                reply = b'{"ok": true}' if status < 300 else b'{"error": "rejected by the test receiver"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="http-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def received(self) -> list[Request]:
        with self.lock:
            return list(self.requests)

    def wait_for(self, count: int, timeout: float = PATIENCE) -> list[Request]:
        wait_until(lambda: len(self.received()) >= count, timeout)
        return self.received()


@dataclass(frozen=True)
class Received:
    topic: str
    payload: bytes
    retain: bool
    dup: bool = False  # the broker's re-delivery of a message it had sent before (QoS 1 at-least-once)

    def json(self) -> Any:
        return json.loads(self.payload)


class MqttProbe:
    """A plain paho subscriber (its own network thread), as a plant's SCADA would be, recording messages.

    ``clean_session=False`` with a fixed ``client_id`` keeps its subscriptions and QoS 1 backlog in the broker
    while it is away (with a persistent broker, across a broker restart too).
    """

    def __init__(self, port: int, topics: list[str], *, client_id: str = "", clean_session: bool = True) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self._topics = topics
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                                  clean_session=clean_session)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *_a: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.05, 0.2)
        self.port = port

    def _on_connect(self, client: Any, _u: Any, _f: Any, rc: Any, _p: Any) -> None:
        if not rc.is_failure:
            client.subscribe([(t, 1) for t in self._topics])

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        with self.lock:
            self.received.append(Received(msg.topic, bytes(msg.payload), bool(msg.retain), bool(msg.dup)))

    def start(self, timeout: float = 5.0) -> MqttProbe:
        self.client.connect("127.0.0.1", self.port, keepalive=5)
        self.client.loop_start()
        if not self.subscribed.wait(timeout):
            raise TimeoutError("probe did not subscribe")
        return self

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def messages(self, topic: str | None = None) -> list[Received]:
        with self.lock:
            return [m for m in self.received if topic is None or m.topic == topic]

    def wait_for(self, topic: str, count: int, timeout: float = PATIENCE) -> list[Received]:
        wait_until(lambda: len(self.messages(topic)) >= count, timeout)
        return self.messages(topic)
