"""A server that accepts connections and never answers: a wedged inference server, a stuck load balancer.

    with SilentServer() as silent:
        APIServerConfig(base_url=silent.base_url, ...)  # every request and health probe hangs

A real listening TCP socket on a free loopback port; a thread accepts every connection, reads and
discards what the client sends, and holds the connection open without writing a byte until
``stop()``. ``accepted`` counts the connections taken.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Optional


class SilentServer:
    """Accepts TCP connections on ``127.0.0.1:port`` and never answers (see the module docstring)."""

    def __init__(self) -> None:
        self._listener: Optional[socket.socket] = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.port = 0
        self.accepted = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> SilentServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        listener.settimeout(0.1)
        self._listener, self.port = listener, listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                self._drain()
                continue
            except OSError:
                return
            conn.setblocking(False)
            with self._lock:
                self._conns.append(conn)
                self.accepted += 1
            self._drain()

    def _drain(self) -> None:
        """Read and drop what clients sent, so that no client ever blocks on a full buffer."""
        with self._lock:
            for conn in list(self._conns):
                try:
                    while conn.recv(65536):
                        pass
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    self._conns.remove(conn)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        if self._listener is not None:
            self._listener.close()
        self._listener, self._thread = None, None

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


__all__ = ["SilentServer"]
