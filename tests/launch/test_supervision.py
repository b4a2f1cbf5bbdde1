"""Supervision rules of the local backend, with real (small) processes: a component that keeps
crashing stops the run with one line; a failed trainer stops it naming its log; both exit non-zero and
leave nothing running."""

from __future__ import annotations

import sys
from pathlib import Path

from atroposlib.launch.local import LocalRun
from atroposlib.launch.plan import Component, Plan
from atroposlib.launch.procs import group_members
from atroposlib.launch.topology import parse_topology


def _plan(tmp_path: Path, env_code: str, trainer_code: str) -> Plan:
    topo = parse_topology(
        {
            "inference": [{"name": "ext", "kind": "external", "urls": ["http://127.0.0.1:9"]}],
            "envs": [{"name": "e", "file": "unused.py"}],
            "trainer": {},
            "supervision": {"max_restarts": 2, "backoff_s": 0.05, "stop_timeout_s": 5},
        }
    )
    comps = [
        Component("env-e-0", "env", [sys.executable, "-c", env_code], [0], restart=True),
        Component("trainer", "trainer", [sys.executable, "-c", trainer_code], [0]),
    ]
    return Plan(topo, tmp_path, "local", comps, "http://127.0.0.1:9", tmp_path / "m.jsonl")


def test_a_crash_looping_env_worker_stops_the_run(tmp_path):
    lines: list[str] = []
    runner = LocalRun(
        _plan(tmp_path, "import sys; sys.exit(3)", "import time; time.sleep(60)"), say=lines.append
    )
    assert runner.run() == 1
    errors = [line for line in lines if line.startswith("atropos-launch: error:")]
    assert errors == [
        f"atropos-launch: error: env-e-0 crashed 3 times in 10 min (last exit code 3); "
        f"see {tmp_path / 'logs' / 'env-e-0.log'}"
    ]
    assert [p.restarts for p in runner.procs] == [2, 0]
    assert not [p for p in runner.procs if p.popen and group_members(p.popen.pid)]


def test_a_failed_trainer_stops_the_run_naming_its_log(tmp_path):
    lines: list[str] = []
    code = "import sys, time; time.sleep(0.5); print('boom'); sys.exit(5)"
    runner = LocalRun(_plan(tmp_path, "import time; time.sleep(60)", code), say=lines.append)
    assert runner.run() == 1
    assert lines[-1] == (
        f"atropos-launch: error: the trainer exited with code 5; see {tmp_path / 'logs' / 'trainer.log'}"
    )
    assert "boom" in (tmp_path / "logs" / "trainer.log").read_text()
    env = runner.procs[0]
    assert env.state == "stopped" and env.popen is not None and not group_members(env.popen.pid)


def test_an_env_worker_that_finishes_is_not_restarted(tmp_path):
    runner = LocalRun(_plan(tmp_path, "pass", "import time; time.sleep(1.5)"), say=lambda s: None)
    assert runner.run() == 0
    assert [(p.state, p.restarts) for p in runner.procs] == [("done", 0), ("done", 0)]
