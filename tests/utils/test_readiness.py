"""The one readiness rule (``atroposlib.utils.readiness``), which ``wait_for_http`` and the launcher's
``/health`` waits follow: any status below 500 is an answer, a 5xx or no connection is not; a gone
process is raised before its deadline; each server has its own deadline."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from atroposlib.utils.net import free_port, wait_for_http
from atroposlib.utils.readiness import POLL_S, wait_until_answering


@pytest.fixture()
def server() -> Iterator[tuple[str, dict[str, int]]]:
    """A local server answering ``/<name>`` with ``statuses[name]`` (404 for unknown names)."""
    statuses: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(statuses.get(self.path.strip("/"), 404))
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", statuses
    finally:
        httpd.shutdown()
        httpd.server_close()


def _never_exited(_key: str) -> None:
    return None


def _timed_out(key: str, last: object) -> BaseException:
    return TimeoutError(f"{key} (last: {type(last).__name__})")


def test_a_status_below_500_is_an_answer_and_a_5xx_is_not(server):
    base, statuses = server
    statuses.update(ok=200, missing=404, busy=503)
    ready: list[str] = []
    wait_until_answering(
        {k: f"{base}/{k}" for k in ("ok", "missing")},
        {"ok": 5, "missing": 5},
        exited=_never_exited,
        timed_out=_timed_out,
        ready=ready.append,
    )
    assert ready == ["ok", "missing"]
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^busy \(last: NoneType\)$"):
        wait_until_answering(
            {"busy": f"{base}/busy"}, {"busy": 0.3}, exited=_never_exited, timed_out=_timed_out
        )
    assert 0.3 <= time.monotonic() - start < 3


def test_each_server_has_its_own_deadline_and_keeps_its_last_transport_error(server):
    base, statuses = server
    statuses["late"] = 503
    closed = f"http://127.0.0.1:{free_port()}/health"  # nothing listens there
    rounds: list[float] = []

    def before_round() -> None:
        rounds.append(time.monotonic())
        if len(rounds) == 3:
            statuses["late"] = 200

    ready: list[str] = []
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^closed \(last: ConnectError\)$"):
        wait_until_answering(
            {"late": f"{base}/late", "closed": closed},
            {"late": 30.0, "closed": 1.5},
            exited=_never_exited,
            timed_out=_timed_out,
            ready=ready.append,
            before_round=before_round,
        )
    assert time.monotonic() - start >= 1.5  # closed's own limit, not late's
    assert ready == ["late"]  # answered in round 3, while closed was still waited for
    assert all(b - a >= POLL_S for a, b in zip(rounds, rounds[1:], strict=False))


def test_a_gone_process_is_raised_at_once_not_at_the_deadline(server):
    base, statuses = server
    statuses["slow"] = 503
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="gone"):
        wait_until_answering(
            {"slow": f"{base}/slow"},
            {"slow": 30},
            exited=lambda _k: RuntimeError("gone"),
            timed_out=_timed_out,
        )
    assert time.monotonic() - start < 1


def test_wait_for_http_follows_the_rule(server):
    base, statuses = server
    statuses["health"] = 401  # a live server that wants a token
    wait_for_http(f"{base}/health", timeout=5)
    statuses["health"] = 500
    with pytest.raises(TimeoutError, match=r"did not answer within 0s \(last error: None\)"):
        wait_for_http(f"{base}/health", timeout=0.2)
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    proc.wait()
    with pytest.raises(RuntimeError, match="process exited with code 7 before"):
        wait_for_http(f"{base}/health", timeout=30, proc=proc)


def test_wait_for_http_sends_its_headers(server):
    base, statuses = server
    statuses["health"] = 200
    seen: list[str] = []
    original = httpx.Client.get

    def get(self: httpx.Client, url: str, **kw: object) -> httpx.Response:
        seen.append(self.headers.get("authorization", ""))
        return original(self, url, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(httpx.Client, "get", get)
        wait_for_http(f"{base}/health", timeout=5, headers={"Authorization": "Bearer s"})
    assert seen == ["Bearer s"]
