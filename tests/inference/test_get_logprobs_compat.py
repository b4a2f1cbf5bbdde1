"""Atropos's ``ServerManager.get_logprobs`` against our CPU engine (vLLM's ``prompt_logprobs``)."""

from __future__ import annotations

import torch

from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.server_manager import ServerManager
from tests.compat.helpers import run_coro


def test_get_logprobs_matches_the_model(server, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tok("12+34=46")["input_ids"]

    async def ask():
        manager = ServerManager(
            APIServerConfig(base_url=server.url + "/v1", model_name="tiny", server_type="vllm")
        )
        try:
            by_ids = await manager.get_logprobs(input_ids=ids, top_k=2)
            by_text = await manager.get_logprobs(prompt="12+34=46", top_k=1, split="eval")
            return by_ids, by_text, manager.servers[0]
        finally:
            await manager.close()

    out, by_text, srv = run_coro(ask())
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], dim=-1)
    assert out["prompt_tokens"] == ids
    assert len(out["prompt_topk_token_ids"]) == len(out["prompt_topk_logprobs"]) == len(ids)
    assert out["prompt_topk_token_ids"][0] == [] and out["prompt_topk_logprobs"][0] == []
    for t in range(1, len(ids)):
        row_ids, row_lps = out["prompt_topk_token_ids"][t], out["prompt_topk_logprobs"][t]
        assert 2 <= len(row_ids) <= 3 and row_lps == sorted(row_lps, reverse=True)
        assert row_ids[0] == int(logp[t - 1].argmax())  # best first
        assert ids[t] in row_ids  # the prompt token itself is always reported
        own = row_lps[row_ids.index(ids[t])]
        assert abs(own - logp[t - 1, ids[t]].item()) < 1e-4
    assert by_text["prompt_tokens"] == ids
    assert len(srv.request_timings) == 1 and len(srv.eval_request_timings) == 1
