"""TRL's GRPOTrainer (1.16, CPU, no vLLM) trains 2 steps on ``environments/arithmetic_server.py`` served by
``serve-openenv``, through TRL's own OpenEnv integration (``environment_factory``, openenv's client).

TRL lives in its own environment (torch CPU + trl + openenv), made once by ``scripts/setup_trl.sh`` and
reused; ``ATROPOS_TRL_PYTHON`` points at a user's own. Without it the test skips with the set-up's reason.
The policy is a tiny model taught to answer two of the four problems (``a+b=``, a and b in 0..1) right
and two wrong (it says the second operand), so the env's rewards differ between episodes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from atroposlib.utils.net import free_port

from .conftest import HERE, REPO, Proc
from .test_serve_openenv import plugin_path  # noqa: F401 - the fixture

TRL_VERSION = "1.16.0"  # keep equal to VERSION in scripts/setup_trl.sh
# the second operand: right for 0+0 and 0+1, wrong for 1+0 and 1+1 (quick to teach); the env's item
# sampler (seed 0) gives both kinds within the 4 groups
TAUGHT = {"0+0=": "0", "0+1=": "1", "1+0=": "0", "1+1=": "1"}


def _trl_venv() -> Path:
    env = os.environ.get("ATROPOS_TRL_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"trl-{TRL_VERSION}"


def _find_trl_python() -> Optional[str]:
    env = os.environ.get("ATROPOS_TRL_PYTHON")
    if env:
        return env
    venv = _trl_venv()
    return str(venv / "bin" / "python") if (venv / ".atroposlib-trl-ok").exists() else None


@pytest.fixture(scope="module")
def trl_python() -> str:
    """The Python that has trl + openenv on CPU torch; set up once (cached) or skip."""
    py = _find_trl_python()
    failed = _trl_venv() / "install-failed.txt"
    if py is None and os.environ.get("ATROPOS_SKIP_TRL") != "1" and not failed.is_file():
        subprocess.run(
            ["bash", str(REPO / "scripts" / "setup_trl.sh")],
            timeout=1200,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        py = _find_trl_python()
    if py is None:
        if failed.is_file():
            pytest.skip("trl could not be installed: " + failed.read_text().strip())
        pytest.skip("no trl: run scripts/setup_trl.sh or set ATROPOS_TRL_PYTHON")
    return py


def _qwen25_template(trl_python: str) -> str:
    """TRL's copy of the Qwen2.5 chat template: TRL's environments need a tool-capable template."""
    where = subprocess.run(
        [
            trl_python,
            "-c",
            "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('trl').origin))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return (Path(where) / "chat_templates" / "qwen2_5.jinja").read_text()


def test_trl_grpo_trains_on_a_served_atropos_env(trl_python, plugin_path, tmp_path):  # noqa: F811
    from atroposlib.testing.taught_model import build_taught_model

    replies = [([{"role": "user", "content": p}], a) for p, a in TAUGHT.items()]
    model = build_taught_model(
        tmp_path / "model", replies, chat_template=_qwen25_template(trl_python)
    )
    port = free_port()
    argv = [
        sys.executable,
        str(REPO / "environments" / "arithmetic_server.py"),
        "serve-openenv",
        "--port",
        str(port),
        "--env.tokenizer_name",
        str(model),
        "--env.max_operand",
        "1",
    ]
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = plugin_path  # the child inherits it
    try:
        server = Proc(argv, port, "/health", tmp_path / "serve.log")
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        server.wait()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
        r = subprocess.run(
            [
                trl_python,
                str(HERE / "trl_grpo_openenv.py"),
                server.url,
                str(model),
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    finally:
        server.stop()
    assert r.returncode == 0, r.stderr[-4000:]
    run = json.loads(r.stdout.strip().splitlines()[-1])
    assert run["global_step"] == 2  # two optimizer steps
    episodes = run["episodes"]
    assert len(episodes) == 16  # 2 steps x 2 groups x 4 generations
    for ep in episodes:
        a, b = map(int, re.findall(r"\d", ep["prompt"]))
        assert ep["prompt"] == f"{a}+{b}="
        # the env's own score of the model's reply
        assert ep["reward"] == (1.0 if ep["reply"].strip() == str(a + b) else 0.0), ep
    for group in range(4):  # a GRPO group is 4 episodes of one item (they reset with one seed)
        assert len({ep["prompt"] for ep in episodes[4 * group : 4 * group + 4]}) == 1
    rewards = [ep["reward"] for ep in episodes]
    assert 0.0 in rewards and 1.0 in rewards, episodes  # not a constant
    logged = [h for h in run["log_history"] if "rewards/env_reward/mean" in h]
    assert len(logged) == 2
    for step, h in enumerate(logged):
        mean = sum(rewards[8 * step : 8 * step + 8]) / 8
        assert h["rewards/env_reward/mean"] == pytest.approx(mean)
    log = server.log_path.read_text()
    done = re.findall(r"episode done: steps=1 reward=(\S+) kept=True", log)
    assert sorted(map(float, done)) == sorted(rewards)  # the server scored every episode
