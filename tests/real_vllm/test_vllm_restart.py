"""``--weight-refresh restart`` with its default command: the trainer launches vLLM with vLLM's own
Python and this machine's flags, and relaunches it on every refresh while an env keeps sampling (its
backend retries across the restart window; no rollout may fail)."""

from __future__ import annotations

import time

import pytest
import torch

from atroposlib.utils.net import free_port
from example_trainer.config import TrainingConfig
from example_trainer.weight_refresh import RestartRefresh

from .conftest import EnvSampler, forward_logprobs, greedy

PROMPT = [5, 60, 70, 80, 90, 100, 33, 44]
# one relaunch shows the whole path (the running server stopped, a new one started on the new weights,
# the env's retries spanning the gap); each costs a full vLLM start-up (~30 s on a quiet machine)
RESTARTS = 1
# vLLM start-ups take 30 s on a quiet 2-core machine and several minutes on a loaded one
pytestmark = pytest.mark.timeout(1200)


def test_restart_mode_relaunches_vllm_with_new_weights(
    vllm_python, tiny_model_dir, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    cfg = TrainingConfig(
        model_name=str(tiny_model_dir),
        save_path=str(tmp_path / "run"),
        weight_refresh="restart",
        inference_python=vllm_python,
        vllm_port=free_port(),
        seq_len=512,
        inference_startup_timeout=300,
    )
    strategy = RestartRefresh(cfg)
    url = f"http://127.0.0.1:{cfg.vllm_port}"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    times = []
    try:
        strategy.start(str(tiny_model_dir))
        with EnvSampler(url, cfg.model_name, PROMPT, max_retries=200) as env:  # ~5 s apart
            for step in range(1, RESTARTS + 1):
                torch.manual_seed(step)
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(torch.randn_like(p) * 0.02)
                before = env.rollouts
                t0 = time.perf_counter()
                strategy.refresh(step, model, tok)
                times.append(time.perf_counter() - t0)
                ids, lps = greedy(url, PROMPT)
                ref = forward_logprobs(model, PROMPT, ids)
                assert max(abs(a - b) for a, b in zip(lps, ref, strict=True)) < 1e-4
                deadline = time.monotonic() + 120
                while env.rollouts == before and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert env.rollouts > before
        assert not env.failures, env.failures[:3]
    finally:
        strategy.close()
    log = (tmp_path / "run" / "inference_server.log").read_text(errors="replace")
    assert "vllm" in log.lower()
    print(f"vLLM restart: {[round(t, 1) for t in times]} s per refresh (save + relaunch)")
