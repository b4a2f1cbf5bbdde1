"""What a run says while an inference server that never answered keeps failing (``waiting``): why,
in a few words, at once; then one progress line per interval; then when it answered."""

from __future__ import annotations

import logging
import time

import httpx

from atroposlib.inference_clients.backend import ServerDown, ServerSilent
from atroposlib.inference_clients.waiting import UnreachableReport, why_down


def _refused() -> ServerDown:
    try:
        httpx.get("http://127.0.0.1:9/", timeout=5)
    except httpx.ConnectError as e:
        try:
            raise ServerDown(f"POST http://127.0.0.1:9/v1/completions: {e!r}") from e
        except ServerDown as down:
            return down
    raise AssertionError("something listens on port 9")


def test_why_down_names_the_cause():
    assert why_down(_refused()) == "connection refused"
    body = 'POST http://h/v1/completions: 503 {"error": "busy: try later"}'
    assert why_down(ServerDown(f"http://h/v1 failed 3 attempts: {body}")) == "answered 503"
    assert (
        why_down(ServerDown("x failed 3 attempts: no answer within 60s")) == "no answer within 60s"
    )
    slow = "no answer within 72s (the server answers its health probe: it generates slower ...)"
    assert why_down(ServerDown(f"x failed 3 attempts: {slow}")) == slow
    silent = ServerSilent("http://h/v1 accepted connections but answered nothing, not even a probe")
    assert why_down(silent) == "accepted connections but answered nothing"


def test_report_says_it_at_once_then_per_interval_then_when_answered(caplog):
    refused = _refused()
    report = UnreachableReport(window=120, interval=0.5)
    with caplog.at_level(logging.INFO, logger="atroposlib.inference_clients.server_manager"):
        for _ in range(5):  # many failures at once: one line
            report.failed("http://h:1/v1", refused)
            report.tick()
        time.sleep(0.6)
        report.tick()
        report.tick()  # within the interval again: nothing
        report.answered("http://h:1/v1")
        report.answered("http://h:1/v1")  # no wait under way: nothing
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("inference server http://h:1/v1: connection refused; waiting for")
    assert "up to 120s (--env.unreachable_timeout" in lines[0]
    assert lines[1].startswith("still waiting for an inference server (http://h:1/v1: connection")
    assert lines[2].startswith("inference server http://h:1/v1 answered after ")
