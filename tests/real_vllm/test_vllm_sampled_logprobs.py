"""The trainer's log-probabilities of what vLLM sampled at a temperature are vLLM's own.

The LoRA server of the session (``dev_vllm["lora"]``) runs as the SmolLM2 presets run theirs, with
``--logprobs-mode processed_logprobs``: vLLM then reports the log-probabilities of the distribution it
sampled from (logits / temperature), and a trainer with ``temperature_from_groups`` divides its own
logits by each group's ``generation_params`` temperature. Both layouts of the trainer's forward, one
row per sequence and the shared-prefix rows, must give vLLM's numbers; a trainer that took the raw
distribution (temperature 1) must not, or this test could not tell the two apart.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from example_trainer.batching import collate, flatten_batch
from example_trainer.prefix_packing import layout, pack_rows, prefix_sharing_check
from example_trainer.train_step import forward_logprobs

PROMPT = [5, 60, 70, 80, 90, 100, 33, 44, 12, 19]
TEMPERATURE = 0.7
pytestmark = pytest.mark.timeout(1200)


def _sample(url: str, model_name: str) -> tuple[list[list[int]], list[list[float]]]:
    from atroposlib.inference_clients.config import APIServerConfig
    from atroposlib.inference_clients.server_manager import ServerManager

    config = APIServerConfig(
        base_url=url, server_type="vllm", model_name=model_name, api_key="x", health_check=False
    )

    async def go():
        sm = ServerManager([config])
        try:
            return await sm.tokens_and_logprobs_completion(
                input_ids=PROMPT, n=6, max_tokens=12, temperature=TEMPERATURE
            )
        finally:
            await sm.close()

    _, outs, lps, _ = asyncio.run(go())
    return outs, lps


def _trainer_logprobs(model, outs, lps, temperature_from_groups: bool, share: bool):
    group = {
        "tokens": [PROMPT + o for o in outs],
        "masks": [[-100] * len(PROMPT) + o for o in outs],
        "inference_logprobs": [[1.0] * len(PROMPT) + lp for lp in lps],
        "scores": [float(i % 2) for i in range(len(outs))],
        "generation_params": {"temperature": TEMPERATURE},
    }
    flat = flatten_batch([group], seq_len=64, temperature_from_groups=temperature_from_groups)
    rows = pack_rows(flat.sequences) if share else [[s] for s in flat.sequences]
    seqs = [s for row in rows for s in row]
    mb = collate(seqs)
    if share:
        assert len(rows) < len(seqs), "the group shares its prompt: sequences share rows"
        mb.packed = layout(rows, pad_id=0)
    with torch.no_grad():
        got = forward_logprobs(model, mb, mb.targets.unsqueeze(-1), chunk_tokens=512)[..., 0]
    gap = 0.0
    for b, s in enumerate(seqs):
        n = len(s.tokens) - len(PROMPT)
        mine = got[b, len(PROMPT) - 1 : len(PROMPT) - 1 + n]
        theirs = torch.tensor(s.inf_logprobs[len(PROMPT) :], dtype=torch.float32)
        gap = max(gap, float((mine - theirs).abs().max()))
    return gap


def test_trainer_logprobs_at_the_sampling_temperature_are_vllms(dev_vllm, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from example_trainer.output_head import inspect_output_head

    outs, lps = _sample(dev_vllm["lora"].url, str(tiny_model_dir))
    assert len(outs) == 6 and all(len(o) == len(lp) > 0 for o, lp in zip(outs, lps, strict=True))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    model.set_attn_implementation("eager")
    inspect_output_head(model)
    assert prefix_sharing_check(model) is None
    for share in (False, True):
        assert _trainer_logprobs(model, outs, lps, True, share) < 1e-4, f"share_prefix {share}"
    # the raw distribution (temperature 1) is not what vLLM reported
    assert _trainer_logprobs(model, outs, lps, False, False) > 1e-2
