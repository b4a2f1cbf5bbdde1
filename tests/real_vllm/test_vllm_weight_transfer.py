"""``--weight-refresh nccl`` against the vLLM CPU build: vLLM's own weight-transfer routes and worker
lifecycle (``/init_weight_transfer_engine``, ``/pause``, ``/start_weight_update``, ``/update_weights``,
``/finish_weight_update`` with a weight version, ``/resume``, its layerwise reload), with the gloo data
plane atroposlib registers for servers without a GPU (``atropos_gloo``) in place of NCCL, which needs
CUDA. The session's ``plain`` server takes weights this way; the ``lora`` one has no weight-transfer
backend and refuses the set-up, as an unconfigured vLLM does.
"""

from __future__ import annotations

import logging

import httpx
import pytest
import torch

from atroposlib.errors import WeightTransferError
from example_trainer.config import TrainingConfig
from example_trainer.refresh_modes import make_weight_refresh
from example_trainer.transfer_refresh import TransferRefresh

from .conftest import EnvSampler, forward_logprobs, greedy

PROMPT = [5, 60, 70, 80, 90, 100, 33, 44]
pytestmark = pytest.mark.timeout(1200)  # vLLM start-ups: several minutes on a loaded machine


def _refresher(tmp_path, url, **kw) -> TransferRefresh:
    cfg = TrainingConfig(
        model_name="m",
        save_path=str(tmp_path / "out"),
        weight_refresh="nccl",
        transfer_backend="atropos_gloo",
        inference_urls=[url],
        transfer_timeout_s=120,
        async_refresh=False,
        **kw,
    )
    refresher = make_weight_refresh(cfg, publish_dtype=torch.float32, device=torch.device("cpu"))
    assert isinstance(refresher, TransferRefresh)
    return refresher


def _model(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def test_weights_broadcast_through_vllms_weight_transfer_routes(dev_vllm, tiny_model_dir, tmp_path):
    """Three broadcasts while an env samples: zero failed rollouts, the server reports each step as
    its weight version, and its greedy ids and logprobs are those of the trainer's weights (the tied
    LM head included); broadcasting the start weights back gives what a server that only ever had
    them gives."""
    url, fresh = dev_vllm["plain"].url, dev_vllm["lora"].url
    base_ids, base_lps = greedy(fresh, PROMPT)
    refresher = _refresher(tmp_path, url)
    model = _model(tiny_model_dir)
    try:
        refresher.start(str(tiny_model_dir))
        assert refresher.fallback is None and refresher.group is not None
        with EnvSampler(url, str(tiny_model_dir), PROMPT) as sampler:
            for step in (1, 2, 3):
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(torch.randn_like(p) * 0.05)
                out = refresher.refresh(step, model, None)
                assert out["transfer_fallback"] == 0 and out["weights_version"] == str(step)
                assert httpx.get(url + "/weight_info", timeout=30).json() == {
                    "weight_version": str(step)
                }
                ids, lps = greedy(url, PROMPT)
                want = forward_logprobs(model, PROMPT, ids)
                assert max(abs(a - b) for a, b in zip(lps, want, strict=True)) < 1e-4
                with torch.no_grad():  # greedy: each id is the argmax of the trainer's model
                    logits = model(input_ids=torch.tensor([PROMPT + ids])).logits[0]
                assert ids == logits[len(PROMPT) - 1 : -1].argmax(-1).tolist()
        assert sampler.rollouts > 0 and not sampler.failures, sampler.failures[:3]
        assert ids != base_ids
        out = refresher.refresh(4, _model(tiny_model_dir), None)  # the start weights, back
        ids, lps = greedy(url, PROMPT)
        assert (
            ids == base_ids and max(abs(a - b) for a, b in zip(lps, base_lps, strict=True)) < 1e-4
        )
    finally:
        refresher.close()


def test_a_vllm_without_weight_transfer_refuses_and_the_run_falls_back_or_ends(
    dev_vllm, tiny_model_dir, tmp_path, caplog
):
    url = dev_vllm["lora"].url  # dev mode, no --weight-transfer-config
    ending = _refresher(tmp_path, url, transfer_fallback="fail")
    try:
        with pytest.raises(WeightTransferError) as err:
            ending.start(str(tiny_model_dir))
    finally:
        ending.close()
    line = str(err.value)
    assert "\n" not in line and "/init_weight_transfer_engine answered 500" in line, line
    assert "Weight transfer not configured" in line and "--weight-transfer-config" in line

    falling = _refresher(tmp_path, url)  # transfer_fallback=reload
    try:
        with caplog.at_level(logging.ERROR, logger="example_trainer.transfer_refresh"):
            falling.start(str(tiny_model_dir))
        assert [r.getMessage() for r in caplog.records] == [
            line + "; publishing through disk (reload mode) for the rest of the run "
            "(transfer_fallback=reload)"
        ]
        ids_before = greedy(url, PROMPT)
        # the same weights again, through the disk path (the other tests compare with this server)
        out = falling.refresh(1, _model(tiny_model_dir), None)
        assert out["transfer_fallback"] == 1 and out["reload_push_s"] is not None
        assert greedy(url, PROMPT) == ids_before
    finally:
        falling.close()
