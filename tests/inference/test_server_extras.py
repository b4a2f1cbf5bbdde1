"""vLLM extras of the server: prompt_logprobs, token-id rendering, LoRA adapter load/unload."""

from __future__ import annotations

import httpx
import torch

from .test_server import PROMPTS, _greedy


def test_prompt_logprobs_and_tokens_as_ids_match_forward(server, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tok(PROMPTS[0])["input_ids"]
    body = {
        "prompt": ids,
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": 2,
        "prompt_logprobs": 3,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
    }
    ch = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], dim=-1)
    pl = ch["prompt_logprobs"]
    assert len(pl) == len(ids) and pl[0] is None
    for t in range(1, len(ids)):
        entry = pl[t]
        assert str(ids[t]) in entry and 3 <= len(entry) <= 4
        actual = entry[str(ids[t])]
        assert abs(actual["logprob"] - logp[t - 1, ids[t]].item()) < 1e-4
        assert actual["rank"] == int((logp[t - 1] > logp[t - 1, ids[t]]).sum()) + 1
        assert actual["decoded_token"] == f"token_id:{ids[t]}"
        best = int(logp[t - 1].argmax())
        assert entry[str(best)]["rank"] == 1
    assert ch["logprobs"]["tokens"] == [f"token_id:{ch['token_ids'][0]}"]
    assert all(k.startswith("token_id:") for k in ch["logprobs"]["top_logprobs"][0])


def test_lora_adapter_load_use_and_unload(server, tiny_model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    peft_model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        LoraConfig(
            r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        ),
    )
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(adapter_dir)

    srv = server
    c = srv.client()
    base = [_greedy(c, p).choices[0].text for p in PROMPTS[:3]]
    bad = httpx.post(
        srv.url + "/v1/load_lora_adapter", json={"lora_name": "a", "lora_path": str(tmp_path)}
    )
    assert bad.status_code == 400 and "adapter_config.json" in bad.json()["error"]["message"]
    ok = httpx.post(
        srv.url + "/v1/load_lora_adapter",
        json={"lora_name": "step-1", "lora_path": str(adapter_dir)},
    )
    assert ok.status_code == 200, ok.text
    assert "step-1" in [m.id for m in c.models.list().data]
    tuned = c.completions.create(
        model="step-1",
        prompt=PROMPTS[0],
        max_tokens=8,
        temperature=0.0,
        logprobs=0,
        extra_body={"ignore_eos": True, "return_token_ids": True},
    ).choices[0]
    assert [
        _greedy(c, p).choices[0].text for p in PROMPTS[:3]
    ] == base  # base name still gets base weights
    assert tuned.text != base[0]
    prompt, comp = tuned.model_extra["prompt_token_ids"], tuned.model_extra["token_ids"]
    peft_model.eval()
    with torch.no_grad():
        logp = torch.log_softmax(
            peft_model(input_ids=torch.tensor([prompt + comp])).logits[0], dim=-1
        )
    ref = logp[len(prompt) - 1 : -1].gather(-1, torch.tensor(comp).unsqueeze(-1)).squeeze(-1)
    assert (ref - torch.tensor(tuned.logprobs.token_logprobs)).abs().max().item() < 1e-4
    gone = httpx.post(srv.url + "/v1/unload_lora_adapter", json={"lora_name": "step-1"})
    assert gone.status_code == 200
    assert (
        httpx.post(srv.url + "/v1/unload_lora_adapter", json={"lora_name": "step-1"}).status_code
        == 404
    )
    assert [_greedy(c, p).choices[0].text for p in PROMPTS[:3]] == base


def _adapter(tiny_model_dir, out, seed: int):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    m = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        LoraConfig(
            r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        ),
    )
    m.save_pretrained(out)
    return out


def test_unknown_model_name_is_404_like_vllm(server):
    for path, body in [
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ]:
        r = httpx.post(server.url + path, json={"model": "no-such-adapter", **body}, timeout=60)
        assert r.status_code == 404, r.text
        err = r.json()["error"]
        assert err["type"] == "NotFoundError" and err["param"] == "model"
        assert "`no-such-adapter` does not exist" in err["message"]
    # no name means the served model, as in vLLM
    ok = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1})
    assert ok.status_code == 200, ok.text


def test_lora_duplicate_name_is_400_and_load_inplace_replaces(server, tiny_model_dir, tmp_path):
    a = _adapter(tiny_model_dir, tmp_path / "a", seed=1)
    b = _adapter(tiny_model_dir, tmp_path / "b", seed=2)
    c = server.client()
    load = server.url + "/v1/load_lora_adapter"
    clash = httpx.post(load, json={"lora_name": "tiny", "lora_path": str(a)})
    assert clash.status_code == 400 and "conflicts with a served base model" in clash.text

    def greedy(name):
        ch = c.completions.create(
            model=name, prompt=PROMPTS[1], max_tokens=8, temperature=0.0, logprobs=0
        ).choices[0]
        return ch.text, ch.logprobs.token_logprobs

    try:
        assert httpx.post(load, json={"lora_name": "p", "lora_path": str(b)}).status_code == 200
        want_b = greedy("p")
        httpx.post(server.url + "/v1/unload_lora_adapter", json={"lora_name": "p"})
        assert httpx.post(load, json={"lora_name": "p", "lora_path": str(a)}).status_code == 200
        want_a = greedy("p")
        assert want_a != want_b
        dup = httpx.post(load, json={"lora_name": "p", "lora_path": str(b)})
        assert dup.status_code == 400 and "load_inplace" in dup.json()["error"]["message"]
        assert greedy("p") == want_a  # the refused load changed nothing
        inplace = {"lora_name": "p", "lora_path": str(b), "load_inplace": True}
        assert httpx.post(load, json=inplace).status_code == 200
        text, lps = greedy("p")
        assert text == want_b[0]
        assert max(abs(x - y) for x, y in zip(lps, want_b[1], strict=True)) < 1e-5
        bad = httpx.post(load, json={**inplace, "lora_path": str(tmp_path)})
        assert bad.status_code == 400 and greedy("p")[0] == want_b[0]
    finally:
        httpx.post(server.url + "/v1/unload_lora_adapter", json={"lora_name": "p"})
