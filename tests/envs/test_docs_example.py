"""The minimal environment in docs/environments.md runs as written after the documented set-up
(a tiny model in ``runs/tiny``, a server answering as ``tiny``): copying it must not fail on a
placeholder tokenizer or model name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from atroposlib.testing import FakeOpenAIServer
from tests.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]


def test_the_documented_minimal_env_runs_as_written(tmp_path):
    from atroposlib.inference.tiny_model import build_tiny_model

    doc = (REPO / "docs" / "environments.md").read_text()
    code = re.search(r"```python\n(# environments/addition.py\n.*?)```", doc, re.S).group(1)
    (tmp_path / "addition.py").write_text(code)
    build_tiny_model(tmp_path / "runs" / "tiny", seed=0)  # `atropos-make-tiny-model runs/tiny`
    with FakeOpenAIServer(
        tokenizer=tmp_path / "runs" / "tiny", model="tiny", strict_model=True
    ) as f:
        r = subprocess.run(
            [
                sys.executable,
                "addition.py",
                "process",
                "--openai.base_url",
                f.base_url,
                "--env.total_steps",
                "2",
                "--env.ensure_scores_are_not_same",
                "false",
                "--env.data_path_to_save_groups",
                "out/addition.jsonl",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            env=dict(os.environ, PYTHONPATH=str(REPO), WANDB_MODE="disabled"),
        )
    assert r.returncode == 0, r.stderr[-2000:]
    groups = read_jsonl(tmp_path / "out" / "addition.jsonl")
    assert len(groups) == 2 and all(len(g["tokens"]) == 8 for g in groups)
