"""Against the real Harbor (its own Python 3.12 environment, ``scripts/setup_harbor.sh``): its CLI runs
a shipped task through our host sandbox as a backend (``--env module:Class``) and through its own
podman backend, ``oracle`` scores 1.0 and ``nop`` 0.0, and our env's reward for the same trial (the
reference command, or no command) is Harbor's. One trial per backend and agent; the podman trial
and ours run at the same time (a container start is slow)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from atroposlib.interop.harbor.env import HarborEnv
from atroposlib.interop.harbor.harbor_bridge import write_overlay
from atroposlib.interop.harbor.harbor_install import harbor_env
from atroposlib.interop.harbor.settings import HarborSettings
from atroposlib.interop.harbor.task import read_task
from atroposlib.testing import check_env
from tests.interop.harbor.conftest import REPO, TASKS

TASK = TASKS / "train" / "count-00"
BACKEND = "atroposlib.interop.harbor.harbor_backend:HostSandboxEnvironment"
TIMEOUT_S = 300


def _harbor_trial(
    python: str, agent: str, env: str, trials: Path, *extra: str
) -> subprocess.Popen[str]:
    """``harbor trial start`` on TASK, started (not waited for)."""
    harbor_cli = str(Path(python).parent / "harbor")  # the console script next to Harbor's Python
    argv = [harbor_cli, "trial", "start", "-p", str(TASK), "--agent", agent, "--env", env]
    argv += ["--trials-dir", str(trials / agent), *extra]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=harbor_env(),
        cwd=trials,
    )


def _reward(proc: subprocess.Popen[str], trials: Path, agent: str) -> float:
    """The trial's reward from Harbor's own result.json."""
    out, _ = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, out[-3000:]
    [result] = (trials / agent).glob("*/result.json")
    data = json.loads(result.read_text())
    assert data.get("exception_info") is None, data["exception_info"]
    return float(data["verifier_result"]["rewards"]["reward"])


class OracleOrNop:
    """Our policy's stand-in: the first episode runs the task's reference command, the second none."""

    def __init__(self) -> None:
        self._lock, self._next = threading.Lock(), itertools.count()
        self.command = read_task(TASK).solution_script.read_text().split("\n", 1)[1].strip()  # type: ignore[union-attr]

    def __call__(self, prompt: str, body: dict) -> str:
        if prompt.count("<|im_start|>assistant\n") > 1:
            return "Done."
        with self._lock:
            first = next(self._next) == 0
        call = json.dumps({"name": "shell", "arguments": {"command": self.command}})
        return f"<tool_call>{call}</tool_call>" if first else "Nothing to do."


def _our_rewards(sandbox: str, episodes: int) -> list[float]:
    [group] = check_env(
        HarborEnv,
        responder=OracleOrNop(),
        env_overrides={
            "group_size": episodes,
            "max_token_length": 4096,
            "harbor": HarborSettings(tasks=str(TASK), sandbox=sandbox),
        },
    )
    return [o["episode"]["score"] for o in group["overrides"]]


def test_our_backend_imports_without_torch_or_transformers():
    """What Harbor's Python imports of ours (``harbor_backend`` minus Harbor itself) loads neither."""
    code = (
        "import sys\n"
        "import atroposlib.interop.harbor.host_sandbox, atroposlib.interop.harbor.task\n"
        "import atroposlib.interop.harbor.harbor_bridge\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'numpy')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.usefixtures("bwrap")
def test_harbor_runs_a_task_through_our_backend_with_our_envs_rewards(harbor, trials):
    oracle = _harbor_trial(harbor, "oracle", BACKEND, trials)
    nop = _harbor_trial(harbor, "nop", BACKEND, trials)
    ours = _our_rewards("host", 2)
    assert (_reward(oracle, trials, "oracle"), _reward(nop, trials, "nop")) == (1.0, 0.0)
    assert sorted(ours) == [0.0, 1.0]  # the reference command, then no command: Harbor's rewards


def test_harbor_runs_a_task_in_podman_with_our_envs_reward(podman, trials):
    overlay = write_overlay(trials)  # no network, stops at once: what our podman sandbox uses too
    oracle = _harbor_trial(
        podman, "oracle", "podman", trials, "--extra-docker-compose", str(overlay)
    )
    ours = _our_rewards("podman", 1)  # our episode in Harbor's podman runtime, meanwhile
    assert _reward(oracle, trials, "oracle") == 1.0 and ours == [1.0]
