"""Run a paho-mqtt client on an asyncio event loop instead of paho's own network thread.

paho's external-event-loop API: paho reports when its socket opens, closes, and has bytes waiting to be
written; we watch the socket with ``add_reader``/``add_writer`` and call ``loop_read``/``loop_write`` when it
is ready. Everything paho does in response, including every user callback (``on_message`` …), then runs on
the loop thread. The one exception is ``Client.reconnect()``, which blocks (DNS, TCP connect) and so runs in
an executor thread: the socket callbacks it triggers are handed to the loop with ``call_soon_threadsafe``, in
order, and each handler checks that the descriptor is still the client's current socket before watching it
(a descriptor number can be reused by the next connection once closed).

paho surprises worth knowing (2.2): ``loop_read`` handles at most one packet per call for a pure subscriber
(level-triggered ``add_reader`` calls it again while bytes remain); ``loop_misc`` must be called about once a
second for keepalive pings; and with ``on_socket_register_write`` set, queued packets (acks, SUBSCRIBE) are
never written synchronously, only from the writer callback.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt


class LoopBinding:
    """Installs the socket callbacks of ``client`` so that its I/O runs on ``loop``. Create it on the loop."""

    def __init__(self, *, client: mqtt.Client, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop
        self._loop_thread = threading.get_ident()
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._on_socket_close
        client.on_socket_register_write = self._on_register_write
        client.on_socket_unregister_write = self._on_unregister_write

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _in_loop(self, fn: Callable[[int], Any], fd: int) -> None:
        if self.on_loop_thread():
            fn(fd)
        else:
            self._loop.call_soon_threadsafe(fn, fd)

    def _current_fd(self) -> int:
        sock = self._client.socket()
        return sock.fileno() if sock is not None else -1

    def _on_socket_open(self, _c: mqtt.Client, _u: Any, sock: Any) -> None:
        self._in_loop(self._watch_read, sock.fileno())

    def _watch_read(self, fd: int) -> None:
        if fd >= 0 and fd == self._current_fd():
            self._loop.add_reader(fd, self._client.loop_read)

    def _on_socket_close(self, _c: mqtt.Client, _u: Any, sock: Any) -> None:
        # paho calls this just before closing, so the descriptor is still valid here.
        self._in_loop(self._unwatch, sock.fileno())

    def _unwatch(self, fd: int) -> None:
        if fd >= 0:
            self._loop.remove_reader(fd)
            self._loop.remove_writer(fd)

    def _on_register_write(self, _c: mqtt.Client, _u: Any, sock: Any) -> None:
        self._in_loop(self._watch_write, sock.fileno())

    def _watch_write(self, fd: int) -> None:
        if fd >= 0 and fd == self._current_fd():
            self._loop.add_writer(fd, self._client.loop_write)

    def _on_unregister_write(self, _c: mqtt.Client, _u: Any, sock: Any) -> None:
        self._in_loop(self._unwatch_write, sock.fileno())

    def _unwatch_write(self, fd: int) -> None:
        if fd >= 0:
            self._loop.remove_writer(fd)
