"""Small networking helpers shared by CLIs, tests and the demo: free ports and readiness waits."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any, Optional

import httpx

if TYPE_CHECKING:
    import subprocess


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_http(
    url: str,
    timeout: float = 60.0,
    proc: Optional[subprocess.Popen[Any]] = None,
    headers: Optional[dict[str, str]] = None,
) -> None:
    """Poll ``url`` until it answers (any status < 500). Raises ``TimeoutError`` or, if ``proc``
    (a ``subprocess.Popen``) exits first, ``RuntimeError`` with its exit code."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with code {proc.returncode} before {url} answered")
        try:
            r = httpx.get(url, timeout=2.0, headers=headers)
            if r.status_code < 500:
                return
        except httpx.TransportError as e:
            last = e
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s (last error: {last!r})")
