"""Schema fuzzing (the real schemathesis) against real server processes on loopback: every target of
``targets.TARGETS`` is started, prepared, then fuzzed from its own OpenAPI schema with a bounded,
derandomized run (hypothesis's fixed seed; ``max_examples`` per operation), with the token when it
has one. It must find nothing: no 5xx, every answer's status, content type, headers and body as the
schema declares (and with a token, no operation answers without it); afterwards the target's own
``verify`` holds (``/health`` answers, no traceback in the log, and on run-api every group queued
before the run delivered exactly once)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS, FuzzTarget
from tests.live_servers import LiveServer


def schemathesis_argv(
    python: str, schema: Path, server: LiveServer, target: FuzzTarget
) -> list[str]:
    checks = [*target.checks, "ignored_auth"] if server.token else list(target.checks)
    argv = [
        python,
        "-m",
        "schemathesis.cli",
        "run",
        str(schema),
        "--url",
        server.url,
        "--checks",
        ",".join(checks),
        "--phases",
        ",".join(target.phases),
        "--max-examples",
        str(target.max_examples),
        "--generation-deterministic",  # hypothesis's derandomize: the same cases every run
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--no-color",
        "--warnings",
        "off",
    ]
    if server.token:
        argv += ["--header", f"Authorization: Bearer {server.token}"]
    for path in target.exclude_paths:
        argv += ["--exclude-path", path]
    return argv


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_the_fuzzer_finds_nothing(target, schemathesis_python, fuzz_model_dir, tmp_path: Path):
    server = target.start(tmp_path, fuzz_model_dir)
    try:
        before = target.prepare(server)
        schema = tmp_path / "openapi.json"
        schema.write_text(json.dumps(target.schema(server)))
        run = subprocess.run(
            schemathesis_argv(schemathesis_python, schema, server, target),
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
        )
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-8000:]
        assert " passed" in out and "generated" in out, out[-3000:]
        target.verify(server, before)
    finally:
        server.stop()
