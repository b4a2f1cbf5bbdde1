"""scripts/gpu_check.sh: one clear line and exit 1 without CUDA; the same steps run end to end when
pointed at the CPU (a smoke test of the script, not GPU figures)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from _trainer_helpers import REPO, child_env


def _run(*args: str) -> subprocess.CompletedProcess:
    env = child_env()
    env["PYTHON"] = sys.executable
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_refuses_with_one_line_without_cuda():
    proc = _run("--steps", "1")
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "gpu_check: error: no CUDA GPU (torch.cuda.is_available() is False); run this on a "
        "machine with an NVIDIA GPU and a CUDA build of torch"
    ]


def test_cpu_smoke_run_prints_loss_grad_norm_and_throughput_per_step(tiny_model):
    proc = _run(
        "--device", "cpu", "--model", str(tiny_model), "--steps", "2", "--seq-len", "48",
        "--batch-size", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = re.findall(
        r"^step (\d)/2 loss [-+]\d\.\d+ grad_norm (\d+\.\d+) tokens/s", proc.stdout, re.M
    )
    assert [s for s, _ in steps] == ["1", "2"] and all(float(g) > 0 for _, g in steps)
    assert (
        "bfloat16 compute (autocast)" in proc.stdout and "gradient checkpointing on" in proc.stdout
    )
    assert re.search(r"^gpu_check: mean [\d,]+ tokens/s", proc.stdout, re.M)
