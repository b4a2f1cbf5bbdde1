"""Restart mode on a GPU shared with the trainer: the next server starts only once the old one's
processes are gone and its claim fits in what is free; when it cannot fit, one line ends the run.

The servers are real processes (``_gpu_server_standin.py``: an API process and an engine child that
outlives it by a few seconds, as vLLM's does); the GPU is the one stand-in: free memory = total - what
the trainer holds - what live server processes hold (their files in a folder)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from atroposlib.errors import InferenceError
from atroposlib.utils.net import free_port
from example_trainer.config import TrainingConfig
from example_trainer.device_memory import GIB, utilization_in, wait_until_it_fits
from example_trainer.weight_refresh import RestartRefresh

STANDIN = Path(__file__).with_name("_gpu_server_standin.py")
TOTAL = 80 * GIB


class SharedGpu:
    """Free memory of an 80 GiB GPU that the trainer and the stand-in servers share."""

    name = "cuda:0 (stand-in)"

    def __init__(self, hold_dir: Path, trainer: int) -> None:
        self.hold_dir, self.trainer = hold_dir, trainer
        self.looks = 0

    def free_and_total(self) -> tuple[int, int]:
        from _gpu_server_standin import live_holders

        self.looks += 1
        held = sum(
            int((self.hold_dir / str(pid)).read_text() or 0) for pid in live_holders(self.hold_dir)
        )
        return TOTAL - self.trainer - held, TOTAL

    def trainer_bytes(self) -> int:
        return self.trainer


def _refresh(tmp_path: Path, trainer_gib: float, linger: float, wait_s: float = 30.0):
    hold = tmp_path / "gpu"
    hold.mkdir()
    claim = int(0.45 * TOTAL)
    command = (
        f"{sys.executable} {STANDIN} --model {{model_path}} --port {{port}} --hold-dir {hold} "
        f"--claim {claim} --linger {linger} --gpu-memory-utilization 0.45"
    )
    cfg = TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh="restart",
        inference_command=command,
        vllm_port=free_port(),
        inference_startup_timeout=60,
        inference_memory_wait_s=wait_s,
    )
    refresh = RestartRefresh(cfg)
    gpu = SharedGpu(hold, int(trainer_gib * GIB))
    refresh.memory = gpu
    return refresh, gpu, hold


def _launches(hold: Path) -> list[dict]:
    return [json.loads(line) for line in (hold / "launches.jsonl").read_text().split("\n") if line]


def test_the_next_server_starts_after_the_old_one_released_its_memory(tmp_path, tiny_model):
    """40 GiB held by the trainer, 36 GiB claimed by each server: the old engine keeps its claim 2 s
    after the API process exits; the relaunch waits for it (before: it started beside it and vLLM
    would have refused to start for lack of free memory)."""
    from transformers import AutoModelForCausalLM

    refresh, gpu, hold = _refresh(tmp_path, trainer_gib=40, linger=2.0)
    try:
        refresh.start(str(tiny_model))
        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        out = refresh.refresh(1, model, None)
    finally:
        refresh.close()
    launches = _launches(hold)
    assert [launch["others_holding"] for launch in launches] == [0, 0], launches
    assert launches[1]["model"].endswith("weights/step_0000001")
    assert out["restart_memory_wait_s"] is not None and gpu.looks >= 2


def test_a_server_that_cannot_fit_ends_the_run_with_one_line(tmp_path, tiny_model):
    refresh, gpu, hold = _refresh(tmp_path, trainer_gib=50, linger=0.0, wait_s=1.0)
    try:
        with pytest.raises(InferenceError) as err:
            refresh.start(str(tiny_model))
    finally:
        refresh.close()
    message = str(err.value)
    assert "\n" not in message
    assert "claims 36.0 GiB (--gpu-memory-utilization 0.45 of 80.0 GiB)" in message
    assert "30.0 GiB are free" in message and "the trainer holds 50.0 GiB" in message
    assert "at most 0.36 fits now" in message  # (30 - 1 GiB headroom) / 80
    assert not (hold / "launches.jsonl").exists() and refresh.proc is None  # nothing started


def test_an_old_engine_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, tiny_model):
    refresh, gpu, hold = _refresh(tmp_path, trainer_gib=0, linger=3600.0)
    try:
        refresh.start(str(tiny_model))
        from _gpu_server_standin import live_holders

        assert len(live_holders(hold)) == 1
        refresh._stop(grace=1.0)
        assert live_holders(hold) == []  # killed with its process group, memory free again
    finally:
        refresh.close()


def test_the_utilization_is_read_from_the_launch_command():
    assert utilization_in("python -m vllm... --gpu-memory-utilization 0.45 --port 1") == 0.45
    assert utilization_in("serve --gpu-memory-utilization=0.3") == 0.3
    assert utilization_in("python -m atroposlib.cli.serve_model --model m") is None


def test_waiting_gives_up_with_the_figures(tmp_path):
    class Full:
        name = "cuda:1"

        def free_and_total(self):
            return 10 * GIB, 80 * GIB

        def trainer_bytes(self):
            return None

    with pytest.raises(InferenceError, match=r"claims 72\.0 GiB .* 10\.0 GiB are free after 0 s;"):
        wait_until_it_fits(Full(), 0.9, 0.0)
