"""The local backend waits for its API and inference servers with the one readiness rule: a server
that answers is ready; one that exits first, or misses its ``startup_timeout``, fails the launch with
a ``RunFailed`` naming its log, which ``except AtroposError`` catches (there is one ``RunFailed``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from atroposlib.errors import AtroposError, RunFailed
from atroposlib.launch.local import LocalRun
from atroposlib.launch.plan import Component, Plan
from atroposlib.launch.topology import parse_topology
from atroposlib.utils.net import free_port


def _run(
    tmp_path: Path,
    argv: list[str],
    port: int,
    startup_timeout: float = 30,
    said: Optional[list[str]] = None,
) -> LocalRun:
    topo = parse_topology(
        {
            "inference": [{"name": "ext", "kind": "external", "urls": ["http://127.0.0.1:9"]}],
            "envs": [{"name": "e", "file": "unused.py"}],
            "trainer": {},
            "supervision": {"stop_timeout_s": 5},
        }
    )
    url = f"http://127.0.0.1:{port}"
    api = Component(
        "api", "api", argv, [0], url=url, health=url + "/health", startup_timeout=startup_timeout
    )
    return LocalRun(
        Plan(topo, tmp_path, "local", [api], url, tmp_path / "m.jsonl"),
        say=(said if said is not None else []).append,
    )


def _start(run: LocalRun) -> BaseException | None:
    """``run._start()``; what it raised, caught the way a user of the package catches it."""
    try:
        run._start()
    except AtroposError as e:
        return e
    finally:
        run._stop_all()
    return None


def test_a_server_that_exits_first_fails_the_launch_as_an_atropos_error(tmp_path):
    code = "import sys; print('cannot start'); sys.exit(3)"
    run = _run(tmp_path, [sys.executable, "-c", code], free_port())
    failed = _start(run)
    assert isinstance(failed, RunFailed)
    log = tmp_path / "logs" / "api.log"
    assert str(failed) == f"api exited with code 3 before it answered; see {log}"
    assert "cannot start" in log.read_text()
    assert (run.procs[0].state, run.procs[0].exit_code) == ("failed", 3)


def test_a_server_that_never_answers_fails_at_its_startup_timeout(tmp_path):
    port = free_port()
    run = _run(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"], port, 1.0)
    failed = _start(run)
    assert str(failed) == (
        f"api did not answer http://127.0.0.1:{port}/health within 1s; "
        f"see {tmp_path / 'logs' / 'api.log'}"
    )


def test_a_server_that_answers_is_ready_and_its_start_is_logged(tmp_path):
    port = free_port()
    serve = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    said: list[str] = []
    run = _run(tmp_path, serve, port, said=said)  # http.server answers /health with 404: alive
    assert _start(run) is None
    assert said == [f"[launch] api ready at http://127.0.0.1:{port}"]
    head = (tmp_path / "logs" / "api.log").read_text().splitlines()[1]
    assert head.startswith("=== start ") and head.endswith(": " + " ".join(serve))
