"""The local backend for real: the shipped CPU demo topology run for 3 trainer steps; an env worker
and then an inference server SIGKILLed in one run and restarted, the run finishing with no group lost;
``atropos-launch stop`` leaving no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from atroposlib.utils.procs import group_members, pid_alive
from tests.jsonl import read_jsonl
from tests.launch.run_checks import group_accounting

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "launch" / "demo_cpu.yaml"
# small batches: the test is about the launcher, not about learning
SMALL = [
    "--set",
    "trainer.flags.batch_size=8",
    "--set",
    "envs.0.flags.env.group_size=4",
    "--set",
    "envs.0.flags.env.max_num_workers=2",
]


def _launch(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "atroposlib.cli.launch", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


@pytest.fixture(scope="module")
def shared_topology(tmp_path_factory) -> Path:
    """The demo topology with its model built once into a folder the tests share."""
    model = tmp_path_factory.mktemp("model")
    subprocess.run(
        [sys.executable, "-m", "demo.tiny_model", str(model), "--warmup-sft-steps", "5"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=True,
        capture_output=True,
    )
    data = yaml.safe_load(DEMO.read_text())
    data["prepare"] = []
    warm = str(model / "warm")
    data["inference"][0]["model"] = warm
    data["envs"][0]["flags"]["env"]["tokenizer_name"] = warm
    data["trainer"]["flags"]["model_name"] = warm
    data["supervision"] = {"backoff_s": 0.2, "max_restarts": 3}
    path = tmp_path_factory.mktemp("topo") / "demo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _state(run: Path) -> dict:
    try:
        return json.loads((run / "launch-state.json").read_text())
    except (OSError, ValueError):
        return {}


def _comp(state: dict, name: str) -> dict:
    return next((c for c in state.get("components", []) if c["name"] == name), {})


def _wait(cond, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(f"launcher exited {proc.returncode}: {proc.stdout.read()}")
        time.sleep(0.1)
    raise AssertionError("timed out")


def _steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    return [row["step"] for row in read_jsonl(path)]


def _nothing_left(state: dict) -> None:
    pids = [c["pid"] for c in state["components"] if c.get("pid")]
    assert pids and not [p for p in pids if group_members(p)]
    assert not pid_alive(state["launcher_pid"])


def test_the_shipped_cpu_demo_topology_runs_three_steps(tmp_path):
    run = tmp_path / "run"
    proc = _launch(
        "run",
        str(DEMO),
        "--out",
        str(run),
        *SMALL,
        "--set",
        "prepare.0.argv.5=5",
        "--set",
        "trainer.flags.training_steps=3",
    )
    out, _ = proc.communicate(timeout=150)
    assert proc.returncode == 0, out
    assert _steps(run) == [1, 2, 3]
    state = _state(run)
    assert state["state"] == "finished"
    assert {c["name"]: c["state"] for c in state["components"]} == {
        "prepare-model": "done",
        "api": "stopped",
        "inference-engine-0": "stopped",
        "env-arithmetic-0": "stopped",
        "trainer": "done",
    }
    for name in ("api", "inference-engine-0", "env-arithmetic-0", "trainer"):
        assert (run / "logs" / f"{name}.log").stat().st_size > 0
    _nothing_left(state)
    status = subprocess.run(
        [sys.executable, "-m", "atroposlib.cli.launch", "status", str(run)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0 and "run: finished" in status.stdout
    assert (
        "inference-engine-0" in status.stdout and str(run / "logs" / "trainer.log") in status.stdout
    )
    # the same directory again without --resume is refused, and nothing is started
    again = _launch("run", str(DEMO), "--out", str(run))
    out, _ = again.communicate(timeout=30)
    assert again.returncode == 2 and "holds an earlier run: pass --resume" in out


def test_a_killed_env_worker_and_inference_server_are_restarted_and_no_group_is_lost(
    tmp_path, shared_topology
):
    """One run, two SIGKILLs in turn: the env worker after step 1, the inference server once the
    env is back; each is restarted, and the run finishes every step with no group lost."""
    run = tmp_path / "run"
    proc = _launch(
        "run",
        str(shared_topology),
        "--out",
        str(run),
        *SMALL,
        "--set",
        "trainer.flags.training_steps=8",
    )
    try:
        _wait(lambda: _steps(run)[-1:] >= [1] if _steps(run) else False, 90, proc)
        victim = _comp(_state(run), "env-arithmetic-0")["pid"]
        os.kill(victim, signal.SIGKILL)
        _wait(lambda: _comp(_state(run), "env-arithmetic-0").get("restarts") == 1, 30, proc)
        assert _comp(_state(run), "env-arithmetic-0")["pid"] != victim
        _wait(lambda: _comp(_state(run), "env-arithmetic-0").get("state") == "running", 60, proc)
        victim = _comp(_state(run), "inference-engine-0")["pid"]
        os.kill(victim, signal.SIGKILL)
        _wait(lambda: _comp(_state(run), "inference-engine-0").get("restarts") == 1, 30, proc)
        _wait(lambda: _comp(_state(run), "inference-engine-0").get("state") == "running", 60, proc)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert proc.returncode == 0, out
    assert "env-arithmetic-0 exited with code -9; restarting" in out
    assert "inference-engine-0 exited with code -9; restarting" in out
    assert _steps(run) == list(range(1, 9))
    # (the trainer skips a refresh the restarting server cannot take instead of failing)
    counts = group_accounting(run)
    assert counts["lost"] == 0 and counts["other"] == 0 and counts["spooled"] == 0, counts
    assert counts["served"] == counts["served_in_batches"] > 0, counts
    _nothing_left(_state(run))


def test_stop_stops_everything_in_order_and_leaves_nothing(tmp_path, shared_topology):
    run = tmp_path / "run"
    proc = _launch(
        "run",
        str(shared_topology),
        "--out",
        str(run),
        *SMALL,
        "--set",
        "trainer.flags.training_steps=1000",
    )
    try:
        _wait(lambda: _comp(_state(run), "trainer").get("state") == "running", 90, proc)
        stop = subprocess.run(
            [sys.executable, "-m", "atroposlib.cli.launch", "stop", str(run)],
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert "nothing left running" in stop.stdout
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    state = _state(run)
    assert state["state"] == "stopped"
    assert all(c["state"] == "stopped" for c in state["components"])
    _nothing_left(state)
