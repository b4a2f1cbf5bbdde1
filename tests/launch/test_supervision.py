"""Supervision rules of the local backend, with real (small) processes: a component that keeps
crashing stops the run with one line; a failed trainer stops it naming its log; a trainer that makes no
step for ``progress_timeout_s`` stops it naming what stopped; all exit non-zero and leave nothing
running."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from atroposlib.launch.local import LocalRun
from atroposlib.launch.plan import Component, Plan
from atroposlib.launch.topology import parse_topology
from atroposlib.utils.procs import group_members


def _plan(tmp_path: Path, env_code: str, trainer_code: str, **supervision: float) -> Plan:
    topo = parse_topology(
        {
            "inference": [{"name": "ext", "kind": "external", "urls": ["http://127.0.0.1:9"]}],
            "envs": [{"name": "e", "file": "unused.py"}],
            "trainer": {},
            "supervision": {"max_restarts": 2, "backoff_s": 0.05, "stop_timeout_s": 5}
            | supervision,
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


STEP_ONCE = "import time; open({path!r}, 'a').write('{{\"step\": 1}}\\n'); time.sleep(120)"


def test_a_run_that_makes_no_progress_ends_naming_the_stopped_component(tmp_path):
    lines: list[str] = []
    plan = _plan(
        tmp_path,
        "import time; time.sleep(120)",
        STEP_ONCE.format(path=str(tmp_path / "m.jsonl")),
        progress_timeout_s=3,
    )
    runner = LocalRun(plan, topology_path="topo.yaml", say=lines.append)

    def freeze_env() -> None:  # once the trainer has made its step, the env worker is frozen
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (tmp_path / "metrics.jsonl").exists():
            time.sleep(0.05)
        os.killpg(runner.procs[0].popen.pid, signal.SIGSTOP)

    threading.Thread(target=freeze_env, daemon=True).start()
    started = time.monotonic()
    assert runner.run() == 1
    assert 3 < time.monotonic() - started < 30
    assert lines[-1] == (
        "atropos-launch: error: no trainer step for 3 s (last: step 1): env-e-0 is stopped "
        f"(SIGSTOP?); see {tmp_path / 'logs' / 'env-e-0.log'}; continue with: atropos-launch run "
        f"topo.yaml --out {tmp_path} --resume"
    )
    assert not [p for p in runner.procs if p.popen and group_members(p.popen.pid)]


def test_a_trainer_that_makes_no_step_ends_the_run_naming_the_trainer(tmp_path):
    lines: list[str] = []
    plan = _plan(
        tmp_path,
        "import time; time.sleep(120)",
        "import time; time.sleep(120)",
        progress_timeout_s=2,
    )
    assert LocalRun(plan, topology_path="t.yaml", say=lines.append).run() == 1
    assert lines[-1].startswith(
        "atropos-launch: error: no trainer step for 2 s (none yet): the trainer is running but made "
        f"no progress; see {tmp_path / 'logs' / 'trainer.log'}; continue with: "
    )
