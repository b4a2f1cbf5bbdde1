"""Small networking helpers shared by CLIs, tests and the demo: free ports, listening sockets,
whether a bind address is loopback, and readiness waits."""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING, Any, Optional

from atroposlib.utils.readiness import wait_until_answering

if TYPE_CHECKING:
    import subprocess


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` only reaches this machine (``127.x``, ``::1``, ``localhost``): the
    servers warn on any other address when they have no token."""
    return host in ("localhost", "::1") or host.startswith("127.")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port``, for a server to take over (``OSError`` when the address
    is taken or the host is not one of this machine's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def cannot_listen(host: str, port: int, error: OSError) -> str:
    """The one-line message of a server command that cannot listen on ``host:port``."""
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        hint = "is --host a name or address of this machine?"
    elif error.errno == errno.EACCES:
        hint = "ports below 1024 need privileges; pick another --port"
    else:
        hint = "is another server using it? pick another --port"
    return f"cannot listen on {host}:{port} ({error.strerror or error}); {hint}"


def listen_problem(host: str, port: int) -> Optional[str]:
    """Why a server could not listen on ``host:port`` right now (bind and release), or None."""
    try:
        listening_socket(host, port).close()
    except OSError as e:
        return cannot_listen(host, port, e)
    return None


def wait_for_http(
    url: str,
    timeout: float = 60.0,
    proc: Optional[subprocess.Popen[Any]] = None,
    headers: Optional[dict[str, str]] = None,
) -> None:
    """Poll ``url`` until it answers (any status < 500; the rule of ``readiness``). Raises
    ``TimeoutError`` or, if ``proc`` (a ``subprocess.Popen``) exits first, ``RuntimeError`` with its
    exit code."""

    def exited(_: str) -> Optional[BaseException]:
        if proc is not None and proc.poll() is not None:
            return RuntimeError(f"process exited with code {proc.returncode} before {url} answered")
        return None

    def timed_out(_: str, last: Optional[Exception]) -> BaseException:
        return TimeoutError(f"{url} did not answer within {timeout:.0f}s (last error: {last!r})")

    wait_until_answering(
        {url: url}, {url: timeout}, exited=exited, timed_out=timed_out, headers=headers
    )
